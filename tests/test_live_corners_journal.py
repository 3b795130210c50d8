"""Resuming on a damaged journal file: pages SQLite cannot read, text that is not UTF-8, rows of
table attempts with values the scheduler never writes. `serve` and `whatif` refuse each with the
file, the table and what is wrong (never a traceback, never a run that fails later or gives up
on a job), and `serve` leaves the file as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import fails
from tests.test_journal_reading import GRAPH, change, contents, make_journal


@pytest.fixture(scope="module")
def journal_file(tmp_path_factory) -> Path:
    """A journal of a run stopped with jobs running, each job with a running attempt on GPU 0."""
    path = make_journal(tmp_path_factory.mktemp("journal"), stop_s=170.0)
    db = sqlite3.connect(path)
    for job in range(6):
        db.execute(
            "INSERT INTO attempts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (job, 1, 160.0, "[0]", '["a"]', 29500 + job, 0, None, None, None, None, None, None, None),
        )
    db.commit()
    db.close()
    return path


@pytest.fixture
def journal(journal_file, tmp_path) -> Path:
    copy = tmp_path / "j.sqlite"
    copy.write_bytes(journal_file.read_bytes())
    return copy


def _serve_fails(capsys, journal: Path, folder: Path) -> str:
    from roundhouse.tools.loopback import free_port

    graph = folder / "g.sched"
    graph.write_text(GRAPH.format(cluster="1x2:V100", jobs=6))
    address = f"tcp://127.0.0.1:{free_port()}"
    return fails(capsys, "serve", graph, "--bind", address, "--insecure", "--journal", journal, "--checkpoints", folder / "ck")


def _overwrite_page(path: Path, table: str) -> None:
    """Scribble over the cells of `table`'s first page, as a failing disk might."""
    db = sqlite3.connect(path)
    (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    start = (page - 1) * size
    for i in range(start + 8, start + size, 7):
        data[i] = 0xA5
    path.write_bytes(bytes(data))


@pytest.mark.live  # (serve binds a loopback port)
@pytest.mark.parametrize("table", ["meta", "rounds"])
def test_serve_and_whatif_refuse_a_journal_whose_pages_are_damaged(journal, tmp_path, capsys, table):
    _overwrite_page(journal, table)
    before = journal.read_bytes()
    for err in (_serve_fails(capsys, journal, tmp_path), fails(capsys, "whatif", journal)):
        assert f"{journal}: damaged journal: SQLite finds its file damaged (" in err, err
        assert len(err.strip().splitlines()) == 1, err
    assert journal.read_bytes() == before


def test_a_damaged_index_is_refused_before_the_run_writes_through_it(journal, capsys):
    _overwrite_page(journal, "sqlite_autoindex_meta_1")
    assert "damaged journal: SQLite finds its file damaged" in fails(capsys, "whatif", journal)


NOT_UTF8 = [
    ("UPDATE rounds SET record = CAST(X'7B22FF22' AS TEXT) WHERE k = 3;", "table rounds", "column 'record'"),
    ("UPDATE meta SET value = CAST(X'22FF22' AS TEXT) WHERE key = 'graph';", "table meta", "column 'value'"),
    ("UPDATE submissions SET spec = CAST(X'7B22FF22' AS TEXT) WHERE job_id = 1;", "table submissions", "column 'spec'"),
    ("UPDATE attempts SET resume = CAST(X'61FF' AS TEXT) WHERE job_id = 2;", "table attempts", "column 'resume'"),
    ("INSERT INTO nodes VALUES (CAST(X'61FF' AS TEXT), 0, 'x', 0.0);", "table nodes", "column 'name'"),
]


@pytest.mark.live  # (serve binds a loopback port)
@pytest.mark.parametrize(("sql", "table", "column"), NOT_UTF8, ids=[t for _, t, _ in NOT_UTF8])
def test_text_that_is_not_utf8_is_a_damaged_journal_naming_its_table(journal, tmp_path, capsys, sql, table, column):
    change(journal, sql)
    before = contents_or_none(journal)
    err = _serve_fails(capsys, journal, tmp_path)
    assert f"{journal}: damaged journal: {table}, its rows: SQLite cannot read them" in err and column in err, err
    assert contents_or_none(journal) == before
    if table in ("table rounds", "table meta", "table submissions"):  # (whatif reads no attempts nor nodes)
        err = fails(capsys, "whatif", journal)
        assert f"{journal}: damaged journal: {table}" in err, err


def contents_or_none(path: Path) -> list[str] | None:
    """The journal's rows as SQL (None if a row cannot be read as text)."""
    try:
        return contents(path)
    except sqlite3.OperationalError:
        return None


BAD_ATTEMPTS = [
    ("launched_s = 'soon'", "launched_s 'soon' is not a time in seconds"),
    ("master_port = 'x'", "master_port 'x' is not a port"),
    ("master_port = 99999999", "master_port 99999999 is not a port"),
    ("start_iteration = -5", "start_iteration -5 is not an iteration"),
    ("ended_s = 'x', outcome = 'done'", "ended_s 'x' is not a time in seconds"),
    ("ended_s = 170.0, outcome = 'bogus'", "outcome 'bogus' is not one of done, preempted"),
    ("ended_s = 170.0", "ended_s 170.0 and outcome None: an attempt that ended has both"),
    ("checkpoint = '/c', checkpoint_iteration = 'x'", "checkpoint_iteration 'x' is not an iteration or null"),
    ("end_iteration = 2.5, ended_s = 170.0, outcome = 'done'", "end_iteration 2.5 is not an iteration"),
    ("job_id = 'x'", "job 'x': job_id 'x' is not a job id"),
]


@pytest.mark.live  # (serve binds a loopback port)
@pytest.mark.parametrize(("assignment", "words"), BAD_ATTEMPTS, ids=[w for _, w in BAD_ATTEMPTS])
def test_serve_refuses_an_attempt_row_the_scheduler_never_writes_before_replaying(journal, tmp_path, capsys, assignment, words):
    """Refused at once, not as a traceback when the run reaches the row, nor as a job that
    'cannot run' (an attempt number or checkpoint iteration no launch can carry)."""
    change(journal, f"UPDATE attempts SET {assignment} WHERE job_id = 0;")
    before = contents(journal)
    err = _serve_fails(capsys, journal, tmp_path)
    assert f"{journal}: damaged journal: table attempts, " in err and words in err, err
    assert "replaying" not in err
    assert contents(journal) == before


def test_the_journal_with_running_attempts_is_sound(journal, capsys):
    """(The fixture's journal itself reads: the refusals above are the changes' doing.)"""
    from roundhouse.tools.cli import main

    assert main(["whatif", str(journal)]) == 0


LOST_FACTS = [
    ("DELETE FROM meta;", "table meta, its rows: there are none, though table rounds holds a run's records"),
    ("DELETE FROM meta WHERE key = 'epoch';", "table meta, key 'epoch': missing"),
]


@pytest.mark.live  # (serve binds a loopback port)
@pytest.mark.parametrize(("sql", "words"), LOST_FACTS, ids=[w for _, w in LOST_FACTS])
def test_serve_refuses_a_journal_that_lost_its_run_s_facts(journal, tmp_path, capsys, sql, words):
    """Before: with no facts, the journal was taken for a new run (its graph and cluster never
    checked) whose 'round 0' then replayed the old rounds under a new start time; without its
    start time, serve failed with a KeyError."""
    change(journal, sql)
    before = contents(journal)
    err = _serve_fails(capsys, journal, tmp_path)
    assert f"{journal}: damaged journal: {words}" in err, err
    assert contents(journal) == before


MISDELIVERED = [
    ("UPDATE submissions SET round = NULL WHERE job_id = 1;", "job 1: it is pending, says its row, but round 0 delivered it"),
    ("UPDATE submissions SET round = 3 WHERE job_id = 1;", "job 1: round 3 delivered it, says its row, but round 0"),
    ("UPDATE submissions SET round = 'x' WHERE job_id = 1;", "job 1: round 'x' delivered it, says its row, but round 0"),
    (
        'INSERT INTO submissions VALUES (50, \'{"job_id": "50", "gpus": "1", "duration_s": "5"}\', 0.0, 2);',
        "job 50: round 2 delivered it, says its row, but no round did",
    ),
]


@pytest.mark.live  # (serve binds a loopback port)
@pytest.mark.parametrize(("sql", "words"), MISDELIVERED, ids=[w for _, w in MISDELIVERED])
def test_serve_refuses_a_submission_whose_delivering_round_is_not_the_journal_s(journal, tmp_path, capsys, sql, words):
    """Before: a delivered job marked pending was delivered again after the replay ("job id 1
    is used twice", naming no journal); one marked delivered by a round that did not deliver
    it was never run, in silence."""
    change(journal, sql)
    before = contents(journal)
    err = _serve_fails(capsys, journal, tmp_path)
    assert f"{journal}: damaged journal: table submissions, {words}" in err, err
    assert contents(journal) == before
