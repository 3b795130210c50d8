"""docs/simulation-api.md's example, run as written, and the Simulation API's bad inputs."""

from __future__ import annotations

import json
import os
import re

import pytest

from roundhouse import Simulation
from roundhouse.errors import RoundhouseError, UsageError
from tests.conftest import REPO


def test_the_documented_example_runs_as_written(tmp_path, capsys):
    text = (REPO / "docs" / "simulation-api.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", text, re.S)
    example = example.replace("/tmp/fifo-day1.snap", str(tmp_path / "fifo-day1.snap"))
    here = os.getcwd()
    os.chdir(REPO)
    try:
        exec(compile(example, "docs/simulation-api.md", "exec"), {})  # noqa: S102
    finally:
        os.chdir(here)
    out = capsys.readouterr().out
    assert re.search(r"Simulation\(fifo\.sched, t=86400s, 288 rounds, 60 jobs, running\)", out)
    assert "every job finished" in out and "average JCT" in out
    assert (tmp_path / "fifo-day1.snap").stat().st_size > 0


def test_a_simulation_ends_once(tmp_path):
    sim = Simulation("graphs/fifo.sched", cluster="2x4:V100", overrides=["arrivals.jobs=10"])
    result = sim.run()
    assert sim.done and not sim.step() and sim.run() is result
    with pytest.raises(UsageError, match="has ended"):
        sim.fork()
    with pytest.raises(UsageError, match="has ended"):
        sim.save(tmp_path / "x.snap")


def test_bad_graph_and_settings_are_located_errors(tmp_path):
    with pytest.raises(RoundhouseError, match="no such file"):
        Simulation(tmp_path / "missing.sched")
    with pytest.raises(RoundhouseError, match="round"):
        Simulation("graphs/fifo.sched", round="soon")
    with pytest.raises(UsageError, match="no TraceSource"):
        Simulation("graphs/gavel-fifo.sched", trace="traces/samples/philly-1000.csv")


def test_paths_are_taken_as_paths_and_bad_arguments_name_themselves(tmp_path):
    from pathlib import Path

    from roundhouse.runtime.snapshot import SnapshotError

    here = os.getcwd()
    os.chdir(REPO)
    try:
        sim = Simulation("graphs/fifo.sched", cluster=Path("clusters/gavel-physical.toml"), overrides=["arrivals.jobs=5"])
        as_text = Simulation("graphs/fifo.sched", cluster="clusters/gavel-physical.toml", overrides=["arrivals.jobs=5"])
    finally:
        os.chdir(here)
    assert sim.world.cluster.node_gpus.sum() == as_text.world.cluster.node_gpus.sum() > 0
    with pytest.raises(UsageError, match=r"^trace: expected the path of a trace file, got int"):
        Simulation(REPO / "graphs" / "fifo.sched", trace=123)
    with pytest.raises(UsageError, match=r"^columns: the job table has no column 'nosuch'.*; it has job_id"):
        sim.jobs(["nosuch"])
    with pytest.raises(SnapshotError, match=r"is a directory; give the file to write"):
        sim.save(tmp_path)
    with pytest.raises(SnapshotError, match=r"cannot write it: no directory .*nodir"):
        sim.save(tmp_path / "nodir" / "x.snap")
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / f"{tmp_path.name}.partial").exists()
    with pytest.raises(UsageError, match=r"^path: expected the snapshot file to write"):
        sim.save(123)
    with pytest.raises(UsageError, match=r"^path: expected a snapshot file written by Simulation.save, got 123"):
        Simulation.load(123)
    assert sim.jobs(["job_id"]).columns == ["job_id"]  # (and a good column still reads)


def test_missing_files_and_names_given_twice_are_usage_errors_naming_the_argument(tmp_path):
    fifo = REPO / "graphs" / "fifo.sched"
    with pytest.raises(UsageError, match=r"^trace: .*nope\.csv: no such file$"):
        Simulation(fifo, trace=tmp_path / "nope.csv")
    with pytest.raises(UsageError, match=r"^trace: .*: is a folder"):
        Simulation(fifo, trace=tmp_path)
    with pytest.raises(UsageError, match=r"^cluster: .*nope\.toml: cluster spec not found"):
        Simulation(fifo, cluster=tmp_path / "nope.toml")
    with pytest.raises(UsageError, match=r"^cluster: bad cluster '8xx'"):
        Simulation(fifo, cluster="8xx")
    # The last would win without a word: refused, as two `--set`s of one name are.
    with pytest.raises(
        UsageError, match=r"^overrides and keyword settings: round is set twice \('round=1min' and 'round=10min'\)"
    ):
        Simulation(fifo, overrides=["round=1min"], round="10min")
    with pytest.raises(UsageError, match=r"^overrides: arrivals.jobs is set twice"):
        Simulation(fifo, overrides=["arrivals.jobs=5", "arrivals.jobs=6"])
    with pytest.raises(UsageError, match=r"^cluster: the cluster is given twice"):
        Simulation(fifo, cluster="8x4:V100", overrides=['cluster="4x4:V100"'])
    with pytest.raises(UsageError, match=r"^trace: it replaces arrivals.path, also given in overrides"):
        Simulation(fifo, trace=REPO / "traces/samples/philly-1000.csv", overrides=['arrivals.path="x.csv"'])


def _gap_graph(tmp_path, arrival_s: str) -> str:
    """A job at 0 s, then, after an empty stretch, one at `arrival_s`; a sink that records every
    round it sees."""
    trace = tmp_path / "gap.csv"
    trace.write_text(f"job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,{arrival_s},1,100\n")
    return (
        f'round = 5min; cluster = "1x4:V100"; a :: TraceSource(path="{trace}"); run :: Launch;'
        " a -> AcceptAll -> JobPool -> Fifo -> FirstFree -> run -> m :: JobMetrics; run -> usage :: ResourceUsage;"
    )


def test_a_run_stepped_to_times_gives_what_a_run_straight_through_gives(tmp_path):
    """The jump over an empty system is cut where `run_until` pauses, and the next step goes on
    with it rather than ticking the empty rounds a straight run never sees."""
    graph = _gap_graph(tmp_path, "30000")
    straight = Simulation(graph).run()
    stepped = Simulation(graph)
    for t in range(3600, 30000, 3600):  # (pauses in the empty stretch, before the arrival)
        stepped.run_until(t)
        assert stepped.now == t and not stepped.done
    result = stepped.run()
    assert straight.rounds == 4  # rounds 0 and 300 s, then the arrival's 30000 and 30300 s
    assert (result.rounds, result.end_s, result.counters) == (straight.rounds, straight.end_s, straight.counters)
    assert json.dumps(result.reports, default=str, sort_keys=True) == json.dumps(straight.reports, default=str, sort_keys=True)


def test_an_arrival_just_after_a_boundary_starts_there_whether_or_not_the_system_was_empty(tmp_path):
    """Sources read an arrival within a nanosecond after a boundary at that boundary; the jump over
    an empty system lands on the same boundary."""
    alone = Simulation(_gap_graph(tmp_path, "900.0000000005"))
    alone.run()
    starts = alone.jobs(["job_id", "first_start_s"]).to_dicts()
    assert starts == [{"job_id": 0, "first_start_s": 0.0}, {"job_id": 1, "first_start_s": 900.0}]


def test_a_result_mid_run_is_that_of_a_run_given_the_clock_as_its_time_limit():
    """Its last round's progress and completions counted, as docs/simulation-api.md says; the
    simulation itself goes on as if nobody had asked."""
    options = dict(cluster="4x4:V100", overrides=["arrivals.jobs=60"], seed=1)
    timeless = lambda summary: {k: v for k, v in summary.items() if not k.endswith("_ms")}  # noqa: E731
    whole = Simulation(REPO / "graphs/fifo.sched", **options)
    final = timeless(whole.run() and whole.summary())
    for t in (60300.0, 86400.0, 96000.0):
        sim = Simulation(REPO / "graphs/fifo.sched", **options).run_until(t)
        now = sim.result()
        ended = Simulation(REPO / "graphs/fifo.sched", until=t, **options)
        then = ended.run()
        assert (now.end_s, now.rounds, timeless(sim.summary())) == (then.end_s, then.rounds, timeless(ended.summary()))
        assert 0 < sim.summary()["jobs_finished"] < 60
        sim.run()
        assert timeless(sim.summary()) == final
