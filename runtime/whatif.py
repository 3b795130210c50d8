"""What-if from a live scheduler's state: rebuild it from the journal, then simulate forward.

A live run is a deterministic function of its graph and of what its journal records round by
round (runtime/journal.py), so replaying the journaled rounds through the run's graph rebuilds
the scheduler's whole state as of its last journaled round: the job table, who holds which GPU,
and every element's own state. From there the simulator takes over: under the same graph (its
elements keep their replayed state: what the scheduler will do if nothing changes), and, forked
from the same world, under another graph (its elements start afresh, and the jobs in the system
enter it as arrivals at the next round, running ones still holding their GPUs until its plan
says otherwise). Jobs then progress at the throughput model's rates, as in any simulation.

`roundhouse whatif` (tools/whatif_cmd.py) prints the two side by side.
"""

from __future__ import annotations

import contextlib
import copy
import math
import numbers
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from roundhouse.errors import RoundhouseError, UsageError
from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.backends.live.records import replayed, same_plan
from roundhouse.runtime.backends.live.round import next_boundary
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster, described_alike, spec_shown
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.engine import STALL_ROUNDS, Engine, StalledError, all_jobs_ended, every_job_ended, last_round_start
from roundhouse.runtime.journal import _TABLE_NAMES, Journal, _check_begun
from roundhouse.runtime.snapshot_paths import SQLITE_HEADER
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.values import FilePath, format_duration
from roundhouse.runtime.world import World
from roundhouse.traces.jobs import FINISHED, PENDING

# Metrics compared, in the order printed: (key, label, unit: "s" seconds, "%" a fraction, "" a count).
METRICS = (
    ("avg_jct_s", "average JCT", "s"),
    ("p95_jct_s", "p95 JCT", "s"),
    ("avg_responsiveness_s", "average responsiveness", "s"),  # (arrival to first start, as summary.json)
    ("makespan_s", "makespan (from now)", "s"),
    ("utilization", "utilisation (from now)", "%"),
    ("preemptions", "preemptions (from now)", ""),
    ("jobs", "jobs in the system or to come", ""),
    ("jobs_finished", "of them finished", ""),
)


class JournalReplay:
    """A backend that replays a live run's journal: each round's events and progress as the
    live backend reported them. (Not the simulator: a fork of the engine replaying it, such as
    a synthesizer's look-ahead, simulates from the round's clock: runtime/snapshot.py.)"""

    def __init__(self, world: World, journal: Journal):
        self.world = world
        self._journal = journal
        self._rounds = list(journal.rounds())
        self._at = 0
        self._plans: list[dict] = []
        self._where = ""
        self.divergences = 0  # plans that differ from the journal's (the graph is not the run's)

    @property
    def rounds(self) -> int:
        return len(self._rounds)

    @property
    def last_round(self) -> int:
        """The number of the last journaled round (a restarted run's rounds are numbered on)."""
        return int(self._rounds[-1][0])

    @property
    def remaining(self) -> int:
        return len(self._rounds) - self._at

    @property
    def now(self) -> float:
        return float(self._rounds[min(self._at, len(self._rounds) - 1)][1])

    def poll(self) -> tuple[Events, Progress]:
        _, now, record = self._rounds[self._at]
        ids = record.get("submitted") or []
        submitted = self._journal.delivered(ids) if ids else Submissions.empty()
        self._plans = list(record.get("plans", []))
        self._where = getattr(record, "where", f"the journal's round at t={now:g}s")
        _check_plan_gpus(self._plans, self.world.cluster.n_gpus, self._where)
        return replayed(record, now, self.world.jobs, self.world.cluster.n_gpus, submitted)

    def apply(self, plan: Plan) -> None:
        recorded = self._plans.pop(0) if self._plans else None
        if recorded is not None:  # (its jobs are in the world now: those the round brought too)
            _check_plan_jobs(recorded, self.world.jobs, self._where)
        if not same_plan(plan, recorded, self.world.jobs.column("job_id")):
            self.divergences += 1

    def advance(self) -> None:
        self._at += 1


def _check_plan_gpus(plans: list[dict], n_gpus: int, where: str) -> None:
    """A journaled round's plans name only GPUs the run's cluster has: another is the
    journal's damage (a UsageError naming the round), not a graph other than the run's."""
    for key in ("gpus", "resize_gpus"):
        for plan in plans:
            bad = [gpu for gpu in plan.get(key, []) if not (type(gpu) is int and 0 <= gpu < n_gpus)]
            if bad:
                raise UsageError(f"{where}: its plans name GPU {bad[0]!r}, and the cluster's are 0 to {n_gpus - 1}")


def _check_plan_jobs(plan: dict, jobs, where: str) -> None:
    """A journaled plan names only jobs the run has (as of its round): another is the journal's
    damage (a UsageError naming the round)."""
    for key in ("launch", "suspend", "complete", "resize"):
        for job in plan.get(key, []):
            if type(job) is not int or jobs.row_of(job) is None:
                raise UsageError(
                    f"{where}: its plan's {key} names job {job!r}, which no round so far brought (submitted or from a source)"
                )


@attrs.frozen
class Projection:
    """One graph's simulated future from the fork point."""

    graph: str
    metrics: dict[str, float | int | None]
    end_s: float
    stop: str


# What `roundhouse whatif` reads, as its messages say it.
ACCEPTED = "whatif reads a simulation's snapshot (Simulation.save) or a live scheduler's journal (its --journal file)"

# How much of a file is read to say what it is.
_LOOKED_AT = 4096


def check_journal_file(path: str | Path) -> None:
    """A UsageError naming `path` if it is not a journal, nor a snapshot: not a SQLite database
    (an empty file, a CSV, an image), or one with tables, none of them a journal's (another
    program's database). (A snapshot is told apart before: `is_snapshot`.) A database
    with some of a journal's tables is a journal, damaged or not: opening it says which."""
    try:
        with open(path, "rb") as f:
            start = f.read(_LOOKED_AT)
    except OSError as err:
        raise UsageError(f"{path}: cannot read it: {err.strerror or err}") from None
    if start.startswith(SQLITE_HEADER):
        tables = _table_names(Path(path))
        if tables == set() and _log_left_behind(Path(path), start):
            raise UsageError(
                f"{path}: a SQLite database with no tables, written through a write-ahead log that is not beside it "
                f"({path}-wal is missing or empty): a copy of a running scheduler's journal made without its -wal "
                "file, which holds the journal's recent writes? Copy the journal with its -wal file, or with "
                '`sqlite3 JOURNAL ".backup COPY"`'
            )
        # (One with no tables at all, as a scheduler's journal is for a moment as it starts, is
        # left to the journal's own message, which lists the tables it lacks.)
        if tables is None or not tables or tables & set(_TABLE_NAMES):
            return
        what = "it is a SQLite database with none of a journal's tables"
    elif not start:
        what = "it is empty"
    else:
        what = _what_it_holds(start)
    raise UsageError(f"{path}: not a live scheduler's journal, nor a simulation's snapshot ({what}); {ACCEPTED}")


def _log_left_behind(path: Path, start: bytes) -> bool:
    """Whether a database in write-ahead-log mode (its header's read and write versions, bytes
    18 and 19, are 2) has no log beside it, or an empty one: copied alone, a running journal's
    file holds little more than its header, its tables and rounds being in the log."""
    wal_mode = len(start) >= 20 and start[18] == 2 and start[19] == 2
    log = path.with_name(path.name + "-wal")
    return wal_mode and (not log.is_file() or log.stat().st_size == 0)


def _table_names(path: Path) -> set[str] | None:
    """The tables of the SQLite database at `path`, read without writing; None if they cannot
    be read (a damaged or locked database: opening it as a journal says why)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return None
    finally:
        db.close()


def _what_it_holds(start: bytes) -> str:
    """What a file that begins with `start` (not a database) holds, in a few words: text, by
    its first line, or binary data."""
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as err:
        # (A character cut at the end of what was read is still text.)
        cut = len(start) == _LOOKED_AT and err.start >= len(start) - 3
        text = start[: err.start].decode("utf-8") if cut and err.start > 0 else ""
    if not text or any(ch < " " and ch not in "\t\r\n" for ch in text):
        return "it holds binary data, not a SQLite database"
    text = text.removeprefix("\ufeff")  # (a byte order mark, as some programs begin text with)
    first = text.splitlines()[0] if text.strip() else ""
    shown = first if len(first) <= 60 else first[:57] + "..."
    return f"it is text, whose first line is {shown!r}" if shown else "it is text"


def open_journal(path: str | Path) -> tuple[Journal, dict[str, Any]]:
    """The journal at `path`, read without writing (its scheduler may still be running), and
    its run's meta; a UsageError naming the file if it is not a live scheduler's journal."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such journal file")
    check_journal_file(path)
    journal = Journal(path, read_only=True)
    try:
        meta = journal.meta()
        _check_begun(journal, meta)  # (records without the run's start: damaged, not a run yet to begin)
        rounds = journal.db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
    except sqlite3.DatabaseError as err:
        raise UsageError(f"{path}: not a live scheduler's journal ({err})") from None
    if not rounds and "epoch" not in meta:
        # (A scheduler writes its run's start once its agents have come, `serve --wait-for-agents`;
        # a job accepted meanwhile writes the other facts.)
        raise UsageError(
            f"{path}: the run has not begun: its scheduler is waiting for its agents (or stopped before they came); "
            "try again once it has begun"
        )
    if not meta or "graph" not in meta or "round_s" not in meta:
        raise UsageError(f"{path}: not a live scheduler's journal (it has no run recorded)")
    if not rounds:
        raise UsageError(f"{path}: the run has not journaled a round yet; try again once it has begun")
    return journal, meta


def _check_cluster(journal: Journal, meta: dict[str, Any], cluster: Cluster) -> None:
    """Refuse a cluster other than the run's: by the fingerprint of its nodes' facts the journal
    keeps, and by its description for a journal written before the fingerprint was kept."""
    described = cluster.describe()
    hint = "give --cluster the cluster the scheduler ran on (or leave it out if the scheduler took the graph's own)"
    # (Where the journal keeps the fingerprint, a cluster written otherwise but alike node by node,
    # `1x2,1x2` or `2x2:v100` for `2x2:V100`, is the run's.)
    same_nodes = "cluster_fingerprint" in meta and cluster.fingerprint() == meta["cluster_fingerprint"]
    if not same_nodes and not described_alike(described, str(meta.get("cluster"))):
        raise UsageError(f"{journal.path}: the cluster {described} is not the run's, which was {meta.get('cluster')}; {hint}")
    if "cluster_fingerprint" in meta and not same_nodes:
        raise UsageError(
            f"{journal.path}: the cluster is not the run's: both are {described}, but their nodes differ (their cores, "
            f"memory, network, racks or GPU links); {hint}"
        )


def replay(journal: Journal, meta: dict[str, Any], graph: CompiledGraph, world: World) -> Engine:
    """An engine on `world` with the run's graph, its journaled rounds replayed: the live
    scheduler's state as of its last journaled round."""
    if graph.key() != meta.get("graph_digest"):
        raise UsageError(
            f"{journal.path}: the graph {graph.path} is not the run's ({_what_differs(graph, meta)}); give the run's graph "
            "as it was with --run-graph, its --set with --run-set, and its --trace with --run-trace"
        )
    _check_cluster(journal, meta, world.cluster)
    backend = JournalReplay(world, journal)
    engine = Engine(graph, world, backend)
    engine.begin()
    while backend.remaining:
        if engine.step():  # (the run ended in this round: `engine.stop_reason` says why)
            break
    if backend.divergences:
        raise UsageError(
            f"{journal.path}: replaying the run through {meta['graph']} gave {backend.divergences} plan(s) other than "
            "the journal's: the graph or its files (traces, profile) are not those of the run"
        )
    return engine


def _what_differs(graph: CompiledGraph, meta: dict[str, Any]) -> str:
    """What makes `graph` not the run's: its round length, when the journal's (`round_s`) is
    another, which is named with both values; else its elements, arguments or settings, which
    the journal keeps only a digest of."""
    run_round = meta.get("round_s")
    if isinstance(run_round, (int, float)) and _seconds(run_round) and float(graph.settings.round) != run_round:
        return (
            f"its rounds are {format_duration(float(graph.settings.round))} long, the run's were "
            f"{format_duration(float(run_round))}, as the journal recorded"
        )
    return "its elements, arguments or settings differ from those the journal recorded"


class OnTheRunsSchedule(Simulator):
    """The simulator, taking over from a run's last round at its clock, with its first round
    ending at the run's next boundary (`boundary`) and whole rounds from there: a run stopped
    mid-round (its last round cut short at the stop) goes on on its own schedule, the run's
    start and every round after, as a restarted scheduler does (`next_boundary`)."""

    def __init__(self, *args, **kwargs):  # (made by `for_graph`, with the graph's costs)
        super().__init__(*args, **kwargs)
        self.boundary: float | None = next_boundary(self.now, self.round_s)

    def advance(self) -> None:
        boundary, self.boundary = self.boundary, None
        whole = self.round_s
        # (From a boundary of the schedule, the next is a whole round on: advanced as always.)
        if boundary is None or not boundary > self.now or abs(boundary - self.now - whole) <= 1e-9 * max(1.0, boundary):
            super().advance()
            return
        self.round_s = boundary - self.now  # the rest of the round the stop cut short
        try:
            super().advance()
        finally:
            self.round_s = whole
        self.resume(boundary, *self.poll())  # (its progress for the next poll; whole rounds from the boundary)

    def jump_to(self, t: float) -> None:
        self.boundary = None  # (a jump lands on a boundary of the schedule)
        super().jump_to(t)


def take_over(engine: Engine) -> Engine:
    """The replayed engine, simulating forward: the simulator as its backend from the last
    journaled round, its elements keeping their replayed state; its rounds on the run's
    schedule (`OnTheRunsSchedule`)."""
    sim = OnTheRunsSchedule.for_graph(engine.world, engine.graph.settings, now=engine.backend.now)
    engine.backend = sim
    sim.advance()  # the round after the last journaled one (the engine advanced the replay)
    engine.skip_idle_rounds()
    return engine


def simulate_ahead(
    world: World,
    graph: CompiledGraph,
    now: float,
    horizon_s: float,
    *,
    seen_s: float | None = None,
    world_name: str = "the world",
    _run_coming: dict[str, tuple[Any, Any, int]] | None = None,
) -> Projection:
    """`graph` simulated from a copy of `world` at `now`, the time the world is as of (from
    `Simulation.world_now`, at the simulation's clock: a round boundary, everything up to it
    folded in): its elements start afresh and every unfinished job enters it at the next round;
    the metrics of those jobs and of any that arrive later, until they finish or `horizon_s`
    passes. `world` itself is not changed. (A look-ahead for what-if questions, such as a
    scheduler synthesizer's candidates.) Another `now` is a UsageError naming both times: from
    a later one, the jobs arriving in between would be left out and the running ones stand
    still; so is a world whose time is not known.

    `seen_s`: the boundary of the world's last round, whose arrivals it has (default: the one
    the world says, its `last_round_s`, which `Simulation.world_now` sets from the run's own
    rounds, whatever the length of `graph`'s; for a world that does not say it, one of `graph`'s
    rounds before `now`). The graph's sources bring the jobs that arrive after it, so it is at
    most `now` (a finite number: a UsageError otherwise); a job of theirs with the id of another
    job the world has is a UsageError naming both (`world_name`: what the world came from)."""
    if not isinstance(world, World):
        raise UsageError(f"world: expected a simulation's world (sim.world_now()), got {type(world).__name__}")
    if not isinstance(graph, CompiledGraph):
        raise UsageError(
            f"graph: expected a compiled graph (roundhouse.runtime.compiler.compile_file(path)), got {type(graph).__name__}"
        )
    if not _seconds(horizon_s) or not horizon_s > 0:
        finite = " (a finite number: a projection ends)" if horizon_s == float("inf") else ""
        raise UsageError(f"horizon_s: expected seconds, a number more than 0, got {horizon_s!r}{finite}")
    if not _seconds(now):
        raise UsageError(f"now: expected seconds, the time the world is as of (a finite number), got {now!r}")
    if seen_s is not None and not (_seconds(seen_s) and seen_s <= now):
        raise UsageError(
            f"seen_s: expected seconds, the boundary of the world's last round (a finite number, at most now, {now:g}), "
            f"got {seen_s!r}: the graph's sources bring the jobs that arrive after it"
        )
    own = world.as_of
    _refuse_a_clock_before_the_worlds(world, now, own)
    if own is None:
        raise UsageError(
            "world: the time it is as of is not known (its `as_of` is unset): give a simulation's "
            "`sim.world_now()`, a copy of its world as of its clock, and as `now` that clock (`sim.now`); "
            "a world built by hand says its time in `as_of`"
        )
    if not abs(now - own) <= 1e-9 * max(1.0, abs(own)):
        raise UsageError(
            f"now: {now:g} s is not the time the world is as of, {own:g} s: a projection starts from the world's own "
            "time (from a later one, the jobs arriving in between would be left out and the running ones stand still)"
        )
    seen = None if seen_s is None else float(seen_s)  # (numpy's numbers as Python's from here on)
    if seen is None:
        seen = _last_round(world, now)
    return _simulate_ahead(world, graph, float(now), float(horizon_s), seen, world_name, _run_coming)


def _last_round(world: World, now: float) -> float | None:
    """The boundary of the world's last round, as the world says it (None if it does not): a
    graph of other rounds than the run's would otherwise take it to be one of its own rounds
    before `now`, and pass over the jobs that arrived since, unseen."""
    last = world.last_round_s
    if last is None:
        return None
    if not (_seconds(last) and last <= now):
        raise UsageError(
            f"world: its last_round_s, the boundary of its last round, is {last!r}: expected seconds, a finite number "
            f"at most the time it is as of, {now:g}; leave it unset (None) if it is not known, or give seen_s"
        )
    return float(last)


def _seconds(value) -> bool:
    """Whether `value` is a time in seconds: a finite real number, Python's or numpy's (not a bool)."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return False
    number: Any = value  # (numbers.Real declares no conversion to float)
    try:
        return math.isfinite(float(number))
    except OverflowError:  # (an integer beyond floats: no finite time)
        return False


def _refuse_a_clock_before_the_worlds(world: World, now: float, own: float | None) -> None:
    """A clock before what the world has seen (its projection would be nonsense): a UsageError."""
    latest = np.nanmax(np.concatenate([world.jobs.column("first_start_s"), world.jobs.column("finish_s"), [-np.inf]]))
    if not now >= latest:
        where = "" if own is None else f" (the world is as of {own:g} s)"
        raise UsageError(f"now: {now:g} s is before the world's last recorded start or finish, at {latest:g} s{where}")


def _simulate_ahead(
    world: World,
    graph: CompiledGraph,
    now: float,
    horizon_s: float,
    seen_s: float | None,
    world_name: str,
    run_coming: dict[str, tuple[Any, Any, int]] | None = None,
) -> Projection:
    """`simulate_ahead` of a world as of `now`. `run_coming`: the jobs the run's own sources
    have still to bring, by source name (`_coming`), which a source of `graph` of the same name,
    class and arguments must bring too. The graph's rounds go on at its next boundary from the
    run's start (`OnTheRunsSchedule`), as the run's own side does: `now` may be a journal's last
    round cut short at the run's stop, or a boundary of the run's rounds (a snapshot's clock)
    that is none of the graph's, whose rounds are of another length."""
    _refuse_a_clock_before_the_worlds(world, now, now)
    if seen_s is None:
        seen_s = now - float(graph.settings.round)
    engine = _fresh(graph, copy.deepcopy(world), now, seen_s, world_name, run_coming)
    return project(engine, Path(graph.path).name, horizon_s)


def _fresh(
    graph: CompiledGraph,
    world: World,
    now: float,
    seen_s: float,
    world_name: str,
    run_coming: dict[str, tuple[Any, Any, int]] | None = None,
) -> Engine:
    """`graph`'s elements started afresh on `world` at `now` (copies of them: `_afresh`), in the
    simulator, with every unfinished job entering the graph at the next round, and its sources'
    jobs from after `seen_s` to come; its rounds after the first on its schedule from the run's
    start (`_simulate_ahead`)."""
    graph = _afresh(graph)
    sim = OnTheRunsSchedule.for_graph(world, graph.settings, now=now)
    fresh = Engine(graph, world, sim)
    fresh.begin()
    for name, source in graph.elements.items():
        if source.category == "source" and hasattr(source, "pass_arrivals"):
            coming = source.pass_arrivals(seen_s)  # (the jobs it would have brought before are the world's past)
            _refuse_other_jobs_with_known_ids(world, coming, world_name)
            if run_coming and name in run_coming:
                _refuse_a_source_changed_since(graph, name, source, coming, run_coming[name], world_name)
    fresh.carry_in(np.flatnonzero(world.jobs.column("status") != FINISHED))
    return fresh


def _afresh(graph: CompiledGraph) -> CompiledGraph:
    """`graph` with elements of its own, as compiled: each a new object with the configuration
    of `graph`'s (its arguments, name, peers), without the state a run gave it (what its class
    declares as `state` and `fixed`, which `start` sets, and its counters). A projection starts
    and runs these, so that `graph` is left as it was: it may be a running simulation's own
    (`sim.graph`), whose elements would otherwise be started again and run to the horizon."""
    elements: dict[str, Any] = {}
    for name, el in graph.elements.items():
        cls = type(el)
        run = {"counters", *(cls.state or ()), *cls.fixed}
        new = object.__new__(cls)
        new.__dict__.update({key: value for key, value in el.__dict__.items() if key not in run})
        elements[name] = new
    for new in elements.values():
        if new.peers:  # (the elements it names are the copy's own)
            new.peers = {name: elements[name] for name in new.peers}
    return attrs.evolve(graph, elements=elements)


def _coming(graph: CompiledGraph, seen_s: float) -> dict[str, tuple[Any, Any, int]]:
    """The run's sources, by name, each with the jobs it has still to bring after the boundary
    `seen_s` of the run's last round (as its state holds them: a snapshot's prepared jobs, not
    its trace read again). (Passing over the arrivals up to `seen_s` moves no source on: the
    run's rounds up to it have brought them.)"""
    return {
        name: (el, el.pass_arrivals(seen_s), graph.settings.seed)
        for name, el in graph.elements.items()
        if el.category == "source" and hasattr(el, "pass_arrivals")
    }


def _arguments(el) -> list[tuple[str, Any]] | None:
    """An element's arguments, to compare (None if it has none to compare)."""
    try:
        return [(f.name, getattr(el, f.name)) for f in attrs.fields(type(el))]
    except (TypeError, attrs.exceptions.NotAnAttrsClassError):
        return None


class JobsRefused(UsageError):
    """The other graph's jobs refused for what the world already holds (an id it has for another
    job, a trace changed since): not the world's settings, so no hint at them."""


def _refuse_a_source_changed_since(graph: CompiledGraph, name: str, source, coming, run, world_name: str) -> None:
    """A UsageError if a source of the other graph that reads a file (a trace), with the run's
    source's name, class and arguments and the run's seed, brings other jobs than the run's
    holds still to come: the file changed since the run's state was saved, and the two sides
    would run other jobs under the same ids."""
    run_source, run_coming, run_seed = run
    path = getattr(source, "path", None)
    if type(source) is not type(run_source) or not isinstance(path, str) or graph.settings.seed != run_seed:
        return
    try:
        mine, theirs = _arguments(source), _arguments(run_source)
        if mine is None or mine != theirs:
            return
    except (TypeError, ValueError):  # (arguments that do not compare as one value, such as arrays)
        return
    differs = _first_difference(coming, run_coming)
    if differs is not None:
        raise JobsRefused(
            f"{name} ({type(source).__name__}): with the run's arguments, it brings other jobs than {world_name} holds "
            f"still to come from it: {differs}; its file {path} has changed since the run's state was saved, and the two "
            "sides would run other jobs under the same ids: put the file back as it was"
        )


def _first_difference(coming, run_coming) -> str | None:
    """How the other side's jobs still to come differ from the run's (None: they do not)."""
    ids, run_ids = np.asarray(coming.columns["job_id"]), np.asarray(run_coming.columns["job_id"])
    for i in range(min(len(ids), len(run_ids))):
        if ids[i] != run_ids[i]:
            return f"its job {ids[i]} is the run's job {run_ids[i]}"
        for column in ("arrival_s", *_IDENTITY):
            if column not in coming.columns or column not in run_coming.columns:
                continue
            ours, theirs = coming.columns[column][i], run_coming.columns[column][i]
            if not _same(theirs, ours):
                return f"job {ids[i]} has {column} {_shown(ours)}, and {_shown(theirs)} in the run's state"
    if len(ids) != len(run_ids):
        return f"it brings {len(ids)} job(s), the run's state {len(run_ids)}"
    return None


# What makes a job the job it is: a source's job with the id of one the world has is that job
# (not added again) only if these agree. (Not its arrival: a trace's arrivals redrawn at another
# rate bring the same jobs at other times.)
_IDENTITY = (
    "gpus",
    "duration_s",
    "model",
    "work",
    "batch_size",
    "user",
    "weight",
    "slo_s",
    "epochs",
    "epoch_size",
    "max_gpus",
    "max_batch_size",
    "cpus",
    "memory_gb",
    "command",
)


def _refuse_other_jobs_with_known_ids(world: World, upcoming, world_name: str) -> None:
    """A UsageError if a job still to come has the id of another job the world has: the engine
    would take it for that job and leave it out."""
    ids = np.asarray(upcoming.columns["job_id"])
    for i in np.flatnonzero(np.isin(ids, world.jobs.column("job_id"))).tolist():
        row = world.jobs.row_of(int(ids[i]))
        assert row is not None  # (the isin above)
        for name in _IDENTITY:
            if name not in upcoming.columns or not world.jobs.has_column(name):
                continue
            ours, theirs = world.jobs.column(name)[row], upcoming.columns[name][i]
            if not _same(ours, theirs):
                raise JobsRefused(
                    f"job {ids[i]}: {upcoming.origin} has one arriving at t={upcoming.columns['arrival_s'][i]:g}s, and "
                    f"{world_name} already has another job {ids[i]} ({name} {_shown(ours)}, not {_shown(theirs)}); "
                    "give the two sources distinct job ids (a trace's job_id column, the start_id of a PoissonSource or BurstSource)"
                )


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _shown(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def project(engine: Engine, label: str, horizon_s: float, base: World | None = None, start: float | None = None) -> Projection:
    """Run a taken-over engine until every job in the system and every job still to arrive
    has finished, or until the horizon, at the first round boundary at or after it: the
    metrics of those jobs from the fork point on. `base`: the world as of the fork point, if
    the engine's own has not folded in everything up to it (a simulation between two rounds:
    `Simulation.world_now`). `start`: the fork point, if the engine's clock has moved past it
    (a journal's last round, taken over: `take_over`); both sides of a comparison are
    measured from it, over the same span.

    Only these two end a projection, on either side of a comparison: not the time limit the
    run was given (a snapshot's `until`), nor a sink's goal met (JobMetrics' `track`)."""
    world = engine.world
    base = base or world
    start = engine.backend.now if start is None else start
    end = start + horizon_s
    known = len(base.jobs)
    affected_before = np.flatnonzero(base.jobs.column("status") != FINISHED)
    service0 = base.jobs.column("service").copy()
    preempt0 = base.jobs.column("preemptions").copy()
    shared0 = base.shared_gpu_s
    # The horizon in place of the run's own time limit, and no sink's goal (a sink still ticks):
    # those end a run, not a projection. (A step skips no round past the pause.)
    engine.look_ahead(end, goals=False)
    engine.pause_at(end)
    stop, ended = "", None
    while not stop:
        if world.unfinished == 0 and not _arrivals_to_come(engine):
            # At the round that found it so, on either side: a replayed LiveSource, still open
            # to submissions, would have its engine tick a round more (none come in a simulation).
            stop, ended = every_job_ended(world), last_round_start(engine)
        elif not world.online.any() and len(world.running_rows) == 0:
            stop, ended = _no_gpu_online(world), last_round_start(engine)
        elif engine.backend.now >= end - 1e-9:
            # The last round's progress and completions, as the world would learn them at the
            # next round's start (as `Simulation.world_now`).
            engine.fold_in()
            done = world.unfinished == 0 and not _arrivals_to_come(engine)
            stop = every_job_ended(world) if done else f"reached the horizon ({format_duration(horizon_s)})"
        else:
            try:
                stop = engine.step()
            except StalledError as err:  # (an answer about this graph's future, not a failure of the command)
                stop = _stalled(world, engine.backend.now, err)
            if all_jobs_ended(stop):
                ended = last_round_start(engine)
    end = engine.backend.now if ended is None else max(ended, start)
    rows = np.concatenate([affected_before, np.arange(known, len(world.jobs))])
    return Projection(label, _metrics(world, rows, start, end, service0, preempt0, shared0), end, stop)


def _no_gpu_online(world: World) -> str:
    """Why a projection stops with no GPU online: the simulator brings no node back."""
    return f"no GPU is online (0 of {world.cluster.n_gpus}): no job can run, and a simulation brings no node back"


def _stalled(world: World, now: float, err: StalledError) -> str:
    """Why a projection stops when its graph can start none of the waiting jobs (`certain`: none
    can ever be placed, found at once: runtime/certain_stalls.py), or none of those it runs
    progresses (`stuck`)."""
    waiting = int((world.jobs.column("status") == PENDING).sum())
    idle = (
        "none can ever be placed"
        if err.certain
        else f"none has progressed for {STALL_ROUNDS} rounds, though jobs hold GPUs"
        if err.stuck
        else f"none has run for {STALL_ROUNDS} rounds"
    )
    return (
        f"stalled at t={now:g}s: {waiting} job(s) wait and {idle}, "
        f"with {int(world.online.sum())} of {world.cluster.n_gpus} GPUs online"
    )


def _arrivals_to_come(engine: Engine) -> bool:
    sources = [el for el in engine.graph.elements.values() if el.category == "source"]
    return any(math.isfinite(s.next_arrival_s()) for s in sources if hasattr(s, "next_arrival_s"))


def _metrics(
    world: World, rows: np.ndarray, start: float, end: float, service0: np.ndarray, preempt0: np.ndarray, shared0: float
) -> dict:
    """The projection's figures over `rows` (the jobs unfinished at the fork point and those
    that came after), from `start` to `end`; `service0`, `preempt0` and `shared0` are the
    world's books at the fork point. A GPU two jobs share counts once in the utilisation, as in
    the world's `busy_gpu_s` (both jobs of a pair are unfinished, so both are among `rows`)."""
    jobs = world.jobs
    arrival = jobs.column("arrival_s")[rows]
    finish = jobs.column("finish_s")[rows]
    first = jobs.column("first_start_s")[rows]
    done = ~np.isnan(finish)
    jct = finish[done] - arrival[done]
    started = ~np.isnan(first)
    old = rows[rows < len(service0)]
    gpu_s = float(jobs.column("service")[rows].sum() - service0[old].sum()) - (world.shared_gpu_s - shared0)
    span = end - start
    n_gpus = int(world.online.sum())
    last = float(finish[done].max()) if done.any() else None
    return {
        "avg_jct_s": float(jct.mean()) if len(jct) else None,
        "p95_jct_s": float(np.percentile(jct, 95)) if len(jct) else None,
        "avg_responsiveness_s": float((first[started] - arrival[started]).mean()) if started.any() else None,
        # (Only once every job has finished: the last finish so far is not when the last ends.)
        "makespan_s": None if last is None or not done.all() else max(last - start, 0.0),
        "utilization": gpu_s / (n_gpus * span) if span > 0 and n_gpus else None,
        "preemptions": int(jobs.column("preemptions")[rows].sum() - preempt0[old].sum()),
        "jobs": int(len(rows)),
        "jobs_finished": int(done.sum()),
    }


# Settings that built the run's world (its cluster and profiles): the other graph goes on from
# that world, so its own values of them are not used.
WORLD_SETTINGS = ("cluster", "profile", "pair_profile", "elastic_profile", "reference_gpu", "gpu_types")


@contextlib.contextmanager
def _hint_at_the_worlds_settings(
    run: CompiledGraph, other: CompiledGraph, world: World, whose: str, warn: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Around simulating the other graph on the run's world, when the other graph's own cluster
    or profiles differ from the run's: `warn` is told so before it is simulated (its figures
    are the run's cluster's, whatever its file says), and an error it meets (a trace's job that
    needs more GPUs than the world has, a model the run's profile does not know) says so."""
    unused = _unused_settings(run, other, world)
    said = (
        f"{Path(other.path).name} goes on from the {whose}'s world ({world.cluster.describe()}, with the {whose}'s "
        f"profiles): its own {', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not used (docs/whatif.md)"
    )
    if unused and warn is not None:
        warn(said)
    try:
        yield
    except RoundhouseError as err:
        if not unused or isinstance(err, JobsRefused):
            raise
        raise UsageError(f"{err}\n  hint: {said}") from None


def _unused_settings(run: CompiledGraph, other: CompiledGraph, world: World) -> list[str]:
    """The other graph's own cluster (when it is not the world's: the run's may have been given
    apart from its graph) and profiles (when not the run's), as `name value` texts."""
    from roundhouse.runtime.simulate import load_cluster
    from roundhouse.traces import readonce

    unused = []
    spec = other.settings.cluster
    if spec is not None:
        try:
            theirs = load_cluster(other, None, world.profile).fingerprint()
        except (RoundhouseError, OSError, ValueError):  # (a cluster it cannot build: not the world's either)
            theirs = None
        readonce.clear()  # (no source of the other graph runs here to take a trace its cluster's check read)
        if theirs != world.cluster.fingerprint():
            unused.append(f"cluster {spec_shown(spec)}")
    for name in WORLD_SETTINGS:
        value = getattr(other.settings, name)
        if name != "cluster" and value is not None and not _same_setting(run, other, name):
            unused.append(f"{name} {value}")
    return unused


def _same_setting(run: CompiledGraph, other: CompiledGraph, name: str) -> bool:
    """Whether the two graphs' setting `name` is the same: as written, or, for a file, the same
    file (a graph given by a relative path has its files relative to the working folder, the
    run's graph compiled from its journal's whole path has them whole)."""
    mine, theirs = getattr(run.settings, name), getattr(other.settings, name)
    if str(mine) == str(theirs):
        return True
    if not (isinstance(mine, FilePath) and isinstance(theirs, FilePath)):
        return False
    if name == "elastic_profile":  # (a built-in one, "ones" or "pollux", is known by its name, not a file)
        from roundhouse.runtime.simulate import built_in_elastic

        built_in = built_in_elastic(run), built_in_elastic(other)
        if built_in != (None, None):
            return built_in[0] == built_in[1]
    mine, theirs = run._whole_paths(mine), other._whole_paths(theirs)
    try:
        return os.path.samefile(mine, theirs)  # (a link to the run's file is the run's file)
    except OSError:  # (one no longer there: told apart by its path)
        return os.path.realpath(mine) == os.path.realpath(theirs)


def whatif_snapshot(
    path: str | Path, other: CompiledGraph | None, horizon_s: float = 30 * 86400.0, warn: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], list[Projection]]:
    """As `whatif`, from a simulation's snapshot file (`Simulation.save`) instead of a journal."""
    from roundhouse.runtime.simulation import Simulation

    sim = Simulation.load(path)
    if sim.done:
        # A time limit stops the run after ticking its round at the limit: that state is not
        # one a fork point is taken from. One saved by `run_until(until)` is (the round at the
        # limit not yet ticked), and its unfinished jobs are what a what-if simulates.
        hint = ""
        if sim._engine.until is not None and sim.stop_reason.startswith("reached the time limit"):
            hint = (
                f"; a what-if from its time limit needs a snapshot saved before the run stops there: "
                f"save it after run_until({sim._engine.until:g}), not run_until(math.inf)"
            )
        raise UsageError(f"snapshot {path}: its run had already stopped ({sim.stop_reason}){hint}")
    engine, world = sim._engine, sim.world_now()  # (the facts as of the clock, as both sides start)
    point = {
        "kind": "snapshot",
        "snapshot": str(path),  # (the file read, named by what it is: as a journal's is "journal")
        "graph": sim.graph.path,
        "cluster": world.cluster.describe(),
        "now_s": engine.backend.now,
        "rounds": engine.rounds,
        "jobs": len(world.jobs),
        "unfinished": int(world.unfinished),
        "running": int(len(world.running_rows)),
        # (What both sides run on: a lost node's GPUs stay offline, as `submit --status` says.)
        "gpus": int(world.cluster.n_gpus),
        "gpus_online": int(world.online.sum()),
    }
    ahead = None
    if other is not None:
        traces = [str(el.path) for el in sim.graph.elements.values() if el.category == "source" and hasattr(el, "path")]
        name = f"the snapshot {path}" + (f" (its jobs from {', '.join(traces)})" if traces else "")
        seen = world.last_round_s  # (its last round ran one of the run's rounds before the clock)
        assert seen is not None  # (`world_now` sets it)
        with _hint_at_the_worlds_settings(sim.graph, other, world, "snapshot", warn):
            ahead = simulate_ahead(
                world, other, point["now_s"], horizon_s, seen_s=seen, world_name=name, _run_coming=_coming(sim.graph, seen)
            )
    out = [project(engine, Path(sim.graph.path).name, horizon_s, world)]
    return point, out + ([ahead] if ahead is not None else [])


def whatif(
    journal_path: str | Path,
    other: CompiledGraph | None,
    compile_run_graph,
    load_world,
    horizon_s: float = 30 * 86400.0,
    warn: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[Projection]]:
    """Replay the journal and project forward under the run's graph and, if given, `other`.
    `compile_run_graph(path)` compiles the run's graph; `load_world(graph)` makes the world for
    a graph (its cluster and profile). `warn` is told of the other graph's own settings of the
    world (its cluster, its profiles) that are not used. Returns the fork point's facts and the
    projections."""
    journal, meta = open_journal(journal_path)
    try:
        graph = compile_run_graph(meta["graph"])
        world = load_world(graph)
        engine = replay(journal, meta, graph, world)
    finally:
        journal.db.close()
    if engine.stop_reason:  # (nothing is left to simulate: as for a stopped run's snapshot)
        raise UsageError(
            f"{journal_path}: its run had already stopped at t={engine.backend.now:g}s ({engine.stop_reason}); "
            "nothing is left to simulate from it"
        )
    point = {
        "kind": "journal",
        "journal": str(journal_path),
        "graph": meta["graph"],
        "cluster": meta.get("cluster"),
        "now_s": engine.backend.now,
        "rounds": engine.rounds,
        "round": engine.backend.last_round,
        "jobs": len(world.jobs),
        "unfinished": int(world.unfinished),
        "running": int(len(world.running_rows)),
        # (What both sides run on: a lost node's GPUs stay offline, as `submit --status` says.)
        "gpus": int(world.cluster.n_gpus),
        "gpus_online": int(world.online.sum()),
    }
    # (The other graph first: it starts from a copy of the world before the run's graph moves on.
    # The clock is the last journaled round's, whose arrivals the world has.)
    now = point["now_s"]
    ahead = None
    if other is not None:
        # (The replayed world is as of the last journaled round's clock, `now`.)
        with _hint_at_the_worlds_settings(graph, other, world, "run", warn):
            ahead = _simulate_ahead(world, other, now, horizon_s, now, f"the journal {journal_path}")
    out = [project(take_over(engine), Path(meta["graph"]).name, horizon_s, start=now)]
    return point, out + ([ahead] if ahead is not None else [])
