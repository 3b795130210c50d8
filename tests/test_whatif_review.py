"""What-if from a snapshot, checked by hand on four jobs; `simulate_ahead`'s arguments refused
with a message naming them; the other graph failing on the run's world says which of its own
settings (cluster, profiles) that world does not use."""

from __future__ import annotations

import json

import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.whatif import simulate_ahead
from tests.conftest import fails

# Four jobs known by their duration on two GPUs, 100 s rounds.
TRACE = """job_id,arrival_s,gpus,duration_s,model,batch_size
0,0,1,1000,ResNet-18,16
1,0,2,500,ResNet-18,16
2,50,1,300,ResNet-18,16
3,2000,1,200,ResNet-18,16
"""
GRAPH = """round = 100s;
cluster = "1x2:V100";
arrivals :: TraceSource(path="{trace}", timing=duration);
arrivals -> AcceptAll -> pool :: JobPool -> {policy} -> Consolidated -> Launch -> JobMetrics;
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "fifo.sched").write_text(GRAPH.format(trace="t.csv", policy="Fifo"))
    (tmp_path / "srtf.sched").write_text(GRAPH.format(trace="t.csv", policy="Srtf"))
    return tmp_path


def test_whatif_from_a_snapshot_gives_the_metrics_worked_out_by_hand(folder, capsys):
    """At t=300 job 0 has run 300 of its 1000 s; jobs 1 and 2 wait; job 3 comes at 2000 s.
    Fifo goes on: 0 ends at 1000, 1 runs 1000-1500, 2 1500-1800, 3 2000-2200. Srtf from a fresh
    start: 2 (300 s left) beside 0 at 300-600, then 0 (400 s left) before 1 (500 s, two GPUs):
    0 ends at 1000, 1 runs 1000-1500, 3 2000-2200."""
    from roundhouse.tools.cli import main

    snap = Simulation(folder / "fifo.sched").run_until(300).save(folder / "f.snap")
    capsys.readouterr()
    assert main(["whatif", str(snap), "--graph", str(folder / "srtf.sched"), "--json"]) == 0
    fifo, srtf = (p["metrics"] for p in json.loads(capsys.readouterr().out)["projections"])
    busy = 700 + 2 * 500 + 300 + 200  # GPU-seconds from the fork point on, on either side
    assert fifo == pytest.approx(
        {
            "avg_jct_s": (1000 + 1500 + 1750 + 200) / 4,
            "p95_jct_s": 1500 + 0.85 * 250,  # (numpy's linear percentile of 200, 1000, 1500, 1750)
            "avg_responsiveness_s": (0 + 1000 + 1450 + 0) / 4,
            "makespan_s": 2200 - 300,
            "utilization": busy / (2 * 1900),
            "preemptions": 0,
            "jobs": 4,
            "jobs_finished": 4,
        }
    )
    assert srtf == pytest.approx(
        {
            "avg_jct_s": (1000 + 1500 + 550 + 200) / 4,
            "p95_jct_s": 1000 + 0.85 * 500,
            "avg_responsiveness_s": (0 + 1000 + 250 + 0) / 4,
            "makespan_s": 1900,
            "utilization": busy / (2 * 1900),
            "preemptions": 0,
            "jobs": 4,
            "jobs_finished": 4,
        }
    )


def test_simulate_ahead_refuses_arguments_it_cannot_use(folder):
    sim = Simulation(folder / "fifo.sched").run_until(300)
    world, other = sim.world_now(), compile_file(folder / "srtf.sched")
    # The boundary of the world's last round: a later one (or not a number) would pass over jobs
    # still to come (job 3, at 2000 s), which were silently left out.
    for seen in ("x", float("nan"), 5000.0, True):
        with pytest.raises(UsageError, match=r"seen_s: expected seconds, the boundary of the world's last round"):
            simulate_ahead(world, other, sim.now, 86400, seen_s=seen)
    assert simulate_ahead(world, other, sim.now, 86400, seen_s=200.0).metrics["jobs"] == 4
    with pytest.raises(
        UsageError, match=r"horizon_s: expected seconds, a number more than 0, got inf \(a finite number: a projection ends\)"
    ):
        simulate_ahead(world, other, sim.now, float("inf"))
    with pytest.raises(UsageError, match=r"now: expected seconds, the time the world is as of \(a finite number\), got nan"):
        simulate_ahead(world, other, float("nan"), 86400)
    with pytest.raises(UsageError, match=r"graph: expected a compiled graph .*, got str"):
        simulate_ahead(world, str(folder / "srtf.sched"), sim.now, 86400)  # type: ignore[arg-type]


def test_the_other_graph_failing_on_the_run_s_world_names_its_settings_not_used(folder, capsys):
    """A graph for a larger cluster brings a job of 4 GPUs to a world of 2: the error says the
    graph's own cluster is not the one it runs on."""
    (folder / "big.csv").write_text(TRACE.replace("3,2000,1,", "3,2000,4,"))
    big = folder / "big.sched"
    big.write_text(GRAPH.format(trace="big.csv", policy="Srtf").replace("1x2:V100", "1x8:V100"))
    snap = Simulation(folder / "fifo.sched").run_until(300).save(folder / "f.snap")
    err = fails(capsys, "whatif", snap, "--graph", big)
    assert "job 3 asks for 4 GPUs but the cluster has 2" in err, err
    assert "hint: big.sched goes on from the snapshot's world (2 GPUs on 1 node (1x2:V100)" in err, err
    assert "its own cluster 1x8:V100 is not used" in err, err
    # The run's cluster given apart from its graph, whose own is the other graph's: still not used.
    (folder / "fifo8.sched").write_text(GRAPH.format(trace="t.csv", policy="Fifo").replace("1x2:V100", "1x8:V100"))
    snap8 = Simulation(folder / "fifo8.sched", cluster="1x2:V100").run_until(300).save(folder / "f8.snap")
    err = fails(capsys, "whatif", snap8, "--graph", big)
    assert "its own cluster 1x8:V100 is not used" in err, err
    # The same graph with the run's cluster: no such hint (nothing of its own is left unused).
    big.write_text(GRAPH.format(trace="big.csv", policy="Srtf"))
    err = fails(capsys, "whatif", snap, "--graph", big)
    assert "job 3 asks for 4 GPUs but the cluster has 2" in err and "hint" not in err, err


def test_a_trace_changed_since_the_snapshot_is_refused_not_compared(folder, capsys):
    """The snapshot holds the jobs its trace had (job 3 of 200 s); the other side, the same graph
    with another argument, reads the trace as it is now. Changed since (job 3 of 999 s), the two
    sides would run another job 3 each: refused, naming the source, the job and the file."""
    from roundhouse.tools.cli import main

    snap = Simulation(folder / "fifo.sched").run_until(300).save(folder / "f.snap")
    (folder / "t.csv").write_text(TRACE.replace("3,2000,1,200,", "3,2000,1,999,"))
    err = fails(capsys, "whatif", snap, "--set", "skip_rounds=false")
    assert "arrivals (TraceSource): with the run's arguments, it brings other jobs than the snapshot" in err, err
    assert "job 3 has duration_s 999, and 200 in the run's state" in err, err
    assert f"its file {folder / 't.csv'} has changed since the run's state was saved" in err, err
    # Put back, the two sides agree (a fresh Fifo runs these jobs as the run's does).
    (folder / "t.csv").write_text(TRACE)
    assert main(["whatif", str(snap), "--set", "skip_rounds=false", "--json"]) == 0
    run, other = (p["metrics"] for p in json.loads(capsys.readouterr().out)["projections"])
    assert run == other and run["jobs"] == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["", "--json"], "JOURNAL_OR_SNAPSHOT: got an empty path; give a live scheduler's journal file"),
        (["{snap}", "--graph", ""], "--graph: got an empty path; give a .sched file"),
        (["{snap}", "--run-graph", " "], "--run-graph: got an empty path; give the run's .sched file"),
        (["{snap}", "--run-trace", ""], "--run-trace: got an empty path; give the scheduler's --trace file"),
    ],
)
def test_empty_paths_are_refused_naming_the_option(folder, capsys, argv, message):
    """An empty path was the current folder: "cannot read : is a directory", or ignored."""
    snap = Simulation(folder / "fifo.sched").run_until(300).save(folder / "f.snap")
    err = fails(capsys, "whatif", *(a.format(snap=snap) for a in argv))
    assert message in err and "directory" not in err, err


def _resaved(path, change) -> None:
    """Rewrite a snapshot with `change(header, saved)` applied to its header and state, with a
    checksum that fits (as a snapshot written by other code would be)."""
    import hashlib
    import io
    import pickle

    from roundhouse.runtime import snapshot

    header, payload = snapshot.read_header(path)
    cluster, offset = snapshot.load_cluster(path, payload)
    refs = snapshot._references(Simulation.load(path)._engine)
    saved = snapshot._Unpickler(io.BytesIO(payload[offset:]), refs).load()
    change(header, saved)
    buffer = io.BytesIO()
    pickle.dump(cluster, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    snapshot._Pickler(buffer, {id(o): k for k, o in refs.items() if o is not None}).dump(saved)
    data = buffer.getvalue()
    header.update(payload_bytes=len(data), payload_sha256=hashlib.sha256(data).hexdigest())
    path.write_bytes(json.dumps(header).encode() + b"\n" + data)


def test_a_snapshot_whose_element_kept_other_state_is_refused_at_load(folder, capsys):
    """State the element's class does not declare (another version's code kept it: here the
    pool's state renamed) was set on the element and left for the run to trip over."""
    from roundhouse.runtime.snapshot import SnapshotError

    snap = Simulation(folder / "fifo.sched").run_until(300).save(folder / "f.snap")

    def rename(header, saved):
        state = saved["elements"]["pool"]
        name = next(a for a in state if a != "counters")
        state["_old_" + name.lstrip("_")] = state.pop(name)
        header["roundhouse"] = "0.0.1"

    _resaved(snap, rename)
    with pytest.raises(
        SnapshotError,
        match=r"element 'pool' \(JobPool; declared at [^)]*fifo\.sched:\d+:\d+, class defined at [^)]*elements/pool\.py:\d+\) kept other state when it was saved: its state has _old_",
    ):
        Simulation.load(snap)
    err = fails(capsys, "whatif", snap)
    assert "which JobPool does not declare now (the snapshot was saved by Roundhouse 0.0.1; this is" in err, err
    assert "open it with the Roundhouse that wrote it" in err, err


def test_a_graph_for_another_cluster_is_warned_of_before_it_runs_on_the_run_s(folder, capsys):
    """A graph whose file declares a larger cluster runs on the snapshot's world all the same
    (docs/whatif.md, "The other graph"): a warning says so, naming both clusters, not only the
    table's header the run's."""
    from roundhouse.tools.cli import main

    big = folder / "big.sched"
    big.write_text(GRAPH.format(trace="t.csv", policy="Srtf").replace("1x2:V100", "4x8:V100"))
    snap = Simulation(folder / "fifo.sched").run_until(300).save(folder / "f.snap")
    capsys.readouterr()
    assert main(["whatif", str(snap), "--graph", str(big)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: big.sched goes on from the snapshot's world (2 GPUs on 1 node (1x2:V100)"), err
    assert "its own cluster 4x8:V100 is not used (docs/whatif.md)" in err and len(err.splitlines()) == 1, err
    # Its figures are those of the 2 GPUs: the same as the same graph's on the run's cluster.
    same = folder / "same.sched"
    same.write_text(GRAPH.format(trace="t.csv", policy="Srtf"))
    figures = []
    for graph in (big, same):
        assert main(["whatif", str(snap), "--graph", str(graph), "--json"]) == 0
        out, err = capsys.readouterr()
        figures.append(json.loads(out)["projections"][1]["metrics"])
        assert ("warning" in err) == (graph == big), err
    assert figures[0] == figures[1]
    # The run's own graph with a --set has the run's settings: nothing to warn of.
    assert main(["whatif", str(snap), "--set", "skip_rounds=false"]) == 0
    assert "warning" not in capsys.readouterr().err
