"""The ordering policies' references checked against behaviour: small traces worked by hand, and
arguments that contradict each other or fall out of range refused at the argument."""

import pytest

from roundhouse.errors import RoundhouseError
from tests.conftest import jobs_of

GRAPH = """
round = {round};
skip_rounds = {skip};
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> p :: {policy} -> {placer} -> Launch -> m :: JobMetrics;
"""


def _graph(policy: str, round_: str = "100s", skip: str = "true", placer: str = "FirstFree") -> str:
    return GRAPH.format(policy=policy, round=round_, skip=skip, placer=placer)


def _job(job_id: int, arrival: float, gpus: int, duration: float, **extra) -> dict:
    return {"job_id": job_id, "arrival_s": arrival, "gpus": gpus, "duration_s": duration, **extra}


def _refused(run_graph, policy: str, tmp_path) -> str:
    (tmp_path / "past.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,50\n")
    with pytest.raises(RoundhouseError) as caught:
        run_graph(_graph(policy), [_job(0, 0.0, 1, 10.0)], cluster="1x1:V100")
    text = str(caught.value)
    assert "graph.sched:5:" in text and "Traceback" not in text  # (the file and the line of the element)
    return text


# --- arguments ---


@pytest.mark.parametrize(
    "policy, said",
    [
        # With one queue no job is ever promoted (promotion is from a lower queue to the first).
        ("TiresiasLas(queues=1, thresholds=[], promote_knob=2)", "promote_knob needs two queues or more"),
        ("TiresiasGittins(queues=1, thresholds=[], promote_knob=2)", "promote_knob needs two queues or more"),
        # With one queue every job is in the last one, first-in first-out: no Gittins index is read.
        ('TiresiasGittins(queues=1, thresholds=[], history="past.csv")', "history needs two queues or more"),
    ],
)
def test_an_argument_one_queue_makes_idle_is_refused(run_graph, tmp_path, policy, said):
    assert said in _refused(run_graph, policy, tmp_path)


@pytest.mark.parametrize(
    "policy, said",
    [
        # Said at the argument, as every other bound is, not at the element.
        ("Optimus(samples=2)", "argument 'samples' of Optimus must be at least 3, got 2"),
        ("Optimus(samples=0)", "argument 'samples' of Optimus must be at least 3, got 0"),
        ("TiresiasLas(queues=0, thresholds=[])", "argument 'queues' of TiresiasLas must be at least 1, got 0"),
    ],
)
def test_a_bound_is_said_at_its_argument(run_graph, tmp_path, policy, said):
    assert said in _refused(run_graph, policy, tmp_path)


def test_the_arguments_that_do_fit_one_queue_are_taken(run_graph):
    for policy in ("TiresiasLas(queues=1, thresholds=[])", "TiresiasGittins(queues=1, thresholds=[])", "Optimus(samples=3)"):
        result = run_graph(_graph(policy), [_job(0, 0.0, 1, 150.0)], cluster="1x1:V100")
        assert jobs_of(result, "m")[0]["finish_s"] == 150.0


# --- counters ---


def test_optimus_counts_this_rounds_extra_gpus_and_fits_as_none_once_the_pool_is_empty(run_graph):
    # A 1-GPU ResNet-18 job alone on a 4-GPU node gets extra GPUs (it ends well before its
    # 20,000 s on one GPU); the round after it finishes ranks no job, and gives no GPU.
    job = [_job(0, 0.0, 1, 20000.0, model="ResNet-18", batch_size=32)]
    result = run_graph(_graph("Optimus", "5min", placer="Consolidated"), job, cluster="1x4:V100")
    assert jobs_of(result, "m")[0]["finish_s"] < 10000.0
    assert result.counters["p"]["extra_gpus"] == 0 and result.counters["p"]["fitted"] == 0


# --- orders worked by hand ---

# One 4-GPU node, rounds of 100 s: job 0 (2 GPUs, 300 s) alone at first; at 100 s job 1 (4 GPUs,
# 100 s) and job 2 (1 GPU, 100 s) wait.
THREE = [_job(0, 0.0, 2, 300.0), _job(1, 1.0, 4, 100.0), _job(2, 2.0, 1, 100.0)]


@pytest.mark.parametrize(
    "policy, finish",
    [
        # Strict queue: 2 waits behind 1, which waits for 0.
        ("Fifo", {0: 300.0, 1: 400.0, 2: 500.0}),
        ("Fifo(backfill=true)", {0: 300.0, 1: 400.0, 2: 200.0}),
        ("YarnCS", {0: 300.0, 1: 400.0, 2: 500.0}),
        # At 100 s: 0 has 200 GPU-s, 1 and 2 none (1 first, admitted first): 1 preempts 0.
        ("Las", {0: 400.0, 1: 200.0, 2: 300.0}),
        # At 100 s: remaining 200, 100, 100: 1 first (the tie to the job admitted first).
        ("Srtf", {0: 400.0, 1: 200.0, 2: 300.0}),
        # At 100 s: remaining service 400, 400, 100: 2, then 0 (the tie to the one admitted
        # first), then 1, which waits for 0.
        ("Srsf", {0: 300.0, 1: 400.0, 2: 200.0}),
        # 0 started first, 1 and 2 never ran (by arrival): 2 fills in behind 1.
        ("TiresiasLas", {0: 300.0, 1: 400.0, 2: 200.0}),
        # At 100 s (N was 1 until then, 3 from then): rho of 0 is (100 + 200) / 300 = 1, of 1
        # (99 + 100) / 100, of 2 (98 + 100) / 100. At 200 s (N_avg of 2 is 398 / 198), 2's
        # rho (198 + 100) / 100 beats 0's (200 + 200) / 300.
        ("Themis", {0: 400.0, 1: 200.0, 2: 300.0}),
        # 1 and 2 never ran (Nw_sens 0), 0 ran at full efficiency (1); 1's clock started first.
        ("NetworkSensitive", {0: 400.0, 1: 200.0, 2: 300.0}),
    ],
)
def test_each_order_as_worked_by_hand(run_graph, policy, finish):
    result = run_graph(_graph(policy), THREE, cluster="1x4:V100")
    assert {job: row["finish_s"] for job, row in jobs_of(result, "m").items()} == finish


def test_themis_reports_the_rho_of_the_job_served_worst(run_graph):
    # Job 2 (above) ends at 300 s, 298 s after it arrived; alone it would take 100 s (N_avg
    # about 2 on a 4-GPU node leaves its one GPU whole): rho 2.98, the largest.
    result = run_graph(_graph("Themis"), THREE, cluster="1x4:V100")
    fairness = result.reports["p"]["fairness"]
    assert fairness["jobs"] == 3 and fairness["max_rho"] == pytest.approx(2.98)


def test_tiresias_promotion_as_worked_by_hand(run_graph):
    # One GPU, 50 s rounds, a 100 GPU-s first queue, promote_knob=1. A (400 s) runs from 0 and
    # goes down at 100 s, when B (400 s, arrived at 60 s) starts; B goes down at 200 s, when A
    # (waited 100 s, ran 100 s) goes up; from then on each, in turn, goes down after 100 s and
    # the other, having waited as long as it ran since it last went up, goes up: A ends at
    # 700 s, and B, promoted once more then, at 800 s. Six moves each way, at 200 s to 700 s.
    jobs = [_job(0, 0.0, 1, 400.0), _job(1, 60.0, 1, 400.0)]
    for skip in ("true", "false"):  # (event skipping changes nothing)
        result = run_graph(_graph("TiresiasLas(thresholds=[100s], promote_knob=1)", "50s", skip), jobs, cluster="1x1:V100")
        assert {job: row["finish_s"] for job, row in jobs_of(result, "m").items()} == {0: 700.0, 1: 800.0}
        assert result.counters["p"] == {"promoted": 6, "demoted": 6}
