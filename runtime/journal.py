"""The live scheduler's journal: an SQLite file from which a restarted scheduler recovers.

A live run is a deterministic function of what it was told: the graph, the cluster, and, round
by round, the events its backend reported (completions, progress, faults, submissions). The
journal keeps exactly that, written ahead of every action:

- `meta`: what run this is (graph digest, cluster, round length, the wall-clock epoch t=0);
- `rounds`: one record per round: its time, the events folded in, the plans carried out;
- `submissions`: every job accepted from `roundhouse submit`, stored before the submitter is
  answered, with the round that delivered it to the graph (NULL until then);
- `attempts`: every launch of every job: where, from which checkpoint, how it ended;
- `exits`: every worker's exit as its agent reported it (outcome, iteration, checkpoint);
- `nodes`: which agent (by node name) fills which node of the cluster.

A restarted scheduler replays the rounds through the same graph (elements keep private
state, which replay rebuilds exactly), then takes the running jobs back from re-registering
agents. The file uses write-ahead logging, so a crash loses nothing that was committed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from roundhouse.errors import UsageError

SCHEMA_VERSION = 1

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
"""


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


class Journal:
    """One live run's journal file. Changes are grouped and committed by `commit()`."""

    def __init__(self, path: str | Path, read_only: bool = False):
        """`read_only`: only read it (`roundhouse whatif`; its scheduler may be writing it)."""
        self.path = Path(path)
        try:
            if read_only:
                self.db = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True, check_same_thread=False)
            else:
                self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.executescript(_TABLES)
        except sqlite3.DatabaseError as err:
            raise UsageError(f"{self.path}: cannot use as a journal: {err}") from None
        self._open = False
        self.writes = 0  # rows written (inserted or updated) since the journal was opened
        self.commits = 0

    # --- the run ---
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def begin(self, meta: dict[str, Any]) -> dict[str, Any]:
        """Start a new run, or check that the journal's run is this one; returns its meta
        (with the epoch, which a resumed run keeps)."""
        old = self.meta()
        if not old:
            meta = {**meta, "schema": SCHEMA_VERSION, "epoch": time.time()}
            self._begin()
            for k, v in meta.items():
                self.db.execute("INSERT INTO meta VALUES (?, ?)", (k, json.dumps(v)))
            self.commit()
            return meta
        if old.get("schema") != SCHEMA_VERSION:
            raise UsageError(f"{self.path}: journal schema {old.get('schema')} is not {SCHEMA_VERSION}")
        for key in ("graph_digest", "cluster", "round_s"):
            if old.get(key) != meta.get(key):
                raise UsageError(
                    f"{self.path}: this journal belongs to another run ({key} differs: {old.get(key)!r} "
                    f"there, {meta.get(key)!r} now); give a new --journal path to start afresh"
                )
        return old

    # --- rounds ---
    def rounds(self) -> Iterator[tuple[int, float, dict]]:
        for k, now, record in self.db.execute("SELECT k, now, record FROM rounds ORDER BY k"):
            yield k, now, json.loads(record)

    def add_round(self, k: int, now: float, record: dict) -> None:
        self._begin()
        self.writes += 1
        self.db.execute("INSERT OR REPLACE INTO rounds VALUES (?, ?, ?)", (k, now, json.dumps(record, separators=(",", ":"))))

    # --- submissions ---
    def add_submission(self, job_id: int, spec: dict, received_s: float) -> None:
        self._begin()
        self.writes += 1
        self.db.execute("INSERT INTO submissions VALUES (?, ?, ?, NULL)", (job_id, json.dumps(spec), received_s))

    def submission_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT job_id FROM submissions")}

    def pending_submissions(self) -> list[tuple[int, dict, float]]:
        rows = self.db.execute("SELECT job_id, spec, received_s FROM submissions WHERE round IS NULL ORDER BY rowid")
        return [(i, json.loads(s), t) for i, s, t in rows]

    def submissions(self, ids: list[int]) -> list[tuple[int, dict, float]]:
        got = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for job_id, spec, t in self.db.execute(
                f"SELECT job_id, spec, received_s FROM submissions WHERE job_id IN ({marks})", chunk
            ):
                got[job_id] = (job_id, json.loads(spec), t)
        return [got[i] for i in ids]

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
        query = "SELECT * FROM attempts" + (" WHERE job_id = ?" if job_id is not None else "") + " ORDER BY job_id, attempt"
        rows = self.db.execute(query, () if job_id is None else (job_id,))
        out = []
        for r in rows:
            out.append(
                AttemptRow(
                    r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13]
                )
            )
        return out

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

    # --- nodes ---
    def set_node(self, name: str, slot: int, address: str, joined_s: float) -> None:
        self._begin()
        self.writes += 1
        self.db.execute("INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?)", (name, slot, address, joined_s))

    def nodes(self) -> dict[str, tuple[int, str]]:
        return {n: (s, a) for n, s, a in self.db.execute("SELECT name, slot, address FROM nodes")}

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

    def close(self) -> None:
        self.commit()
        self.db.close()

    def holds_nothing(self) -> bool:
        """Whether nothing was written: no run begun, no submission accepted, no node seen."""
        tables = ("meta", "rounds", "submissions", "attempts", "exits", "nodes")
        return not any(self.db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in tables)

    def remove(self) -> None:
        """Delete the closed journal's files (SQLite's write-ahead log and index beside it)."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
