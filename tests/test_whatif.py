"""`roundhouse whatif`'s bad inputs: clear messages, exit status 2 (the live runs are in
test_whatif_live.py)."""

from __future__ import annotations

import pytest

from roundhouse.runtime.journal import Journal
from tests.conftest import fails


def test_bad_journals_and_values_are_refused_clearly(tmp_path, capsys):
    assert "missing.sqlite: no such file; give a simulation's snapshot (Simulation.save) or a live scheduler's journal" in fails(
        capsys, "whatif", tmp_path / "missing.sqlite"
    )
    text = tmp_path / "graph.sched"
    text.write_text("round = 5min;\n")
    assert f"{text}: not a live scheduler's journal" in fails(capsys, "whatif", text)
    empty = tmp_path / "empty.sqlite"
    Journal(empty).close()
    assert "the run has not begun: its scheduler is waiting for its agents" in fails(capsys, "whatif", empty)
    begun = tmp_path / "begun.sqlite"
    journal = Journal(begun)
    journal.begin({"graph": str(text), "graph_digest": "x", "cluster": "1x1:V100", "round_s": 60.0})
    journal.close()
    assert "the run has not journaled a round yet" in fails(capsys, "whatif", begun)
    assert "--horizon: 'soon' is not a duration" in fails(capsys, "whatif", begun, "--horizon", "soon")
    assert "--horizon 0s: must be more than 0" in fails(capsys, "whatif", begun, "--horizon", "0s")
    assert "--horizon -1h: must be more than 0" in fails(capsys, "whatif", begun, "--horizon", "-1h")


@pytest.mark.slow
def test_whatif_from_a_simulation_snapshot_matches_running_on(tmp_path, capsys):
    """From a snapshot: the run's own graph projected forward gives what running it on gives,
    and another graph (here Srtf for Las) is run from the same world."""
    import json

    from roundhouse import Simulation
    from roundhouse.tools.cli import main

    graph = tmp_path / "las.sched"
    graph.write_text(
        'round = 15min;\ncluster = "4x2:V100";\n'
        "src :: PoissonSource(rate=6/h, jobs=40, seed=2);\n"
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    (tmp_path / "srtf.sched").write_text(graph.read_text().replace("Las", "Srtf"))
    sim = Simulation(graph).run_until(5 * 3600)
    path = sim.save(tmp_path / "five-hours.snap")
    at, unfinished = sim.now, sim.world_now().unfinished
    assert unfinished < sim.world.unfinished  # a job finished in the last round: the world learns it next round
    sim.run()
    frame = sim.jobs()
    assert main(["whatif", str(path), "--graph", str(tmp_path / "srtf.sched"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["from"]["now_s"] == at and got["from"]["unfinished"] == unfinished
    same, other = got["projections"]
    finish, arrival = frame["finish_s"].to_numpy(), frame["arrival_s"].to_numpy()
    affected = finish > at + 1e-6  # unfinished at the snapshot's clock, or arriving later
    assert same["metrics"]["jobs"] == int(affected.sum()) == other["metrics"]["jobs"]
    assert same["metrics"]["avg_jct_s"] == pytest.approx((finish - arrival)[affected].mean())
    assert same["metrics"]["makespan_s"] == pytest.approx(finish.max() - at)
    assert other["stop"] == "every job finished" and other["metrics"]["jobs_finished"] == other["metrics"]["jobs"]
    assert other["metrics"] != same["metrics"]
    # --set without --graph: the snapshot's own graph with another argument.
    assert main(["whatif", str(path), "--set", "Las@3.service=wall_seconds", "--json"]) == 0
    assert [p["graph"] for p in json.loads(capsys.readouterr().out)["projections"]] == ["las.sched"] * 2


def test_a_corrupt_or_newer_snapshot_is_refused_by_whatif(tmp_path, capsys):
    import json

    from roundhouse import Simulation

    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\nPoissonSource(rate=4/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
    )
    path = Simulation(graph).run_until(3600).save(tmp_path / "s.snap")
    head, _, payload = path.read_bytes().partition(b"\n")
    path.write_bytes(head + b"\n" + payload[:-1] + bytes([payload[-1] ^ 1]))
    assert f"error: snapshot {path}: corrupt" in fails(capsys, "whatif", path)
    header = json.loads(head)
    header["version"] = 99
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    assert "format version 99 is newer than this Roundhouse reads" in fails(capsys, "whatif", path)


def test_a_snapshot_loads_from_any_folder_keeps_its_trace_and_refuses_a_journals_options(tmp_path, capsys, monkeypatch):
    import json

    import polars as pl

    from roundhouse import Simulation
    from roundhouse.tools.cli import main

    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")  # (the graph named by a relative path)
    (tmp_path / "run" / "g.sched").write_text(
        'round = 5min;\ncluster = "1x2:V100";\nsrc :: TraceSource(path="none.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    rows = [{"job_id": i, "arrival_s": 600.0 * i, "gpus": 1, "duration_s": 1800.0 + 300 * i} for i in range(8)]
    pl.DataFrame(rows).write_csv(tmp_path / "run" / "trace.csv")
    path = Simulation("g.sched", trace="trace.csv").run_until(3600).save(tmp_path / "s.snap")
    monkeypatch.chdir(tmp_path)
    # The same graph with the same arguments, its trace kept: the two sides agree.
    assert main(["whatif", str(path), "--set", "Fifo@3.backfill=false", "--json"]) == 0
    same, other = json.loads(capsys.readouterr().out)["projections"]
    assert same["metrics"] == other["metrics"] and same["metrics"]["jobs"] > 0
    for argv, words in (
        (["--cluster", "2x2:V100"], "--cluster: only for a live scheduler's journal"),
        (["--run-set", "src.path=x"], "--run-set: only for a live scheduler's journal"),
        (["--set", 'cluster="1x1:K80"'], "the snapshot's cluster is its own"),
    ):
        assert words in fails(capsys, "whatif", path, *argv)
    # A graph given as text reads its relative paths from the folder it was given in, there too.
    monkeypatch.chdir(tmp_path / "run")
    text = (tmp_path / "run" / "g.sched").read_text().replace("none.csv", "trace.csv")
    path = Simulation(text).run_until(3600).save(tmp_path / "t.snap")
    monkeypatch.chdir(tmp_path)
    loaded = Simulation.load(path)
    loaded.run()
    assert loaded.jobs()["finish_s"].is_not_null().sum() == 8


def test_a_snapshot_save_that_fails_leaves_the_earlier_file(tmp_path, monkeypatch):
    from roundhouse import Simulation
    from roundhouse.runtime import snapshot

    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\nPoissonSource(rate=4/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
    )
    sim = Simulation(graph).run_until(3600)
    path = sim.save(tmp_path / "s.snap")
    before = path.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot.os, "replace", full_disk)
    with pytest.raises(snapshot.SnapshotError, match=r"cannot write it \(No space left on device\)"):
        sim.run_until(7200).save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir() if p.suffix == ".partial"] == []


def test_simulate_ahead_refuses_a_horizon_of_none_and_a_clock_before_the_worlds(tmp_path):
    from roundhouse import Simulation
    from roundhouse.errors import UsageError
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.whatif import simulate_ahead

    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\nPoissonSource(rate=4/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
    )
    sim = Simulation(graph).run_until(3 * 3600)
    world, other = sim.world_now(), compile_file(str(graph))
    with pytest.raises(UsageError, match="horizon_s: expected seconds, a number more than 0, got -1"):
        simulate_ahead(world, other, sim.now, -1)
    with pytest.raises(UsageError, match="now: 60 s is before the world's last recorded start or finish"):
        simulate_ahead(world, other, 60.0, 3600)
    assert simulate_ahead(world, other, sim.now, 3600).stop
