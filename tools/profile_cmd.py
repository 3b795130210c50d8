"""`roundhouse profile`: measure the example workloads here and write a profile table for the
simulator (graph setting `profile = "FILE"`), with the launch and checkpoint overheads."""

from __future__ import annotations

import platform
import time
from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.files import check_output_file, writing


def register(sub) -> None:
    p = sub.add_parser("profile", help="measure the example workloads on this machine; write a profile table")
    p.add_argument(
        "--models", default="ResNet-18,LM,Recommendation", help="comma-separated (default: ResNet-18,LM,Recommendation)"
    )
    p.add_argument("--batch-sizes", help="comma-separated batch sizes for every model (default: each model's own)")
    p.add_argument("--gpus", default="1", help="worker counts, comma-separated (default 1)")
    p.add_argument("--gpu-type", default="V100", help="the GPU type to file the measurements under (default V100)")
    p.add_argument("--seconds", type=float, default=5.0, help="how long to count iterations, all copies training (default 5)")
    p.add_argument(
        "--concurrent",
        type=int,
        default=1,
        help="run this many copies at once (fake GPUs sharing this machine's CPUs; default 1)",
    )
    p.add_argument(
        "--beside",
        help="with --concurrent: the models of the other jobs, comma-separated, each in turn "
        "(default: copies of the measured job)",
    )
    p.add_argument("--threads", type=int, default=1, help="CPU threads per worker (default 1)")
    p.add_argument("--out", "-o", required=True, help="the profile CSV to write")
    p.set_defaults(handler=profile_command)


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a comma-separated list of whole numbers") from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag}: give whole numbers of 1 or more")
    return values


def profile_command(args) -> int:
    from roundhouse.agents.profiler import profile
    from roundhouse.traces.profiles import canonical_model

    check_output_file(args.out, "--out")  # before measuring, which takes minutes
    models = []
    for name in args.models.split(","):
        canonical = canonical_model(name.strip())
        if canonical is None:
            raise UsageError(f"--models: unknown model {name.strip()!r}")
        models.append(canonical)
    batches = None
    if args.batch_sizes:
        sizes = _ints(args.batch_sizes, "--batch-sizes")
        batches = {m: sizes for m in models}
    if args.seconds < 1 or args.concurrent < 1 or args.threads < 1:
        raise UsageError("--seconds must be at least 1, --concurrent and --threads at least 1")
    beside = None
    if args.beside:
        beside = [canonical_model(b.strip()) for b in args.beside.split(",")]
        if None in beside:
            raise UsageError(f"--beside: unknown model in {args.beside!r}")
    result = profile(
        models, batches, _ints(args.gpus, "--gpus"), args.gpu_type, args.seconds, args.concurrent, args.threads, beside=beside
    )
    header = f"measured by `roundhouse profile` on {platform.node()} ({platform.processor() or platform.machine()}), {time.strftime('%Y-%m-%d %H:%M')}"
    with writing(args.out):
        Path(args.out).write_text(result.csv(header))
    print(
        f'wrote {args.out}: use it with `profile = "{args.out}";` and restore = {result.restore_s:.2f}s; '
        f"checkpoint = {result.checkpoint_s:.2f}s; in the graph"
    )
    return 0
