"""Run a compiled graph live: the entry point `roundhouse serve` (and `run --live`) uses, the
counterpart of runtime/simulate.py. The same graph, the same engine; the backend is the live
one (runtime/backends/live/) and the clock is the wall clock."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from roundhouse.errors import ERROR_FORM, RoundhouseError, UsageError, shown_error
from roundhouse.runtime.backends.live import LiveBackend, LiveOptions
from roundhouse.runtime.backends.live.ending import end_run
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.engine import Engine, RunResult
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world

log = logging.getLogger("roundhouse.scheduler")
T = TypeVar("T")


def journaled_graph(journaled: str, journal_path: str | Path) -> Path:
    """The run's graph as its journal names it. Journals hold its absolute path; older ones
    hold it as it was given to `serve`, relative to the folder serve ran in. Such a path is
    tried from the current folder, then from the journal's folder and the one above it (the
    default journal, checkpoints/roundhouse-journal.sqlite, is inside serve's folder). Returns
    the first that is a file, else the path as journaled (for the caller to report)."""
    path = Path(journaled)
    if path.is_absolute() or path.is_file():
        return path
    folder = Path(journal_path).resolve().parent
    for base in (folder, folder.parent):
        if (base / path).is_file():
            return base / path
    return path


def serve(
    graph: CompiledGraph,
    bind: str,
    security,
    journal_path: str | Path,
    options: LiveOptions | None = None,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    explain: bool = False,
) -> RunResult:
    """Run the graph live; with `explain`, the world records why each job is where it is."""
    options = options or LiveOptions()
    settings = graph.settings
    # The same world as a simulation's: the graph's pair and elastic profiles too (ONES' and
    # Pollux's jobs resize by their elastic profile's throughput).
    profile = load_profile(graph)
    world = new_world(graph, load_cluster(graph, cluster, profile), profile)
    created = not Path(journal_path).exists()
    journal = Journal(journal_path, lock=True)  # (one scheduler at a time: locked before SQLite opens it)
    meta = {
        # Absolute: `whatif` may read the journal from another folder than serve's.
        "graph": str(Path(graph.path).resolve()),
        "graph_digest": graph.key(),
        "cluster": world.cluster.describe(),
        # (Clusters that describe alike may differ in a node's cores, memory or rack: `whatif`
        # and a rerun compare this digest of every node's facts too.)
        "cluster_fingerprint": world.cluster.fingerprint(),
        "round_s": float(settings.round),
    }
    try:
        backend = LiveBackend(world, settings.round, bind, security, journal, options, meta)
    except BaseException:
        _close(journal, created)
        raise
    previous = {}

    def stop(signum, frame):
        # (A signal only sets a flag, also the second one while the run stops: it ends the
        # waits for agents and jobs, not a message handler half-way through its journal writes.)
        backend.request_stop(f"stopped by {signal.Signals(signum).name}")

    try:
        for s in (signal.SIGTERM, signal.SIGINT):
            previous[s] = signal.signal(s, stop)
    except ValueError:  # not the main thread (tests may run a scheduler in a thread)
        previous = {}
    try:
        # The backend keeps the time limit: it cuts the round in progress there, and it does
        # not count the replay of a resumed run against it.
        backend.until = until
        engine = Engine(graph, world, backend, on_round=on_round, explain=explain)
        # A new run's engine begins before the scheduler takes submissions (`LiveBackend.start`).
        begun = backend.start(begin=engine.begin)
        if not backend.started:  # stopped while waiting for agents: no round ran
            log.info("%s before round 0: the run did not begin", backend.stop_requested)
            return RunResult(world, 0, 0.0, backend.stop_requested, {}, {}, 0.0)
        _run(backend, journal_path, lambda: _rounds(engine, begun))
        if backend.replaying and backend.stop_requested:  # (a signal: a finished run's replay may end early too)
            _stopped_in_replay(backend, journal_path)
        if backend.replaying:
            _ended_before(backend, journal_path, engine.stop_reason)
        _refuse_submissions(backend, engine.stop_reason)
        running = len(world.running_rows)
        if running and not backend.at_limit and not options.stop_agents:  # (else they checkpoint: ending.py)
            log.info(
                "the run stopped with %d job(s) running: they keep running on their nodes; "
                "`roundhouse serve` with the same --journal takes them back",
                running,
            )
        ending = time.perf_counter()
        # The jobs checkpointed or withheld at the end wait again, as the summary counts them
        # (the journal has them so already: what a rerun resumes is as it was), and those done
        # meanwhile finished; the sinks and pools count both.
        end_run(backend)
        if backend.end_events is not None:
            engine.observe(backend.end_events)
        ending_s = time.perf_counter() - ending
        result = _run(backend, journal_path, engine.end)
        result.wall_s = max(0.0, result.wall_s - ending_s)  # (the rounds' time, as before the end waited for jobs)
        return result
    finally:
        try:
            if backend.started:
                _refuse_submissions(backend, "it stopped")  # (if not refused already: the run failed)
            backend.close()
            _close(journal, created)
        finally:  # (only once the journal is closed: a signal until then is the backend's)
            for s, handler in previous.items():
                signal.signal(s, handler)


def _stopped_in_replay(backend: LiveBackend, journal_path: str | Path) -> None:
    """Stopped while replaying a resumed run's journal: what the engine holds then is the run
    as it stood rounds ago, not the run, so it is neither summed up nor written out (`--out`
    would be overwritten with it). Nothing of the journal changed; ends as an interrupt does."""
    replay = backend.takeover
    log.info(
        "%s while replaying the journal (at round %d of %d): the run was not taken back, and its journal %s "
        "is as it was; `roundhouse serve` with the same --journal resumes it",
        backend.stop_requested,
        replay.replay_at,
        len(replay.replay),
        journal_path,
    )
    raise KeyboardInterrupt


def _ended_before(backend: LiveBackend, journal_path: str | Path, reason: str) -> None:
    """The engine stopped in a journaled round: the journal's run had ended before this serve
    (its replay ends as the run did). Summing it up again would print the old run as this one,
    ran in the replay's fraction of a second, and leave the agents and submitters of the
    documented block waiting for a scheduler that has gone; so it is refused, as `whatif`
    refuses it. Nothing of the journal changed."""
    raise UsageError(
        f"{journal_path}: the run this journal holds had already ended, at round {backend.clock.k} "
        f"(t={backend.clock.now:g}s; {reason}): nothing is left to resume\n"
        "  hint: for a new run, give another --journal or --checkpoints, or remove this journal"
    )


def _refuse_submissions(backend: LiveBackend, why: str) -> None:
    """From the end of the run on, refuse submissions: the scheduler still serves its agents
    (checkpointing jobs at the time limit, waiting for stopping agents), but no round is to
    come that would deliver a job accepted now."""
    if getattr(backend.server.handlers.get("submit"), "ended", False):
        return  # (refused already, saying why the run ended)

    def refuse(identity, seq, body, frame) -> None:
        log.warning("refused a submission: the run has ended (from %s)", backend.server.who(identity))
        backend.server.send(identity, "error", reason=f"the run has ended ({why}): it takes no more jobs", ref=seq)

    refuse.ended = True  # type: ignore[attr-defined]
    backend.server.handlers["submit"] = refuse


def _rounds(engine: Engine, begun: bool) -> None:
    """The engine's rounds (`Engine.run` without its `end`): `begin`, unless `begun` already,
    then its rounds until it stops."""
    if begun:
        engine.restart_wall_clock()
    else:
        engine.begin()
    while not engine.step():
        pass


def _run(backend: LiveBackend, journal_path: str | Path, part: Callable[[], T]) -> T:
    """Run a part of the run (its rounds, its `end`); an error while it replays a resumed run's
    journaled rounds names the journal and the round (the graph's own files, its profile say,
    may have changed since the run began: the journal is left as it was)."""
    try:
        return part()
    except RoundhouseError as err:
        if not backend.replaying:
            raise
        said = ERROR_FORM.sub(r"\1", shown_error(err), count=1)  # (`PLACE: error: WHAT` as `PLACE: WHAT`)
        raise UsageError(
            f"{journal_path}: cannot replay the run it holds, at round {backend.clock.k} (t={backend.clock.now:g}s): {said}\n"
            "  hint: the graph's files (a profile, a trace, a cluster spec) may have changed since the run began; "
            "restore them to resume it, or give a new --journal path to start afresh"
        ) from None


def _close(journal: Journal, created: bool) -> None:
    """Close the journal; one made for a run that never began and holds nothing (the address
    was taken, the keys were refused, it was stopped while waiting for agents before any job
    was submitted) is removed rather than left to be mistaken for one that holds a run. (Jobs
    accepted while it waited stay: the next start delivers them.)"""
    # (Asked only of a journal made for this run: reading an old one, which may be the damaged
    # journal the run was refused for, must not fail on the way out.)
    journal.close(remove_if_empty=created)
