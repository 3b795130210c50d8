"""`roundhouse profile`: measure the example workloads here and write a profile table for the
simulator (graph setting `profile = "FILE"`), with the launch and checkpoint overheads."""

from __future__ import annotations

import argparse
import platform
import re
import time
from pathlib import Path

from roundhouse.errors import UsageError, did_you_mean, print_warning
from roundhouse.runtime.files import check_output_file, writing
from roundhouse.runtime.values import describe, duration_from_text
from roundhouse.tools.common import whole
from roundhouse.tools.live_options import MAX_THREADS
from roundhouse.tools.outputs.whole_file import whole_file
from roundhouse.wire import protocol

# The most worker processes (copies x workers a copy) profiled at once (threads a worker:
# live_options.MAX_THREADS): fake GPUs share this machine, so more is a mistake that would
# exhaust its memory.
MAX_WORKERS = 256
_LONGEST_S = 86400.0  # (the longest --seconds taken)


def register(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="measure the example workloads on this machine; write a profile table",
        description="Measure the example workloads on this machine and write a profile table (CSV: model, "
        "batch_size (each worker's), gpu_type, gpus (the job's workers), placement (consolidated), iters_per_s "
        "(the job's training steps a second, a step training a batch on every worker)), with the launch and "
        'checkpoint overheads in its comments. A graph uses it with `profile = "FILE";`.',
    )
    p.add_argument(
        "--models", default="ResNet-18,LM,Recommendation", help="comma-separated (default: ResNet-18,LM,Recommendation)"
    )
    p.add_argument("--batch-sizes", help="comma-separated batch sizes for every model (default: each model's own)")
    p.add_argument("--gpus", default="1", help="worker counts, comma-separated (default 1)")
    p.add_argument("--gpu-type", default="V100", help="the GPU type to file the measurements under (default V100)")
    p.add_argument(
        "--seconds",
        default="5",
        help="how long to count iterations, all copies training: 1 second to 1 day, in seconds or with a unit (default 5)",
    )
    p.add_argument(
        "--concurrent",
        type=whole,
        default=1,
        help="run this many copies at once (fake GPUs sharing this machine's CPUs; default 1; "
        f"copies x workers at most {MAX_WORKERS})",
    )
    p.add_argument(
        "--beside",
        help="with --concurrent: the models of the other jobs, comma-separated, each in turn, each at its "
        "workload's own batch size; the figures are the mean over them (default: copies of the measured job)",
    )
    p.add_argument("--threads", type=whole, default=1, help=f"CPU threads per worker (default 1, at most {MAX_THREADS})")
    p.add_argument("--out", "-o", required=True, help="the profile CSV to write")
    p.set_defaults(handler=profile_command)


def _ints(text: str, flag: str) -> list[int]:
    items = text.split(",")
    if any(not x.strip() for x in items) and text.strip():  # (`1,,2`, `1,`: a number left out)
        raise UsageError(f"{flag}: {text!r} has an empty item; write whole numbers separated by commas")
    try:
        values = [whole(x) for x in items if x.strip()]
    except argparse.ArgumentTypeError:
        raise UsageError(f"{flag}: {text!r} is not a comma-separated list of whole numbers") from None
    if not values:
        raise UsageError(f"{flag}: give whole numbers of 1 or more")
    if min(values) < 1:
        raise UsageError(f"{flag}: give whole numbers of 1 or more, got {min(values)}")
    _once(values, flag, text)
    return values


def _models(text: str, flag: str) -> list[str]:
    """The models named in `text` (comma-separated, any accepted spelling), each one with an
    example workload to measure; a name that is none of them is refused with those there are."""
    from roundhouse.agents.profiler import DEFAULT_BATCH
    from roundhouse.agents.workloads import workload_for
    from roundhouse.traces.profiles import canonical_model

    have = f"have: {', '.join(DEFAULT_BATCH)}"
    models = []
    for name in (n.strip() for n in text.split(",")):
        canonical = canonical_model(name)
        if canonical is None:
            hint = did_you_mean(name, DEFAULT_BATCH) if name else None
            raise UsageError(f"{flag}: unknown model {name!r} ({have}" + (f"; {hint}" if hint else "") + ")")
        if workload_for(canonical) is None:
            raise UsageError(f"{flag}: no example workload for model {canonical!r} ({have})")
        models.append(canonical)
    _once(models, flag, text)
    return models


def _once(values: list, flag: str, text: str) -> None:
    """A value listed twice would be measured twice, and a profile that lists an entry twice is refused."""
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise UsageError(f"{flag} {text}: {twice[0]} is listed twice")


def _check_gpu_type(text: str) -> None:
    """The GPU type is a cell of the profile's CSV rows, which hold no quoted or padded text:
    one that would not read back as itself is refused before measuring."""
    if not text.strip():
        raise UsageError("--gpu-type: give the name of a GPU type (e.g. V100)")
    if text != text.strip():
        raise UsageError(f"--gpu-type {text!r}: has spaces at its ends, which the profile's reader drops")
    bad = next((ch for ch in text if ch in ',"#' or not ch.isprintable()), None)
    if bad is not None:
        raise UsageError(f"--gpu-type {text!r}: {bad!r} cannot be part of a GPU type's name in a profile (a CSV file)")
    if not re.fullmatch(protocol.NAME_RE, text):
        # (as an agent's GPUs are named on the wire: a profile's type no node can register is no use)
        raise UsageError(
            f"--gpu-type {text!r}: a GPU type must be a plain name "
            "(up to 64 letters, digits, '.', '_' and '-', starting with a letter or digit)"
        )


def _warn_near_type(name: str) -> None:
    """Warn, before measuring, of a type that is a near miss of the shipped profile's (`V1OO`):
    it is filed as written, a type of its own that no cluster of the type meant would use."""
    from roundhouse.runtime.near_gpu_types import near_types
    from roundhouse.traces.profiles import ProfileTable

    near = near_types(name, ProfileTable.load().gpu_types)
    if near:
        print_warning(
            f"warning: --gpu-type {name}: near the shipped profile's {near[0]}, but the measurements are filed "
            f"under {name} as written, a type of its own; if you meant {near[0]}, write that"
        )


def profile_command(args) -> int:
    from roundhouse.agents.profiler import DEFAULT_BATCH, check_batch, profile
    from roundhouse.traces.profiles import REFERENCE_GPU_TYPE

    if not args.out.strip():
        raise UsageError("--out: give the file to write the profile table to")
    check_output_file(args.out, "--out")  # before measuring, which takes minutes
    _check_gpu_type(args.gpu_type)
    _warn_near_type(args.gpu_type)
    models = _models(args.models, "--models")
    batches = None
    if args.batch_sizes is not None:  # (`--batch-sizes ""` gives no size: refused, not the default)
        sizes = _ints(args.batch_sizes, "--batch-sizes")
        batches = {m: sizes for m in models}
    gpus = _ints(args.gpus, "--gpus")
    try:  # (not `seconds()`, whose "0 or more" would send a user from -5 to 0, refused in turn)
        duration = float(duration_from_text(args.seconds))
    except ValueError as err:
        raise UsageError(f"--seconds: {err}") from None
    if not 1 <= duration <= _LONGEST_S:  # (NaN too; a day is more than any measurement wants)
        raise UsageError(f"--seconds {args.seconds}: must be a time from 1 second to 1 day")
    for flag, value in (("--concurrent", args.concurrent), ("--threads", args.threads)):
        if value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1")
    beside = None
    if args.beside is not None:  # (`--beside ""` names no model: refused below, not ignored)
        if args.concurrent < 2:
            raise UsageError(
                f"--beside {args.beside}: only with --concurrent 2 or more (the models of the jobs run beside the measured one)"
            )
        beside = _models(args.beside, "--beside")
    # A batch the workload's dataset cannot hold would fail only once measuring had begun.
    for model in models:
        for batch in (batches or {}).get(model) or [DEFAULT_BATCH.get(model, 16)]:
            check_batch(model, batch, gpus, f"--batch-sizes {args.batch_sizes}" if batches else f"--gpus {args.gpus}")
    for other in beside or ():
        check_batch(other, DEFAULT_BATCH.get(other, 16), gpus, f"--gpus {args.gpus} (with --beside {other})")
    # Every copy's workers are processes on this machine, all at once, each with its threads.
    workers = args.concurrent * max(gpus)
    if workers > MAX_WORKERS:
        raise UsageError(
            f"--concurrent {args.concurrent} with --gpus {args.gpus}: {workers:,} worker processes at once on this machine; "
            f"at most {MAX_WORKERS}"
        )
    if args.threads > MAX_THREADS:
        raise UsageError(f"--threads {args.threads}: at most {MAX_THREADS} CPU threads per worker")
    result = profile(models, batches, gpus, args.gpu_type, duration, args.concurrent, args.threads, beside=beside)
    header = f"measured by `roundhouse profile` on {platform.node()} ({platform.processor() or platform.machine()}), {time.strftime('%Y-%m-%d %H:%M')}"
    with writing(args.out):
        with whole_file(args.out) as through:  # (the old table stays if writing fails)
            Path(through).write_text(result.csv(header))
    # (A graph reads `profile` relative to its own folder: the hint gives the file's whole path,
    # written as a .sched string so that a quote or backslash in it reads back.)
    # (A graph's reference type is V100 unless set: a table of other types has no speed for it.)
    reference = "" if args.gpu_type.lower() == REFERENCE_GPU_TYPE.lower() else f' reference_gpu = "{args.gpu_type}";'
    print(
        f"wrote {args.out}: use it with `profile = {describe(str(Path(args.out).resolve()))};` "
        f"and restore = {result.restore_s:.2f}s; "
        f"checkpoint = {result.checkpoint_s:.2f}s;{reference} in the graph "
        "(a relative path there is relative to the graph's folder)"
    )
    return 0
