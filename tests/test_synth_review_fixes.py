"""The synthesizer's pools and shared fork state end with the run that made them, its `both`
metric weighs JCT against wait, its graph is checked before it runs, and a gate switched off
keeps no stale counters."""

import gc
import multiprocessing
import time
import weakref

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.lookahead import Outlook
from roundhouse.runtime.simulation import Simulation

# Busy enough that its decisions simulate combinations (jobs wait), in a pool of two processes.
POOLED = """
round = 5min;
cluster = "2x2:V100";
synth :: Synthesizer(switches=[admit, order], every=4, horizon=1h, metric={metric}, workers=2);
arrivals :: PoissonSource(rate=8/h, jobs=30, gpus=single, models=blox, seed=0);
all :: AcceptAll;
a12 :: AcceptThreshold(factor=1.2x);
admit :: ChooseAdmission(candidates=[all, a12]);
fifo :: Fifo;
srtf :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
arrivals -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


def children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children()}


def wait_for(condition, seconds: float = 30.0) -> bool:
    """Whether `condition()` holds within `seconds` (pool processes take a moment to exit)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        gc.collect()
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def shared_of(sim: Simulation):
    """What the run's forks share (runtime/snapshot.py), as made for its pool, weakly."""
    from roundhouse.runtime.snapshot import Shared

    cluster = sim.world.cluster
    return weakref.ref(next(s for s in list(Shared._BY_CLUSTER.values()) if s.objects[0] is cluster))


def test_abandoned_forks_and_runs_leave_no_processes_or_shared_state():
    before = children()
    sim = Simulation(POOLED.format(metric="jct"), until=48 * 3600).run_until(4 * 3600)
    running = children()
    assert running - before  # (a decision ran its look-aheads in a pool)
    shared = shared_of(sim)
    for _ in range(2):  # (a fork after an abandoned one starts and ends a pool of its own too; each costs seconds)
        fork = sim.fork()
        fork.run_until(sim.now + 2 * 3600)  # past decisions of its own, in a pool of its own
        assert children() - running
        del fork
        assert wait_for(lambda: children() <= running), "an abandoned fork's pool processes are still running"
    sim.run_until(sim.now + 3600)  # the run itself goes on with its own pool
    assert children() - before == running - before
    del sim
    assert wait_for(lambda: children() <= before), "an abandoned run's pool processes are still running"
    assert wait_for(lambda: shared() is None), "the shared state of a run no longer referred to is still held"


def test_a_finished_run_shuts_its_pool_down_and_decides_as_one_process_does():
    before = children()
    sim = Simulation(POOLED.format(metric="both"), until=10 * 3600).run_until(4 * 3600)
    assert children() - before
    pooled = sim.run().reports["synth"]["decisions"]
    assert children() <= before  # (finish waits for its processes)
    alone = Simulation(POOLED.format(metric="both").replace("workers=2", "workers=1"), until=10 * 3600)
    assert pooled.height > 0 and pooled.equals(alone.run().reports["synth"]["decisions"])


def outlooks(jct: list[float], wait: list[float]) -> list[Outlook]:
    return [Outlook(jobs=30, finished=0, time_in_system_s=j, wait_s=w, waiting=30) for j, w in zip(jct, wait)]


def test_both_weighs_jct_against_wait_even_where_nobody_waits():
    synth = Simulation(POOLED.format(metric="both")).graph.elements["synth"]
    # Combination 0: twice the JCT, nobody waits; 1: half the JCT, a mean wait of 10 s (one of
    # thirty new jobs waits one round). The wait's difference is far below a round: 1 wins.
    jct, wait = [20000.0, 10000.0] + [30000.0] * 7, [0.0, 10.0] + [5000.0] * 7
    synth._choice = 1
    assert synth._best(outlooks(jct, wait), 300.0) == 1
    synth._choice = 0
    assert synth._best(outlooks(jct, wait), 300.0) == 1
    # A wait of hours against none outweighs a JCT 1% longer.
    assert synth._best(outlooks([10000.0, 10100.0], [3 * 3600.0, 0.0]), 300.0) == 1
    # Both measured against the best: equal trade-offs tie, and the running one stays.
    assert synth._best(outlooks([10000.0, 20000.0], [3000.0, 1500.0]), 300.0) == 0


def graph_file(tmp_path, body: str):
    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "2x4:V100";\n'
        "arrivals :: PoissonSource(rate=8/h, jobs=20, gpus=single, models=blox, seed=0);\n"
        "all :: AcceptAll;\nfifo :: Fifo;\nsrtf :: Srtf;\norder :: ChoosePolicy(candidates=[fifo, srtf]);\n"
        + body
        + "arrivals -> all -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return path


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("synth :: Synthesizer(switches=[fifo]);\n", ":8:32", "'fifo' (Fifo) is not a switch"),
        ("synth :: Synthesizer(switches=[order, synth]);\n", ":8:39", "'synth' (Synthesizer) is not a switch"),
        (
            "synth :: Synthesizer(switches=[order]);\ns2 :: Synthesizer(switches=[order]);\n",
            ":9:1",
            "'s2' (Synthesizer) is a second element that forks the world, after 'synth' (Synthesizer)",
        ),
    ],
)
def test_a_synthesizer_graph_is_checked_before_it_runs(tmp_path, capsys, body, where, message):
    from roundhouse.tools.cli import main

    path = graph_file(tmp_path, body)
    with pytest.raises(SchedError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_file(path)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}{where}: error: {message}" in err and "Traceback" not in err


def test_a_bad_metric_is_named_plainly(tmp_path):
    path = graph_file(tmp_path, "synth :: Synthesizer(switches=[order], metric=speed);\n")
    with pytest.raises(SchedError) as got:
        compile_file(path)
    text = str(got.value)
    assert "argument 'metric' of Synthesizer must be one of 'jct', 'responsiveness', 'both'" in text
    assert "Attribute(" not in text and "validator" not in text


def test_a_gate_switched_off_counts_no_demand():
    sim = Simulation(
        """
round = 5min;
cluster = "1x4:V100";
arrivals :: PoissonSource(rate=12/h, jobs=40, gpus=single, models=blox, seed=3);
a10 :: AcceptThreshold(factor=1.0x);
all :: AcceptAll;
admit :: ChooseAdmission(candidates=[a10, all]);
arrivals -> admit -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""
    )
    gate = sim.graph.elements["a10"]
    while gate.counters["demand"] == 0 or gate.counters["queued"] == 0:
        assert sim.step()
    sim.graph.elements["admit"].select(1)
    sim.step()
    assert gate.counters["queued"] == 0 and gate.counters["demand"] == 0
    assert gate.holding() == 0
    # Selected again, it takes over the jobs admitted since and counts them.
    sim.graph.elements["admit"].select(0)
    sim.step()
    assert gate.counters["demand"] > 0


def test_the_quick_reproduction_is_described_as_it_runs():
    from roundhouse.tools.reproductions import blox_synthesizer as module

    doc = " ".join(module.__doc__.split())
    nodes, per_node = (int(n) for n in module.QUICK.cluster.split(":")[0].split("x"))
    assert f"{nodes * per_node} GPUs" in doc and f"same {module.QUICK.rate:g} jobs/hour" in doc
    assert "quarter of the load" not in doc
    assert f"({module.QUICK.jobs}, {module.QUICK.track[0]}-{module.QUICK.track[1] - 1} measured)" in doc
