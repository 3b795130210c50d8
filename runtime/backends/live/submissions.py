"""Jobs submitted to a live scheduler (`roundhouse submit`): checked against the trace schema and
the profile before the submitter is answered, journaled, and delivered to the graph's
LiveSource at the next round boundary as a canonical trace frame."""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from roundhouse.errors import SchedError, TraceError
from roundhouse.runtime.backends.live.launches import nothing_to_run, workload_for
from roundhouse.runtime.journal import Journal, attempted_ids
from roundhouse.wire import protocol

if TYPE_CHECKING:
    from roundhouse.runtime.element import Element

SUBMISSION = "submission"  # (what errors about submitted jobs are named by: `submission:N:`, N the job's place)


class Submissions:
    def __init__(self, world, journal: Journal):
        self.world = world
        self.journal = journal
        known = attempted_ids(journal) | journal.submission_ids()
        self._next_id = max(known, default=-1) + 1
        # The ids the graph's other sources will bring, each with its source's name (`expect`).
        self._coming: list[tuple[str, np.ndarray]] = []
        self._coming_ids: frozenset[int] = frozenset()
        self._past_coming = 0  # (one past the largest of them)

    def expect(self, sources: Iterable[Element]) -> None:
        """Take as used the ids of the jobs that `sources` will bring (their `coming_job_ids`,
        known once they have started; a LiveSource's are not known ahead): no submission is
        given one, and one that asks for one is refused. A new run's engine begins before the
        scheduler takes its first submission (`LiveBackend.start`), so that this holds from the
        first one on. A journaled submission that has one anyway (taken under a graph whose
        sources brought other ids then) is refused here, naming the source: the run would fail
        when the source's job arrived."""
        sources = list(sources)
        known = ((s.name, s.coming_job_ids()) for s in sources)
        self._coming = [(name, np.asarray(ids)) for name, ids in known if ids is not None and len(ids)]
        self._coming_ids = frozenset(i for _, ids in self._coming for i in ids.tolist())
        self._past_coming = max(self._coming_ids, default=-1) + 1
        clash = sorted(self.journal.submission_ids() & self._coming_ids)
        if clash:
            name = self._bringer(clash[0])
            source = next(s for s in sources if s.name == name)
            raise SchedError(
                f"element '{name}' ({type(source).__name__}): job id {clash[0]} is also the id of a job submitted "
                "to the scheduler before its sources started (job ids must be unique in a run)",
                source.declared_at,
                hint="give the source's jobs other ids (a generated source's start_id), or start afresh with another --journal",
            )

    def _bringer(self, job_id: int) -> str:
        """The name of the source that will bring job `job_id`."""
        return next(name for name, ids in self._coming if bool(np.any(ids == job_id)))

    def accept(self, specs: list[dict], received_s: float) -> list[int]:
        """Check the jobs and journal them (committed with the backend's next flush); returns
        their ids. Raises a RoundhouseError that says what is wrong, accepting none; a problem
        with one job names its place in the message (`submission:N:`, counted from 1), which
        the submitter turns into the line of its file."""
        rows = []
        for spec in specs:
            row = {}
            for k, v in spec.items():
                if k != "command":
                    row[k] = None if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            rows.append(row)
        ids = self._ids(rows)
        for place, (spec, row, job_id) in enumerate(zip(specs, rows, ids), 1):
            row["job_id"] = str(job_id)
            if "command" in spec:
                row["command"] = _command_text(spec["command"], job_id, place)
        frame = _text_frame(rows)
        # The columns the scheduler added, which an error's list of columns found leaves out:
        # a submitted job arrives when it is taken, and one without an id is given one.
        added = tuple(c for c in ("arrival_s", "job_id") if not any(c in spec for spec in specs))
        checked = validated(frame.with_columns(arrival_s=pl.lit("0")), SUBMISSION, added=added)
        places = {job_id: place for place, job_id in enumerate(ids, 1)}
        _within_the_wire(checked, places)
        try:
            self.world.prepare(checked, SUBMISSION)
        except TraceError as err:
            raise _placed(err, places) from None
        _runnable(checked, places)
        if any(r.get("job_id") is None for r in rows):
            self._next_id = max(i for i, r in zip(ids, rows) if r.get("job_id") is None) + 1
        for spec, job_id in zip(frame.to_dicts(), ids):
            self.journal.add_submission(job_id, spec, received_s)
        return ids

    def _ids(self, rows: list[dict]) -> list[int]:
        """The jobs' ids: their own (unused), or, for a job without one, the next free id after
        the largest in use, and once those run out at the wire's limit (a job was given the
        largest id), the lowest free one. Only the journal and the jobs decide which ids are
        used, and the ids the graph's sources will bring (`expect`), so a restarted scheduler
        picks the same ones."""
        taken = set(self.world.jobs.column("job_id").tolist()) | self.journal.submission_ids()
        coming = self._coming_ids
        start = max(self._next_id, max(taken, default=-1) + 1, self._past_coming)
        given: list[int | None] = []
        for place, row in enumerate(rows, 1):
            text = row.get("job_id")
            if text is None:
                given.append(None)
                continue
            try:
                job_id = int(text)
            except ValueError:
                raise TraceError(SUBMISSION, f"job_id {text!r} is not a whole number", row=place) from None
            if job_id in taken:
                raise TraceError(SUBMISSION, f"job id {job_id} is already in use", row=place)
            if job_id in coming:
                message = f"job id {job_id} is one that source '{self._bringer(job_id)}' will bring later"
                raise TraceError(SUBMISSION, message + " (job ids must be unique in a run)", row=place)
            taken.add(job_id)
            given.append(job_id)
        free = (
            i
            for i in itertools.chain(range(start, protocol.JOB.hi + 1), range(min(start, protocol.JOB.hi + 1)))
            if i not in taken and i not in coming
        )
        ids = []
        for place, own in enumerate(given, 1):
            chosen = own if own is not None else next(free, None)
            if chosen is None:
                raise TraceError(SUBMISSION, f"no job id is free (every id up to {protocol.JOB.hi:,} is in use)", row=place)
            ids.append(chosen)
        return ids

    def take(self, k: int) -> tuple[pl.DataFrame, list[int]]:
        """The jobs accepted since the last round, now delivered in round k."""
        pending = self.journal.pending_submissions()
        if not pending:
            return self.empty(), []
        ids = [i for i, _, _ in pending]
        self.journal.mark_delivered(ids, k)
        return self.frame(pending), ids

    def replayed(self, ids: list[int]) -> pl.DataFrame:
        return self.journal.delivered(ids) if ids else self.empty()

    @staticmethod
    def frame(pending: list[tuple[int, dict, float]]) -> pl.DataFrame:
        from roundhouse.traces.schema import validate

        return validate(_text_frame([{**spec, "arrival_s": str(t)} for _, spec, t in pending]), SUBMISSION)

    @staticmethod
    def empty() -> pl.DataFrame:
        return pl.DataFrame(
            {"job_id": [], "arrival_s": [], "gpus": []}, schema={"job_id": pl.Int64, "arrival_s": pl.Float64, "gpus": pl.Int64}
        )


def _command_text(command, job_id: int, place: int) -> str | None:
    """A job's command as a shell would read it: given as text or as a list of words. Anything
    else (`true`, a number) would be read as a command of that name, which is not what was meant.
    Text must split into words as a shell would (closed quotes, no lone trailing backslash),
    name a program (a blank command fails at every launch), and split into no more words than
    a launch carries: the launch splits it, and a job it cannot run is better refused now than
    journaled. `place`: the job's place in the submission, which an error names."""
    if command is None:
        return None
    if isinstance(command, list) and all(isinstance(word, str) for word in command):
        text = shlex.join(command)
    elif isinstance(command, str):
        text = command
    else:
        raise TraceError(SUBMISSION, f"job {job_id}: command {command!r}: must be text or a list of words (strings)", row=place)
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise TraceError(
            SUBMISSION, f"job {job_id}: command {text!r}: {str(err).lower()} (it does not split into words)", row=place
        ) from None
    if not words or not words[0].strip():
        raise TraceError(SUBMISSION, f"job {job_id}: command {text!r} is blank: it names no program to run", row=place)
    try:
        _LAUNCH_COMMAND.check(words, "command")
    except protocol.ProtocolError as err:
        raise TraceError(SUBMISSION, f"job {job_id}: {err.reason} (more than a live launch carries)", row=place) from None
    return text


_LAUNCH_COMMAND = protocol.SCHEMAS["launch"].optional["command"]


def _text_frame(rows: list[dict]) -> pl.DataFrame:
    columns = sorted({k for r in rows for k in r})
    return pl.DataFrame({c: [r.get(c) for r in rows] for c in columns}, schema={c: pl.String for c in columns})


def validated(frame: pl.DataFrame, path: str, lines=None, added: tuple[str, ...] = ()) -> pl.DataFrame:
    """The trace schema's `validate`, for a frame to which the caller `added` columns of its own
    (an arrival time where none was given, the file's order): an error listing the columns
    found lists only those that were given."""
    from roundhouse.traces.schema import validate

    try:
        return validate(frame, path, lines)
    except TraceError as err:
        found = "columns found: " + _listed(frame.columns)
        if found not in err.message:
            raise
        given = "columns found: " + _listed([c for c in frame.columns if c not in added])
        raise TraceError(err.path, err.message.replace(found, given), row=err.row, column=err.column) from None


def _listed(columns: list[str]) -> str:
    return ", ".join(f"'{c}'" for c in columns) or "none"  # (as traces/schema.py lists them)


# A problem the checks of a whole batch find, named by job id: `job 12: ...`, `job 12 asks ...`.
_JOB_NAMED = re.compile(r"job (\d+)\b")


# How a refusal names a submitted job: by its place, `submission:N:` (N counted from 1); and
# what follows when a check of the whole batch named it by the id the scheduler chose, after
# the column, if any: `error: job 6: ...`, `error: column 'iterations': job 6: ...`, `error: job 6 asks ...`.
_PLACE = re.compile(rf"\b{SUBMISSION}:(\d+):")
_CHOSEN_ID = re.compile(r"^( error: (?:column '[^']*': )?)job \d+(: |(?= ))")


def as_submitted(reason: str, specs: list[dict]) -> str:
    """A refusal's `reason` as the scheduler logs it, naming the job as its submitter did: `row
    N of the submission`, and for a job sent without an id, not by the id the scheduler chose
    for it (dropped, or said as `it`, as the submitter drops it): that id was never the job's,
    and the next job accepted may well be given it. `specs`: the jobs as submitted."""
    match = _PLACE.search(reason)
    place = int(match.group(1)) if match else 0
    if match is None or not 1 <= place <= len(specs):
        return reason
    rest = reason[match.end() :]
    named = f"row {place} of the submission"
    if specs[place - 1].get("job_id") is None:
        rest = _CHOSEN_ID.sub(lambda m: m.group(1) if m.group(2) else f"{m.group(1)}it", rest, count=1)
        named += " (which gave no job id)"
    return f"{reason[: match.start()]}{named}:{rest}"


def _placed(err: TraceError, places: dict[int, int]) -> TraceError:
    """A problem with one job of a submission (named by its id) named by the job's place too."""
    named = _JOB_NAMED.match(err.message)
    place = places.get(int(named.group(1))) if named else None
    if place is None or err.row is not None:
        return err
    return TraceError(err.path, err.message, row=place, column=err.column)


# The job columns a launch message carries, and the wire's limit on each (wire/protocol.py).
_WIRE_LIMITS = (("job_id", protocol.JOB.hi), ("iterations", protocol.ITERATION.hi), ("batch_size", protocol.BATCH_SIZE.hi))


def _within_the_wire(frame: pl.DataFrame, places: dict[int, int]) -> None:
    """Refuse jobs whose numbers a launch message could not carry, before they are journaled. A
    live job trains whole iterations: a fraction (which a simulated trace may hold) is refused
    rather than rounded, as a run would otherwise train for other than what was asked.
    `places`: each job's place in the submission, by id, which an error names."""
    if "iterations" in frame.columns:
        split = frame.filter(pl.col("iterations") != pl.col("iterations").floor())
        if split.height:
            job_id = split["job_id"][0]
            message = f"job {job_id}: iterations {split['iterations'][0]:g} is not a whole number"
            raise TraceError(SUBMISSION, message, row=places.get(job_id))
    for column, most in _WIRE_LIMITS:
        if column in frame.columns:
            over = frame.filter(pl.col(column) > most)
            if over.height:
                value, job_id = over[column][0], over["job_id"][0]
                shown = _number(value)
                message = f"job {job_id}: {column} {shown} is more than a live launch carries ({most:,})"
                raise TraceError(SUBMISSION, message, row=places.get(job_id))


def _runnable(frame: pl.DataFrame, places: dict[int, int]) -> None:
    """Refuse a job that gives no command and whose model has no example workload: no agent
    could run it, and it would fail at its first launch instead (`launches.send_launch`)."""
    commands = frame["command"].to_list() if "command" in frame.columns else [None] * frame.height
    models = frame["model"].to_list() if "model" in frame.columns else [None] * frame.height
    for job_id, model, command in zip(frame["job_id"].to_list(), models, commands):
        if not (isinstance(command, str) and command.strip()) and workload_for(model) is None:
            raise TraceError(SUBMISSION, f"job {job_id}: cannot run live: {nothing_to_run(model)}", row=places.get(job_id))


def _number(value: float) -> str:
    """A number as a message shows it: digits grouped by thousands, but a float past 10^21 (where
    Python itself turns to an exponent) as `1e+300`, not three hundred digits."""
    if isinstance(value, float) and not abs(value) < 1e21:
        return f"{value:g}"
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"
