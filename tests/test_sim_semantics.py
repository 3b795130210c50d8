"""The simulator's round semantics, pinned with hand-computed cases."""

import pytest

from tests.conftest import jobs_of

FIFO = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


# LAS on one GPU with checkpoint and restore costs: a 1000 s job runs first; a second arrives at
# 100 and preempts it at 300.
LAS_WITH_COSTS = """
round = 300s;
checkpoint = 20s;
restore = 30s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
"""
PREEMPTING_PAIR = [
    {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
    {"job_id": 1, "arrival_s": 100.0, "gpus": 1, "duration_s": 200.0},
]


def test_issue_example_fifo_one_gpu(run_graph):
    # One 1-GPU node, 300 s rounds; A (1000 s) at 0, B (500 s) at 100.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
        {"job_id": 1, "arrival_s": 100.0, "gpus": 1, "duration_s": 500.0},
    ]
    result = run_graph(FIFO, jobs, cluster="1x1:V100")
    a, b = jobs_of(result)[0], jobs_of(result)[1]
    assert a["first_start_s"] == 0.0 and a["finish_s"] == 1000.0
    # A finishes inside the round [900, 1200); its GPU idles until 1200, when B starts.
    assert b["first_start_s"] == 1200.0 and b["finish_s"] == 1700.0
    assert b["queue_s"] == pytest.approx(1100.0)
    summary = result.reports["m"]["summary"]
    assert summary["avg_jct_s"] == pytest.approx((1000 + 1600) / 2)
    assert summary["avg_responsiveness_s"] == pytest.approx((0 + 1100) / 2)
    assert summary["makespan_s"] == 1700.0
    # 1500 GPU-seconds of work over [0, 1800): the run ends at the boundary that saw B finish.
    assert summary["utilization"] == pytest.approx(1500 / 1800)


def test_arrivals_become_visible_at_the_next_boundary(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 1, "arrival_s": 300.0, "gpus": 1, "duration_s": 100.0},  # exactly on a boundary
        {"job_id": 2, "arrival_s": 301.0, "gpus": 1, "duration_s": 100.0},
    ]
    got = jobs_of(run_graph(FIFO, jobs, cluster="2x1:V100"))
    assert got[0]["first_start_s"] == 0.0 and got[0]["finish_s"] == 100.0
    assert got[1]["first_start_s"] == 300.0 and got[1]["finish_s"] == 400.0
    assert got[2]["first_start_s"] == 600.0 and got[2]["finish_s"] == 700.0


def test_checkpoint_and_restore_costs_and_free_lease_renewal(run_graph):
    # LAS on one GPU: a 1000 s job runs first; a second arrives at 100 and preempts it at 300.
    got = jobs_of(run_graph(LAS_WITH_COSTS, PREEMPTING_PAIR, cluster="1x1:V100"))
    # Round [0,300): job 0 launches at 0 and restores 30 s, so it has done 270 s of work.
    # At 300, job 1 has less service (0 < 300): job 0 is suspended (its checkpoint keeps the
    # GPU busy until 320), job 1 starts at 320, restores until 350, and finishes at 550.
    assert got[1]["first_start_s"] == 300.0
    assert got[1]["finish_s"] == pytest.approx(550.0)
    # At 600, job 0 (service 300) is alone: relaunch, restore 30 s, 730 s of work left: 1360.
    assert got[0]["finish_s"] == pytest.approx(600 + 30 + 730)
    assert got[0]["preemptions"] == 1 and got[0]["launches"] == 2
    # A job that keeps its GPUs pays nothing: a lone 1000 s job with restore=30s runs 30 + 1000.
    alone = jobs_of(
        run_graph(LAS_WITH_COSTS, [{"job_id": 5, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0}], cluster="1x1:V100")
    )
    assert alone[5]["finish_s"] == pytest.approx(1030.0)


@pytest.mark.slow
def test_same_inputs_same_outputs(run_graph, tmp_path):
    # 60 jobs already make nearly two thousand preemptions: enough for any order dependence to show.
    graph = """
    round = 5min;
    src :: PoissonSource(rate=12/h, jobs=60, seed=7, models=blox);
    src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
    """
    first = run_graph(graph, cluster="4x4:V100").reports["m"]["jobs"]
    second = run_graph(graph, cluster="4x4:V100").reports["m"]["jobs"]
    assert first.equals(second)
    third = run_graph(graph.replace("seed=7", "seed=8"), cluster="4x4:V100").reports["m"]["jobs"]
    assert not first.equals(third)


def test_progress_uses_profiled_throughput_per_gpu_type(run_graph):
    # ResNet-50 bs 64: 4.39 it/s on V100, 0.62 on K80 (Gavel's table). 4390 iterations take
    # 1000 s on a V100 and about 7080 s on a K80.
    graph = """
    round = 100s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Fifo(backfill=true) -> FirstFree -> Launch -> m :: JobMetrics;
    """
    from roundhouse.traces.profiles import ProfileTable

    profile = ProfileTable.load()
    v100 = profile.rate("ResNet-50", 64, "V100", 1)
    k80 = profile.rate("ResNet-50", 64, "K80", 1)
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "ResNet-50", "batch_size": 64, "iterations": 10 * v100 * 100},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "model": "ResNet-50", "batch_size": 64, "iterations": 10 * v100 * 100},
    ]
    got = jobs_of(run_graph(graph, jobs, cluster="1x1:V100,1x1:K80"))
    assert got[0]["finish_s"] == pytest.approx(1000.0)  # the first takes the faster type
    assert got[1]["finish_s"] == pytest.approx(1000.0 * v100 / k80)


def test_model_job_with_duration_runs_its_duration_on_the_reference_type(run_graph):
    graph = FIFO.replace("FirstFree", "Consolidated")
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 4, "model": "ResNet-18", "batch_size": 32, "duration_s": 3600.0}]
    got = jobs_of(run_graph(graph, jobs, cluster="1x4:V100"))
    assert got[0]["finish_s"] == pytest.approx(3600.0)
    slower = jobs_of(run_graph(graph, jobs, cluster="1x4:P100"))
    from roundhouse.traces.profiles import ProfileTable

    p = ProfileTable.load()
    ratio = p.rate("ResNet-18", 32, "V100", 4) / p.rate("ResNet-18", 32, "P100", 4)
    assert slower[0]["finish_s"] == pytest.approx(3600.0 * ratio)


def test_spread_placement_runs_at_the_spread_throughput(run_graph):
    # A 2-GPU ResNet-18 job on two 1-GPU nodes runs at Gavel's unconsolidated throughput.
    from roundhouse.traces.profiles import ProfileTable

    p = ProfileTable.load()
    together, apart = p.rate("ResNet-18", 16, "V100", 2, True), p.rate("ResNet-18", 16, "V100", 2, False)
    assert apart < together
    iterations = together * 1000
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 2, "model": "ResNet-18", "batch_size": 16, "iterations": iterations}]
    graph = FIFO.replace("round = 300s;", "round = 100000s;")
    got = jobs_of(run_graph(graph, jobs, cluster="2x1:V100"))
    assert got[0]["finish_s"] == pytest.approx(iterations / apart)
    got = jobs_of(run_graph(graph, jobs, cluster="1x2:V100"))
    assert got[0]["finish_s"] == pytest.approx(1000.0)


def test_all_running_jobs_progress_together(run_graph):
    # 40 jobs of different lengths on 40 GPUs: each finishes exactly at its duration.
    jobs = [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 137.0 * (i + 1)} for i in range(40)]
    got = jobs_of(run_graph(FIFO, jobs, cluster="10x4:V100"))
    assert [got[i]["finish_s"] for i in range(40)] == [137.0 * (i + 1) for i in range(40)]


def test_until_stops_the_run(run_graph):
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1e6}]
    result = run_graph(FIFO, jobs, cluster="1x1:V100", until=3000.0)
    assert result.end_s == 3000.0
    assert "time limit" in result.stop_reason
    row = jobs_of(result)[0]
    assert row["finish_s"] is None and row["status"] == "running"


def test_a_limit_inside_a_round_ends_the_run_at_the_next_boundary_and_says_so(run_graph):
    # 300 s rounds; a limit at 400 s ends the run at 600 s, and the job finishing at 500 s is in
    # the results as finished.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 500.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 1e6},
    ]
    result = run_graph(FIFO, jobs, cluster="1x2:V100", until=400.0)
    assert result.end_s == 600.0
    assert result.stop_reason == "reached the time limit (400s; the run ends at the round boundary 10min)"
    assert jobs_of(result)[0]["finish_s"] == 500.0


def test_tracked_window_stops_when_tracked_jobs_finish(run_graph):
    graph = """
    round = 300s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics(track=1..3);
    """
    jobs = [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0 * (i + 1)} for i in range(5)]
    result = run_graph(graph, jobs, cluster="5x1:V100")
    assert sorted(jobs_of(result)) == [1, 2]
    assert result.end_s == 300.0  # jobs 1 and 2 finish at 200 and 300; seen at the 300 boundary
    assert "tracked" in result.stop_reason


def test_job_larger_than_the_cluster_is_a_clear_error(run_graph):
    from roundhouse.errors import RoundhouseError

    with pytest.raises(RoundhouseError, match="asks for 8 GPUs but the cluster has 4"):
        run_graph(FIFO, [{"job_id": 3, "arrival_s": 0.0, "gpus": 8, "duration_s": 10.0}], cluster="1x4:V100")
    # A profiled model too: the cluster's size is the cause, not the profile's entries.
    profiled = {"job_id": 3, "arrival_s": 0.0, "gpus": 8, "duration_s": 10.0, "model": "ResNet-18", "batch_size": 128}
    with pytest.raises(RoundhouseError, match="asks for 8 GPUs but the cluster has 4"):
        run_graph(FIFO, [profiled], cluster="1x4:V100")


def test_job_larger_than_every_gpu_type_is_a_clear_error(run_graph):
    # Four GPUs in all, but two of each type: a placer puts a job on one type, so a 4-GPU job
    # would wait forever (and, in a FIFO queue, the 1-GPU job behind it too).
    from roundhouse.errors import RoundhouseError

    jobs = [
        {"job_id": 7, "arrival_s": 0.0, "gpus": 4, "duration_s": 100.0},
        {"job_id": 8, "arrival_s": 0.0, "gpus": 1, "duration_s": 50.0},
    ]
    message = "job 7 asks for 4 GPUs but the largest GPU type of the cluster, V100, has 2 (a job runs on GPUs of one type)"
    with pytest.raises(RoundhouseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_graph(FIFO, jobs, cluster="1x2:V100,1x2:K80")
    # The largest type is the measure, not the first: three K80s take a 3-GPU job.
    jobs[0]["gpus"] = 3
    got = jobs_of(run_graph(FIFO, jobs, cluster="1x2:V100,1x3:K80"))
    assert got[7]["finish_s"] == pytest.approx(100.0) and got[8]["finish_s"] == pytest.approx(50.0)
    with pytest.raises(RoundhouseError, match="asks for 4 GPUs but the largest GPU type of the cluster, K80, has 3"):
        run_graph(FIFO, [dict(jobs[0], gpus=4)], cluster="1x2:V100,1x3:K80")


def test_stall_names_the_largest_gpu_type_on_a_mixed_cluster(run_graph):
    # With an elastic profile the trace check lets such a job through (Pollux and Ones choose a
    # job's GPUs over the whole cluster); a placer cannot place it, and the stall says why.
    from roundhouse.runtime.engine import StalledError

    graph = 'elastic_profile = "pollux";\n' + FIFO.replace("300s", "10s")
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 100.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 50.0},
    ]
    with pytest.raises(StalledError) as stalled:
        run_graph(graph, jobs, cluster="1x2:V100,1x2:K80")
    assert "the largest waiting job (0) wants 4 GPUs of one type, and the largest type, V100, has 2." in str(stalled.value)


def test_idle_gaps_are_skipped_without_changing_results(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 1, "arrival_s": 3_000_000.0, "gpus": 1, "duration_s": 100.0},
    ]
    result = run_graph(FIFO, jobs, cluster="1x1:V100")
    got = jobs_of(result)
    assert got[1]["first_start_s"] == 3_000_000.0 and got[1]["finish_s"] == 3_000_100.0
    assert result.rounds < 10  # the 10,000 empty rounds in between were jumped over


def test_preemption_and_service_accounting_under_las(run_graph):
    graph = """
    round = 100s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 300.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0},
    ]
    # 2 GPUs; ties go to the job admitted first (job 0).
    # t=0:   both 0 GPU-s: job 0 (2 GPUs) runs; job 1 does not fit.
    # t=100: job 0 has 200, job 1 0: job 1 ranks first, takes a GPU, job 0 no longer fits and
    #        is preempted (1st time). One GPU idles (job 0 needs two).
    # t=200: job 1 has 100 < 200: it keeps running.
    # t=300: both 200: the tie goes to job 0, which preempts job 1.
    # t=400: job 0 has 400, job 1 200: job 1 back (job 0 preempted, 2nd time); 100 s left.
    # t=500: job 1 finished at 500; job 0 runs its last 100 s: done at 600.
    result = run_graph(graph, jobs, cluster="1x2:V100")
    got = jobs_of(result)
    assert got[1]["finish_s"] == pytest.approx(500.0)
    assert got[0]["finish_s"] == pytest.approx(600.0)
    assert got[0]["preemptions"] == 2 and got[1]["preemptions"] == 1
    assert got[0]["service_gpu_s"] == pytest.approx(2 * 300.0)
    assert got[1]["service_gpu_s"] == pytest.approx(300.0)
    assert result.reports["m"]["summary"]["preemptions"] == 3


def test_finishes_after_long_quiet_stretches_are_exact(run_graph):
    # Hundreds of rounds with the same jobs running and nothing finishing (the simulator skips
    # its per-job finish test in such rounds); each job still finishes at its exact time,
    # including one just past a boundary and one just before it.
    durations = [100_000.5, 250_000.25, 30_000.001, 29_999.999]
    jobs = [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": d} for i, d in enumerate(durations)]
    got = jobs_of(run_graph(FIFO, jobs, cluster="1x4:V100"))
    assert [got[i]["finish_s"] for i in range(4)] == pytest.approx(durations, rel=1e-12, abs=1e-9)


def test_a_job_finishing_inside_a_round_books_only_the_part_it_ran(run_graph):
    # Two jobs from 0 on one 4-GPU node: A (2 GPUs, 450 s) finishes 150 s into its second round,
    # B (1 GPU, 1000 s) inside its fourth; A's last round counts 150 s, not the whole round.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 450.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
    ]
    result = run_graph(FIFO, jobs, cluster="1x4:V100")
    got = jobs_of(result)
    assert got[0]["finish_s"] == 450.0 and got[0]["run_s"] == 450.0 and got[0]["service_gpu_s"] == 900.0
    assert got[1]["finish_s"] == 1000.0 and got[1]["run_s"] == 1000.0 and got[1]["service_gpu_s"] == 1000.0
    table = result.world.jobs
    assert table.column("done")[:2].tolist() == [450.0, 1000.0]
    assert table.column("compute_s")[:2].tolist() == [450.0, 1000.0]  # (work over the compute rate, 1 here)


def test_checkpoint_wait_and_restore_count_as_held_time_from_the_launching_boundary(run_graph):
    """docs/semantics.md: a launched job's lease and its held time start at the round boundary;
    waiting for the GPUs' previous holder to checkpoint, like its own restore, counts as held
    (attained service, run time) but makes no progress. The suspended job's checkpoint is not
    its own held time."""
    result = run_graph(LAS_WITH_COSTS, PREEMPTING_PAIR, cluster="1x1:V100")
    got = jobs_of(result)
    # Job 1 is launched at 300 onto the GPU job 0 checkpoints on until 320; it restores until 350
    # and works 200 s. It holds the GPU from 300: 20 s of waiting + 30 s of restore + 200 s.
    one = got[1]
    assert one["first_start_s"] == 300.0 and one["finish_s"] == pytest.approx(550.0)
    assert one["run_s"] == pytest.approx(250.0) and one["service_gpu_s"] == pytest.approx(250.0)
    assert one["queue_s"] == pytest.approx(450.0 - 250.0)  # the wait for the checkpoint is not queueing
    # Job 0 holds [0, 300) (restore included) and, relaunched at 600 on a free GPU, [600, 1360):
    # its checkpoint after 300 is not its own held time.
    zero = got[0]
    assert zero["finish_s"] == pytest.approx(1360.0)
    assert zero["run_s"] == pytest.approx(300.0 + 760.0) and zero["service_gpu_s"] == pytest.approx(1060.0)
    assert zero["queue_s"] == pytest.approx(300.0)
    # Utilisation counts the checkpoint's 20 s once, as job 1's held time: 1310 GPU-s over [0, 1500).
    assert result.reports["m"]["summary"]["utilization"] == pytest.approx(1310.0 / 1500.0)
