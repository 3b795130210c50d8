"""Microsoft Philly's `cluster_job_log` (msr-fiddle/philly-traces, ATC'19), and a synthetic one.

The file is a JSON list of jobs::

    {"status": "Pass", "vc": "...", "jobid": "application_...", "user": "...",
     "submitted_time": "2017-10-03 08:00:00",
     "attempts": [{"start_time": "...", "end_time": "...",
                   "detail": [{"ip": "m123", "gpus": ["gpu0", "gpu1"]}]}]}

Times are "YYYY-MM-DD HH:MM:SS" strings; some are null or the string "None". It is converted
as Blox's `parse_philly_jobs.py` does with `sum_attempts`: the first submission is t = 0, an
attempt ran if it has both times, a positive length and at least one GPU in its details, the
duration is the sum of the run times of the attempts that ran, and the GPU count is the number
of GPUs in the details of the first attempt that ran (Blox takes the last one's; it assumes
they are the same). job_id is the order of submission (0, 1, 2, ...); the original id is kept
in the extra column `name`, with `vc` and `philly_status` (renamed: `status` is the simulator's
own job-table column). An original id that two jobs have is an error naming both records, as a
job id used twice is for every reader. Jobs with no attempt that ran are skipped and counted,
and so are jobs that ran but have no submitted_time (they have no arrival), counted apart.
Blox also drops jobs outside 10^1.5 to 10^4 minutes and then resamples durations; that is a
workload choice left to the user (the generators provide the resampling).

The Philly data has no licence, so no real rows ship with Roundhouse: the sample is made by
`SyntheticLog`, which draws from the published Philly distributions and writes
the same schema, including never-ran jobs, retried jobs and multi-machine jobs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import json_kind as _kind
from roundhouse.traces.csvtext import located_in_json, read_json_list
from roundhouse.traces.generators import philly_durations, philly_gpus, poisson_arrivals
from roundhouse.traces.schema import validate, warn_near_misses

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
# The keys of a job's record that are read (the others are warned of, once a file).
RECORD_KEYS = frozenset({"status", "vc", "jobid", "user", "submitted_time", "attempts"})
_MISSING_TIMES = (None, "None", "")


@attrs.frozen
class PhillyTrace:
    """The converted jobs and how many records were skipped: the job never ran, or (`unsubmitted`
    of them) it ran but has no submission time."""

    frame: pl.DataFrame
    skipped: int
    unsubmitted: int = 0

    @property
    def skipped_what(self) -> str:
        """What the skipped records were, in words (for `trace describe` and `convert`)."""
        if not self.unsubmitted:
            return "jobs that never ran"
        return f"jobs that never ran, or ran but have no submitted_time ({self.unsubmitted:,} of them)"


def read(path: str | Path) -> pl.DataFrame:
    return parse(path).frame


def parse(path: str | Path) -> PhillyTrace:
    """Read a `cluster_job_log` file; errors name the record (1-based) and the field."""
    path = str(path)
    with collection_paused():
        return _parse_file(path)


def _parse_file(path: str) -> PhillyTrace:
    """parse, with the records freed once read (before the collector is back on, so that it
    need not scan them once more)."""
    records = read_json_list(path, "a cluster_job_log")
    try:
        return _parse_records(path, records)
    except TraceError as err:
        raise located_in_json(err) from None


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a JSON job list is decoded and walked: each
    record is a few dicts and lists, none of them garbage, and with the collector on it scans
    all of them again and again as they pile up (a log of a million jobs read five times slower).
    Its state before is restored, however reading ends; free the records inside."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _parse_records(path: str, records: list) -> PhillyTrace:
    jobs: dict[str, list] = {k: [] for k in ("record", "jobid", "user", "vc", "status", "submitted")}
    attempts: dict[str, list] = {k: [] for k in ("record", "order", "start", "end", "gpus")}
    unread: dict[str, None] = {}  # (keys of records that are none of RECORD_KEYS, in the order met)
    for number, record in enumerate(records, start=1):
        _collect(path, number, record, jobs, attempts)
        if not record.keys() <= RECORD_KEYS:
            unread.update(dict.fromkeys(k for k in record if k not in RECORD_KEYS))
    # (Every key read is one of a fixed set, as the columns of Pollux' or ONES' traces: any other
    # is left out, and said, with the one it may be a misspelling of.)
    warn_near_misses(list(unread), path, RECORD_KEYS, fixed="Philly's cluster_job_log")

    submitted = _times(path, pl.Series(jobs["submitted"], dtype=pl.String), jobs["record"], "submitted_time")
    start = _times(path, pl.Series(attempts["start"], dtype=pl.String), attempts["record"], "start_time")
    end = _times(path, pl.Series(attempts["end"], dtype=pl.String), attempts["record"], "end_time")
    tries = pl.DataFrame(
        {
            "record": pl.Series(attempts["record"], dtype=pl.Int64),
            "order": pl.Series(attempts["order"], dtype=pl.Int64),
            "seconds": (end - start).dt.total_seconds(fractional=True),
            "gpus": pl.Series(attempts["gpus"], dtype=pl.Int64),
        }
    )
    backwards = (tries.get_column("seconds") < 0).fill_null(False)
    if backwards.any():
        i = int(backwards.arg_true()[0])
        number = int(tries.get_column("record")[i])
        raise TraceError(
            path,
            f"record {number}: attempt {int(tries.get_column('order')[i]) + 1} ends at {end[i]}, before it starts ({start[i]})",
            row=number,
            column="end_time",
        )
    # An attempt without both times, of no length or on no GPU never ran (its time is not the
    # job's, and a job whose first timed attempt had no GPU may still have run later).
    tries = tries.filter((pl.col("seconds") > 0) & (pl.col("gpus") > 0))
    per_job = (
        tries.sort("record", "order")
        .group_by("record", maintain_order=True)
        .agg(pl.col("seconds").sum().alias("duration_s"), pl.col("gpus").first())
    )
    frame = pl.DataFrame(
        {
            "record": pl.Series(jobs["record"], dtype=pl.Int64),
            "submitted": submitted,
            "name": pl.Series(jobs["jobid"], dtype=pl.String),
            "user": pl.Series(jobs["user"], dtype=pl.String),
            "vc": pl.Series(jobs["vc"], dtype=pl.String),
            "philly_status": pl.Series(jobs["status"], dtype=pl.String),
        }
    ).join(per_job, on="record", how="inner", maintain_order="left")
    unsubmitted = frame.get_column("submitted").null_count()
    frame = frame.filter(pl.col("submitted").is_not_null())
    _refuse_repeated_ids(path, frame)
    frame = frame.sort("submitted", "record", maintain_order=True)
    skipped = len(records) - frame.height
    frame = frame.with_columns(
        job_id=pl.int_range(pl.len(), dtype=pl.Int64),
        arrival_s=(pl.col("submitted") - pl.col("submitted").min()).dt.total_seconds(fractional=True),
    )
    rows = frame.get_column("record").to_numpy()
    ordered = frame.select("job_id", "arrival_s", "gpus", "duration_s", "user", "name", "vc", "philly_status")
    # (Errors name the fields a record has: its arrival is its submitted_time, its duration its
    # attempts' times.)
    names = {"arrival_s": "submitted_time", "duration_s": "attempts"}
    return PhillyTrace(validate(ordered, path, rows, source_names=names), skipped, unsubmitted)


def _refuse_repeated_ids(path: str, jobs: pl.DataFrame) -> None:
    """A TraceError for the first job (in file order) whose `jobid` an earlier job has, naming
    both records, as every reader refuses a job id used twice (records skipped, that are no job,
    are not compared)."""
    ids = jobs.get_column("name")
    repeated = ids.is_not_null() & ~ids.is_first_distinct()
    if not repeated.any():
        return
    second = int(repeated.arg_true()[0])
    records = jobs.get_column("record")
    first = int(records.filter(ids == ids[second])[0])
    raise TraceError(path, f"job id {ids[second]} is used twice", row=int(records[second]), column="jobid", also=first)


def _collect(path: str, number: int, record, jobs: dict, attempts: dict) -> None:
    """Check one record's structure and append its fields (times stay text, parsed in bulk)."""

    def fail(column: str | None, message: str):
        raise TraceError(path, f"record {number}: {message}", row=number, column=column)

    if not isinstance(record, dict):
        fail(None, f"is a JSON {_kind(record)}, expected an object (one job)")
    for key in ("jobid", "submitted_time", "attempts"):
        if key not in record:
            fail(key, "is missing")
    for key in ("jobid", "user", "vc", "status"):
        value = record.get(key)
        if isinstance(value, bool) or (value is not None and not isinstance(value, (str, int))):
            fail(key, f"is a JSON {_kind(value)}, expected text")
    submitted = record["submitted_time"]
    if submitted is not None and not isinstance(submitted, str):
        fail("submitted_time", f"is a JSON {_kind(submitted)}, expected a time like '2017-10-03 08:00:00'")
    tries = record["attempts"] if record["attempts"] is not None else []
    if not isinstance(tries, list):
        fail("attempts", f"is a JSON {_kind(tries)}, expected a list")
    for order, attempt in enumerate(tries):
        if not isinstance(attempt, dict):
            fail("attempts", f"attempt {order + 1} is a JSON {_kind(attempt)}, expected an object")
        times = []
        for key in ("start_time", "end_time"):
            value = attempt.get(key)
            if value is not None and not isinstance(value, str):
                fail(key, f"attempt {order + 1}: is a JSON {_kind(value)}, expected a time")
            times.append(value)
        detail = attempt.get("detail") or []
        if not isinstance(detail, list) or not all(isinstance(d, dict) for d in detail):
            fail("detail", f"attempt {order + 1}: expected a list of objects, got {_kind(detail)}")
        gpus = 0
        for machine in detail:
            devices = machine.get("gpus") or []
            if not isinstance(devices, list):
                fail("gpus", f"attempt {order + 1}: is a JSON {_kind(devices)}, expected a list")
            gpus += len(devices)
        attempts["record"].append(number)
        attempts["order"].append(order)
        attempts["start"].append(times[0])
        attempts["end"].append(times[1])
        attempts["gpus"].append(gpus)
    jobs["record"].append(number)
    jobs["jobid"].append(None if record["jobid"] is None else str(record["jobid"]))
    jobs["user"].append(None if record.get("user") is None else str(record["user"]))
    jobs["vc"].append(None if record.get("vc") is None else str(record["vc"]))
    jobs["status"].append(None if record.get("status") is None else str(record["status"]))
    jobs["submitted"].append(submitted)


def _times(path: str, text: pl.Series, records: list[int], column: str) -> pl.Series:
    """Parse times in bulk; null and "None" are missing, anything else unparsable is an error."""
    text = text.str.strip_chars()
    missing = text.is_null() | text.is_in(["None", ""])
    parsed = text.str.to_datetime(TIME_FORMAT, strict=False)
    bad = ~missing & parsed.is_null()
    if bad.any():
        i = int(bad.arg_true()[0])
        raise TraceError(
            path, f"record {records[i]}: {text[i]!r} is not a time like '2017-10-03 08:00:00'", row=records[i], column=column
        )
    return parsed


# --- a synthetic cluster_job_log ----------------------------------------------------------

_CHUNK = 65536  # records drawn, formatted and written at a time (memory stays bounded)
_RECORD = '{"status": "%s", "vc": "%s", "jobid": "application_1500000000000_%05d", "attempts": [%s], "submitted_time": "%s", "user": "%s"}'
_ATTEMPT = '{"start_time": "%s", "end_time": "%s", "detail": %s}'


@attrs.define
class SyntheticLog:
    """A synthetic `cluster_job_log` drawn from the Philly distributions (Poisson submissions,
    Philly durations and GPU counts). A fraction `never_ran` of the jobs never runs (no
    attempts, or an attempt without an end time); about one job in six is retried; 8-GPU jobs
    sometimes span two machines. Ids, users and machines are made up.

    The submissions are drawn when it is made (`span_s` can be checked before anything else);
    the records are drawn, formatted and written a chunk at a time by `write` (or `lines`), so a
    log of millions of jobs never sits in memory. The same seed always gives the same bytes."""

    jobs: int
    rate_per_s: float
    seed: int
    start: str = "2017-10-02 08:00:00"
    never_ran: float = 0.15
    _submitted: np.ndarray = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._submitted = poisson_arrivals(self.jobs, self.rate_per_s, self._streams()[0])

    def _streams(self) -> list[np.random.Generator]:
        """The seed's four streams, from their start: submissions, sizes, shapes and names."""
        return [np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(4)]

    @property
    def span_s(self) -> float:
        """Seconds from the first submission to the last, as written (whole seconds)."""
        if not self.jobs:
            return 0.0
        return float(int(self._submitted[-1]) - int(self._submitted[0]))  # (submissions are in time order)

    def write(self, path: str | Path) -> int:
        """Write the log as a JSON list, one job per line; returns the number of records."""
        return _write_lines(self.lines(), path)

    def lines(self) -> Iterator[str]:
        """Each record as its line of JSON (what `json.dumps(record, separators=(", ", ": "))` gives)."""
        _, size_rng, shape_rng, name_rng = self._streams()  # (fresh: each pass gives the same lines)
        durations = philly_durations(self.jobs, size_rng)
        gpus = philly_gpus(self.jobs, size_rng)
        users = [f"{u:06x}" for u in name_rng.integers(0, 16**6, size=12)]
        vcs = [f"vc{v:04x}" for v in name_rng.integers(0, 16**4, size=4)]
        origin = np.datetime64(dt.datetime.strptime(self.start, TIME_FORMAT), "s")
        details: dict[tuple[int, int, bool], str] = {}
        for first in range(0, self.jobs, _CHUNK):
            last = min(first + _CHUNK, self.jobs)
            submitted = self._submitted[first:last]
            # The records' draws, in the order the generator makes them (the stream is the seed's).
            shapes, seconds = _draw_shapes(shape_rng, submitted.tolist(), durations[first:last].tolist(), self.never_ran)
            sizes = gpus[first:last].tolist()
            # Two names a record, a VC then a user: one call draws the chunk's, in the same order.
            names = name_rng.integers(0, np.tile(np.array([len(vcs), len(users)]), last - first)).tolist()
            stamps = _stamps(origin, np.asarray(seconds, dtype=np.int64))
            submitted_stamps = _stamps(origin, submitted.astype(np.int64))
            at = 0
            for k, (status, tries, machine, spread) in enumerate(shapes):
                key = (sizes[k], machine, spread)
                detail = details.get(key)
                if detail is None:
                    detail = details[key] = json.dumps(_detail(*key), separators=(", ", ": "))
                if tries > 0:  # ran: a start and an end for each attempt
                    attempts = ", ".join(_ATTEMPT % (stamps[at + 2 * j], stamps[at + 2 * j + 1], detail) for j in range(tries))
                    at += 2 * tries
                elif tries < 0:  # started and lost: an attempt with no end time
                    attempts = _ATTEMPT % (stamps[at], "None", detail)
                    at += 1
                else:
                    attempts = ""
                yield _RECORD % (
                    status,
                    vcs[names[2 * k]],
                    first + k + 1,
                    attempts,
                    submitted_stamps[k],
                    users[names[2 * k + 1]],
                )


def _draw_shapes(
    rng: np.random.Generator, submitted: list[float], durations: list[float], never_ran: float
) -> tuple[list[tuple[str, int, int, bool]], list[int]]:
    """Each record's shape (status; attempts: n that ran, 0 for none, -1 for one with no end;
    machine; spread over two machines) and the whole seconds of its attempts' times, in order.

    The draws are the original generator's, one record at a time: `dirichlet(ones(n))` is n
    standard exponentials over their sum (numpy's own computation, done here by hand) and
    `exponential(scale)` is scale x a standard one, so the n split draws and the n gap draws
    come from one call, and the stream stays the same as calling each in turn."""
    shapes = []
    seconds: list[int] = []
    random, exponential, integers = rng.random, rng.standard_exponential, rng.integers
    for submit, duration in zip(submitted, durations):
        ran_u, kind = random(2).tolist()
        queued = 600.0 * exponential()
        tries = 1 if random() < 5 / 6 else int(integers(2, 4))
        draws = exponential(2 * tries).tolist()
        u = random()
        status = "Pass" if u < 0.6 else "Killed" if u < 0.85 else "Failed"
        machine = int(integers(100, 999))
        spread = random() < 0.3
        clock = submit + queued
        if ran_u >= never_ran:
            total = 0.0
            for e in draws[:tries]:
                total = total + e
            scale = 1.0 / total
            for e, gap in zip(draws[:tries], draws[tries:]):
                begin, clock = clock, clock + max(e * scale * duration, 1.0)
                seconds.append(int(begin))
                seconds.append(int(clock))
                clock += 120.0 * gap
        elif kind < 0.5:
            status, tries = "Killed", 0  # cancelled while waiting: no attempt at all
        else:
            status, tries = "Failed", -1  # started and lost: an attempt with no end time
            seconds.append(int(clock))
        shapes.append((status, tries, machine, spread))
    return shapes, seconds


def _stamps(origin: np.datetime64, seconds: np.ndarray) -> list[str]:
    """Times as "YYYY-MM-DD HH:MM:SS", `seconds` after `origin`, formatted in bulk."""
    text = np.datetime_as_string(origin + seconds.astype("m8[s]"), unit="s")
    return [t[:10] + " " + t[11:] for t in text.tolist()]


def synthetic_cluster_job_log(
    jobs: int,
    rate_per_s: float,
    seed: int,
    *,
    start: str = "2017-10-02 08:00:00",
    never_ran: float = 0.15,
) -> list[dict]:
    """The records of `SyntheticLog` as a list (for small logs: `SyntheticLog.write` streams)."""
    log = SyntheticLog(jobs, rate_per_s, seed, start=start, never_ran=never_ran)
    return [json.loads(line) for line in log.lines()]


def _detail(gpus: int, machine: int, spread: bool) -> list[dict]:
    if spread and gpus == 8:
        return [{"ip": f"m{machine + k}", "gpus": [f"gpu{g}" for g in range(4)]} for k in range(2)]
    return [{"ip": f"m{machine}", "gpus": [f"gpu{g}" for g in range(gpus)]}]


def write_cluster_job_log(records: Iterable[dict], path: str | Path) -> int:
    """Write records as a `cluster_job_log` JSON list, one job per line (diffable, deterministic),
    one record at a time; returns the number written."""
    return _write_lines((json.dumps(r, separators=(", ", ": ")) for r in records), path)


def _write_lines(lines: Iterable[str], path: str | Path) -> int:
    """Write JSON texts as a list, one a line ("[]" for none), as they come."""
    count = 0
    with open(path, "w", encoding="utf-8", newline="") as out:
        batch: list[str] = []
        for line in lines:
            batch.append(line)
            if len(batch) == _CHUNK:
                out.write(("[\n" if not count else ",\n") + ",\n".join(batch))
                count += len(batch)
                batch = []
        if batch:
            out.write(("[\n" if not count else ",\n") + ",\n".join(batch))
            count += len(batch)
        out.write("\n]\n" if count else "[]\n")
    return count
