"""Reading a live scheduler's journal back (`roundhouse whatif`, and `serve` resuming its run): a
journal under a name with '#', '?' or '%' is that file, and a damaged one is refused with the
file, the table, the round or job, and what is wrong, never a traceback, and left as it was.

The journals are made without a live run: a stand-in backend runs the jobs as the plans say
and journals each round as the live backend does (runtime/backends/live/records.py)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.backends.live.records import plan_record, record_of
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.engine import Engine
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world
from roundhouse.runtime.simulation import own_elements
from roundhouse.runtime.types import Events
from tests.conftest import fails

GRAPH = """round = 10s;
cluster = "{cluster}";
submitted :: LiveSource(jobs={jobs});
submitted -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;
"""


class Recording:
    """A stand-in for the live backend: jobs known by their duration run one second of work a
    second while the plans hold them, and every round is journaled as the live backend would."""

    wall_clock = True  # (no event skipping: a live run ticks every round)

    def __init__(self, world, journal: Journal, round_s: float):
        self.world, self.journal, self.round_s = world, journal, round_s
        self.now, self.k = 0.0, 0
        self.record: dict = {}
        self.plans: list[dict] = []

    def poll(self) -> tuple[Events, Progress]:
        jobs = self.world.jobs
        ids = jobs.column("job_id")
        rows = np.asarray(self.world.running_rows, dtype=np.int64)
        left = jobs.column("work")[rows] - jobs.column("done")[rows]
        done = np.minimum(left, self.round_s if self.k else 0.0)
        ending = rows[done >= left - 1e-9] if self.k else rows[:0]
        pending = self.journal.pending_submissions()
        submitted = [i for i, _, _ in pending]
        self.journal.mark_delivered(submitted, self.k)
        events = Events(
            time=self.now,
            finished=ending,
            finished_at=np.full(len(ending), self.now),
            submitted=Submissions.frame(pending) if pending else Submissions.empty(),
        )
        progress = Progress(rows, done, done * jobs.column("held")[rows], np.full(len(rows), float(done.max(initial=0))))
        self.record = record_of(events, progress, ids, submitted)
        self.plans = []
        return events, progress

    def apply(self, plan) -> None:
        self.plans.append(plan_record(plan, self.world.jobs.column("job_id")))

    def advance(self) -> None:
        self.journal_round()
        self.k += 1
        self.now += self.round_s

    def journal_round(self) -> None:
        self.journal.add_round(self.k, self.now, dict(self.record, plans=self.plans))
        self.journal.commit()


def live_journal(
    folder: Path,
    graph: Path | str,
    jobs: Sequence[tuple[int, int]],
    stop_s: float | None = None,
    *,
    fingerprint: bool = False,
    name: str = "j.sqlite",
    own: bool = False,
) -> tuple[Path, dict]:
    """A journal in `folder` of a live run of `graph` (a file, or the text of one written as
    g.sched), with `jobs` (gpus, duration_s) submitted as jobs 0, 1, ... before round 0; run to its
    end, or to `stop_s`. The run's facts as serve keeps them, without the cluster's fingerprint
    unless `fingerprint` (an older Roundhouse's journal); the graph compiled with its element
    files its own if `own`. Returns the journal's path and those facts."""
    if isinstance(graph, str):
        (folder / "g.sched").write_text(graph)
        graph = folder / "g.sched"
    with own_elements() if own else nullcontext():
        compiled = compile_file(graph)
    profile = load_profile(compiled)
    world = new_world(compiled, load_cluster(compiled, None, profile), profile)
    meta = {"graph": str(graph.resolve()), "graph_digest": compiled.key(), "cluster": world.cluster.describe()}
    if fingerprint:
        meta["cluster_fingerprint"] = world.cluster.fingerprint()
    meta["round_s"] = 10.0
    path = folder / name
    journal = Journal(path)
    journal.begin(meta)
    for i, (gpus, duration_s) in enumerate(jobs):
        journal.add_submission(i, {"job_id": str(i), "gpus": str(gpus), "duration_s": str(duration_s), "command": "sleep 1"}, 0.0)
    journal.commit()
    backend = Recording(world, journal, 10.0)
    engine = Engine(compiled, world, backend)
    engine.begin()
    while stop_s is None or backend.now < stop_s:
        if engine.step():
            backend.journal_round()  # (the last round, as the live backend journals it on closing)
            break
    journal.close()
    return path, meta


def make_journal(
    folder: Path, jobs: int = 6, cluster: str = "1x2:V100", name: str = "j.sqlite", stop_s: float | None = None
) -> Path:
    """A journal of a run of `jobs` jobs, all submitted before round 0 (to its end, or to
    `stop_s`: jobs still running then)."""
    specs = [(1 + i % 2, 25 + 10 * (i % 4)) for i in range(jobs)]
    return live_journal(folder, GRAPH.format(cluster=cluster, jobs=jobs), specs, stop_s, name=name)[0]


def change(path: Path, sql: str) -> None:
    """Damage the journal as a hand (or a disk) might."""
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.commit()
    db.close()


def contents(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


@pytest.fixture(scope="module")
def journal_file(tmp_path_factory) -> Path:
    return make_journal(tmp_path_factory.mktemp("journal"), stop_s=170.0)


@pytest.fixture
def journal(journal_file, tmp_path) -> Path:
    """A copy of the module's journal, to damage."""
    copy = tmp_path / "j.sqlite"
    copy.write_bytes(journal_file.read_bytes())
    return copy


def test_the_made_journal_replays(journal, capsys):
    from roundhouse.tools.cli import main

    assert main(["whatif", str(journal), "--json"]) == 0
    point = json.loads(capsys.readouterr().out)["from"]
    assert point["jobs"] == 6 and point["unfinished"] > 0 and point["round"] > 3


@pytest.mark.parametrize("name", ["run#1.sqlite", "run?x=1.sqlite", "run%201.sqlite", "run%.sqlite"])
def test_a_journal_named_with_uri_characters_is_that_file(journal, tmp_path, monkeypatch, capsys, name):
    """Not a shorter name with a query or an escape after it: whatif reads this run, not the
    journal `run` beside it, and creates no file; serve's journal is the file named."""
    from roundhouse.tools.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(journal.read_bytes())
    other = make_journal(tmp_path, jobs=3, name="run")  # (what the name cut at '#' or '?' would be)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["whatif", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["from"]["jobs"] == 6
    assert not {p.name for p in tmp_path.iterdir()} - set(before) - {f"{name}-wal", f"{name}-shm"}
    # Read-write, as serve opens it: the same file, its run and rows.
    writable = Journal(name)
    assert writable.meta()["graph_digest"] == Journal(journal, read_only=True).meta()["graph_digest"]
    assert len(list(writable.rounds())) == len(list(Journal(journal, read_only=True).rounds()))
    writable.close()
    assert len(list(Journal(other, read_only=True).rounds())) < len(list(Journal(name, read_only=True).rounds()))
    fresh = Journal(f"new{name}")
    fresh.close()
    assert (tmp_path / f"new{name}").is_file()
    assert not (tmp_path / "new").exists() and not (tmp_path / "newrun").exists()


def _record(k: int, change_: str) -> str:
    return f"UPDATE rounds SET record = {change_} WHERE k = {k};"


# (Damage done to the journal, and what the error says.) Round 0 delivers the six jobs; round 1
# has jobs running, round 3 has some finished.
DAMAGED = [
    (_record(1, "'{\"finished\": ['"), "table rounds, round 1: not JSON"),
    (_record(1, "'[]'"), "table rounds, round 1: the record is list [], not an object"),
    (_record(1, "json_remove(record, '$.progress')"), "table rounds, round 1: the record has no 'progress'"),
    (_record(1, "json_set(record, '$.progress', json('[[0,1],[1.0]]'))"), "round 1: progress [[0, 1], [1.0]] is not [job ids"),
    (_record(1, "json_set(record, '$.progress', 'oops')"), 'round 1: progress "oops" is not [job ids'),
    (_record(1, "json_set(record, '$.progress[0][0]', 'x')"), "round 1: progress names jobs"),
    (_record(1, "json_set(record, '$.progress', json('[[99],[1.0],[1.0],[1.0]]'))"), "round 1: progress names job 99, which no"),
    (_record(1, "replace(record, '\"progress\":[[0', '\"progress\":[[NaN')"), "round 1: progress names jobs [NaN"),
    (_record(1, "json_set(record, '$.progress[1][0]', -5000.0)"), "round 1: progress takes job 0 to -5000 iterations, below 0"),
    (
        _record(1, "json_set(record, '$.progress[3][0]', -1.0)"),
        "round 1: progress has GPU-seconds and seconds [[10.0, 10.0], [-1.0",
    ),
    (
        _record(1, "replace(record, '[10.0,10.0],[10.0', '[NaN,10.0],[10.0')"),
        "round 1: progress has [[NaN, 10.0], [10.0, 10.0], [10.0",
    ),
    (_record(1, "json_set(record, '$.progress[2][1]', 'x')"), 'round 1: progress has [[10.0, 10.0], [10.0, "x"]'),
    (_record(1, "json_set(record, '$.online', json('[99]'))"), "round 1: online names GPUs [99], and the cluster's are 0 to 1"),
    (_record(1, "json_set(record, '$.online', json('[-1]'))"), "round 1: online [-1] has a GPU id below 0"),
    (_record(1, "json_set(record, '$.finished', json('[[\"x\", 3.0]]'))"), 'round 1: finished [["x", 3.0]] is not a list'),
    (_record(1, "json_set(record, '$.finished', json('[[0, 99.0]]'))"), "round 1: finished [[0, 99.0]] is not a list"),
    (_record(1, "json_set(record, '$.failed', json('[\"0\"]'))"), 'round 1: failed ["0"] is not a list of job ids'),
    (_record(1, "json_set(record, '$.metrics', json('{\"abc\": {\"loss\": 1}}'))"), 'round 1: metrics {"abc"'),
    (_record(1, "json_set(record, '$.metrics', json('{\"42\": {\"loss\": 1}}'))"), "round 1: metrics names job 42, which no"),
    (_record(1, "json_set(record, '$.joined', json('[3]'))"), "round 1: joined [3] is not a list of node names"),
    (_record(1, "json_set(record, '$.plans', json('[5]'))"), "round 1: plans [5] is not a list of plans"),
    (_record(1, "json_set(record, '$.submitted', json('[0]'))"), "round 1: it delivered job 0, which an earlier round delivered"),
    (_record(1, "json_set(record, '$.submitted', json('[77]'))"), "round 1: it delivered job 77, which table submissions"),
    ("UPDATE rounds SET now = 'soon' WHERE k = 2;", "round 2: its time 'soon' is not a number of seconds"),
    ("UPDATE rounds SET now = 5.0 WHERE k = 3;", "round 3: its time, t=5s, is before the previous round's, t=20s"),
    ("UPDATE rounds SET now = 1e308 WHERE k = 3;", "round 3: its time, t=1e+308s, is more than a century"),
    ("UPDATE rounds SET now = 1000.0 WHERE k = 3;", "round 3: its time, t=1000s, is past where round 3 can be with 10s rounds"),
    ("UPDATE rounds SET k = -1 WHERE k = 0;", "round -1: its number -1 is not a round's"),
    (
        "INSERT INTO rounds SELECT k + 1, now + 10, record FROM rounds ORDER BY k DESC LIMIT 1;",
        "finished, as it did in an earlier round",
    ),
    ("UPDATE submissions SET spec = '{bad' WHERE job_id = 1;", "table submissions, job 1: not JSON"),
    ("UPDATE submissions SET spec = '[1]' WHERE job_id = 1;", "table submissions, job 1: the spec [1] is not an object"),
    ("UPDATE submissions SET spec = json_set(spec, '$.gpus', 2) WHERE job_id = 1;", 'job 1: the spec {"job_id": "1", "gpus": 2,'),
    (
        "UPDATE submissions SET spec = json_set(spec, '$.gpus', 'two') WHERE job_id = 1;",
        "table submissions, job 1: column 'gpus': 'two' is not a whole number",
    ),
    ("DELETE FROM submissions WHERE job_id = 2;", "round 0: it delivered job 2, which table submissions does not have"),
    ("UPDATE meta SET value = 'not json' WHERE key = 'cluster';", "table meta, key 'cluster': not JSON"),
    ("UPDATE meta SET value = '5' WHERE key = 'graph';", "table meta, key 'graph': 5 is not a graph's path"),
    ("UPDATE meta SET value = '\"10s\"' WHERE key = 'round_s';", "table meta, key 'round_s': '10s' is not a round's length"),
    ("UPDATE meta SET value = '2' WHERE key = 'schema';", "journal schema 2 is not 1"),
]


@pytest.mark.parametrize(("sql", "words"), DAMAGED, ids=[w for _, w in DAMAGED])
def test_whatif_refuses_a_damaged_journal_saying_where(journal, capsys, sql, words):
    change(journal, sql)
    err = fails(capsys, "whatif", journal)
    assert f"{journal}: " in err and words in err, err
    if "table" in words:
        assert f"{journal}: damaged journal: table" in err


def test_the_progress_of_a_job_back_at_its_checkpoint_still_replays(journal, capsys):
    """Iterations may go down (a job requeued from its checkpoint), as long as not below 0."""
    from roundhouse.tools.cli import main

    record = json.loads(sqlite3.connect(journal).execute("SELECT record FROM rounds WHERE k = 4").fetchone()[0])
    assert record["progress"][0][0] == 0  # (job 0, which ran 10s in round 1)
    change(journal, _record(4, "json_set(record, '$.progress[1][0]', -10.0)"))
    assert main(["whatif", str(journal)]) == 0
    change(journal, _record(4, "json_set(record, '$.progress[1][0]', -10.5)"))
    assert "round 4: progress takes job 0 to -0.5 iterations, below 0" in fails(capsys, "whatif", journal)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (_record(1, "'{\"finished\": ['"), "table rounds, round 1: not JSON"),
        (_record(1, "json_set(record, '$.progress', json('[[99],[1.0],[1.0],[1.0]]'))"), "progress names job 99"),
        ("UPDATE rounds SET now = 5.0 WHERE k = 3;", "round 3: its time, t=5s, is before"),
        ("UPDATE submissions SET spec = '{bad' WHERE job_id = 1;", "table submissions, job 1: not JSON"),
        ("UPDATE meta SET value = '2' WHERE key = 'schema';", "journal schema 2 is not 1"),
        ("DROP TABLE rounds;", "not a journal as Roundhouse writes it (it has no table rounds)"),
        ("DROP TABLE submissions;", "not a journal as Roundhouse writes it (it has no table submissions)"),
        ("ALTER TABLE submissions DROP COLUMN round;", "table submissions, its columns: it has no column round"),
        ("UPDATE rounds SET now = 1e308 WHERE k = 3;", "round 3: its time, t=1e+308s, is more than a century"),
        ("UPDATE rounds SET now = 1000.0 WHERE k = 3;", "round 3: its time, t=1000s, is past where round 3 can be"),
    ],
)
def test_serve_refuses_a_damaged_journal_and_leaves_it_as_it_was(journal, tmp_path, capsys, sql, words):
    """Resuming: the journal is read and checked before any round replays (or before the
    agents are waited for), and it is not written to."""
    from roundhouse.tools.loopback import free_port

    change(journal, sql)
    before = contents(journal)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(cluster="1x2:V100", jobs=6))
    address = f"tcp://127.0.0.1:{free_port()}"
    err = fails(capsys, "serve", graph, "--bind", address, "--insecure", "--journal", journal, "--checkpoints", tmp_path / "ck")
    assert f"{journal}: " in err and words in err, err
    assert contents(journal) == before


@pytest.mark.parametrize("table", ["meta", "rounds", "submissions", "attempts", "exits", "nodes"])
def test_whatif_refuses_a_journal_that_lost_a_table_naming_it(journal, capsys, table):
    """Read-only too, every table of a journal is there before any is read: one sentence, never
    an SQLite error from the middle of a replay, nor a replay of what is left."""
    change(journal, f"DROP TABLE {table};")
    before = contents(journal)
    err = fails(capsys, "whatif", journal)
    assert f"{journal}: damaged journal: it has no table {table}" in err, err
    assert len(err.strip().splitlines()) == 1
    assert contents(journal) == before


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("ALTER TABLE submissions DROP COLUMN round;", "table submissions, its columns: it has no column round"),
        ("ALTER TABLE rounds DROP COLUMN record;", "table rounds, its columns: it has no column record"),
        ("ALTER TABLE attempts DROP COLUMN reason;", "table attempts, its columns: it has no column reason"),
        ("ALTER TABLE shapes DROP COLUMN lr_scale;", "table shapes, its columns: it has no column lr_scale"),
    ],
)
def test_whatif_refuses_a_journal_table_that_lost_a_column(journal, capsys, sql, words):
    change(journal, sql)
    assert f"{journal}: damaged journal: {words}" in fails(capsys, "whatif", journal)


def test_whatif_reads_a_journal_written_before_shapes_were_kept(journal, capsys):
    from roundhouse.tools.cli import main

    change(journal, "DROP TABLE shapes;")
    assert main(["whatif", str(journal), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["from"]["jobs"] == 6


def test_whatif_refuses_a_database_of_no_tables(tmp_path, capsys):
    empty = tmp_path / "empty.sqlite"
    change(empty, "CREATE TABLE t (x INTEGER); DROP TABLE t;")
    assert f"{empty}: not a live scheduler's journal (it has no table meta, rounds," in fails(capsys, "whatif", empty)


def test_whatif_json_never_prints_a_number_json_cannot_hold(journal, capsys, monkeypatch):
    """Were a metric not finite (damage the journal's checks missed), --json says where, in one
    sentence, rather than printing Infinity or NaN, which are not JSON."""
    from roundhouse.runtime.whatif import Projection, whatif
    from roundhouse.tools import whatif_cmd

    def broken(*args, **kwargs):
        point, projections = whatif(*args, **kwargs)
        bad = Projection(projections[0].graph, {**projections[0].metrics, "avg_jct_s": float("inf")}, 1.0, "x")
        return point, [bad]

    monkeypatch.setattr(whatif_cmd, "whatif", broken)
    err = fails(capsys, "whatif", journal, "--json")
    assert f"{journal}: cannot print the comparison as JSON: projections[0].metrics.avg_jct_s is inf" in err, err


def test_a_database_that_is_not_a_journal_is_not_made_one(tmp_path):
    """Serve's journal opened read-write: tables are created only in a new (empty) file."""
    from roundhouse.errors import UsageError

    path = tmp_path / "other.sqlite"
    change(path, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');")
    before = contents(path)
    with pytest.raises(UsageError, match="not a journal as Roundhouse writes it .it has no table meta, rounds"):
        Journal(path)
    assert contents(path) == before


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("UPDATE attempts SET gpus = '[0,' ;", "table attempts, job 3 attempt 1: not JSON"),
        ("UPDATE attempts SET gpus = '[\"a\"]' ;", 'table attempts, job 3 attempt 1: gpus ["a"] is not a list of GPU ids'),
        ("UPDATE attempts SET nodes = '{}' ;", "table attempts, job 3 attempt 1: nodes {} is not a list of node names"),
    ],
)
def test_a_damaged_attempt_is_refused_saying_which(tmp_path, sql, words):
    """The attempts a resumed scheduler takes back (their GPUs and nodes) are checked as read."""
    from roundhouse.errors import UsageError
    from roundhouse.runtime.journal import AttemptRow

    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    journal.add_attempt(AttemptRow(3, 1, 0.0, [0, 1], ["node-a"], 29500, 0))
    journal.commit()
    assert journal.attempts()[0].gpus == [0, 1]
    journal.close()
    change(path, sql)
    with pytest.raises(UsageError, match=re.escape(words)):
        Journal(path).attempts()
