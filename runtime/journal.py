"""The live scheduler's journal: an SQLite file from which a restarted scheduler recovers.

A live run is a deterministic function of what it was told: the graph, the cluster, and, round
by round, the events its backend reported (completions, progress, faults, submissions). The
journal keeps exactly that, written ahead of every action:

- `meta`: what run this is (graph digest, cluster and its fingerprint, round length, the wall-clock epoch t=0),
  written when the run begins; a job accepted while the run waits for its agents writes all
  but the epoch with it, so that the journal is that graph's and cluster's from then on;
- `rounds`: one record per round: its time, the events folded in, the plans carried out;
- `submissions`: every job accepted from `roundhouse submit`, stored before the submitter is
  answered, with the round that delivered it to the graph (NULL until then);
- `attempts`: every launch of every job: where it was launched, from which checkpoint, how it ended;
- `shapes`: every shape of every attempt: generation 0 as launched, then one per in-place
  resize (its GPUs, nodes, rendezvous port, batch and learning-rate rule), so that a restarted
  scheduler takes a resized job back as it runs, not as it was launched;
- `exits`: every worker's exit as its agent reported it (outcome, iteration, checkpoint);
- `nodes`: which agent (by node name) fills which node of the cluster;
- `stopped_nodes`: the nodes whose agents the scheduler told to stop, or that said they were
  stopping, and have not registered since: a resumed run keeps them offline until they do;
- `strays`: the stray workers the scheduler killed on a node (a rank that runs on another node)
  whose exits have not come: a restarted scheduler acknowledges such an exit as the one that
  killed the worker would, rather than refuse it.

A restarted scheduler replays the rounds through the same graph (elements keep private
state, which replay rebuilds exactly), then takes the running jobs back from re-registering
agents. The file uses write-ahead logging, so a crash loses nothing that was committed.

What is read back is checked: its pages (SQLite's quick check), tables and their columns as
the file is opened (to read or to write), `meta`, `rounds` (each round's time too), the
submissions and attempts as read (text SQLite cannot read included), and what only
the run's jobs show as its rounds replay (records.py's `replayed`): a journal changed by hand
or damaged is refused with a UsageError naming the file, the table, the round or job, and what
is wrong, before anything is written to it.

`Journal` holds the file and its tables of rounds, submissions and attempts. Which run the
journal holds (its facts, beginning one) is runtime/journal_runs.py, its tables of nodes
runtime/journal_nodes.py: Journal binds their functions as its methods. How a value read back
is judged and shown in an error is runtime/journal_values.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from roundhouse.errors import TraceError, UsageError
from roundhouse.runtime import journal_nodes, journal_runs
from roundhouse.runtime.element import MAX_SECONDS
from roundhouse.runtime.files import file_making_problem, lock_file, unlock_file
from roundhouse.runtime.journal_values import cell as _cell
from roundhouse.runtime.journal_values import is_number as _is_number
from roundhouse.runtime.journal_values import shown as _shown
from roundhouse.runtime.types import LR_RULES

if TYPE_CHECKING:
    import polars as pl

# Kept here for the modules that import them from here (runtime/whatif.py checks a journal it
# reads with `_check_begun`).
SCHEMA_VERSION = journal_runs.SCHEMA_VERSION
_check_begun = journal_runs.check_begun
# Rounds read from the journal at a time (`Journal.rounds`): a replay holds no more at once.
ROUND_BATCH = 256

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (k INTEGER PRIMARY KEY, now REAL NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    job_id INTEGER PRIMARY KEY, spec TEXT NOT NULL, received_s REAL NOT NULL, round INTEGER);
CREATE TABLE IF NOT EXISTS attempts (
    job_id INTEGER NOT NULL, attempt INTEGER NOT NULL,
    launched_s REAL NOT NULL, gpus TEXT NOT NULL, nodes TEXT NOT NULL, master_port INTEGER NOT NULL,
    start_iteration INTEGER NOT NULL, resume TEXT,
    ended_s REAL, outcome TEXT, end_iteration INTEGER,
    checkpoint TEXT, checkpoint_iteration INTEGER, reason TEXT,
    PRIMARY KEY (job_id, attempt));
CREATE TABLE IF NOT EXISTS exits (
    job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL, node TEXT NOT NULL,
    received_s REAL NOT NULL, outcome TEXT NOT NULL, iteration INTEGER NOT NULL, start_iteration INTEGER NOT NULL,
    checkpoint TEXT, checkpoint_iteration INTEGER, exit_code INTEGER, reason TEXT,
    PRIMARY KEY (job_id, attempt, rank));
CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY, slot INTEGER NOT NULL, address TEXT NOT NULL, joined_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS stopped_nodes (name TEXT PRIMARY KEY, stopped_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS strays (
    node TEXT NOT NULL, job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL,
    killed_s REAL NOT NULL, PRIMARY KEY (node, job_id, attempt, rank));
CREATE TABLE IF NOT EXISTS shapes (
    job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, generation INTEGER NOT NULL, since_s REAL NOT NULL,
    gpus TEXT NOT NULL, nodes TEXT NOT NULL, master_port INTEGER NOT NULL,
    batch INTEGER NOT NULL, iters_per_s REAL NOT NULL, lr_rule INTEGER, lr_scale REAL,
    PRIMARY KEY (job_id, attempt, generation));
"""
# The tables every journal has. `shapes`, `stopped_nodes` and `strays` came later: a journal
# written before them has none, and reads as if no attempt were ever resized, no agent ever told
# to stop and no stray worker killed (they are added when such a journal is resumed).
_TABLE_NAMES = ("meta", "rounds", "submissions", "attempts", "exits", "nodes")


class Record(dict[str, Any]):
    """A journaled round's record (runtime/backends/live/records.py), which says where it was
    read: replay finds what only the run's jobs show (a job it never had), and names the round."""

    __slots__ = ("where",)

    def __init__(self, record: dict, where: str):
        super().__init__(record)
        self.where = where


@attrs.define
class AttemptRow:
    job_id: int
    attempt: int
    launched_s: float
    gpus: list[int]
    nodes: list[str]
    master_port: int
    start_iteration: int
    resume: str | None = None
    ended_s: float | None = None
    outcome: str | None = None
    end_iteration: int | None = None
    checkpoint: str | None = None
    checkpoint_iteration: int | None = None
    reason: str | None = None


@attrs.define
class ShapeRow:
    """An attempt's shape from its `generation` on (0: as launched; each in-place resize is
    the next): where its ranks run (rank order), its rendezvous port, its global batch, its
    profiled speed (0: unknown), and its learning-rate rule and factor (None: none)."""

    job_id: int
    attempt: int
    generation: int
    since_s: float
    gpus: list[int]
    nodes: list[str]
    master_port: int
    batch: int
    iters_per_s: float
    lr_rule: int | None = None
    lr_scale: float | None = None


def _connect(uri: str, read_only: bool) -> sqlite3.Connection:
    """The journal's database at `uri`, opened to read and write, or to read only: then in one
    read transaction until it is closed, so that every read sees the journal as of one moment as
    its scheduler goes on writing (a round read without the job it delivers would read as
    damaged). In write-ahead-log mode that holds up no writer."""
    if not read_only:
        return sqlite3.connect(f"{uri}?mode=rwc", uri=True, isolation_level=None, check_same_thread=False)
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    db.execute("BEGIN")
    return db


class Journal:
    """One live run's journal file. Changes are grouped and committed by `commit()`."""

    def __init__(self, path: str | Path, read_only: bool = False, lock: bool = False):
        """`read_only`: only read it (`roundhouse whatif`; its scheduler may be writing it).
        `lock`: lock it (`lock`) before SQLite opens it, as a scheduler does: SQLite keeps its
        write-ahead log beside the path it was given, so a second scheduler reaching the file by
        another name (a hard link) would read it, and could write to it, without the first's log."""
        self.path = Path(path)  # (as given: what messages name)
        # The file itself, resolved once: through a symbolic link to a journal not there yet,
        # the journal is made where the link leads (as a user who made the link expects), and
        # what is locked, opened and, if left empty, removed is that file, never the link, even
        # should the link be changed while the journal is open.
        self.file = self.path.resolve()
        self._lock: _Lock | None = None  # held by the scheduler running the run
        made = lock and not self.file.exists()  # (made here: removed again if it cannot be used)
        if lock:
            self._lock = _Lock(self.path, self.file)
        # As a URI with its path escaped: a name with '#', '?' or '%' in it is then that file,
        # not a shorter name followed by a query.
        uri = self.file.as_uri()
        try:
            _check_one_name(self)  # (before SQLite opens it: it would read it, and could write it)
            self.db = _connect(uri, read_only)
            _check_tables(self, read_only)  # (before anything is created in it, or read from it)
            _check_pages(self)
            if not read_only:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.executescript(_TABLES)
        except sqlite3.DatabaseError as err:
            what = (
                f"not a live scheduler's journal ({err})"
                if read_only
                else f"cannot use as a journal: {_why(self.path, str(err))}"
            )
            self._abandon(made)
            raise UsageError(f"{self.path}: {what}") from None
        except BaseException:
            self._abandon(made)
            raise
        self._open = False
        self._facts: dict[str, Any] | None = None  # the run's facts, until its first job or its start writes them
        self.writes = 0  # rows written (inserted or updated) since the journal was opened
        self.commits = 0

    def damaged(self, table: str, where: str, what: str) -> UsageError:
        """The error for what is wrong with a row of the journal (`where`: which row)."""
        return UsageError(f"{self.path}: damaged journal: table {table}, {where}: {what}")

    # --- the run: its facts, and beginning one (runtime/journal_runs.py) ---
    meta = journal_runs.meta
    run_of = journal_runs.run_of
    begin = journal_runs.begin

    # --- rounds ---
    def rounds(self) -> Iterator[tuple[int, float, Record]]:
        """The journaled rounds in order (by k, which the table keeps unique), each checked as
        it is read: the record's shape (runtime/backends/live/records.py), the time never going
        back, each job delivered and finished once, a delivered job's submission in its table."""
        check = _Rounds(self.submission_ids(), self.meta().get("round_s"))
        for k, now, text in _round_rows(self):
            record = self._json(text, "rounds", f"round {k}")
            try:
                check(k, now, record)
            except _Bad as bad:
                raise self.damaged("rounds", f"round {k}", str(bad)) from None
            yield k, now, Record(record, f"{self.path}: damaged journal: table rounds, round {k}")

    def replay(self) -> Replay:
        """The rounds for a restarted scheduler to replay, every one checked now (`Replay`)."""
        return Replay(self)

    def add_round(self, k: int, now: float, record: dict) -> None:
        self._begin()
        self.writes += 1
        self.db.execute("INSERT OR REPLACE INTO rounds VALUES (?, ?, ?)", (k, now, json.dumps(record, separators=(",", ":"))))

    # --- submissions ---
    def add_submission(self, job_id: int, spec: dict, received_s: float) -> None:
        self._begin()
        self.writes += 1
        if self._facts:  # (accepted before the run began: by this graph, on this cluster)
            self.db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in self._facts.items()])
            self._facts = None
        self.db.execute("INSERT INTO submissions VALUES (?, ?, ?, NULL)", (job_id, json.dumps(spec), received_s))

    def submission_ids(self) -> set[int]:
        return {r[0] for r in self._read("submissions", "SELECT job_id FROM submissions")}

    def pending_submissions(self) -> list[tuple[int, dict, float]]:
        rows = self._read("submissions", "SELECT job_id, spec, received_s FROM submissions WHERE round IS NULL ORDER BY rowid")
        return [self._submission(*row) for row in rows]

    def delivered(self, ids: list[int]) -> pl.DataFrame:
        """The submissions of jobs a round delivered, in that order, as the frame the scheduler
        read them into (`Submissions.frame`), checked as it is made (`_delivered`)."""
        return _delivered(self, ids)

    def _submission(self, job_id: int, text: str, received_s: float) -> tuple[int, dict, float]:
        spec = self._json(text, "submissions", f"job {job_id}")
        if not isinstance(spec, dict):
            raise self.damaged("submissions", f"job {job_id}", f"the spec {_shown(spec)} is not an object")
        if not _is_number(received_s):
            raise self.damaged("submissions", f"job {job_id}", f"its time received {received_s!r} is not a number")
        return job_id, spec, received_s

    def _read(self, table: str, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        """Every row a query of `table` reads; what SQLite cannot read (a damaged page, text not UTF-8) is a damaged journal."""
        try:
            return self.db.execute(sql, tuple(args)).fetchall()
        except sqlite3.DatabaseError as err:
            raise self.damaged(table, "its rows", f"SQLite cannot read them ({err})") from None

    def _json(self, text: Any, table: str, where: str) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError) as err:  # (json's own error is a ValueError)
            raise self.damaged(table, where, f"not JSON ({err})") from None

    def mark_delivered(self, ids: list[int], k: int) -> None:
        self._begin()
        self.writes += len(ids)
        self.db.executemany("UPDATE submissions SET round = ? WHERE job_id = ?", [(k, i) for i in ids])

    # --- attempts ---
    def add_attempt(self, a: AttemptRow) -> None:
        self._begin()
        self.writes += 1
        self.db.execute(
            "INSERT OR REPLACE INTO attempts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                a.job_id,
                a.attempt,
                a.launched_s,
                json.dumps(a.gpus),
                json.dumps(a.nodes),
                a.master_port,
                a.start_iteration,
                a.resume,
                a.ended_s,
                a.outcome,
                a.end_iteration,
                a.checkpoint,
                a.checkpoint_iteration,
                a.reason,
            ),
        )

    def end_attempt(
        self,
        job_id: int,
        attempt: int,
        ended_s: float,
        outcome: str,
        end_iteration: int,
        checkpoint: str | None,
        checkpoint_iteration: int | None,
        reason: str,
    ) -> None:
        self._begin()
        self.writes += 1
        self.db.execute(
            "UPDATE attempts SET ended_s=?, outcome=?, end_iteration=?, checkpoint=?, checkpoint_iteration=?, reason=? "
            "WHERE job_id=? AND attempt=?",
            (ended_s, outcome, end_iteration, checkpoint, checkpoint_iteration, reason, job_id, attempt),
        )

    def note_checkpoint(self, job_id: int, attempt: int, path: str, iteration: int) -> None:
        self._begin()
        self.writes += 1
        self.db.execute(
            "UPDATE attempts SET checkpoint=?, checkpoint_iteration=? WHERE job_id=? AND attempt=? "
            "AND (checkpoint_iteration IS NULL OR checkpoint_iteration < ?)",
            (path, iteration, job_id, attempt, iteration),
        )

    def attempts(self, job_id: int | None = None) -> list[AttemptRow]:
        """Table attempts' rows (of one job, if given), checked as read (`_checked_attempts`)."""
        query = "SELECT * FROM attempts" + (" WHERE job_id = ?" if job_id is not None else "") + " ORDER BY job_id, attempt"
        return _checked_attempts(self, self._read("attempts", query, () if job_id is None else (job_id,)))

    # --- shapes ---
    def add_shape(self, s: ShapeRow) -> None:
        self._begin()
        self.writes += 1
        row = attrs.astuple(s, recurse=False)
        self.db.execute(
            "INSERT OR REPLACE INTO shapes VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (*row[:4], json.dumps(s.gpus), json.dumps(s.nodes), *row[6:]),
        )

    def shapes(self) -> dict[tuple[int, int], list[ShapeRow]]:
        """Every attempt's shapes by (job id, attempt), in generation order, checked as they
        are read; none for a journal written before shapes were kept."""
        if not self._read("shapes", "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'shapes'"):
            return {}
        return _checked_shapes(self, self._read("shapes", "SELECT * FROM shapes ORDER BY job_id, attempt, generation"))

    def add_exit(self, node: str, received_s: float, body: dict) -> None:
        self._begin()
        self.writes += 1
        self.db.execute(
            "INSERT OR IGNORE INTO exits VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                body["job"],
                body["attempt"],
                body["rank"],
                node,
                received_s,
                body["outcome"],
                body["iteration"],
                body["start_iteration"],
                body.get("checkpoint"),
                body.get("checkpoint_iteration"),
                body.get("exit_code"),
                body.get("reason") or None,
            ),
        )

    # --- nodes (runtime/journal_nodes.py) ---
    set_node = journal_nodes.set_node
    node_stopped = journal_nodes.node_stopped
    stopped_nodes = journal_nodes.stopped_nodes
    nodes = journal_nodes.nodes
    strays_killed, stray_heard, strays = journal_nodes.strays_killed, journal_nodes.stray_heard, journal_nodes.strays

    # --- transactions ---
    def _begin(self) -> None:
        if not self._open:
            self.db.execute("BEGIN")
            self._open = True

    def commit(self) -> None:
        if self._open:
            self.db.execute("COMMIT")
            self._open = False
            self.commits += 1

    def lock(self) -> None:
        """Hold an exclusive lock on the journal file itself until the journal is closed: two
        schedulers on one journal would each write their own rounds into it (`_Lock`). The lock
        goes with the file, so that a symbolic or a hard link to the journal is the same journal."""
        self._lock = self._lock or _Lock(self.path, self.file)

    def close(self, remove_if_empty: bool = False) -> None:
        """Commit and close. `remove_if_empty`: remove its files too if it holds nothing of a run
        (`holds_nothing`), while it is locked (locked now if need be): a journal another
        scheduler holds is that one's, and one removed before its lock is released is never
        taken by another (runtime/files.py's `lock_file` opens the path again)."""
        try:
            self.commit()
            empty = remove_if_empty and self._locked() and self.holds_nothing()
            self.db.close()
            if empty:
                self.remove()
        finally:
            self._release()

    def _locked(self) -> bool:
        """Whether this journal holds its lock, taken now if no other scheduler holds it."""
        try:
            self.lock()
        except UsageError:
            return False
        return True

    def _abandon(self, made: bool) -> None:
        """Let go of a journal that cannot be used: SQLite's connection, the file if it was
        `made` for it (removed while still locked), then the lock."""
        db = getattr(self, "db", None)
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        try:
            if made and self._lock is not None:
                self.remove()
        finally:
            self._release()

    def _release(self) -> None:
        # (after SQLite closed the file: `lock_file`)
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def holds_nothing(self) -> bool:
        """Whether it holds nothing of a run: none begun, no submission accepted. (The nodes of a
        run that never began are not kept for it: their agents register again.)"""
        tables = ("meta", "rounds", "submissions", "attempts", "exits")
        return not any(self._read(table, f"SELECT 1 FROM {table} LIMIT 1") for table in tables)

    def remove(self) -> None:
        """Delete the closed journal's files (SQLite's write-ahead log and index beside it):
        the file opened, not a symbolic link that led to it."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.file}{suffix}").unlink(missing_ok=True)


def _why(path: Path, said: str) -> str:
    """Why the journal at `path` could not be opened (or made) to write it, after what was `said`
    (SQLite's or the system's words): what the file system says, where SQLite says only that
    it cannot open the file."""
    real = path.resolve()
    if real.exists() and not real.is_file() and not real.is_dir():  # (SQLite says "disk I/O error" of /dev/null)
        return f"{said}: {path} is not a regular file (a device or a pipe); a journal is a file of its own"
    if not real.parent.is_dir():  # (a symbolic link to a file in no folder)
        return f"{said}: no folder {real.parent}" + (f" (where {path} leads)" if real != path.absolute() else "")
    if file_making_problem(real.parent) is not None:  # (tried: `os.access` says yes to root everywhere)
        return f"{said}: its folder {real.parent} is not writable (SQLite's write-ahead log goes beside the journal)"
    return said


def _round_rows(journal: Journal) -> Iterator[tuple[Any, Any, Any]]:
    """Table rounds' rows in order of k, read ROUND_BATCH at a time (each batch a query of its
    own, after the last k read: the table's key, a whole number), so that a long run's rounds
    are never all in memory at once, and no query stays open between batches."""
    sql = "SELECT k, now, record FROM rounds ORDER BY k LIMIT ?"
    batch = journal._read("rounds", sql, (ROUND_BATCH,))
    while batch:
        yield from batch
        if len(batch) < ROUND_BATCH:
            return
        after = batch[-1][0]
        batch.clear()  # (before the next batch is read: one batch held at a time)
        batch = journal._read("rounds", "SELECT k, now, record FROM rounds WHERE k > ? ORDER BY k LIMIT ?", (after, ROUND_BATCH))


class Replay:
    """A journal's rounds as a restarted scheduler replays them: checked first, all of them, as
    `Journal.rounds` checks them, and which rounds delivered the submissions (`check_deliveries`),
    so that a damaged journal is refused before any round replays; then read again, in order, a
    batch at a time, as the replay asks for them (`replay[i]`, i never going back but to 0, or
    iterating), so that memory does not grow with the run's length. Its length is the number of
    rounds checked (a round journaled after it was made is not one of them)."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self._count = 0

        def counted() -> Iterator[tuple[int, float, Record]]:
            for row in journal.rounds():
                self._count += 1
                yield row

        check_deliveries(journal, counted())  # (reads them all, one batch at a time)
        self._rows: Iterator[tuple[int, float, Record]] | None = None
        self._at = -1
        self._row: tuple[int, float, Record] | None = None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[tuple[int, float, Record]]:
        for _, row in zip(range(self._count), self.journal.rounds()):
            yield row

    def __getitem__(self, i: int) -> tuple[int, float, Record]:
        if not 0 <= i < self._count:
            raise IndexError(f"round {i} of a replay of {self._count}")
        if self._rows is None or i < self._at:
            self._rows, self._at = iter(self), -1
        while self._at < i:
            self._row, self._at = next(self._rows), self._at + 1
        assert self._row is not None
        return self._row


def _delivered(journal: Journal, ids: list[int]) -> pl.DataFrame:
    """The submissions of jobs a round delivered, in that order, as the frame the scheduler
    read them into (`Submissions.frame`): checked as it is made (a TraceError about one of
    them names the job), so that a replay neither fails in its middle nor reads them twice."""
    from roundhouse.runtime.backends.live.submissions import Submissions  # (it uses the journal)

    got = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for job_id, spec, t in journal._read(
            "submissions", f"SELECT job_id, spec, received_s FROM submissions WHERE job_id IN ({marks})", chunk
        ):
            got[job_id] = journal._submission(job_id, spec, t)
    for i in ids:
        if i not in got:
            raise journal.damaged("submissions", f"job {i}", "no such row, though a round delivered the job")
    delivered = [got[i] for i in ids]
    for job_id, spec, _ in delivered:
        if not all(isinstance(v, str) or v is None for v in spec.values()):  # (as `Submissions.accept` journals it)
            raise journal.damaged("submissions", f"job {job_id}", f"the spec {_shown(spec)} has values other than text")
    try:
        return Submissions.frame(delivered)
    except TraceError as err:
        job = f"job {delivered[err.row - 1][0]}" if err.row and 0 < err.row <= len(delivered) else "a delivered job"
        raise journal.damaged(
            "submissions", job, f"column {err.column!r}: {err.message}" if err.column else err.message
        ) from None


def attempted_ids(journal: Journal) -> set[int]:
    """The job ids of table attempts, checked to be job ids."""
    ids = {r[0] for r in journal._read("attempts", "SELECT DISTINCT job_id FROM attempts")}
    for job_id in ids:
        if type(job_id) is not int or job_id < 0:
            raise journal.damaged(
                "attempts", f"job {_cell(job_id)}", f"job_id {_cell(job_id)} is not a job id (a whole number, 0 or more)"
            )
    return ids


def check_deliveries(journal: Journal, rounds: Iterable[tuple[int, float, dict]]) -> None:
    """Refuse submissions whose delivering round (column `round`) is not the journaled round
    that delivered them (`rounds`, as read): one marked pending that a round delivered would be
    delivered again, as a second job of its id; one marked delivered that no round delivered
    would never run."""
    by_round = {job: k for k, _, record in rounds for job in record["submitted"]}
    marked = dict(journal._read("submissions", "SELECT job_id, round FROM submissions WHERE round IS NOT NULL"))
    for job, k in by_round.items():
        if marked.get(job) != k:
            said = "it is pending" if job not in marked else f"round {_cell(marked[job])} delivered it"
            raise journal.damaged("submissions", f"job {job}", f"{said}, says its row, but round {k} delivered it")
    for job, k in marked.items():
        if job not in by_round:
            raise journal.damaged("submissions", f"job {job}", f"round {_cell(k)} delivered it, says its row, but no round did")


def _checked_attempts(journal: Journal, rows: list[tuple]) -> list[AttemptRow]:
    """Table attempts' rows checked: their GPUs and nodes as lists, every other value of its
    kind (`_attempt_problem`)."""
    out = []
    for r in rows:
        where = f"job {r[0]} attempt {r[1]}"
        gpus, nodes = journal._json(r[3], "attempts", where), journal._json(r[4], "attempts", where)
        if not isinstance(gpus, list) or not all(type(g) is int and g >= 0 for g in gpus):
            raise journal.damaged("attempts", where, f"gpus {_shown(gpus)} is not a list of GPU ids")
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise journal.damaged("attempts", where, f"nodes {_shown(nodes)} is not a list of node names")
        if wrong := _attempt_problem(r):
            raise journal.damaged("attempts", where, wrong)
        out.append(AttemptRow(r[0], r[1], r[2], gpus, nodes, r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13]))
    return out


def _checked_shapes(journal: Journal, rows: list[tuple]) -> dict[tuple[int, int], list[ShapeRow]]:
    """Table shapes' rows checked (`_shape_problem`), by (job id, attempt)."""
    out: dict[tuple[int, int], list[ShapeRow]] = {}
    for r in rows:
        where = f"job {r[0]} attempt {r[1]} generation {r[2]}"
        gpus, nodes = journal._json(r[4], "shapes", where), journal._json(r[5], "shapes", where)
        if wrong := _shape_problem(r, gpus, nodes):
            raise journal.damaged("shapes", where, wrong)
        shape = ShapeRow(r[0], r[1], r[2], r[3], gpus, nodes, r[6], r[7], float(r[8]), r[9], r[10])
        out.setdefault((r[0], r[1]), []).append(shape)
    return out


def _columns_created() -> dict[str, tuple[str, ...]]:
    """Each table's columns, as `_TABLES` creates them."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(_TABLES)
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
        return {name: tuple(r[1] for r in db.execute(f"PRAGMA table_info({name})")) for name in names}
    finally:
        db.close()


_COLUMNS = _columns_created()


def _check_tables(journal: Journal, read_only: bool) -> None:
    """Refuse a database that lacks a journal's table (`shapes` aside: a journal written before
    it has none), or a column of one, before any table is created in it or any row read from it:
    another program's database, or a journal that lost a table, stays as it was. Opened to be
    written (serve), a database with no tables at all is a new journal."""
    names = {r[0] for r in journal.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = ", ".join(name for name in _TABLE_NAMES if name not in names)
    if not names and read_only:
        raise UsageError(f"{journal.path}: not a live scheduler's journal (it has no table {missing})")
    if names and missing and not read_only:
        raise UsageError(
            f"{journal.path}: not a journal as Roundhouse writes it (it has no table {missing}); "
            "give a new --journal path to start afresh"
        )
    if names and missing:
        raise UsageError(f"{journal.path}: damaged journal: it has no table {missing}")
    for table, columns in _COLUMNS.items():
        if table in names:
            have = {r[1] for r in journal.db.execute(f"PRAGMA table_info({table})")}
            if lacking := [c for c in columns if c not in have]:
                raise journal.damaged(table, "its columns", f"it has no column {', '.join(lacking)}")


def _check_one_name(journal: Journal) -> None:
    """Refuse a journal file that has more than one name (hard links): SQLite keeps the
    write-ahead log beside the name it opens, so opened by another name than its scheduler's
    the journal reads without what its log holds (a crashed scheduler's last committed rounds),
    and written so it would be two journals in one file."""
    try:
        names = os.stat(journal.file).st_nlink
    except FileNotFoundError:
        return  # (a new journal)
    except OSError as err:
        raise UsageError(f"{journal.path}: cannot use as a journal: {err.strerror or err}") from None
    if names > 1:
        raise UsageError(
            f"{journal.path}: cannot use as a journal: the file has {names} names (hard links), and a journal reached by "
            "two names loses what its write-ahead log holds (SQLite keeps the log beside the name it was opened by); "
            f"open it by the name its scheduler used and remove the others (`find / -xdev -samefile {journal.path}`)"
        )


class _Lock:
    """An exclusive lock on a journal file itself, held until `release` (`files.lock_file`).
    Beside the file (`file`, its path resolved), FILE.lock holds the holder's pid while it holds
    the lock. `journal`: the path as given, for messages."""

    def __init__(self, journal: Path, file: Path):
        self.note = Path(f"{file}.lock")
        busy = (
            f"journal {journal} is in use by another scheduler (pid {{pid}}); stop it first, or give this one another --journal"
        )
        try:
            self.fd = lock_file(file, busy, self.note)
        except OSError as err:
            raise UsageError(f"{journal}: cannot use as a journal: {_why(journal, err.strerror or str(err))}") from None

    def release(self) -> None:
        unlock_file(self.fd, self.note)


def _check_pages(journal: Journal) -> None:
    """Refuse a file whose pages SQLite finds damaged (a disk, a copy cut short or overwritten),
    before any row is read from it or written to it: SQLite would otherwise fail, or misread,
    in the middle of a replay or a run."""
    try:
        found = [r[0] for r in journal.db.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as err:
        found = [str(err)]
    if found != ["ok"]:
        said = [line for text in found for line in str(text).splitlines() if line and not line.startswith("***")]
        first = said[0] if said else "no answer"
        raise UsageError(f"{journal.path}: damaged journal: SQLite finds its file damaged ({first[:200]})")


# What an attempt may have ended as: a worker's outcome, or cancelled (its job completed before
# the relaunch started).
ATTEMPT_OUTCOMES = ("done", "preempted", "failed", "killed", "resized", "cancelled")


def _attempt_problem(r: tuple) -> str | None:
    """What is wrong with a row of table attempts (besides its GPUs and nodes), if anything."""

    def count(v: Any) -> bool:
        return type(v) is int and v >= 0

    for name, value, fits, kind in (
        ("job_id", r[0], count(r[0]), "a job id (a whole number, 0 or more)"),
        ("attempt", r[1], type(r[1]) is int and r[1] >= 1, "an attempt's number (a whole number, 1 or more)"),
        ("launched_s", r[2], _is_number(r[2]) and r[2] >= 0, "a time in seconds from the run's start"),
        ("master_port", r[5], type(r[5]) is int and 0 < r[5] < 65536, "a port"),
        ("start_iteration", r[6], count(r[6]), "an iteration (a whole number, 0 or more)"),
        ("resume", r[7], r[7] is None or isinstance(r[7], str), "a checkpoint's path or null"),
        ("ended_s", r[8], r[8] is None or (_is_number(r[8]) and r[8] >= 0), "a time in seconds from the run's start or null"),
        ("outcome", r[9], r[9] in (None, *ATTEMPT_OUTCOMES), f"one of {', '.join(ATTEMPT_OUTCOMES)}, or null"),
        ("end_iteration", r[10], r[10] is None or count(r[10]), "an iteration or null"),
        ("checkpoint", r[11], r[11] is None or isinstance(r[11], str), "a checkpoint's path or null"),
        ("checkpoint_iteration", r[12], r[12] is None or count(r[12]), "an iteration or null"),
        ("reason", r[13], r[13] is None or isinstance(r[13], str), "text or null"),
    ):
        if not fits:
            return f"{name} {_cell(value)} is not {kind}"
    if (r[8] is None) != (r[9] is None):
        return f"ended_s {_cell(r[8])} and outcome {_cell(r[9])}: an attempt that ended has both, one running neither"
    return None


def _shape_problem(r: tuple, gpus: Any, nodes: Any) -> str | None:
    """What is wrong with a row of table shapes (its GPUs and nodes read from JSON), if anything."""
    if not isinstance(gpus, list) or not gpus or not all(type(g) is int and g >= 0 for g in gpus):
        return f"gpus {_shown(gpus)} is not a list of GPU ids"
    if not isinstance(nodes, list) or len(nodes) != len(gpus) or not all(isinstance(n, str) for n in nodes):
        return f"nodes {_shown(nodes)} is not a node name for each GPU"
    for value, fits, kind in (
        (r[2], type(r[2]) is int and r[2] >= 0, "a generation (a whole number, 0 or more)"),
        (r[3], _is_number(r[3]) and r[3] >= 0, "a time in seconds from the run's start"),
        (r[6], type(r[6]) is int and 0 < r[6] < 65536, "a port"),
        (r[7], type(r[7]) is int and r[7] >= 0, "a batch size (a whole number, 0 or more)"),
        (r[8], _is_number(r[8]) and r[8] >= 0, "a speed (a number, 0 or more)"),
        (r[9], r[9] is None or (type(r[9]) is int and 0 <= r[9] < len(LR_RULES)), "a learning-rate rule or null"),
        (r[10], r[10] is None or (_is_number(r[10]) and r[10] > 0), "a learning-rate factor (more than 0) or null"),
    ):
        if not fits:
            return f"{value!r} is not {kind}"
    return None


# The keys of every round's record (records.py's `record_of`); "plans" is added when journaled.
_KEYS = ("finished", "failed", "requeued", "online", "joined", "lost", "metrics", "submitted", "progress")


class _Bad(Exception):
    """What is wrong with a round's record."""


class _Rounds:
    """What must hold across a journal's rounds, checked round by round as they are read: the
    time never goes back, nor runs ahead of the round's number (`_check_time`), a job is
    delivered once (and its submission is in its table), and a job finishes once (a round
    journaled twice would finish its jobs again). `round_s`: the run's round length (None
    before a run begins)."""

    def __init__(self, submission_ids: set[int], round_s: float | None = None):
        self.submission_ids = submission_ids
        self.round_s = round_s
        self.delivered: set[int] = set()
        self.finished: set[int] = set()
        self.now = 0.0

    def __call__(self, k: Any, now: Any, record: Any) -> None:
        _check_time(k, now, self.now, self.round_s)
        self.now = now
        _check_record(record, now)
        for job in record["submitted"]:
            if job not in self.submission_ids:
                raise _Bad(f"it delivered job {job}, which table submissions does not have")
            if job in self.delivered:
                raise _Bad(f"it delivered job {job}, which an earlier round delivered")
            self.delivered.add(job)
        finished = {job for job, _ in record["finished"]}
        again = finished & self.finished
        if again:
            raise _Bad(f"job {min(again)} finished, as it did in an earlier round (a round journaled twice?)")
        self.finished |= finished


def _check_time(k: Any, now: Any, before: float, round_s: float | None) -> None:
    """A round's time: a number of seconds from the run's start, within a century (MAX_SECONDS),
    not before the previous round's (`before`), and not past where round `k` can be: the live
    backend numbers a round by its boundary (k = t / round length), or later after a round cut
    short, never earlier."""
    if not _is_number(now) or now < 0:
        raise _Bad(f"its time {now!r} is not a number of seconds from the run's start")
    if now > MAX_SECONDS:
        raise _Bad(f"its time, t={now:g}s, is more than a century ({MAX_SECONDS:g}s) from the run's start")
    if now < before:
        raise _Bad(f"its time, t={now:g}s, is before the previous round's, t={before:g}s")
    if type(k) is not int or k < 0:
        raise _Bad(f"its number {k!r} is not a round's (a whole number, 0 or more)")
    if round_s is not None and now > (k + 1) * round_s:
        raise _Bad(f"its time, t={now:g}s, is past where round {k} can be with {round_s:g}s rounds (at most t={k * round_s:g}s)")


def _check_record(record: Any, now: float) -> None:
    """The record's shape and types, as `record_of` writes them."""
    if not isinstance(record, dict):
        raise _Bad(f"the record is {type(record).__name__} {_shown(record)}, not an object")
    for key in _KEYS:
        if key not in record:
            raise _Bad(f"the record has no {key!r}")
    finished = record["finished"]
    if type(finished) is not list or not all(
        type(f) is list and len(f) == 2 and type(f[0]) is int and _is_number(f[1]) and 0 <= f[1] <= now for f in finished
    ):
        raise _Bad(f"finished {_shown(finished)} is not a list of [job id, time] pairs, each time from 0 to the round's")
    for key in ("failed", "requeued", "submitted"):
        _ids(record[key], key)
    if record["online"] is not None:
        _ids(record["online"], "online", "GPUs offline: None, or a list of GPU ids")
        if any(gpu < 0 for gpu in record["online"]):
            raise _Bad(f"online {_shown(record['online'])} has a GPU id below 0")
    for key in ("joined", "lost"):
        if type(record[key]) is not list or not all(type(name) is str for name in record[key]):
            raise _Bad(f"{key} {_shown(record[key])} is not a list of node names")
    _check_metrics(record["metrics"])
    _check_progress(record["progress"])
    plans = record.get("plans", [])
    if type(plans) is not list or not all(
        type(p) is dict and all(type(p.get(key)) is list for key in ("launch", "gpus", "suspend")) for p in plans
    ):
        raise _Bad(f"plans {_shown(plans)} is not a list of plans (each with launch, gpus and suspend lists)")


def _ids(value: Any, key: str, kind: str = "a list of job ids") -> None:
    if type(value) is not list or not all(type(x) is int for x in value):
        raise _Bad(f"{key} {_shown(value)} is not {kind}")


def _check_metrics(metrics: Any) -> None:
    if type(metrics) is not dict or not all(
        _is_id_text(job) and type(values) is dict and all(type(n) is str and type(x) in (int, float) for n, x in values.items())
        for job, values in metrics.items()
    ):
        raise _Bad(f"metrics {_shown(metrics)} is not a map of job ids to a job's metric values")


def _is_id_text(text: Any) -> bool:
    try:
        return type(text) is str and str(int(text)) == text
    except ValueError:
        return False


def _check_progress(progress: Any) -> None:
    """[job ids, iterations, GPU-seconds, seconds]: four lists of one length, finite numbers;
    the iterations may go down (a job back at its checkpoint), the seconds may not."""
    if (
        type(progress) is not list
        or len(progress) != 4
        or not all(type(c) is list and len(c) == len(progress[0]) for c in progress)
    ):
        raise _Bad(f"progress {_shown(progress)} is not [job ids, iterations, GPU-seconds, seconds]: four lists of one length")
    if not progress[0]:
        return
    if not all(type(x) is int for x in progress[0]):
        raise _Bad(f"progress names jobs {_shown(progress[0])}, not job ids")
    # (Summed rather than looked at one by one: cheap beside the round's replay. A sum is
    # finite only if every value is a finite number; text or null cannot be summed.)
    try:
        finite = all(math.isfinite(sum(column)) for column in progress[1:])
    except (TypeError, OverflowError):  # (OverflowError: a whole number too large for a float)
        finite = False
    if not finite:
        raise _Bad(f"progress has {_shown(progress[1:])}, not numbers of iterations and seconds")
    if min(progress[2]) < 0 or min(progress[3]) < 0:
        raise _Bad(f"progress has GPU-seconds and seconds {_shown(progress[2:])}, some below 0")
