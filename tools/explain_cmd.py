"""`roundhouse explain RUN JOB`: a job's timeline, with why it waited, ran or was suspended.

Reads the job's rows of the record a run kept (explain.parquet, written beside jobs.csv by
`roundhouse run GRAPH --out DIR`; runtime/explain.py) and prints one line per change, in plain words:

    t=6d07h10m   waiting: rank 48; 47 jobs ranked ahead hold GPUs, 0 left free, not enough for it (Las 'order', placed by FirstFree 'place')
    t=6d07h15m   running: launched on machine 3 (1 GPU) (Las 'order', placed by FirstFree 'place')
"""

from __future__ import annotations

import decimal
import difflib
import json
import math
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from roundhouse.errors import UsageError, first_line
from roundhouse.runtime.engine import all_jobs_ended
from roundhouse.runtime.explain import FILE_NAME
from roundhouse.runtime.explain_file import part_of
from roundhouse.runtime.files import holds_a_sweep, run_files_without_record
from roundhouse.tools.outputs.stdout_result import plural, write_result

COLUMNS = ("t_s", "job_id", "state", "reason", "element", "element_class", "ranked_by", "ranked_by_class", "a", "b", "c")


def register(sub) -> None:
    p = sub.add_parser(
        "explain",
        help="print a job's timeline with the reasons it waited, ran or was suspended",
        description="Print a job's timeline from the record a run kept (explain.parquet, written by "
        "`roundhouse run GRAPH --out DIR` unless --no-explain is given): when it was admitted, "
        "waited (its rank and the jobs ranked ahead, no free GPUs of its type, an admission gate "
        "holding it, a delay timer, Gavel's allocation, a model not in the elastic profile), launched, was suspended (preempted, its "
        "Gavel round ended), moved or resized while running, and finished, each with the element that "
        "decided it; a run cut short (--until) says where it stopped. A line is printed "
        "when the reason changes; its numbers are those of that moment. docs/explain.md lists every "
        "reason.",
    )
    p.add_argument("run", help="the folder a run wrote with --out")
    p.add_argument("job", help="the job's id (as in jobs.csv)")
    p.set_defaults(handler=explain)


def explain(args) -> int:
    if not args.job.strip():  # (before the record is read: no id matches nothing)
        raise UsageError("job: no job id given (the job's id, as in jobs.csv)")
    path = read_record(args.run)
    info = run_info(args.run)
    stopped = run_end(args.run, info)
    rows = job_rows(path, args.run, args.job, stopped)
    per_machine = largest_machine(args.run, info)
    if any(row["reason"] == "not_elastic" for row in rows):  # (its model is what keeps it waiting)
        model = job_model(args.run, job_text(args.job))
        rows = [{**row, "model": model} for row in rows]
    lines = [f"job {job_text(args.job)}: {len(rows):,} change(s) recorded in {args.run}"]
    # (The times in one column: as wide as the longest, and at least 10 wide.)
    stopped = stopped if stopped is not None and not finished(rows) else None  # (said only then)
    times = [clock(row["t_s"]) for row in rows] + ([clock(stopped[0])] if stopped is not None else [])
    width = max([10, *map(len, times)])
    lines += [f"  t={clock(row['t_s']):<{width}} {describe(row, per_machine)}" for row in rows]
    if stopped is not None:
        lines.append(f"  t={clock(stopped[0]):<{width}} run stopped here ({stopped[1]}); the job had not finished")
    write_result("".join(line + "\n" for line in lines), f"job {job_text(args.job)}'s timeline")
    return 0


def job_text(job: str) -> str:
    """The job id as jobs.csv writes it: a whole number however it is spelled ("03", "+3",
    "3.0" name job 3); other text as given, without spaces around it."""
    number = whole_number(job)
    return str(number) if number is not None else job.strip()


# A number as job ids are written: the digits 0-9, with a sign, a point or an exponent if any.
# (Python's int() and Decimal() also take `5_03` and other scripts' digits, `٥٠٣`, as 503.)
_NUMERAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def whole_number(job: str) -> int | None:
    """The whole number `job` spells, or None if it spells none."""
    text = job.strip()
    if not _NUMERAL.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = decimal.Decimal(text)  # (exact: a float would take `9223372036854775806.0` for ...808)
    except (decimal.InvalidOperation, ValueError):
        return None
    # (Beyond a 64-bit id no job has, as a float's infinity was: `1e999999999` would take
    # minutes to spell out.)
    if not value.is_finite() or value.adjusted() >= _ID_DIGITS:
        return None
    return int(value) if value == value.to_integral_value() else None


# Digits of the longest job id (a 64-bit integer: at most 9223372036854775807).
_ID_DIGITS = 19
_LARGEST_ID = 2**63 - 1


def _too_long(text: str) -> bool:
    """Whether `text` spells a whole number too long to be a job's id (`1e19`, `1e400`)."""
    if not _NUMERAL.fullmatch(text.strip()):
        return False
    try:
        value = decimal.Decimal(text.strip())
    except (decimal.InvalidOperation, ValueError):
        return False
    if not value.is_finite():
        return False
    if value.adjusted() >= _ID_DIGITS:  # (10**19 or more; `1e999999999` is never spelled out)
        return value.as_tuple().exponent >= 0 or value == value.to_integral_value()
    return abs(value) > _LARGEST_ID and value == value.to_integral_value()


def _a_number(text: str) -> bool:
    """Whether `text` spells a number of any kind (a fraction, an infinity, not a number), in
    the digits 0-9."""
    if text.strip().lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return True
    if not _NUMERAL.fullmatch(text.strip()):
        return False
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def run_info(run: str) -> dict:
    """The run's run.json ({} when there is none: a record alone). One that is there but cannot
    be read is warned of, naming it: without it the timeline of a job that had not finished
    cannot say where the run stopped."""
    from roundhouse.errors import print_warning

    path = Path(run) / "run.json"
    if not path.is_file():
        return {}
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        what = f"line {err.lineno}: {err.msg}" if isinstance(err, json.JSONDecodeError) else first_line(err)
        print_warning(f"warning: {path}: cannot be read ({what}); the timeline does not say where the run stopped")
        return {}
    return info if isinstance(info, dict) else {}


def run_end(run: str, info: dict | None = None) -> tuple[float, str] | None:
    """When the run stopped and why (run.json's end_s and stop_reason, `info` if read), or None
    when its run.json does not say (an older run, or none)."""
    info = run_info(run) if info is None else info
    try:
        end, reason = float(info["end_s"]), str(info.get("stop_reason") or "stopped")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return (end, reason) if math.isfinite(end) else None


def largest_machine(run: str, info: dict | None = None) -> int:
    """GPUs of the run's largest machine, from the cluster run.json describes ("9 GPUs on 3
    nodes (3x3:V100)"; `info` if read); 0 when it does not say."""
    info = run_info(run) if info is None else info
    text = str(info.get("cluster") or "")
    groups = re.search(r"\(([^)]*)\)", text)
    sizes = [int(g) for g in re.findall(r"\d+x(\d+):", groups.group(1))] if groups else []
    return max(sizes, default=0)


def job_model(run: str, job: str) -> str | None:
    """The job's model as the run's jobs.csv gives it, or None when it does not (no such file,
    no model column, the job not among its rows: a sink that tracked other jobs)."""
    import polars as pl

    path = Path(run) / "jobs.csv"
    if not path.is_file():
        return None
    try:
        with _stderr_held():
            frame = pl.scan_csv(path, infer_schema=False, glob=False).filter(pl.col("job_id").str.strip_chars() == job)
            models = frame.select("model").head(1).collect()["model"]
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError):
        return None
    return models[0] if len(models) and models[0] else None


def finished(rows: list[dict]) -> bool:
    """Whether the job's last record that is not a note says it finished."""
    states = [row["state"] for row in rows if row["state"] != "note"]
    return bool(states) and states[-1] == "finished"


def read_record(run: str) -> Path:
    """The path of the run's record, once its columns are checked (its footer is read, no
    more: a long run's record is millions of changes, and only one job's are read)."""
    import polars as pl

    folder = Path(run)
    if not folder.is_dir():
        raise UsageError(
            f"{run}: no such folder" if not folder.exists() else f"{run}: not a folder (give the folder a run wrote with --out)"
        )
    path = folder / FILE_NAME
    if path.exists() and not path.is_file():
        raise UsageError(f"{path}: not a file (a folder?), where the run keeps the record of its decisions")
    if not path.is_file():
        if part_of(path).is_file():  # (a run writes its record beside it, and moves it in place as it ends)
            raise UsageError(
                f"{run}: no {FILE_NAME} yet: a run is still writing its record there ({part_of(path).name}), "
                "or was killed before it could finish it; ask again once the run has ended"
            )
        if holds_a_sweep(folder) or _a_sweeps_store(folder):
            what = "a sweep's folder" if holds_a_sweep(folder) else f"a sweep's results store (of {_parent(folder)})"
            raise UsageError(
                f"{run}: {what}: sweeps keep no record of their runs' decisions "
                "(run the point of interest with `roundhouse run GRAPH --set NAME=VALUE --out DIR`)"
            )
        if not (folder / "run.json").is_file() and not run_files_without_record(folder):
            raise UsageError(
                f"{run}: not a run's folder (it holds no run.json, nor a run's results): give the folder "
                "`roundhouse run GRAPH --out DIR` wrote"
            )
        raise UsageError(
            f"{run}: a run's folder with no {FILE_NAME}: the run kept no record of its decisions "
            "(run it again with `roundhouse run GRAPH --out DIR`, without --no-explain)"
        )
    with _readable(path):
        schema = pl.scan_parquet(path, glob=False).collect_schema()
    missing = [c for c in COLUMNS if c not in schema]
    if missing:
        raise UsageError(f"{path}: no column {', '.join(repr(c) for c in missing)} (not a record `roundhouse run` wrote?)")
    for name in COLUMNS:  # (a record of the wrong types would fail as it is read or worded)
        dtype = schema[name]
        numeric = name in _NUMBERS
        fits = dtype.is_numeric() if numeric else dtype in (pl.String, pl.Categorical, pl.Enum)
        if name == "job_id":  # (ids held as 3.0 would match no id asked for: "3")
            fits = dtype.is_integer()
        if not (fits or dtype == pl.Null):
            what = "whole numbers" if name == "job_id" else "numbers" if numeric else "words"
            raise UsageError(f"{path}: column {name!r} holds {dtype}, not {what} (not a record `roundhouse run` wrote?)")
    return path


def _a_sweeps_store(folder: Path) -> bool:
    """Whether `folder` is the `results` store inside a sweep's folder (beside the sweep's
    tables: the store alone is one of the marks of a sweep's folder)."""
    whole = folder.resolve()  # (`.` has no name of its own)
    return whole.name == "results" and any((whole.parent / name).is_file() for name in ("summary.csv", "points.csv"))


def _parent(folder: Path) -> Path:
    """The folder holding `folder`, as it was named where it can be (`sw` for `sw/results`)."""
    return folder.parent if folder.name not in ("", ".", "..") else folder.resolve().parent


# The record's columns of numbers (a time, a job id and a reason's numbers); the others are words.
_NUMBERS = ("t_s", "job_id", "a", "b", "c")
# Those every record has a value in (a job's time and numbers, its state and reason).
_VALUED = ("t_s", "state", "reason", "a", "b", "c")


@contextmanager
def _readable(path: Path):
    """A file that cannot be read as Parquet (damaged, or something else), as a usage error.
    Some damage (a page whose values do not decode to the count its header gives) makes polars
    panic: the panic is caught, and what its Rust side writes to standard error as it panics
    (a message, with RUST_BACKTRACE set a backtrace) is held back while the file is read and
    passed on only when the reading succeeds."""
    import polars as pl
    import pyarrow as pa

    try:
        with _stderr_held():
            yield
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, pa.ArrowException, OSError) as err:
        what = "damaged: its data do not decode" if isinstance(err, pl.exceptions.PanicException) else first_line(err)
        raise UsageError(f"{path}: cannot be read as Parquet ({what})") from None


@contextmanager
def _stderr_held():
    """Standard error's file descriptor, pointed at a temporary file for the block; what was
    written to it is written out after the block if it ended without an exception."""
    import sys
    import tempfile

    try:
        fd = sys.stderr.fileno()
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # (no file descriptor: a test's capture, say)
        yield
        return
    saved = os.dup(fd)
    failed = True
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), fd)
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            if not failed:
                held.seek(0)
                text = held.read()
                if text:
                    sys.stderr.write(text.decode(errors="replace"))
                    sys.stderr.flush()


def job_rows(path: Path, run: str, job: str, stopped: tuple[float, str] | None = None) -> list[dict]:
    """The job's records in time order; a usage error saying what the record holds when it has
    none for the job (`stopped`: when and why the run stopped, from run.json), or naming the
    column of a damaged record of it that holds no value.

    The record is read with pyarrow, which refuses damaged pages (polars, reading some, aborts
    or crashes the process): first its job ids, then only the row groups holding the job's
    records (a long run's record is many, and a job's records lie in the few its life spans)."""
    import numpy as np
    import polars as pl
    import pyarrow.parquet as pq

    wanted = job_text(job)  # (job ids are whole numbers: "03" is job 3)
    with _readable(path):
        file = pq.ParquetFile(path)
        ids = cast(pl.DataFrame, pl.from_arrow(file.read(columns=["job_id"], use_pandas_metadata=False)))["job_id"].cast(
            pl.String
        )
        at = (ids == wanted).fill_null(False).arg_true().to_numpy()
        if not len(at):
            if ids.null_count():  # (the job's records may be among them)
                raise UsageError(
                    f"{path}: {plural(ids.null_count(), 'record')} of {ids.len():,} have no job id (damaged?), "
                    f"and none of the others is of job {wanted}"
                )
            known = ids.unique(maintain_order=True)
            raise UsageError(f"{run}: no job '{job}' in the record ({_holds(known)}){_why_missing(job, known, stopped)}")
        sizes = np.array([file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)], dtype=np.int64)
        starts = np.cumsum(sizes) - sizes
        group_of = np.searchsorted(starts, at, side="right") - 1
        groups = np.unique(group_of)
        # (Where each record is among the groups read: each group's rows follow those before it.)
        read_from = np.cumsum(sizes[groups]) - sizes[groups]
        at_read = at - starts[group_of] + read_from[np.searchsorted(groups, group_of)]
        table = file.read_row_groups(groups.tolist(), columns=list(COLUMNS), use_pandas_metadata=False)
        rows = cast(pl.DataFrame, pl.from_arrow(table))[at_read]  # (Arrow's own `take` would import pandas)
    for name in _VALUED:
        column = rows[name]
        empty = column.is_null()
        if column.dtype.is_float():  # (a time is finite; a reason's numbers are whole)
            empty |= ~column.is_finite() if name == "t_s" else ~column.is_finite() | (column != column.floor())
        if empty.any():
            value = column[int(empty.arg_true()[0])]
            what = "no value" if value is None else f"{value} (not a whole number)" if name != "t_s" else f"{value} (not a time)"
            raise UsageError(f"{path}: a record of job {wanted} has {what} in column {name!r} (damaged?)")
    records = rows.sort("t_s", maintain_order=True).to_dicts()
    for row in records:
        _refuse_unlike_a_run(path, wanted, row)
    return records


def _refuse_unlike_a_run(path: Path, job: str, row: dict) -> None:
    """A record no run writes (edited by hand since): a state its reason does not put a job in,
    or a count of GPUs, jobs or machines below 0. Worded, it would pass for what the run decided
    ("finished" and then "had not finished"; "launched on 3 machines (-5 GPUs)")."""
    from roundhouse.runtime.explain import MEANINGS, Reason

    states = {meaning[0] for meaning in MEANINGS.values()}
    at = f"{path}: the record of job {job} at t={clock(row['t_s'])}"
    state, reason = str(row["state"]), str(row["reason"])
    code = Reason.__members__.get(reason.upper())
    if code is None or code not in MEANINGS:  # (a reason this version does not know is shown as it is)
        if state not in states:
            raise UsageError(f"{at} has state {state!r}, not one a run records ({', '.join(sorted(states))}) (damaged?)")
        return
    meaning = MEANINGS[code]
    if state != meaning[0]:
        raise UsageError(f"{at} has state {state!r}, but its reason {reason!r} is recorded with state {meaning[0]!r} (damaged?)")
    for column, what in zip(("a", "b", "c"), meaning[1:], strict=True):
        counted = what in ("GPUs", "GPUs before", "machines spanned", "rank") or what.startswith(("GPUs ", "jobs "))
        if counted and int(row[column]) < 0:
            raise UsageError(f"{at} has {int(row[column])} in column {column!r} ({what}, after {reason!r}), below 0 (damaged?)")


def _holds(known) -> str:
    if not known.len():
        return "it holds no job: none was admitted"
    return f"{plural(known.len(), 'job')}, ids such as {', '.join(known.head(3).to_list())}"


# What a job id is, said to one given otherwise: the spellings `whole_number` reads (a trace
# may write its ids as 5.0, and jobs.csv writes 5; either names the job).
_SPELLINGS = " written in the digits 0-9, with a sign, a point or an exponent if any (1, +1, 1.0 and 1e0 all name job 1)"


def _why_missing(job: str, known, stopped: tuple[float, str] | None) -> str:
    """What may explain a job missing from the record. Ids are whole numbers: a numeric id
    spelled like another says nothing about that one, so only other ids get suggestions; nor
    does a number that is not whole ("1.5", "1e400": no job 15 or 400 is meant), which gets none."""
    if _too_long(job):
        return f"; job ids are whole numbers up to {_LARGEST_ID}"
    if whole_number(job) is None:
        close = [] if _a_number(job) else difflib.get_close_matches(job, known.to_list(), n=3)
        return f"; job ids are whole numbers{_SPELLINGS}{'; did you mean ' + ', '.join(close) + '?' if close else ''}"
    if stopped is None or not known.len():
        return ""
    end, reason = stopped
    if all_jobs_ended(reason):  # (every job of the trace arrived)
        return f"; the run ended at t={clock(end)} when every job had {'finished' if reason == 'every job finished' else 'ended'}: no job of its trace has this id, or it was never admitted"
    return f"; the run stopped at t={clock(end)} ({reason}), so a job of its trace with this id had not arrived by then, or was never admitted"


def clock(seconds: float) -> str:
    """A time as 1d02h, 1h05m, 5m, 30s, 1h05m12.5s (exact finish times keep their fraction, to
    the millisecond)."""
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds < 0:
        return "-" + clock(-seconds)
    # To the millisecond: finish times summed from rates carry float noise in their last bits
    # (78720.00000000007 s), which is no fraction of a second anyone means.
    whole, millis = divmod(round(seconds * 1000), 1000)
    d, rest = divmod(whole, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    sec = f"{s}.{millis:03d}".rstrip("0") + "s" if millis else f"{s}s"
    tail = (f"{m:02d}m" if m or s or millis else "") + (sec if s or millis else "")
    if d:
        return f"{d}d{h:02d}h{tail}"
    if h:
        return f"{h}h{tail}"
    if m:
        return f"{m}m" + (sec if s or millis else "")
    return sec


def _by(row: dict) -> str:
    name, klass = row["element"], row["element_class"]
    return f"{klass} '{name}'" if name else "the run"


def _ranked_by(row: dict) -> str:
    """Who decided: the element whose ranking a placer followed, then the placer."""
    ranker = row["ranked_by"]
    if ranker and ranker != row["element"]:
        return f"{row['ranked_by_class']} '{ranker}', placed by {_by(row)}"
    return _by(row)


def _gated(gpus: int, jobs: int, idle: int) -> str:
    """Why a job waits while the epoch gate holds the best schedule back: that schedule gives it
    `gpus` GPUs (0: none); the allocation in force stays, running `jobs` and leaving `idle` GPUs
    idle (0 and 0 in records made before those numbers were kept: then unsaid)."""
    stays = (
        f"; the allocation in force stays: it runs {plural(jobs, 'job')} and leaves {idle:,} GPU(s) idle" if jobs or idle else ""
    )
    if gpus <= 0:
        return (
            "the best schedule found gives it no GPU, and it is held back until the running jobs it changes "
            f"have trained their epoch{stays}"
        )
    return f"the schedule gives it {plural(gpus, 'GPU')} that running jobs still hold, and changes to running jobs wait for their next epoch{stays}"


def _not_elastic(model: str | None, jobs: int, idle: int, apps: int) -> str:
    """Why a job an elastic scheduler (Pollux) never starts waits: its model (`model`, from the
    run's jobs.csv; None: not known) is none of the elastic profile's `apps` applications (0:
    the run set no elastic profile). The allocation runs `jobs` and leaves `idle` GPUs idle."""
    named = f"its model, {model}," if model else "its model"
    if apps <= 0:
        why = "the run sets no elastic_profile, and it starts only jobs whose model names one of the profile's applications"
    else:
        why = (
            f"{named} names none of the elastic profile's {plural(apps, 'application')}, and it starts only jobs whose model does"
        )
    return f"never started: {why}; the allocation runs {plural(jobs, 'job')} and leaves {idle:,} GPU(s) idle"


def describe(row: dict, per_machine: int = 0) -> str:
    """One record in words. `per_machine`: the GPUs of the run's largest machine (0: not known),
    which tells how many machines a moved or resized job spans at least."""
    reason, a, b, c = row["reason"], int(row["a"]), int(row["b"]), int(row["c"])
    least = -(-b // per_machine) if per_machine > 0 else 0
    by = _by(row)
    if reason == "admitted":
        return f"waiting: admitted by {by}"
    if reason == "held":
        return f"held: admission queue place {a}; admitted jobs ask for {plural(b, 'GPU')} of a limit of {c:,} ({by})"
    if reason == "ranked_behind":
        ahead = plural(b, "job") + " ranked ahead"
        return f"waiting: rank {a}; {ahead} hold GPUs, {c:,} left free, not enough for it ({_ranked_by(row)})"
    if reason == "no_free_type":
        return f"waiting: rank {a}; only {c:,} GPU(s) of the type it needs (type {b}) left free ({_ranked_by(row)})"
    if reason == "no_room":
        # (The record does not say what kept it out: one machine, a rack, ... is the placer's own rule.)
        return (
            f"waiting: rank {a}; {c:,} GPU(s) left free, enough for it, but not where its placer may put it ({_ranked_by(row)})"
        )
    if reason == "blocked":
        return f"waiting: rank {a}; rank {b} does not fit and no job behind it may start first (no backfill) ({_ranked_by(row)})"
    if reason in ("delay_machine", "delay_rack"):
        level = "one machine" if reason == "delay_machine" else "one rack"
        timer = "for ever" if b < 0 else f"until its timer of {clock(b)}"
        return f"waiting: declined GPUs to wait for {level}; starved {clock(a)}, waits {timer} ({by})"
    if reason == "not_chosen":
        return f"waiting: not chosen this round: {plural(a, 'entry', 'entries')} further behind their allocation took the GPUs ({by})"
    if reason == "no_allocation":
        return f"waiting: admitted after the allocation in force was made (at {clock(a)}); the next is made no sooner than {clock(b)} ({by})"
    if reason == "no_share":
        return (
            f"waiting: the allocation made at {clock(a)} gives it no time on a GPU type it can use; {b:,} GPU(s) left idle ({by})"
        )
    if reason == "not_scheduled":
        return f"waiting: the schedule deployed gives it no GPU; it runs {plural(a, 'job')} and leaves {b:,} GPU(s) idle ({by})"
    if reason == "gated":
        return f"waiting: {_gated(a, b, c)} ({by})"
    if reason == "not_elastic":
        return f"waiting: {_not_elastic(row.get('model'), a, b, c)} ({by})"
    if reason == "launched":
        where = f"machine {a}" if c <= 1 else f"{c:,} machines from machine {a}"
        return f"running: launched on {where} ({plural(b, 'GPU')}) ({_ranked_by(row)})"
    if reason == "moved":
        # (The record keeps the machine of the job's first GPU, before and after, not all of them.)
        gpus = plural(b, "GPU") + (f" on at least {plural(least, 'machine')}" if least > 1 else "")
        first = "" if b <= 1 else "its first GPU "
        if c < 0:
            return f"running: moved {first}to machine {a} ({gpus}) ({_ranked_by(row)})"
        if c == a:
            where = f"to other GPUs of machine {a}" if b <= 1 else f"to other GPUs, its first still on machine {a}"
        else:
            where = f"{first}from machine {c} to machine {a}"
        return f"running: moved {where} ({gpus}) ({_ranked_by(row)})"
    if reason == "resized":
        if b <= 1:
            where = f"on machine {a}"
        else:
            where = f"on at least {least:,} machines from machine {a}" if least > 1 else f"its first GPU on machine {a}"
        return f"running: resized from {c:,} to {plural(b, 'GPU')}, {where} ({_ranked_by(row)})"
    if reason == "suspended":
        return f"suspended by {by}"
    if reason == "preempted":
        return f"suspended: preempted at rank {a} for the {plural(b, 'job')} ranked ahead; waits behind them ({_ranked_by(row)})"
    if reason == "lease_end":
        return f"suspended: its round (lease) ended and {plural(a, 'entry', 'entries')} further behind their allocation took the GPUs ({by})"
    if reason == "demoted":
        return f"note: demoted to queue {a} after {b:,} GPU-seconds of service ({by})"
    if reason == "promoted":
        return f"note: promoted back to queue {a} after waiting {clock(b)} ({by})"
    if reason == "finished":
        return "finished"
    if reason == "failed":
        return "failed"
    if reason == "completed":
        return f"finished: completed on request by {by}"
    if reason == "run_ended":  # (live: what the run's end did to a job it found running or launching)
        return "suspended: stopped by the run's end (checkpointed, or its launch withheld)"
    if reason == "requeued":
        return "waiting: lost its GPUs without a plan (its node was lost or its lease expired); waits again"
    return f"{row['state']}: {reason} ({by}; a={a}, b={b}, c={c})"
