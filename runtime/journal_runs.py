"""Which run a journal holds: its facts (table meta: graph, cluster, round length, schema; the
epoch once the run begins), beginning a run, and refusing a journal of another run, or one whose
records lost their facts, before anything else of it is read.

Journal binds `meta`, `run_of` and `begin` as its methods (runtime/journal.py)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from roundhouse.errors import UsageError
from roundhouse.runtime.cluster import described_alike
from roundhouse.runtime.journal_values import is_number

if TYPE_CHECKING:
    from roundhouse.runtime.journal import Journal

SCHEMA_VERSION = 1

# What each of the run's facts must be: a test, and what it says of a value that fails it.
_META = {
    "graph": (lambda v: isinstance(v, str), "a graph's path (text)"),
    "graph_digest": (lambda v: isinstance(v, str), "a graph's digest (text)"),
    "cluster": (lambda v: isinstance(v, str), "a cluster's description (text)"),
    "cluster_fingerprint": (lambda v: isinstance(v, str), "a cluster's fingerprint (text)"),
    "round_s": (lambda v: is_number(v) and v > 0, "a round's length in seconds, more than 0"),
    "epoch": (is_number, "a wall-clock time in seconds"),
}
# The facts that say which run a journal is, with what each names: another graph's or cluster's
# scheduler refuses it (what is most telling first: a --set round=... changes the digest too).
_RUN_KEYS = {
    "round_s": "round length (seconds)",
    "cluster": "cluster",
    "cluster_fingerprint": "cluster's nodes",
    "graph_digest": "graph (its elements, arguments and settings, with --set and --trace)",
}
# Facts a journal written by an older Roundhouse does not have: compared only when it has them.
_LATER_KEYS = frozenset({"cluster_fingerprint"})


def meta(journal: Journal) -> dict[str, Any]:
    """The run's facts (none before it begins), checked: a journal of another schema, or
    a value of the wrong kind, is a UsageError."""
    meta = {
        key: journal._json(value, "meta", f"key {key!r}") for key, value in journal._read("meta", "SELECT key, value FROM meta")
    }
    if not meta:
        return meta
    if meta.get("schema") != SCHEMA_VERSION:
        raise UsageError(
            f"{journal.path}: journal schema {meta.get('schema')} is not {SCHEMA_VERSION}, the one this Roundhouse reads"
        )
    for key, (fits, kind) in _META.items():
        if key in meta and not fits(meta[key]):
            raise journal.damaged("meta", f"key {key!r}", f"{meta[key]!r} is not {kind}")
    return meta


def run_of(journal: Journal, meta: dict[str, Any]) -> dict[str, Any]:
    """The journal's meta ({} before a run begins), checked to be this run's: a journal of
    another graph or cluster is refused before anything of it (its nodes) is read, also
    one whose run has not begun but accepted jobs (`add_submission` keeps its facts)."""
    old = journal.meta()
    check_begun(journal, old)
    check_same_run(journal, old, meta)
    begun = "epoch" in old  # (until then, the first job accepted writes the facts with it)
    journal._facts = None if begun else {**{k: v for k, v in meta.items() if k != "epoch"}, "schema": SCHEMA_VERSION}
    return old if begun else {}


def begin(journal: Journal, meta: dict[str, Any]) -> dict[str, Any]:
    """Start a new run, or check that the journal's run is this one; returns its meta
    (with the epoch, which a resumed run keeps)."""
    old = journal.run_of(meta)
    if not old:
        meta = {**meta, "schema": SCHEMA_VERSION, "epoch": time.time()}
        journal._begin()
        journal.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
        journal._facts = None
        journal.commit()
        return meta
    return old


def check_begun(journal: Journal, meta: dict[str, Any]) -> None:
    """Refuse a journal that holds a run's records without its facts (table meta emptied, or a
    fact lost): its rounds would replay as another run's, with no start time to date them by.
    (Facts without an epoch are those of a run that has not begun but accepted jobs.)"""
    if "epoch" in meta:
        return
    for table in ("rounds", "attempts", "exits"):
        if journal._read(table, f"SELECT 1 FROM {table} LIMIT 1"):
            if meta:
                raise journal.damaged("meta", "key 'epoch'", f"missing, though table {table} holds a run's records")
            raise journal.damaged(
                "meta", "its rows", f"there are none, though table {table} holds a run's records (of what graph, cluster, start?)"
            )


def check_same_run(journal: Journal, old: dict[str, Any], meta: dict[str, Any]) -> None:
    """Refuse the journal of another run (`old`, its facts) than this one's (`meta`), naming what
    differs; a run that has not begun is another if the jobs it accepted were another graph's."""
    for key, what in _RUN_KEYS.items():
        if key in _LATER_KEYS and (key not in old or key not in meta):
            continue  # (a journal written before the fact was kept: the others say which run it is)
        if key == "cluster" and isinstance(old.get(key), str) and described_alike(old[key], str(meta.get(key))):
            continue  # (described by an earlier version, in its words)
        if key == "cluster" and "cluster_fingerprint" in old and old["cluster_fingerprint"] == meta.get("cluster_fingerprint"):
            continue  # (written otherwise but alike node by node: `1x2,1x2` or `2x2:v100` for `2x2:V100`)
        if old and old.get(key) != meta.get(key):
            whose = "another run" if "epoch" in old else "another run, which has not begun but accepted jobs"
            if key == "cluster_fingerprint":  # (described alike, or the cluster's key would have differed)
                raise UsageError(
                    f"{journal.path}: this journal belongs to {whose}: its cluster's nodes differ (their cores, memory, "
                    f"network, racks or GPU links; both clusters are {meta.get('cluster')}); give a new --journal path to "
                    "start afresh"
                )
            there, now = (old.get(key), meta.get(key)) if key != "graph_digest" else (old.get("graph"), meta.get("graph"))
            raise UsageError(
                f"{journal.path}: this journal belongs to {whose}: its {what} differs ({there!r} there, {now!r} now"
                + (f"; digests {old.get(key)} and {meta.get(key)}" if key == "graph_digest" else "")
                + "); give a new --journal path to start afresh"
            )
