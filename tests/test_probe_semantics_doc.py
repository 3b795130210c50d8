"""Claims of docs/semantics.md checked with small hand-computed runs (those no other test pins)."""

import pytest

from tests.conftest import jobs_of

SRTF_LONG_CHECKPOINT = """
round = 300s;
checkpoint = 20s;
restore = 30s;
checkpoint_per_gpu = 100s;
skip_rounds = {skip};
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Srtf -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.mark.parametrize("skip", ["true", "false"])
def test_a_launch_whose_wait_outlasts_its_round_finishes_in_the_round_it_ends(run_graph, skip):
    """A checkpoint longer than the rest of the round: the launched job progresses from the
    next boundary, so its finish is seen at the boundary after it, not a round late."""
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 2000.0},
        {"job_id": 1, "arrival_s": 100.0, "gpus": 4, "duration_s": 200.0},
    ]
    result = run_graph(SRTF_LONG_CHECKPOINT.format(skip=skip), jobs, cluster="1x4:V100")
    got = jobs_of(result)
    # Job 0 restores 30 s and works 270 s. At 300 the shorter job 1 preempts it; job 0's
    # checkpoint (20 + 4 x 100 s) holds the GPUs until 720, past the 600 boundary, so job 1
    # progresses from 600 (no restore) and finishes at 800, seen at 900.
    one = got[1]
    assert one["finish_s"] == pytest.approx(800.0) and one["run_s"] == pytest.approx(500.0)
    assert one["service_gpu_s"] == pytest.approx(4 * 500.0)
    # Job 0 is relaunched at 900: restore 30 s, then its 1730 s left.
    zero = got[0]
    assert zero["finish_s"] == pytest.approx(900.0 + 30.0 + 1730.0)
    assert zero["run_s"] == pytest.approx(300.0 + 30.0 + 1730.0)
    assert result.end_s == 2700.0


@pytest.mark.parametrize("policy", ["Fifo", "Srtf", "Las"])
def test_jobs_arriving_together_are_admitted_in_order_of_id_whatever_the_trace_rows(run_graph, policy):
    """Ties go to the job admitted first; jobs of one arrival time are admitted by id, not by
    their rows' order in the trace."""
    graph = f"""
    round = 300s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = [
        {"job_id": 5, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
    ]
    got = jobs_of(run_graph(graph, jobs, cluster="1x1:V100"))
    assert got[2]["first_start_s"] == 0.0 and got[5]["first_start_s"] == 300.0


def test_the_boundary_a_run_ends_at_is_ticked_and_may_launch_a_job(run_graph):
    """--until 500 ends the run at the 600 boundary; that round is ticked like any other, so a
    job that arrived at 550 is launched at 600 and counts as started, holding nothing yet."""
    graph = """
    round = 300s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 1, "arrival_s": 550.0, "gpus": 1, "duration_s": 100.0},
    ]
    result = run_graph(graph, jobs, cluster="1x1:V100", until=500.0)
    assert result.end_s == 600.0
    late = jobs_of(result)[1]
    assert late["status"] == "running" and late["first_start_s"] == 600.0
    assert late["run_s"] == 0.0 and late["service_gpu_s"] == 0.0 and late["finish_s"] is None
    summary = result.reports["m"]["summary"]
    assert (summary["jobs_started"], summary["jobs_finished"]) == (2, 1)


def test_exposed_communication_counts_the_wait_for_a_checkpoint_and_the_restore(run_graph, tmp_path):
    """On a cluster with network tiers, exposed communication is time held minus time computing:
    one-GPU jobs communicate nothing, so theirs is the wait for the GPU's previous holder to
    checkpoint and their own restores."""
    cluster = tmp_path / "one.toml"
    cluster.write_text('name = "one"\n[[group]]\nnodes = 1\ngpus_per_node = 1\nmachines_per_rack = 1\n[tiers]\n')
    graph = """
    round = 300s;
    checkpoint = 20s;
    restore = 30s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, "model": "VGG11"},
        {"job_id": 1, "arrival_s": 100.0, "gpus": 1, "duration_s": 200.0, "model": "VGG11"},
    ]
    got = jobs_of(run_graph(graph, jobs, cluster=str(cluster)))
    # Job 1, launched at 300, waits for job 0's checkpoint until 320, restores until 350.
    assert got[1]["finish_s"] == pytest.approx(550.0) and got[1]["comm_s"] == pytest.approx(20.0 + 30.0)
    # Job 0 restores at each of its two launches, both on a free GPU.
    assert got[0]["finish_s"] == pytest.approx(1360.0) and got[0]["comm_s"] == pytest.approx(2 * 30.0)


def test_the_doc_names_every_column_of_jobs_csv():
    """docs/semantics.md's list of jobs.csv's columns is the table's columns, no more, no fewer."""
    import re

    from roundhouse.elements.sinks import JOB_COLUMNS
    from tests.conftest import REPO

    text = (REPO / "docs" / "semantics.md").read_text()
    paragraph = text.split("`jobs.csv` (`JobMetrics`' per-job table) has a row", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"pending", "running", "finished", "failed"}
    assert named == set(JOB_COLUMNS)
