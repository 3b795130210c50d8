"""Jobs submitted to a live scheduler (`roundhouse submit`): checked against the trace schema and
the profile before the submitter is answered, journaled, and delivered to the graph's
LiveSource at the next round boundary as a canonical trace frame."""

from __future__ import annotations

import shlex

import polars as pl

from roundhouse.errors import UsageError
from roundhouse.runtime.journal import Journal
from roundhouse.wire import protocol


class Submissions:
    def __init__(self, world, journal: Journal):
        self.world = world
        self.journal = journal
        known = {r[0] for r in journal.db.execute("SELECT job_id FROM attempts")} | journal.submission_ids()
        self._next_id = max(known, default=-1) + 1

    def accept(self, specs: list[dict], received_s: float) -> list[int]:
        """Check the jobs and journal them (committed with the backend's next flush); returns
        their ids. Raises a RoundhouseError that says what is wrong, accepting none."""
        from roundhouse.traces.schema import validate

        rows = []
        for spec in specs:
            row = {}
            for k, v in spec.items():
                if k != "command":
                    row[k] = None if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            rows.append(row)
        taken = set(self.world.jobs.column("job_id").tolist()) | self.journal.submission_ids()
        ids = []
        next_id = max(self._next_id, max(taken, default=-1) + 1)
        for given in (r.get("job_id") for r in rows):
            if given is None:
                while next_id in taken:
                    next_id += 1
                ids.append(next_id)
                next_id += 1
            else:
                try:
                    ids.append(int(given))
                except ValueError:
                    raise UsageError(f"job_id {given!r} is not a whole number") from None
                if ids[-1] in taken:
                    raise UsageError(f"job id {ids[-1]} is already in use")
            taken.add(ids[-1])
        for spec, row, job_id in zip(specs, rows, ids):
            row["job_id"] = str(job_id)
            if "command" in spec:
                row["command"] = _command_text(spec["command"], job_id)
        frame = _text_frame(rows)
        checked = validate(frame.with_columns(arrival_s=pl.lit("0")), "submission")
        _within_the_wire(checked)
        self.world.prepare(checked, "submission")
        self._next_id = next_id  # ids are used up only by accepted jobs
        for spec, job_id in zip(frame.to_dicts(), ids):
            self.journal.add_submission(job_id, spec, received_s)
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
        return self.frame(self.journal.submissions(ids)) if ids else self.empty()

    @staticmethod
    def frame(pending: list[tuple[int, dict, float]]) -> pl.DataFrame:
        from roundhouse.traces.schema import validate

        return validate(_text_frame([{**spec, "arrival_s": str(t)} for _, spec, t in pending]), "submission")

    @staticmethod
    def empty() -> pl.DataFrame:
        return pl.DataFrame(
            {"job_id": [], "arrival_s": [], "gpus": []}, schema={"job_id": pl.Int64, "arrival_s": pl.Float64, "gpus": pl.Int64}
        )


def _command_text(command, job_id: int) -> str | None:
    """A job's command as a shell would read it: given as text or as a list of words. Anything
    else (`true`, a number) would be read as a command of that name, which is not what was meant.
    Text must split into words as a shell would (closed quotes, no lone trailing backslash), and
    into no more words than a launch carries: the launch splits it, and a job it cannot run
    is better refused now than journaled."""
    if command is None:
        return None
    if isinstance(command, list) and all(isinstance(word, str) for word in command):
        text = shlex.join(command)
    elif isinstance(command, str):
        text = command
    else:
        raise UsageError(f"job {job_id}: command {command!r}: must be text or a list of words (strings)")
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise UsageError(f"job {job_id}: command {text!r}: {str(err).lower()} (it does not split into words)") from None
    try:
        _LAUNCH_COMMAND.check(words, "command")
    except protocol.ProtocolError as err:
        raise UsageError(f"job {job_id}: {err.reason} (more than a live launch carries)") from None
    return text


_LAUNCH_COMMAND = protocol.SCHEMAS["launch"].optional["command"]


def _text_frame(rows: list[dict]) -> pl.DataFrame:
    columns = sorted({k for r in rows for k in r})
    return pl.DataFrame({c: [r.get(c) for r in rows] for c in columns}, schema={c: pl.String for c in columns})


# The job columns a launch message carries, and the wire's limit on each (wire/protocol.py).
_WIRE_LIMITS = (("job_id", protocol.JOB.hi), ("iterations", protocol.ITERATION.hi), ("batch_size", protocol.BATCH_SIZE.hi))


def _within_the_wire(frame: pl.DataFrame) -> None:
    """Refuse jobs whose numbers a launch message could not carry, before they are journaled. A
    live job trains whole iterations: a fraction (which a simulated trace may hold) is refused
    rather than rounded, as a run would otherwise train for other than what was asked."""
    if "iterations" in frame.columns:
        split = frame.filter(pl.col("iterations") != pl.col("iterations").floor())
        if split.height:
            raise UsageError(f"job {split['job_id'][0]}: iterations {split['iterations'][0]:g} is not a whole number")
    for column, most in _WIRE_LIMITS:
        if column in frame.columns:
            over = frame.filter(pl.col(column) > most)
            if over.height:
                value = over[column][0]
                shown = f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"
                raise UsageError(f"job {over['job_id'][0]}: {column} {shown} is more than a live launch carries ({most:,})")
