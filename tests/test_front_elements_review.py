"""Front elements (sources, admission gates, termination) on small cases built to check what
their docstrings say."""

from __future__ import annotations

from conftest import jobs_of, write_trace


def test_threshold_queue_is_by_arrival_across_sources(run_graph, tmp_path):
    # Two sources into one gate: the job that arrived first (from the source connected second)
    # is the head of the first-in first-out queue, whichever connection delivers it.
    write_trace(tmp_path / "late.csv", [dict(job_id=1, arrival_s=290, gpus=1, duration_s=1000)])
    write_trace(tmp_path / "early.csv", [dict(job_id=2, arrival_s=10, gpus=1, duration_s=1000)])
    result = run_graph(
        """
        round = 5min; cluster = "1x1:V100";
        late :: TraceSource(path="late.csv", timing=duration);
        early :: TraceSource(path="early.csv", timing=duration);
        admit :: AcceptThreshold(factor=0.5x);
        late -> admit; early -> admit;
        admit -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
        """
    )
    jobs = jobs_of(result)
    assert jobs[2]["first_start_s"] == 300.0  # the older job is admitted at the first boundary
    assert jobs[1]["first_start_s"] == 1500.0  # the newer waits for it to finish (at 1300, seen at 1500)


def test_threshold_admits_at_the_limit_and_releases_on_completion(run_graph):
    # Four GPUs, factor 1x: 2 + 2 GPUs admitted (demand 0 then 2 before each), the 1-GPU job C
    # too (demand exactly 4, at the limit), D held (demand 5). A's completion at 300 s brings the
    # demand to 3: D is admitted at that boundary.
    jobs = [
        dict(job_id=1, arrival_s=0, gpus=2, duration_s=300),
        dict(job_id=2, arrival_s=0, gpus=2, duration_s=3000),
        dict(job_id=3, arrival_s=0, gpus=1, duration_s=3000),
        dict(job_id=4, arrival_s=0, gpus=1, duration_s=300),
    ]
    text = """
        round = 5min; cluster = "1x4:V100";
        src :: TraceSource(path="trace.csv", timing=duration);
        admit :: AcceptThreshold(factor=1x);
        src -> admit -> JobPool -> Fifo(backfill=true) -> FirstFree -> Launch -> JobMetrics;
        """
    result = run_graph(text, jobs)
    got = jobs_of(result)
    assert got[3]["first_start_s"] == 300.0  # admitted at 0, found room when A ended
    assert got[4]["first_start_s"] == 300.0  # held at 0 (demand 5 > 4), admitted at 300
    assert result.counters["admit"] == {"admitted": 4, "queued": 0, "demand": 0}
