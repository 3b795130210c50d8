"""Finding a node's GPUs: given (`--fake-gpus`), else NVML, else torch."""

from __future__ import annotations

import attrs


@attrs.frozen
class Gpu:
    index: int
    type: str


def find_gpus(fake: str | None) -> list[Gpu]:
    """The node's GPUs: `fake` ("4:V100") if given, else NVML, else torch."""
    from roundhouse.errors import UsageError

    if fake:
        count, _, kind = fake.partition(":")
        if not count.isdigit() or int(count) < 1 or not kind:
            raise UsageError(f"--fake-gpus {fake!r}: write COUNT:TYPE, e.g. 4:V100")
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
    return name.split()[-1].replace(" ", "-")
