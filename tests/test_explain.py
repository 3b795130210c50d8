"""Decision explanations: small hand-built runs whose decisions are worked out by hand, and what
`roundhouse explain` says about each job."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.explain import FILE_NAME, Reason, Recorder
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails, write_trace


def job(job_id, arrival_s, gpus, duration_s):
    return {"job_id": job_id, "arrival_s": float(arrival_s), "gpus": gpus, "duration_s": float(duration_s)}


@pytest.fixture
def run_out(tmp_path):
    """run_out(graph_text, jobs, cluster) -> the --out folder of `roundhouse run`."""

    def run(text: str, jobs: list[dict], cluster: str, *extra: str):
        write_trace(tmp_path / "trace.csv", jobs)
        graph = tmp_path / "graph.sched"
        graph.write_text(textwrap.dedent(text))
        out = tmp_path / "out"
        assert main(["run", str(graph), "--cluster", cluster, "--out", str(out), "--quiet", *extra]) == 0
        return out

    return run


def timeline(capsys, out, job_id) -> list[tuple[str, str]]:
    """`roundhouse explain OUT JOB`, as (time, what) per line."""
    capsys.readouterr()
    assert main(["explain", str(out), str(job_id)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"job {job_id}: ")
    got = []
    for line in lines[1:]:
        m = re.match(r"\s+t=(\S+)\s+(.*)$", line)
        assert m, line
        got.append((m.group(1), m.group(2)))
    return got


FIFO_STRICT = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> admit :: AcceptAll -> JobPool -> order :: Fifo -> place :: Consolidated -> Launch -> m :: JobMetrics;
"""


def test_waiting_behind_the_jobs_ranked_ahead_and_blocked_without_backfill(run_out, capsys):
    # One machine of 4 GPUs. Job 0 takes all four at 0 and finishes at 1000 s. Jobs 1 (1 GPU)
    # and 2 (2 GPUs) arrive at 100 and are seen at 300: job 1 at rank 2 waits behind job 0,
    # which holds every GPU; job 2 at rank 3 is blocked by job 1 (FIFO without backfill). Both
    # start at 1200, the first boundary after job 0 finished. Job 3 arrives at 10 h, after the
    # cluster has been idle (rounds skipped): its reasons carry the time they began.
    out = run_out(FIFO_STRICT, [job(0, 0, 4, 1000), job(1, 100, 1, 500), job(2, 100, 2, 300), job(3, 36000, 1, 60)], "1x4:V100")
    assert timeline(capsys, out, 0) == [
        ("0s", "waiting: admitted by AcceptAll 'admit'"),
        ("0s", "running: launched on machine 0 (4 GPUs) (Fifo 'order', placed by Consolidated 'place')"),
        ("16m40s", "finished"),
    ]
    assert timeline(capsys, out, 1) == [
        ("5m", "waiting: admitted by AcceptAll 'admit'"),
        (
            "5m",
            "waiting: rank 2; 1 job ranked ahead hold GPUs, 0 left free, not enough for it (Fifo 'order', placed by Consolidated 'place')",
        ),
        ("20m", "running: launched on machine 0 (1 GPU) (Fifo 'order', placed by Consolidated 'place')"),
        ("28m20s", "finished"),
    ]
    blocked = timeline(capsys, out, 2)
    assert blocked[1] == (
        "5m",
        "waiting: rank 3; rank 2 does not fit and no job behind it may start first (no backfill) (Fifo 'order', placed by Consolidated 'place')",
    )
    assert blocked[2][0] == "20m" and blocked[2][1].startswith("running: launched on machine 0 (2 GPUs)")
    assert [t for t, _ in timeline(capsys, out, 3)] == ["10h", "10h", "10h01m"]


LAS = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> admit :: AcceptAll -> JobPool -> order :: Las -> place :: Consolidated -> Launch -> m :: JobMetrics;
"""


def test_preempted_for_the_jobs_ranked_ahead(run_out, capsys):
    # Two machines of two GPUs. Job 0 (4 GPUs) runs alone from 0, spread over both machines.
    # At 300 it has 1200 GPU-seconds; jobs 1 and 2 have none, rank ahead of it (least attained
    # service), and it is suspended for them at rank 3.
    out = run_out(LAS, [job(0, 0, 4, 1000), job(1, 100, 1, 500), job(2, 100, 2, 3000)], "2x2:V100")
    got = timeline(capsys, out, 0)
    assert got[1] == (
        "0s",
        "running: launched on 2 machines from machine 0 (4 GPUs) (Las 'order', placed by Consolidated 'place')",
    )
    assert got[2] == (
        "5m",
        "suspended: preempted at rank 3 for the 2 jobs ranked ahead; waits behind them (Las 'order', placed by Consolidated 'place')",
    )
    # It runs again only once it is ahead; every suspension is followed by a launch, then the end.
    states = [what.split(":")[0] for _, what in got[1:]]
    assert states[-1] == "finished" and all(a != b for a, b in zip(states, states[1:]))


def test_no_room_on_one_machine(run_out, capsys):
    # Two machines of two GPUs. Jobs 0 and 1 (1 GPU each) go best fit onto machine 0, job 2
    # onto machine 1. Job 1 ends at 300; job 3 (2 GPUs, at 100) then finds 2 GPUs free, one on
    # each machine, and Consolidated wants one machine: it waits for room.
    fifo = FIFO_STRICT.replace("Fifo", "Fifo(backfill=true)")
    out = run_out(fifo, [job(0, 0, 1, 3000), job(1, 0, 1, 300), job(2, 0, 1, 3000), job(3, 100, 2, 100)], "2x2:V100")
    got = timeline(capsys, out, 3)
    assert got[1] == (
        "5m",
        "waiting: rank 3; 2 GPU(s) left free, enough for it, but not where its placer may put it (Fifo 'order', placed by Consolidated 'place')",
    )
    assert got[2][0] == "50m" and got[2][1].startswith("running: launched on machine")


def test_held_by_the_admission_gate(run_out, capsys):
    # Admission at 0.5x of a 2-GPU machine: job 0 asks for both GPUs, past the limit of 1, so
    # job 1 is held (first in the queue, 2 GPUs asked for, a limit of 1) until job 0 finishes at 600.
    text = FIFO_STRICT.replace("AcceptAll", "AcceptThreshold(factor=0.5x)")
    out = run_out(text, [job(0, 0, 2, 600), job(1, 0, 1, 60)], "1x2:V100")
    assert timeline(capsys, out, 1)[:3] == [
        ("0s", "held: admission queue place 1; admitted jobs ask for 2 GPUs of a limit of 1 (AcceptThreshold 'admit')"),
        ("10m", "waiting: admitted by AcceptThreshold 'admit'"),
        ("10m", "running: launched on machine 0 (1 GPU) (Fifo 'order', placed by Consolidated 'place')"),
    ]


def test_dally_delay_timer(run_out, capsys):
    # Two machines of two GPUs in one rack. Jobs 0 and 1 take machine 0 (first fit), job 2
    # machine 1; job 1 ends at 300. Job 3 (2 GPUs, at 100) is then offered one GPU on each
    # machine: starved 200 s, under its 1 h machine timer, it declines. At 3900 it has starved
    # 3800 s and takes the rack.
    text = """
    round = 300s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> order :: Fifo(backfill=true) -> place :: DelayPlacer(machine_wait=1h, rack_wait=2h) -> Launch -> JobMetrics;
    """
    out = run_out(text, [job(0, 0, 1, 20000), job(1, 0, 1, 300), job(2, 0, 1, 20000), job(3, 100, 2, 600)], "2x2:V100")
    got = timeline(capsys, out, 3)
    assert got[1] == (
        "5m",
        "waiting: declined GPUs to wait for one machine; starved 3m20s, waits until its timer of 1h (DelayPlacer 'place')",
    )
    assert got[2] == (
        "1h05m",
        "running: launched on 2 machines from machine 0 (2 GPUs) (Fifo 'order', placed by DelayPlacer 'place')",
    )


def test_tiresias_demotion_and_gavel_lease_end(tmp_path):
    # Tiresias: a 1-GPU job reaches the 600 GPU-second threshold at 600 s and is noted as
    # demoted to queue 1 then.
    tiresias = """
    round = 300s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> order :: TiresiasLas(queues=2, thresholds=[600s]) -> Consolidated -> Launch -> JobMetrics;
    """
    write_trace(tmp_path / "trace.csv", [job(0, 0, 1, 2000)])
    (tmp_path / "g.sched").write_text(textwrap.dedent(tiresias))
    result = simulate(compile_file(tmp_path / "g.sched"), "1x1:V100", explain=True)
    frame = result.world.explain.frame(result.world)
    demoted = frame.filter(pl.col("reason") == "demoted").to_dicts()
    assert [(d["t_s"], d["a"], d["b"], d["element"]) for d in demoted] == [(600.0, 1, 600, "order")]

    # Gavel: three equal 1-GPU jobs share two GPUs round by round. In the first round one is
    # not chosen; from then on, each round one job's round (lease) ends and it waits.
    from tests.test_gavel_mechanism import _graph

    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,1.0\n"
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e9) for i in range(3)]
    result = simulate(_graph(tmp_path, jobs, "2x1:V100", profile=profile), until=5 * 360.0, explain=True)
    frame = result.world.explain.frame(result.world).filter(pl.col("reason") != "admitted")
    first = frame.filter(pl.col("t_s") == 0.0)
    assert sorted(first["reason"].cast(pl.String).to_list()) == ["launched", "launched", "not_chosen"]
    assert first.filter(pl.col("reason") == "not_chosen")["element"].to_list() == ["mech"]
    later = frame.filter(pl.col("t_s") > 0.0)
    for t in (360.0, 720.0, 1080.0):
        now = later.filter(pl.col("t_s") == t)
        # One lease ends (given by the mechanism: no plain "suspended" beside it), one job starts.
        assert sorted(now["reason"].cast(pl.String).to_list()) == ["launched", "lease_end"]
        assert now.filter(pl.col("reason") == "lease_end")["element"].to_list() == ["mech"]


def test_gavel_jobs_wait_for_the_next_allocation_or_for_a_share(tmp_path):
    # One GPU; Gavel's FIFO, not work-conserving: job 0 gets the whole share, the others none.
    # Jobs 0 and 1 arrive at 0 (solved at once): job 1 has no share. Job 2 arrives at 300 and is
    # solved at 360 (a solve at time zero starts no interval): no share either. Job 3 arrives at
    # 500, within the interval (32 min) of that solve: it waits for the next, made at 42m
    # (the first round from 6m + 32m), which gives it no share.
    from tests.test_gavel_mechanism import _graph

    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,1.0\n"
    jobs = [dict(job_id=i, arrival_s=t, gpus=1, model="ja", iterations=1e9) for i, t in enumerate([0.0, 0.0, 300.0, 500.0])]
    graph = _graph(tmp_path, jobs, "1x1:V100", solver="FifoHet", rounds="GavelRounds(work_conserving=false)", profile=profile)
    result = simulate(graph, until=3600.0, explain=True)
    frame = result.world.explain.frame(result.world).filter(pl.col("reason") != "admitted")
    got = [
        (d["job_id"], d["t_s"], d["reason"], d["element"], d["a"], d["b"])
        for d in frame.with_columns(pl.col("reason").cast(pl.String)).sort("job_id", maintain_order=True).to_dicts()
    ]
    assert got == [
        (0, 0.0, "launched", "place", 0, 1),
        (1, 0.0, "no_share", "mech", 0, 0),
        (2, 360.0, "no_share", "mech", 360, 0),
        (3, 720.0, "no_allocation", "solve", 360, 360 + 1920),
        (3, 2520.0, "no_share", "mech", 2520, 0),
    ]


@pytest.mark.parametrize("name", ["gavel-fifo", "gavel-las"])
def test_every_gavel_job_that_waits_has_a_reason_from_its_admission(name):
    # gavel-fifo is not work-conserving (jobs without a share wait), and under gavel-las most jobs
    # arrive within the solver's interval of its last solve (they wait for the next).
    result = simulate(compile_file(REPO / "graphs" / f"{name}.sched"), until=3 * 86400.0, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    first = frame.group_by("job_id").agg(
        pl.col("t_s").filter(pl.col("reason") == "admitted").first().alias("admitted"),
        pl.col("t_s").filter(pl.col("reason") == "launched").first().alias("launched"),
        pl.col("t_s").filter((pl.col("state") == "waiting") & (pl.col("reason") != "admitted")).first().alias("why"),
    )
    waited = first.filter(pl.col("launched").is_null() | (pl.col("launched") > pl.col("admitted")))
    assert waited.height > 20
    assert waited["why"].null_count() == 0  # (no reason at all)
    assert waited.filter(pl.col("why") != pl.col("admitted")).height == 0  # (a reason only later)


def test_the_record_is_off_with_no_explain_and_bad_requests_are_located(run_out, capsys, tmp_path):
    out = run_out(FIFO_STRICT, [job(0, 0, 1, 100)], "1x1:V100")
    assert (out / FILE_NAME).is_file()
    text = fails(capsys, "explain", out, "7")
    assert "no job '7' in the record" in text and "ids such as 0" in text
    # A run with --no-explain into the same folder leaves no stale record behind.
    out = run_out(FIFO_STRICT, [job(0, 0, 1, 100)], "1x1:V100", "--no-explain")
    assert not (out / FILE_NAME).exists()
    text = fails(capsys, "explain", out, "0")
    assert f"{out}: a run's folder with no {FILE_NAME}" in text and "--no-explain" in text
    assert "no such folder" in fails(capsys, "explain", tmp_path / "nowhere", "0")
    (tmp_path / "sweep" / "results").mkdir(parents=True)
    assert "a sweep's folder: sweeps keep no record" in fails(capsys, "explain", tmp_path / "sweep", "0")
    (out / FILE_NAME).write_text("not parquet")
    assert f"{out / FILE_NAME}: cannot be read as Parquet" in fails(capsys, "explain", out, "0")
    pl.DataFrame({"t_s": [0.0]}).write_parquet(out / FILE_NAME)
    assert "no column 'job_id'" in fails(capsys, "explain", out, "0")


def test_only_changes_are_recorded_and_a_copy_goes_on_alone():
    record = Recorder(["place"], ["Consolidated"], ["order"])
    record.reserve(4)
    rows = np.array([0, 1, 2])
    record.note(0, Reason.RANKED_BEHIND, rows, a=np.array([1, 2, 3]), t=300.0)
    record.note(0, Reason.RANKED_BEHIND, rows, a=np.array([4, 5, 6]), t=600.0)  # the same reason: nothing new
    assert record.records == 3
    fork = record.copy()
    record.note(0, Reason.NO_ROOM, rows[1:], a=lambda sel: np.array([7, 8])[sel], t=900.0)
    assert record.records == 5 and fork.records == 3
    fork.note(0, Reason.RANKED_BEHIND, rows, t=900.0)  # unchanged in the copy
    assert fork.records == 3
    cols = record.arrays()
    assert cols["t"].tolist() == [300.0, 300.0, 300.0, 900.0, 900.0]
    assert cols["a"].tolist() == [1, 2, 3, 7, 8] and cols["code"][-1] == Reason.NO_ROOM


def test_records_joined_into_blocks_read_and_write_as_one_table(tmp_path, monkeypatch):
    # A long run's records are joined into blocks of columns as they come, and written piece
    # by piece: the table and the file are the same as with every record kept as it came.
    import roundhouse.runtime.explain as explain
    import roundhouse.runtime.explain_file as explain_file

    jobs = [job(i, 100 * i, 1 + i % 3, 900 + 250 * (i % 5)) for i in range(40)]
    write_trace(tmp_path / "trace.csv", jobs)
    (tmp_path / "g.sched").write_text(textwrap.dedent(FIFO_STRICT))
    graph = compile_file(tmp_path / "g.sched")

    def record(chunks: int, piece: int = 1 << 18):
        monkeypatch.setattr(explain, "_CHUNKS", chunks)
        monkeypatch.setattr(explain_file, "PIECE", piece)
        result = simulate(graph, "2x2:V100", explain=True)
        record = result.world.explain
        path = tmp_path / f"explain-{chunks}.parquet"
        record.write(path, result.world)
        return record, record.frame(result.world), pl.read_parquet(path)

    whole, whole_frame, whole_file = record(10**9)
    blocks, blocks_frame, blocks_file = record(3, piece=7)  # written seven records at a time
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "explain-3.parquet").metadata.num_row_groups > whole_frame.height // 7
    assert not whole._blocks and len(blocks._blocks) > 3
    assert blocks._blocks[0]["row"].dtype.itemsize < 8  # small numbers kept in fewer bits
    assert any(name.endswith("/chunk") for block in blocks._blocks for name in block)  # a round's time, once
    assert whole.records == blocks.records == whole_frame.height > 100
    assert blocks_frame.equals(whole_frame) and blocks_file.equals(whole_file)
    assert whole_file.equals(whole_frame) and whole_file.schema == whole_frame.schema
    for name, values in whole.arrays().items():
        assert np.array_equal(blocks.arrays()[name], values) and blocks.arrays()[name].dtype == values.dtype, name
