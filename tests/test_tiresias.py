"""Tiresias' policies: the Fig 7 toy, discretized queues, promotion, the Gittins index, SRSF and
YARN-CS."""

import numpy as np
import pytest

from roundhouse.elements.policies.tiresias import gittins_index
from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.tools.reproductions.tiresias import toy_results
from tests.conftest import jobs_of

GRAPH = """
round = {round};
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> {policy} -> {placer} -> Launch -> m :: JobMetrics;
"""


def graph(policy: str, placer: str = "FirstFree", round: str = "1s") -> str:
    return GRAPH.format(policy=policy, placer=placer, round=round)


def test_fig7_toy_srsf_and_2d_las(tmp_path):
    # Tiresias Fig 7: 2 GPUs; J1 2 GPUs x 2, J2 1 GPU x 8, J3 2 GPUs x 6; one-unit rounds.
    results = toy_results(tmp_path)
    assert results["SRSF"][0] == [2.0, 10.0, 16.0]
    assert results["SRSF"][1] == pytest.approx(28 / 3)  # 9.33
    assert results["2D-LAS (continuous)"][0] == [5.0, 14.0, 16.0]
    assert results["2D-LAS (continuous)"][1] == pytest.approx(35 / 3)  # 11.67
    # Discretized with one queue per GPU-unit of service, first-in first-out by first start
    # inside a queue, it serves the jobs exactly as continuous 2D-LAS does.
    assert results["2D-LAS (one queue per GPU-unit)"][0] == [5.0, 14.0, 16.0]
    # The Gittins index with a quantum of 12 over {4, 8, 12} orders jobs like SRSF (the notes'
    # check of the formula); with a quantum of 4 it waits one more unit for J2.
    assert results["2D-Gittins (K=2, limit 12)"][1] == pytest.approx(28 / 3)
    assert results["2D-Gittins (K=2, limit 4)"][0] == [2.0, 12.0, 16.0]
    assert (tmp_path / "graphs").is_dir()


def test_gittins_index_by_hand():
    samples = np.array([4.0, 8.0, 12.0])
    prefix = np.concatenate([[0.0], np.cumsum(samples)])
    got = gittins_index(samples, prefix, np.array([0.0, 2.0, 5.0, 12.0]), np.array([12.0, 4.0, 4.0, 4.0]))
    # a=0, D=12: all finish within 12; E[min(S, 12)] = 8 -> 1/8.
    # a=2, D=4: P(S <= 6 | S > 2) = 1/3; E[min(S - 2, 4)] = (2 + 4 + 4)/3 -> 0.1.
    # a=5, D=4: S in {8, 12}; P(S <= 9) = 1/2; E[min(S - 5, 4)] = (3 + 4)/2 -> 1/7.
    # a=12: no sample is larger -> 0.
    assert got == pytest.approx([1 / 8, 0.1, 1 / 7, 0.0])


def test_tiresias_las_serves_queues_in_order_and_fifo_by_first_start(run_graph):
    # One 1-GPU node, 100 s rounds, K=2 split at 150 GPU-seconds. A runs first; B arrives and
    # waits in queue 1 behind A (FIFO by first start, not by arrival) until A passes 150 GPU-s
    # and is demoted; then B runs. C, arriving later, still ranks after B in queue 1.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 400.0},
        {"job_id": 1, "arrival_s": 50.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 150.0, "gpus": 1, "duration_s": 100.0},
    ]
    result = run_graph(graph("d :: TiresiasLas(queues=2, thresholds=[150s])", round="100s"), jobs, cluster="1x1:V100")
    got = jobs_of(result)
    # A runs [0, 200): at 100 it has 100 GPU-s (queue 1, started first: keeps running); at 200
    # it has 200 > 150 and drops to queue 2; B (queue 1) runs [200, 300), C [300, 400), A resumes.
    assert got[0]["first_start_s"] == 0.0
    assert got[1]["first_start_s"] == 200.0 and got[1]["finish_s"] == 300.0
    assert got[2]["first_start_s"] == 300.0 and got[2]["finish_s"] == 400.0
    assert got[0]["finish_s"] == 600.0 and got[0]["preemptions"] == 1
    assert result.counters["d"]["demoted"] >= 1


def test_tiresias_las_skips_a_job_that_does_not_fit(run_graph):
    # 2 GPUs; a 1-GPU job runs; a 2-GPU job arrives (queue 1, does not fit since the running
    # job also sits in queue 1 and started first), so a later 1-GPU job fills the free GPU.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
        {"job_id": 1, "arrival_s": 1.0, "gpus": 2, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 2.0, "gpus": 1, "duration_s": 100.0},
    ]
    got = jobs_of(run_graph(graph("TiresiasLas(queues=2, thresholds=[10000s])", round="60s"), jobs, cluster="1x2:V100"))
    assert got[2]["first_start_s"] == 60.0  # backfilled behind the blocked 2-GPU job
    assert got[1]["first_start_s"] > got[2]["first_start_s"]


def test_starvation_promotion_resets_both_clocks(run_graph):
    # One GPU, K=2 at 100 GPU-s. A long job A is demoted; a stream of short jobs keeps queue 1
    # busy. With promote_knob=1, A returns to queue 1 once it has waited as long as it ran.
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0}] + [
        {"job_id": i, "arrival_s": 100.0 * i, "gpus": 1, "duration_s": 90.0} for i in range(1, 30)
    ]
    starved = run_graph(graph("d :: TiresiasLas(queues=2, thresholds=[100s])", round="100s"), jobs, cluster="1x1:V100")
    promoted = run_graph(
        graph("d :: TiresiasLas(queues=2, thresholds=[100s], promote_knob=1)", round="100s"), jobs, cluster="1x1:V100"
    )
    assert starved.counters["d"]["promoted"] == 0
    assert promoted.counters["d"]["promoted"] >= 1
    assert jobs_of(promoted)[0]["finish_s"] < jobs_of(starved)[0]["finish_s"]


@pytest.mark.parametrize(
    "args, message",
    [
        ("queues=3, thresholds=[1h]", "3 queue(s) need 2 threshold(s)"),
        ("queues=3, thresholds=[2h, 1h]", "must increase"),
        ("queues=0, thresholds=[]", "at least 1"),
        ("promote_knob=0", "greater than 0"),
    ],
)
def test_tiresias_las_arguments_are_checked(run_graph, args, message):
    with pytest.raises(RoundhouseError) as err:
        run_graph(graph(f"TiresiasLas({args})"), [{"job_id": 0, "arrival_s": 0, "gpus": 1, "duration_s": 1}], cluster="1x1:V100")
    assert message in str(err.value)


def test_gittins_with_a_history_file(run_graph, tmp_path):
    history = tmp_path / "history.csv"
    history.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,4\n1,0,1,8\n2,0,1,12\n")
    jobs = [
        {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 2.0},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "duration_s": 8.0},
        {"job_id": 3, "arrival_s": 0.0, "gpus": 2, "duration_s": 6.0},
    ]
    got = jobs_of(run_graph(graph('TiresiasGittins(queues=2, thresholds=[12], history="history.csv")'), jobs, cluster="1x2:V100"))
    assert [got[j]["finish_s"] for j in (1, 2, 3)] == [2.0, 10.0, 16.0]
    history.write_text("job_id,arrival_s,gpus,model,iterations\n0,0,1,LM,100\n")
    # (refused when the graph is compiled, at the argument)
    with pytest.raises(SchedError, match="argument 'history' of TiresiasGittins .*needs a duration_s"):
        run_graph(graph('TiresiasGittins(history="history.csv")'), jobs, cluster="1x2:V100")


def test_srsf_weighs_remaining_time_by_gpus(run_graph):
    # A 4-GPU job with 100 s left (400 GPU-s) waits behind a 1-GPU job with 300 s (300 GPU-s).
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 100.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0},
    ]
    got = jobs_of(run_graph(graph("Srsf(backfill=false)", round="100s"), jobs, cluster="1x4:V100"))
    assert got[1]["first_start_s"] == 0.0 and got[0]["first_start_s"] == 300.0
    srtf = jobs_of(run_graph(graph("Srtf(backfill=false)", round="100s"), jobs, cluster="1x4:V100"))
    assert srtf[0]["first_start_s"] == 0.0


def test_yarn_cs_never_preempts_and_blocks_at_the_head(run_graph):
    # 2 nodes x 2 GPUs. A 2-GPU job runs; a 4-GPU job arrives and must wait for the whole
    # cluster; a 1-GPU job behind it waits too (head-of-line blocking), though a GPU is free.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 500.0},
        {"job_id": 1, "arrival_s": 10.0, "gpus": 4, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 20.0, "gpus": 1, "duration_s": 100.0},
    ]
    result = run_graph(graph("YarnCS", placer="Consolidated", round="100s"), jobs, cluster="2x2:V100")
    got = jobs_of(result)
    assert got[1]["first_start_s"] == 500.0 and got[2]["first_start_s"] == 600.0
    assert result.reports["m"]["summary"]["preemptions"] == 0
    # Least attained service, by contrast, preempts the running job for the new 4-GPU one.
    las = jobs_of(run_graph(graph("Las", placer="Consolidated", round="100s"), jobs, cluster="2x2:V100"))
    assert las[1]["first_start_s"] == 100.0 and las[0]["preemptions"] == 1


def test_a_threshold_count_that_misses_the_queues_says_which_queues_it_fits(tmp_path, capsys):
    # `--set order.thresholds=[1h,2h]` on a two-queue graph: the error says that two thresholds
    # go with queues=3, and is said as that option's, not only at the element's line.
    from roundhouse.tools.cli import main
    from tests.conftest import REPO, fails

    err = fails(capsys, "run", REPO / "graphs" / "tiresias.sched", "--until", "0", "--set", "order.thresholds=[1h,2h]")
    assert err.startswith("error: --set order.thresholds=[1h,2h]: TiresiasLas 'order': 2 queue(s) need 1 threshold(s), got 2")
    assert "2 threshold(s) go with queues=3" in err
    err = fails(capsys, "run", REPO / "graphs" / "tiresias.sched", "--until", "0", "--set", "order.queues=3")
    assert err.startswith("error: --set order.queues=3: ") and "1 threshold(s) go with queues=2" in err
    given = ["--set", "order.queues=3", "--set", "order.thresholds=[1h,2h]"]
    assert main(["run", str(REPO / "graphs" / "tiresias.sched"), "--until", "0", *given]) == 0
