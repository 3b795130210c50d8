"""`roundhouse submit ADDR [TRACE]`: send jobs to a live scheduler (its LiveSource elements)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from roundhouse.errors import TraceError, UsageError, first_line
from roundhouse.runtime.values import format_duration
from roundhouse.tools.common import seconds, whole
from roundhouse.tools.live_options import add_security, check_named, setup_logging


def register(sub) -> None:
    p = sub.add_parser("submit", help="submit jobs to a live scheduler, or ask for its status")
    p.add_argument("scheduler", metavar="ADDR", help="the scheduler's address, e.g. tcp://sched:5555")
    p.add_argument(
        "trace",
        nargs="?",
        help=(
            "a trace file of jobs to submit, all at once (their arrival times are ignored; a canonical trace may leave out "
            "arrival_s, and job_id: a job without one gets the next free id)"
        ),
    )
    p.add_argument(
        "--format",
        help="the trace file's format: canonical, gavel, tiresias, philly, helios, pai, pollux or ones (default: detect)",
    )
    p.add_argument("--model", help="model of one job (e.g. ResNet-18, LM, Recommendation)")
    p.add_argument("--iterations", type=whole, help="iterations the job trains for")
    p.add_argument("--gpus", type=whole, help="GPUs (workers) the job needs (default 1)")
    p.add_argument("--batch-size", type=whole, help="batch size per worker")
    p.add_argument("--command", help="a command to run instead of a model's workload (quote it)")
    p.add_argument("--duration", help="with --command: how long the job runs on the reference GPU (e.g. 10min)")
    p.add_argument("--job-id", type=whole, help="the job's id (default: the scheduler picks one)")
    p.add_argument("--count", type=whole, help="submit this many such jobs (default 1)")
    p.add_argument("--status", action="store_true", help="print the scheduler's status and submit nothing")
    p.add_argument("--name", help=f"key name with --keys (default: {DEFAULT_NAME})")
    p.add_argument("--timeout", default="10s", help="how long to wait for the scheduler (default 10s)")
    add_security(p, "reads scheduler.key and NAME.key_secret")
    p.set_defaults(handler=submit_command)


# The key pair a submitter given --keys without --name connects with.
DEFAULT_NAME = "submitter"


# Bounds on command-line values, checked before anything is sent: a longer wait is a mistake
# (and overflows ZeroMQ's poll), a longer job or more copies than a message carries is one too.
MAX_TIMEOUT_S = 86400.0
MAX_DURATION_S = 10 * 365 * 86400.0
MAX_COUNT = 100_000


def _bounded_seconds(text: str, flag: str, most: float) -> float:
    value = seconds(text, flag, positive=True)
    if value is None or not value <= most:  # also refuses inf and nan
        raise UsageError(f"{flag} {text}: must be more than 0 and at most {format_duration(most)}")
    return value


def submit_command(args) -> int:
    from roundhouse.agents.submitter import Submitter, id_ranges
    from roundhouse.wire.security import ClientSecurity, check_connect_address

    setup_logging("warning")
    check_named(args, "keys")
    # (the address's form first: `--insecure` would take `127.0.0.1:5555`, no tcp://, for an address off this machine)
    check_connect_address(args.scheduler, in_process=False)
    if args.keys and args.name is None:
        _check_default_key(args.keys)
    elif args.keys and not args.insecure:
        _check_named_key(args.keys, args.name)
    security = ClientSecurity.choose(args.keys, DEFAULT_NAME if args.name is None else args.name, args.insecure, args.scheduler)
    timeout = _bounded_seconds(args.timeout, "--timeout", MAX_TIMEOUT_S)
    given = _job_flags(args)
    if args.status and (args.trace or given or args.format is not None):
        raise UsageError(f"--status submits nothing: leave out {args.trace or (given or ['--format'])[0]}")
    jobs, where = ([], None) if args.status else jobs_from_args(args)
    with Submitter(args.scheduler, security, timeout) as client:
        if args.status:
            print(json.dumps({k: (int(v) if float(v).is_integer() else v) for k, v in client.status().items()}, indent=2))
            return 0
        ids = client.submit(jobs, where)
    print(f"submitted {len(ids):,} job(s): {id_ranges(ids)}")  # (runs of ids as `0-24999`: --count makes many)
    return 0


def _check_default_key(keys: str) -> None:
    """`--keys DIR` without `--name` takes DIR's `submitter` pair: when it is not there, say that
    the name was the default, and which submitters' pairs the folder has."""
    from roundhouse.wire.security import SUBMITTER, key_role

    folder = Path(keys)
    if not folder.is_dir() or (folder / f"{DEFAULT_NAME}.key_secret").exists():
        return  # (a missing folder, or a pair found: ClientSecurity says what is wrong, if anything)
    names = sorted(path.stem for path in folder.glob("*.key_secret") if key_role(path) == SUBMITTER)
    have = (
        f"the submitters' key pairs there: {', '.join(names)}"
        if names
        else f"make one with `roundhouse keys {keys} --submitters NAME`"
    )
    raise UsageError(
        f"--keys {keys} without --name: a submitter then connects as '{DEFAULT_NAME}', and "
        f"{folder / DEFAULT_NAME}.key_secret is not there; give --name NAME ({have})"
    )


def _check_named_key(keys: str, name: str) -> None:
    """`--keys DIR --name NAME` without DIR/NAME.key_secret: name the submitters' pairs there, and
    how to make this one as a submitter's (`roundhouse keys DIR NAME` would make a node's)."""
    from roundhouse.wire.security import SCHEDULER_KEY, SUBMITTER, check_name, key_role

    folder = Path(keys)
    check_name(name, "--name")
    if not folder.is_dir() or not (folder / f"{SCHEDULER_KEY}.key").is_file() or (folder / f"{name}.key_secret").exists():
        return  # (a missing folder or scheduler key, or a pair found: ClientSecurity says what is wrong, if anything)
    names = sorted(path.stem for path in folder.glob("*.key_secret") if key_role(path) == SUBMITTER)
    have = f"the submitters' key pairs there: {', '.join(names)}; " if names else ""
    raise UsageError(
        f"--name {name}: {folder / name}.key_secret is not there ({have}"
        f"make it with `roundhouse keys {keys} --submitters {name}`)"
    )


# The flags that describe the job(s) to submit: (attribute, flag).
_JOB_FLAGS = (
    ("model", "--model"),
    ("command", "--command"),
    ("iterations", "--iterations"),
    ("duration", "--duration"),
    ("gpus", "--gpus"),
    ("batch_size", "--batch-size"),
    ("job_id", "--job-id"),
    ("count", "--count"),
)


def _job_flags(args) -> list[str]:
    """The job flags given on the command line (what a trace file or --status would leave unused)."""
    return [flag for name, flag in _JOB_FLAGS if getattr(args, name) is not None]


def jobs_from_args(args) -> tuple[list[dict], list[str] | None]:
    """The jobs to submit, and how to name each to the user."""
    if args.trace:
        given = _job_flags(args)
        if given:
            raise UsageError(
                f"{given[0]} describes a job given on the command line, and the trace file {args.trace} gives its own jobs: "
                "give one or the other"
            )
        jobs, where = trace_jobs(args.trace, "auto" if args.format is None else args.format)
        if not jobs:  # (a header and nothing else: "submitted 0 job(s)" would hide the mistake)
            raise TraceError(args.trace, "holds no jobs")
        return jobs, where
    if args.format is not None:  # (an empty one too: an unset shell variable, say)
        shown = args.format if args.format.strip() else repr(args.format)
        raise UsageError(f"--format {shown} names a trace file's format: give the file, or leave it out")
    if not args.model and args.command is None:
        raise UsageError("say what to run: a trace file, --model NAME --iterations N, or --command CMD --duration TIME")
    if args.command is not None:
        _check_command(args.command)
    count = 1 if args.count is None else args.count
    gpus = 1 if args.gpus is None else args.gpus
    if not 1 <= count <= MAX_COUNT:
        raise UsageError(f"--count {count}: must be 1 to {MAX_COUNT:,}")
    if gpus < 1:
        raise UsageError(f"--gpus {gpus}: must be at least 1")
    _check_numbers(args)
    job: dict = {"gpus": gpus}
    if args.model:
        job["model"] = args.model
        if args.iterations is None and args.duration is None:
            raise UsageError("--model needs --iterations (or --duration)")
    if args.iterations is not None:
        job["iterations"] = args.iterations
    if args.batch_size is not None:
        job["batch_size"] = args.batch_size
    if args.command is not None:
        job["command"] = args.command
        # (How long a command runs is its --duration, or a model's profiled speed over --iterations.)
        if args.duration is None and (args.model is None or args.iterations is None):
            raise UsageError(
                "--command needs --duration (how long it runs), or --model and --iterations"
                + (" (--iterations alone does not say how long a command runs)" if args.iterations is not None else "")
            )
    if args.duration is not None:
        job["duration_s"] = _bounded_seconds(args.duration, "--duration", MAX_DURATION_S)
    if args.job_id is not None:
        if count != 1:
            raise UsageError("--job-id names one job; leave it out with --count")
        job["job_id"] = args.job_id
    from roundhouse.agents.submitter import plain_names

    return [dict(job) for _ in range(count)], plain_names(count)


def _check_numbers(args) -> None:
    """Refuse, before anything is sent, a number the scheduler would refuse (or a message could
    not carry): the most is what the protocol's messages carry for the job."""
    from roundhouse.tools.live_options import wire_bounds

    bounds = (
        ("gpus", "--gpus", 1, wire_bounds("launch", "world_size")[1]),
        ("iterations", "--iterations", 1, wire_bounds("launch", "iterations")[1]),
        ("batch_size", "--batch-size", 1, wire_bounds("resize", "batch_size")[1]),
        ("job_id", "--job-id", 0, wire_bounds("lease", "job")[1]),
    )
    for name, flag, least, most in bounds:
        value = getattr(args, name)
        if value is not None and not least <= value <= most:
            raise UsageError(f"{flag} {value}: must be a whole number from {least} to {int(most):,}")


def _check_command(command: str) -> None:
    """A command the scheduler would take: one that splits into words as a shell would and
    names a program (a blank one would fail at every launch)."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError as err:
        raise UsageError(f"--command {command!r}: {str(err).lower()} (it does not split into words)") from None
    if not words or not words[0].strip():
        raise UsageError(f"--command {command!r} is blank: say what to run")


_FILE_ORDER = "roundhouse_file_order_"  # (a column no trace has: the rows' order in the file)


# The trace formats whose files give each job its id (traces/tiresias.py, traces/helios.py);
# the other readers number the jobs in file order.
_FORMATS_WITH_IDS = ("tiresias", "helios")


def trace_jobs(path: str, format: str = "auto") -> tuple[list[dict], list[str]]:
    """The jobs of a trace file in the file's order, checked as a trace, and where each is in the
    file (`t.csv:12`: a CSV's line, a Parquet or JSON file's record). Arrival times are not sent
    (a submitted job arrives when the scheduler takes it); a canonical trace may leave them out,
    and job ids too (the column, or a job's cell): those jobs are sent without one. `format`:
    the file's, or "auto" to tell it from the file (a file it cannot tell is refused, saying to
    name it with --format)."""
    import polars as pl

    from roundhouse.runtime.backends.live.submissions import validated
    from roundhouse.traces.canonical import PARQUET_MAGIC, is_parquet
    from roundhouse.traces.csvtext import read_cells
    from roundhouse.traces.formats import check_format, detect_format, read_trace

    if check_format(format, flag="--format") == "auto":
        try:
            format = detect_format(path)
        except TraceError as err:  # ("name it": the reader's words; submit names it with --format)
            said, named = re.subn(r"name (it|the format) \(one of ", "name it with --format (one of ", err.message)
            # (a file that is not there, or a folder, is no question of format)
            hint = "; name it with --format" if Path(path).is_file() else ""
            raise TraceError(path, said if named else f"{said}{hint}") from None
    if format != "canonical":
        frame = read_trace(path, format)
        rows = [f"{path}: job {i + 1}" for i in range(frame.height)]
        # Where the file has no job ids, its reader numbers the jobs 0, 1, ...: those numbers
        # are not sent, so the scheduler gives the next free ids and the file can be submitted
        # again (as more jobs); ids the file holds are sent, and checked as a trace's are.
        drop = ("arrival_s",) if format in _FORMATS_WITH_IDS else ("arrival_s", "job_id")
        return _job_dicts(frame.drop(*drop)), rows
    lines = None
    with open(path, "rb") as file:
        parquet = is_parquet(path) or file.read(4) == PARQUET_MAGIC
    if parquet:
        try:
            raw = pl.read_parquet(path, glob=False)
        except (pl.exceptions.PolarsError, OSError, ValueError) as err:
            raise TraceError(path, f"cannot be read as Parquet: {first_line(err)}") from None
        numbers = list(range(1, raw.height + 1))
    else:
        cells = read_cells(path)
        raw, lines = cells.frame, cells.lines
        numbers = [int(n) for n in lines]
    added: tuple[str, ...] = (_FILE_ORDER,)  # (columns of this reader's own, which errors must not list)
    if "arrival_s" not in raw.columns:
        raw = raw.with_columns(pl.lit("0").alias("arrival_s"))
        added += ("arrival_s",)
    if "job_id" not in raw.columns:
        added += ("job_id",)
    raw, unnumbered = _stand_in_ids(raw)
    raw = raw.with_columns(pl.Series(_FILE_ORDER, range(raw.height)))
    frame = validated(raw, path, lines, added=added).sort(_FILE_ORDER).drop(_FILE_ORDER, "arrival_s")
    # The jobs the file gives no id are sent without one: the scheduler gives them the next free ids.
    if any(unnumbered):
        frame = frame.with_columns(job_id=pl.when(pl.Series(unnumbered, dtype=pl.Boolean)).then(None).otherwise(pl.col("job_id")))
    return _job_dicts(frame), [f"{path}:{n}" for n in numbers]


def _stand_in_ids(raw):
    """A canonical trace whose jobs may leave out their ids (no `job_id` column, or an empty
    cell), with ids standing in for the missing ones while it is checked as a trace: the
    lowest ids no job of the file uses. Also which rows had none."""
    import polars as pl

    if "job_id" not in raw.columns:
        raw = raw.with_columns(pl.lit(None, dtype=pl.String).alias("job_id"))
    cells = raw.get_column("job_id").to_list()
    unnumbered = [cell is None or (isinstance(cell, str) and not cell.strip()) for cell in cells]
    if not any(unnumbered):
        return raw, unnumbered
    used = set()
    for cell in cells:
        try:
            number = float(cell)
        except (TypeError, ValueError, OverflowError):
            continue
        if number.is_integer():
            used.add(int(number))
    free = (i for i in itertools.count() if i not in used)
    filled = [str(next(free)) if missing else (None if cell is None else str(cell)) for cell, missing in zip(cells, unnumbered)]
    return raw.with_columns(pl.Series("job_id", filled, dtype=pl.String)), unnumbered


def _job_dicts(frame) -> list[dict]:
    return [{k: v for k, v in row.items() if v is not None} for row in frame.to_dicts()]
