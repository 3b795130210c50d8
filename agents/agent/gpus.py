"""Finding a node's GPUs: given (`--fake-gpus`), else NVML, else torch."""

from __future__ import annotations

import re

import attrs

from roundhouse.wire import protocol

# The most GPUs a node registers: what the wire's `register` message carries.
_REGISTERED_GPUS = protocol.SCHEMAS["register"].fields["gpus"]
assert isinstance(_REGISTERED_GPUS, protocol.ListOf)
MAX_GPUS = _REGISTERED_GPUS.max_len


@attrs.frozen
class Gpu:
    index: int
    type: str


def find_gpus(fake: str | None) -> list[Gpu]:
    """The node's GPUs: `fake` ("4:V100") if given, else NVML, else torch."""
    from roundhouse.errors import UsageError

    if fake:
        count, _, kind = fake.partition(":")
        if not re.fullmatch(r"[0-9]+", count) or int(count) < 1 or not kind:
            raise UsageError(f"--fake-gpus {fake!r}: write COUNT:TYPE, e.g. 4:V100")
        if int(count) > MAX_GPUS:
            raise UsageError(f"--fake-gpus {fake}: at most {MAX_GPUS} GPUs per node (what a registration carries)")
        if not re.fullmatch(protocol.NAME_RE, kind):
            raise UsageError(
                f"--fake-gpus {fake}: GPU type {kind!r} must be a plain name "
                "(up to 64 letters, digits, '.', '_' and '-', starting with a letter or digit)"
            )
        return [Gpu(i, kind) for i in range(int(count))]
    try:
        import pynvml  # type: ignore

        pynvml.nvmlInit()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            gpus.append(Gpu(i, _gpu_type(name.decode() if isinstance(name, bytes) else name)))
        if gpus:
            return gpus
    except Exception:  # no NVML: try torch
        pass
    try:
        import torch

        if torch.cuda.is_available():
            return [Gpu(i, _gpu_type(torch.cuda.get_device_name(i))) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    raise UsageError("no GPUs found (neither NVML nor torch sees one); on a machine without GPUs use --fake-gpus COUNT:TYPE")


def _gpu_type(name: str) -> str:
    """'Tesla V100-SXM2-16GB' -> 'V100' (the profile's names), else the name's last word."""
    for known in ("A100", "H100", "V100", "P100", "K80", "T4", "A10", "L4"):
        if known in name.upper():
            return known
    # (a name the wire carries: plain characters, at most 64)
    plain = re.sub(r"[^A-Za-z0-9_.-]", "-", name.split()[-1] if name.split() else "GPU").lstrip("_.-")[:64]
    return plain or "GPU"
