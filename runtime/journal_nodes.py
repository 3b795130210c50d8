"""The journal's tables of nodes: which agent (by node name) fills which node of the cluster
(`nodes`), and which agents were told to stop, or said they were stopping, and have not
registered since (`stopped_nodes`): a resumed run keeps those nodes offline until they do;
and the stray workers killed on each whose exits have not come (`strays`): a resumed run
acknowledges those exits as the run that killed them would.

Journal binds these functions as its methods (runtime/journal.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from roundhouse.errors import UsageError

if TYPE_CHECKING:
    from roundhouse.runtime.journal import Journal


def set_node(journal: Journal, name: str, slot: int, address: str, joined_s: float) -> None:
    journal._begin()
    journal.writes += 1
    # A node taking the place of a lost one replaces its row: one name per slot.
    journal.db.execute("DELETE FROM nodes WHERE slot = ? AND name != ?", (slot, name))
    journal.db.execute("INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?)", (name, slot, address, joined_s))
    journal.db.execute("DELETE FROM stopped_nodes WHERE name = ?", (name,))  # (it serves again)


def node_stopped(journal: Journal, name: str, stopped_s: float) -> None:
    """Node `name`'s agent was told to stop, or said it is stopping (until it registers again)."""
    journal._begin()
    journal.writes += 1
    journal.db.execute("INSERT OR REPLACE INTO stopped_nodes VALUES (?, ?)", (name, stopped_s))


def stopped_nodes(journal: Journal) -> set[str]:
    """The nodes told to stop, or that said they were stopping, not registered since: table
    stopped_nodes' names, checked (none for a journal written before it was kept)."""
    if not journal._read("stopped_nodes", "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stopped_nodes'"):
        return set()
    names = [r[0] for r in journal._read("stopped_nodes", "SELECT name FROM stopped_nodes")]
    for name in names:
        if not isinstance(name, str) or not name:
            raise journal.damaged("stopped_nodes", f"node {name!r}", "its name is not text")
    return set(names)


def nodes(journal: Journal, n_slots: int | None = None) -> dict[str, tuple[int, str]]:
    """Which node of the cluster (0 to `n_slots` - 1, if given) each journaled agent fills,
    and its address, checked as read (`_checked_nodes`)."""
    return _checked_nodes(journal, journal._read("nodes", "SELECT name, slot, address FROM nodes ORDER BY rowid"), n_slots)


def _checked_nodes(journal: Journal, rows: Iterable[tuple], n_slots: int | None) -> dict[str, tuple[int, str]]:
    """Table nodes' rows checked: text for name and address, one name per slot, each slot a
    node of the cluster (of `n_slots`, if given)."""
    out: dict[str, tuple[int, str]] = {}
    by_slot: dict[int, str] = {}
    for name, slot, address in rows:
        where = f"node {name!r}"
        if not isinstance(name, str) or not name:
            raise journal.damaged("nodes", where, "its name is not text")
        if type(slot) is not int or slot < 0:
            raise journal.damaged("nodes", where, f"slot {slot!r} is not a node's index (a whole number, 0 or more)")
        if n_slots is not None and slot >= n_slots:
            if "epoch" not in journal.meta():  # (a run that never began, on another cluster: not damage)
                raise UsageError(
                    f"{journal.path}: this journal belongs to another run (its table nodes puts {name} at node "
                    f"{slot}; this cluster has {n_slots}); give a new --journal path to start afresh"
                )
            raise journal.damaged("nodes", where, f"slot {slot} is not a node of the cluster (0 to {n_slots - 1})")
        if slot in by_slot:
            raise journal.damaged("nodes", where, f"slot {slot} is node {by_slot[slot]!r}'s too")
        if not isinstance(address, str):
            raise journal.damaged("nodes", where, f"address {address!r} is not text")
        by_slot[slot] = name
        out[name] = (slot, address)
    return out


def strays_killed(journal: Journal, node: str, workers: list[tuple[int, int, int]], killed_s: float) -> None:
    """Stray workers (job, attempt, rank) the scheduler killed on node `node` (their ranks run on
    another node), whose exits it acknowledges when they come. One killed again keeps its row,
    and its place among them (the oldest are forgotten first)."""
    journal._begin()
    journal.writes += len(workers)
    rows = [(node, job, attempt, rank, killed_s) for job, attempt, rank in workers]
    journal.db.executemany("INSERT OR IGNORE INTO strays VALUES (?, ?, ?, ?, ?)", rows)


def stray_heard(journal: Journal, node: str, job: int, attempt: int, rank: int) -> None:
    """A stray worker's exit came from node `node`, or the scheduler forgets the stray: its row goes."""
    journal._begin()
    journal.writes += 1
    journal.db.execute(
        "DELETE FROM strays WHERE node = ? AND job_id = ? AND attempt = ? AND rank = ?", (node, job, attempt, rank)
    )


def strays(journal: Journal) -> list[tuple[str, int, int, int]]:
    """The stray workers killed whose exits have not come, (node, job, attempt, rank), in the order
    they were killed, checked (none for a journal written before table strays was kept)."""
    if not journal._read("strays", "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'strays'"):
        return []
    rows = journal._read("strays", "SELECT node, job_id, attempt, rank FROM strays ORDER BY rowid")
    for node, job, attempt, rank in rows:
        where = f"node {node!r} job {job!r} attempt {attempt!r} rank {rank!r}"
        if not isinstance(node, str) or not node:
            raise journal.damaged("strays", where, "its node's name is not text")
        for name, value, least in (("job_id", job, 0), ("attempt", attempt, 1), ("rank", rank, 0)):
            if type(value) is not int or value < least:
                raise journal.damaged("strays", where, f"{name} {value!r} is not a whole number, {least} or more")
    return rows
