"""Forking a simulation mid-run, and snapshots on disk: running on from a fork or a loaded
snapshot gives exactly what running on would have, for graphs whose elements hold state."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.runtime import snapshot
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.snapshot import ForkError, SnapshotError, unforkable_elements
from tests.own_elements import policy_file

# Several kinds of element state at once: an admission overflow queue (AcceptThreshold),
# Tiresias' queues, DelayPlacer's timers and tuner, two sources' positions, checkpoint costs
# (GPUs busy checkpointing and jobs about to start, in the simulator).
MIXED = """
round = 5min;
cluster = "dally:1";
checkpoint = 30s;
restore = 20s;
steady :: PoissonSource(rate=12/h, jobs=120, seed=3);
spike  :: BurstSource(jobs=12, length=1h, every=1d, offset=6h, bursts=2, start_id=100000, seed=4);
admit  :: AcceptThreshold(factor=1.2x);
steady -> admit;
spike -> admit;
admit -> JobPool -> TiresiasLas(queues=2, thresholds=[1h]) -> DelayPlacer(tuned=true, history=6h) -> Launch -> m :: JobMetrics;
"""

# Gavel's LP policy (its shares and last solve), its round-based mechanism (deficits, a seeded
# generator) and its placer, on three GPU types.
GAVEL = """
round = 6min;
cluster = "4:4:4";
src :: PoissonSource(rate=6/h, jobs=60, gpus=single, models=blox, seed=0);
src -> AcceptAll -> JobPool -> MaxMinFairness -> GavelRounds -> GavelPlacer -> Launch -> m :: JobMetrics;
"""

OUTCOME = ["job_id", "arrival_s", "first_start_s", "finish_s", "preemptions", "service", "done"]


def outcome(sim: Simulation) -> dict[str, np.ndarray]:
    frame = sim.jobs(OUTCOME).sort("job_id")
    return {c: frame[c].to_numpy() for c in OUTCOME}


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[c], b[c], equal_nan=True) for c in OUTCOME)


@pytest.fixture(scope="module")
def mixed_reference():
    sim = Simulation(MIXED)
    result = sim.run()
    return outcome(sim), result.rounds


@pytest.mark.parametrize("at_h", [7, 30])
def test_a_fork_and_the_original_run_on_to_what_running_on_gives(mixed_reference, at_h):
    expected, rounds = mixed_reference
    sim = Simulation(MIXED)
    sim.run_until(at_h * 3600)
    assert not sim.done and len(sim.world.jobs) > 0 and sim.world.unfinished > 0
    pending = sim.graph.elements["admit"].__dict__["_queue"]
    fork = sim.fork()
    # The fork is independent: its world, tables and element states are copies.
    assert fork.world is not sim.world and fork.world.jobs is not sim.world.jobs
    assert fork.graph.elements["admit"] is not sim.graph.elements["admit"]
    assert fork.graph.elements["admit"].__dict__["_queue"] is not pending or len(pending) == 0
    fork.run()  # the fork first: the original must not notice
    sim.run()
    assert same(outcome(fork), expected) and same(outcome(sim), expected)
    assert fork.result().rounds == sim.result().rounds == rounds
    assert np.isfinite(expected["finish_s"]).all()  # every job finished: the runs compared something


def test_forks_of_forks_diverge_only_where_told(mixed_reference):
    """A fork run under a changed element gives other results, while its parent keeps its own."""
    expected, _ = mixed_reference
    sim = Simulation(MIXED).run_until(9 * 3600)
    other = sim.fork()
    queue = other.graph.elements["admit"].__dict__["_queue"]
    assert len(queue) > 10
    other.graph.elements["admit"].__dict__["_queue"] = queue[::-1].copy()  # admit the overflow newest first
    other.run()
    sim.run()
    assert same(outcome(sim), expected)
    assert not same(outcome(other), expected)


def test_save_load_and_run_on_gives_the_same(tmp_path, mixed_reference):
    expected, rounds = mixed_reference
    sim = Simulation(MIXED).run_until(9 * 3600)
    path = sim.save(tmp_path / "mid.snap")
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    assert header["format"] == "roundhouse-snapshot" and header["version"] == snapshot.FORMAT_VERSION
    assert header["now_s"] == sim.now and header["jobs"] == len(sim.world.jobs)
    loaded = Simulation.load(path)
    assert loaded.now == sim.now and loaded.rounds == sim.rounds
    loaded.run()
    assert same(outcome(loaded), expected) and loaded.result().rounds == rounds
    sim.run()  # saving changed nothing
    assert same(outcome(sim), expected)


@pytest.mark.slow
def test_gavel_lp_policy_forks_and_saves(tmp_path):
    whole = Simulation(GAVEL)
    whole.run()
    expected = outcome(whole)
    sim = Simulation(GAVEL).run_until(4 * 3600)
    assert sim.graph.by_class("MaxMinFairness")[0].__dict__["_shares"] is not None  # solved at least once
    fork = sim.fork()
    loaded = Simulation.load(sim.save(tmp_path / "gavel.snap"))
    for s in (fork, loaded, sim):
        s.run()
        assert same(outcome(s), expected)


def test_step_and_run_until_agree_with_run():
    a = Simulation(GAVEL)
    while a.step():
        pass
    b = Simulation(GAVEL)
    b.run()
    assert a.rounds == b.rounds and same(outcome(a), outcome(b))
    assert a.summary()["avg_jct_s"] == pytest.approx(b.summary()["avg_jct_s"])


def test_a_summary_mid_run_leaves_the_run_unchanged(mixed_reference):
    expected, _ = mixed_reference
    sim = Simulation(MIXED).run_until(20 * 3600)
    mid = sim.summary()
    assert 0 < mid["jobs_finished"] < 144
    sim.run()
    assert same(outcome(sim), expected)
    assert sim.summary()["jobs_finished"] == 144


def test_two_snapshots_of_one_state_are_the_same_bytes(tmp_path):
    """Nothing but the run's state goes into a snapshot: not memory the job table has reserved
    and never written, not the wall clock. (Not the Gavel graph: its solver's time is a counter.)"""
    first = Simulation(MIXED).run_until(10 * 3600).save(tmp_path / "a.snap")
    second = Simulation(MIXED).run_until(10 * 3600).save(tmp_path / "b.snap")
    assert first.read_bytes() == second.read_bytes()


# --- bad snapshots -------------------------------------------------------------------------------
@pytest.fixture
def snap(tmp_path):
    return Simulation(GAVEL).run_until(3600).save(tmp_path / "s.snap")


def test_a_corrupt_snapshot_is_refused_naming_the_file(snap):
    data = bytearray(snap.read_bytes())
    data[-50] ^= 0xFF
    snap.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match=rf"snapshot {snap}: corrupt: .*SHA-256"):
        Simulation.load(snap)
    snap.write_bytes(bytes(data[:-100]))
    with pytest.raises(SnapshotError, match="corrupt: the state after line 1 is .* bytes, the header says"):
        Simulation.load(snap)


def test_a_newer_snapshot_format_is_refused(snap):
    head, _, payload = snap.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["version"] = snapshot.FORMAT_VERSION + 1
    snap.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    newer = snapshot.FORMAT_VERSION + 1
    with pytest.raises(SnapshotError, match=f"line 1: format version {newer} is newer than this Roundhouse reads"):
        Simulation.load(snap)


@pytest.mark.parametrize(
    "key, value, what",
    [
        ("until", "2d", "a time in seconds or null"),
        ("until", -5, "a time in seconds or null"),
        ("graph_path", None, "a path"),
        ("overrides", "arrivals.jobs=3", "a list of --set texts"),
        ("trace", 7, "a path or null"),
    ],
)
def test_an_edited_header_is_refused_naming_the_field(snap, key, value, what):
    """The checksum covers the state after line 1, not the header's account of the run."""
    head, _, payload = snap.read_bytes().partition(b"\n")
    snap.write_bytes(json.dumps({**json.loads(head), key: value}).encode() + b"\n" + payload)
    with pytest.raises(SnapshotError, match=rf"snapshot {snap}: line 1: '{key}' must be {what}, got "):
        Simulation.load(snap)


def test_not_a_snapshot(tmp_path):
    path = tmp_path / "x.snap"
    path.write_text("round = 5min;\n")
    with pytest.raises(SnapshotError, match="not a Roundhouse snapshot"):
        Simulation.load(path)
    with pytest.raises(SnapshotError, match="cannot read it"):
        Simulation.load(tmp_path / "missing.snap")


# --- elements that cannot be forked -----------------------------------------------------------
# (_Doc is their shared base: the text of an element file with its @element taken off.)
USER_ELEMENTS = (
    policy_file(
        "_Doc",
        "Rank by arrival, remembering how often each round ran.",
        """
    self._seen += 1
    order = np.argsort(active.arrival_s, kind="stable")
    return Ranking(active.rows[order], active.gpus[order])
    """,
        before="import numpy as np",
        after="def start(self, ctx):\n    self._seen = 0",
        declares=None,
    ).replace("@element\n", "")
    + """

@element
class Undeclared(_Doc):
    __doc__ = _Doc.__doc__


@element
class Declared(_Doc):
    __doc__ = _Doc.__doc__
    state = ("_seen",)


@element
class Sloppy(_Doc):
    __doc__ = _Doc.__doc__
    state = ()


@element
class Looksahead(_Doc):
    __doc__ = _Doc.__doc__
    state = ("_seen",)
    forks_world = True  # as the synthesizer: every element of its graph must be forkable


@element
class Refuses(_Doc):
    __doc__ = _Doc.__doc__
    state = ("_seen",)
    forkable = False
"""
)


@pytest.fixture(scope="module")
def user_graph(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("user")
    (tmp_path / "mine.py").write_text(USER_ELEMENTS)

    def graph(policy: str) -> str:
        text = 'require "mine.py";\nround = 5min;\ncluster = "2x2:V100";\n'
        text += f"PoissonSource(rate=4/h, jobs=20, seed=1) -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> JobMetrics;\n"
        path = tmp_path / f"{policy}.sched"
        path.write_text(text)
        return str(path)

    return graph


def test_unforkable_elements_are_reported_with_what_to_add(user_graph):
    assert unforkable_elements(compile_file(user_graph("Declared"))) == []
    assert unforkable_elements(compile_file("graphs/tiresias.sched")) == []
    [(name, cls, why)] = unforkable_elements(compile_file(user_graph("Undeclared")))
    assert (name, cls) == ("Undeclared@4", "Undeclared") or cls == "Undeclared"
    assert "declares no state: add `state = ('_seen',)`" in why
    [(_, _, why)] = unforkable_elements(compile_file(user_graph("Sloppy")))
    assert "sets attribute(s) _seen that neither its `state` nor its `fixed` names" in why
    [(_, _, why)] = unforkable_elements(compile_file(user_graph("Refuses")))
    assert "forkable = False" in why


def test_forking_an_unforkable_element_is_a_clear_error(user_graph):
    sim = Simulation(user_graph("Undeclared")).run_until(3600)
    with pytest.raises(
        ForkError,
        match=r"element '.*' \(Undeclared; declared at [^)]*\.sched:\d+:\d+, class defined at [^)]*mine\.py:\d+\) cannot be forked: it declares no state",
    ):
        sim.fork()
    sim = Simulation(user_graph("Declared")).run_until(3600)
    fork = sim.fork()
    fork.run()
    sim.run()
    assert same(outcome(fork), outcome(sim))


def test_every_built_in_element_declares_its_state():
    from roundhouse.runtime import registry
    from roundhouse.runtime.snapshot import fork_problem

    registry.load_builtin()
    problems = {cls.__name__: fork_problem(cls) for cls in registry.classes() if cls.__module__.startswith("roundhouse.elements")}
    assert len(problems) > 40
    assert {k: v for k, v in problems.items() if v} == {}


def test_roundhouse_check_reports_unforkable_elements(user_graph, capsys):
    from roundhouse.tools.cli import main

    graph = user_graph("Undeclared")
    assert main(["check", graph]) == 0  # without --fork, and nothing in the graph forks the world
    capsys.readouterr()
    assert main(["check", "--fork", graph]) == 2
    err = capsys.readouterr().err
    assert f"{graph}:4:" in err and "error: element 'Undeclared@" in err
    assert "cannot be forked: it declares no state: add `state = ('_seen',)`" in err and "Traceback" not in err
    assert main(["check", "--fork", user_graph("Declared"), "graphs/gavel-las.sched"]) == 0
    # A graph with an element that forks the world is checked as with --fork.
    both = Path(graph).with_name("both.sched")
    both.write_text(
        'require "mine.py";\nround = 5min;\ncluster = "2x2:V100";\npool :: JobPool;\n'
        "PoissonSource(rate=4/h, jobs=20, seed=1) -> AcceptAll -> pool -> Undeclared -> FirstFree -> Launch -> JobMetrics;\n"
        "pool -> Looksahead -> FirstFree -> Launch;\n"
    )
    capsys.readouterr()
    assert main(["check", str(both)]) == 2
    err = capsys.readouterr().err
    assert f"{both}:5:" in err and "(Undeclared; class defined at " in err and "mine.py:" in err and ") cannot be forked" in err


# --- every shipped graph ------------------------------------------------------------------------
SHIPPED = sorted(p.name for p in Path("graphs").glob("*.sched") if p.name != "live-loopback.sched")
# Rounds run and the round forked after, and which job counts must have grown by then (and
# after): the elastic graphs' rounds cost most (a search over every job's GPUs, ONES' predictor
# refitted as jobs finish), and their jobs are resized (under ONES also preempted) from the
# first rounds, so a shorter run still forks among such changes.
ROUNDS = {"pollux.sched": (20, 10, ("resizes",)), "ones.sched": (60, 45, ("resizes", "preemptions"))}


def changes(sim: Simulation, columns: tuple[str, ...]) -> dict[str, int]:
    return {c: int(sim.world.jobs.column(c).sum()) for c in columns}


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_graph_forks_mid_run_to_the_same_results(name):
    """Each graph's elements (sources, admission, policies and solvers, mechanisms, placers,
    sinks) over its first 120 rounds: forked after 50 (the elastic graphs: fewer, ROUNDS), the
    fork and the original both give what the unforked run gives."""
    rounds, fork_at, counted = ROUNDS.get(name, (120, 50, ()))
    round_s = float(compile_file(f"graphs/{name}").settings.round)
    until = rounds * round_s
    whole = Simulation(f"graphs/{name}", until=until)
    whole.run()
    sim = Simulation(f"graphs/{name}", until=until).run_until(fork_at * round_s)
    at_fork = changes(sim, counted)
    assert all(at_fork.values()), at_fork  # forked after jobs were resized (preempted) ...
    assert all(changes(whole, counted)[c] > n for c, n in at_fork.items())  # ... and before more were
    fork = sim.fork()
    fork.run()
    sim.run()
    assert len(whole.jobs()) > 0
    assert same(outcome(fork), outcome(whole)) and same(outcome(sim), outcome(whole))
    timeless = lambda counters: {e: {k: v for k, v in c.items() if not k.endswith("_ms")} for e, c in counters.items()}  # noqa: E731
    assert timeless(fork.result().counters) == timeless(whole.result().counters)


def test_a_snapshot_keeps_its_graph_and_refuses_a_changed_one(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(GAVEL)
    path = Simulation(graph).run_until(3600).save(tmp_path / "g.snap")
    graph.write_text(GAVEL.replace("MaxMinFairness", "MaxThroughput"))  # edited since: the saved text is used
    assert Simulation.load(path).graph.by_class("MaxMinFairness")
    head, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["graph_text"] = graph.read_text()  # a snapshot whose graph is not its state's
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    with pytest.raises(SnapshotError, match="is not the one the snapshot was saved with"):
        Simulation.load(path)


def test_world_now_folds_in_the_last_round():
    sim = Simulation(GAVEL).run_until(5 * 3600)
    before = sim.world.jobs.column("done").copy()
    now = sim.world_now()
    assert now is not sim.world and np.array_equal(sim.world.jobs.column("done"), before)  # untouched
    running = sim.world.running_rows
    assert len(running) and (now.jobs.column("done")[running] > before[running]).all()
    sim.step()  # the next round folds in exactly that
    assert np.array_equal(sim.world.jobs.column("done")[running], now.jobs.column("done")[running])
