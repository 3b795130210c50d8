"""A journal reached by another name than its own: through a hard link, SQLite would not see the
write-ahead log a crashed scheduler left beside the journal's name (it names the log after the
path it opens), so such a file is refused before anything is read or written; through a
symbolic link to a journal not there yet, the journal is made where the link leads, and one
removed as empty is that file, not the link. Processes started here are stopped by the test."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.journal import Journal

ROUND = {
    "finished": [],
    "failed": [],
    "requeued": [],
    "online": None,
    "joined": [],
    "lost": [],
    "metrics": {},
    "submitted": [],
    "progress": [[], [], [], []],
}


def _crashed_scheduler(path: Path) -> None:
    """A scheduler that journaled a round and crashed: its committed round is in the
    write-ahead log beside `path` (SQLite moves it into the file only at a checkpoint)."""
    code = (
        "import os\nfrom roundhouse.runtime.journal import Journal\n"
        f"j = Journal({str(path)!r}, lock=True)\nj.add_round(0, 0.0, {ROUND!r})\nj.commit()\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert Path(f"{path}-wal").stat().st_size > 0  # (the round is in the log, which the crash left)


def _refused_as_linked(path: Path, names: int = 2) -> str:
    return (
        rf"^{path}: cannot use as a journal: the file has {names} names \(hard links\), and a journal reached by two "
        r"names loses what its write-ahead log holds"
    )


@pytest.mark.parametrize("mode", [{"lock": True}, {}, {"read_only": True}])
def test_a_crashed_journal_reached_through_a_hard_link_is_refused_before_it_is_read(tmp_path, mode):
    """Opened through the link, the journal read as if its committed round had never been
    journaled (the log is beside the other name), and a scheduler would have run it again."""
    path, link = tmp_path / "j.sqlite", tmp_path / "other" / "link.sqlite"
    link.parent.mkdir()
    _crashed_scheduler(path)
    os.link(path, link)
    before = {p.name: p.read_bytes() for p in (*tmp_path.iterdir(), link) if p.is_file()}
    with pytest.raises(UsageError, match=_refused_as_linked(link)):
        Journal(link, **mode)
    assert sorted(os.listdir(link.parent)) == ["link.sqlite"]  # (no log, no lock note by that name)
    assert {p.name: p.read_bytes() for p in (*tmp_path.iterdir(), link) if p.is_file()} == before
    # By either name while it has two: the log beside the journal's own name is no help to a
    # second scheduler that opens it by the link, and it must not be told otherwise.
    with pytest.raises(UsageError, match=_refused_as_linked(path)):
        Journal(path, **mode)
    link.unlink()
    journal = Journal(path, read_only=True)  # (one name again: its round is there)
    assert [k for k, _, _ in journal.rounds()] == [0]
    journal.close()


def test_a_symbolic_link_to_a_hard_linked_journal_is_refused(tmp_path):
    path, other, symlink = tmp_path / "j.sqlite", tmp_path / "other.sqlite", tmp_path / "sym.sqlite"
    Journal(path).close()
    os.link(path, other)
    symlink.symlink_to(path)
    with pytest.raises(UsageError, match=_refused_as_linked(symlink)):
        Journal(symlink, lock=True)
    assert not Path(f"{path}.lock").exists()  # (the lock taken to check it was let go of)


def test_a_hard_linked_journal_in_use_is_refused_as_in_use(tmp_path):
    """Another scheduler holds it: that is what to say first (the lock is taken before the names
    are counted, and neither reads the file)."""
    path, link = tmp_path / "j.sqlite", tmp_path / "link.sqlite"
    holder = Journal(path, lock=True)
    try:
        os.link(path, link)
        with pytest.raises(UsageError, match=rf"journal {link} is in use by another scheduler \(pid {os.getpid()}\)"):
            Journal(link, lock=True)
    finally:
        holder.close()


def test_a_journal_with_one_name_opens_as_before(tmp_path):
    path = tmp_path / "j.sqlite"
    _crashed_scheduler(path)
    journal = Journal(path, lock=True)
    assert [k for k, _, _ in journal.rounds()] == [0]
    journal.close()


# --- a symbolic link to a journal not there yet ---
def test_an_empty_journal_made_through_a_symbolic_link_is_removed_where_it_was_made(tmp_path):
    """The journal was made where the link leads, but removing it removed the link, and left
    the file (and its log) behind."""
    (tmp_path / "disk").mkdir()
    link, real = tmp_path / "j.sqlite", tmp_path / "disk" / "j.sqlite"
    link.symlink_to(real)
    journal = Journal(link, lock=True)
    assert real.is_file() and link.is_symlink()
    journal.close(remove_if_empty=True)
    assert sorted(os.listdir(tmp_path / "disk")) == []
    assert link.is_symlink() and os.readlink(link) == str(real)  # (the user's link, as it was)


def test_a_journal_made_through_a_symbolic_link_that_holds_a_round_is_kept_and_resumed_through_it(tmp_path):
    (tmp_path / "disk").mkdir()
    link, real = tmp_path / "j.sqlite", tmp_path / "disk" / "j.sqlite"
    link.symlink_to(real)
    journal = Journal(link, lock=True)
    journal.add_round(0, 0.0, ROUND)
    journal.close(remove_if_empty=True)  # (it holds a round: kept)
    assert real.is_file() and link.is_symlink()
    again = Journal(link, lock=True)
    assert [k for k, _, _ in again.rounds()] == [0]
    again.close(remove_if_empty=True)
    assert real.is_file()


def test_the_journal_removed_is_the_file_opened_though_its_link_changed_since(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    link = tmp_path / "j.sqlite"
    link.symlink_to(tmp_path / "a" / "j.sqlite")
    journal = Journal(link, lock=True)
    (tmp_path / "b" / "j.sqlite").write_bytes(b"")  # (someone else's file, where the link leads next)
    link.unlink()
    link.symlink_to(tmp_path / "b" / "j.sqlite")
    journal.close(remove_if_empty=True)
    assert sorted(os.listdir(tmp_path / "a")) == [] and sorted(os.listdir(tmp_path / "b")) == ["j.sqlite"]


def test_the_serve_path_removes_an_empty_journal_made_through_a_link(tmp_path):
    """As `serve` closes a journal it made for a run that never began (runtime/serve.py `_close`)."""
    from roundhouse.runtime.serve import _close

    (tmp_path / "disk").mkdir()
    link, real = tmp_path / "j.sqlite", tmp_path / "disk" / "j.sqlite"
    link.symlink_to(real)
    created = not link.exists()
    journal = Journal(link, lock=True)
    with sqlite3.connect(real) as db:  # (the file where the link leads is the journal)
        assert {r[0] for r in db.execute("SELECT name FROM sqlite_master")} >= {"meta", "rounds"}
    _close(journal, created)
    assert sorted(os.listdir(tmp_path / "disk")) == [] and link.is_symlink()
