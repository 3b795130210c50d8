"""`roundhouse submit ADDR [TRACE]`: send jobs to a live scheduler (its LiveSource elements)."""

from __future__ import annotations

import json

from roundhouse.errors import UsageError
from roundhouse.tools.common import seconds
from roundhouse.tools.live_options import add_security, setup_logging


def register(sub) -> None:
    p = sub.add_parser("submit", help="submit jobs to a live scheduler, or ask for its status")
    p.add_argument("scheduler", metavar="ADDR", help="the scheduler's address, e.g. tcp://sched:5555")
    p.add_argument("trace", nargs="?", help="a trace file of jobs to submit (their arrival times are ignored)")
    p.add_argument("--model", help="model of one job (e.g. ResNet-18, LM, Recommendation)")
    p.add_argument("--iterations", type=int, help="iterations the job trains for")
    p.add_argument("--gpus", type=int, default=1, help="GPUs (workers) the job needs (default 1)")
    p.add_argument("--batch-size", type=int, help="batch size per worker")
    p.add_argument("--command", help="a command to run instead of a model's workload (quote it)")
    p.add_argument("--duration", help="with --command: how long the job runs on the reference GPU (e.g. 10min)")
    p.add_argument("--job-id", type=int, help="the job's id (default: the scheduler picks one)")
    p.add_argument("--count", type=int, default=1, help="submit this many such jobs (default 1)")
    p.add_argument("--status", action="store_true", help="print the scheduler's status and submit nothing")
    p.add_argument("--name", default="submitter", help="key name with --keys (default: submitter)")
    p.add_argument("--timeout", default="10s", help="how long to wait for the scheduler (default 10s)")
    add_security(p, "reads scheduler.key and NAME.key_secret")
    p.set_defaults(handler=submit_command)


# Bounds on command-line values, checked before anything is sent: a longer wait is a mistake
# (and overflows ZeroMQ's poll), a longer job or more copies than a message carries is one too.
MAX_TIMEOUT_S = 86400.0
MAX_DURATION_S = 10 * 365 * 86400.0
MAX_COUNT = 100_000


def _bounded_seconds(text: str, flag: str, most: float) -> float:
    value = seconds(text, flag)
    if not 0 < value <= most:  # also refuses inf and nan
        raise UsageError(f"{flag} {text}: must be more than 0 and at most {most:g}s")
    return value


def submit_command(args) -> int:
    from roundhouse.agents.submitter import Submitter
    from roundhouse.wire.security import ClientSecurity

    setup_logging("warning")
    security = ClientSecurity.choose(args.keys, args.name, args.insecure, args.scheduler)
    timeout = _bounded_seconds(args.timeout, "--timeout", MAX_TIMEOUT_S)
    jobs = [] if args.status else jobs_from_args(args)
    with Submitter(args.scheduler, security, timeout) as client:
        if args.status:
            print(json.dumps({k: (int(v) if float(v).is_integer() else v) for k, v in client.status().items()}, indent=2))
            return 0
        ids = client.submit(jobs)
    print(f"submitted {len(ids)} job(s): {', '.join(map(str, ids))}")
    return 0


def jobs_from_args(args) -> list[dict]:
    if args.trace:
        if args.model or args.command or args.iterations:
            raise UsageError("give a trace file or --model/--command, not both")
        from roundhouse.traces.formats import read_trace

        frame = read_trace(args.trace).drop("arrival_s")
        return [{k: v for k, v in row.items() if v is not None} for row in frame.to_dicts()]
    if not args.model and not args.command:
        raise UsageError("say what to run: a trace file, --model NAME --iterations N, or --command CMD --duration TIME")
    if not 1 <= args.count <= MAX_COUNT or args.gpus < 1:
        raise UsageError(f"--count must be 1 to {MAX_COUNT:,} and --gpus at least 1")
    job: dict = {"gpus": args.gpus}
    if args.model:
        job["model"] = args.model
        if args.iterations is None and args.duration is None:
            raise UsageError("--model needs --iterations (or --duration)")
    if args.iterations is not None:
        job["iterations"] = args.iterations
    if args.batch_size is not None:
        job["batch_size"] = args.batch_size
    if args.command:
        job["command"] = args.command
        if args.duration is None and args.iterations is None:
            raise UsageError("--command needs --duration (how long it runs), or --model and --iterations")
    if args.duration is not None:
        job["duration_s"] = _bounded_seconds(args.duration, "--duration", MAX_DURATION_S)
    if args.job_id is not None:
        if args.count != 1:
            raise UsageError("--job-id names one job; leave it out with --count")
        job["job_id"] = args.job_id
    return [dict(job) for _ in range(args.count)]
