"""Swapping what feeds Launch's `finish` port: jobs finished before they ever started (the
source's jobs wired there, so each is finished as it arrives) leave the run's summary with
figures that are numbers or None, never NaN, and the run writes its results."""

import json
import math

from roundhouse.tools.cli import main

GRAPH = """\
round = 5min;
cluster = "1x2:V100";
arrivals :: TraceSource(path="trace.csv");
first    :: TraceSource(path="early.csv");
run      :: Launch;
admit    :: AcceptAll;
arrivals -> [finish] run;
arrivals -> admit;
first -> admit;
admit -> JobPool -> Fifo -> FirstFree -> run -> report :: JobMetrics;
"""

HEADER = "job_id,arrival_s,model,batch_size,gpus,duration_s\n"


def test_jobs_finished_before_they_started_leave_no_nan_in_the_summary(tmp_path, capsys):
    # ids 0 and 1 are finished as they arrive (never started); id 5 runs to its end
    (tmp_path / "trace.csv").write_text(HEADER + "0,600,ResNet-18,32,1,3600\n1,900,ResNet-18,32,1,3600\n")
    (tmp_path / "early.csv").write_text(HEADER + "5,0,ResNet-18,32,1,1800\n")
    (tmp_path / "g.sched").write_text(GRAPH)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(out), "--quiet", "--no-explain"]) == 0
    err = capsys.readouterr().err
    assert "cannot be written as JSON" not in err, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs_finished"] == 3 and summary["jobs_started"] == 1
    for key, value in summary.items():
        assert value is None or not (isinstance(value, float) and math.isnan(value)), key
    # the one job that started was never preempted: it waited nothing after its first start
    assert summary["avg_queue_after_preemption_s"] == 0.0
    rows = (out / "jobs.csv").read_text().splitlines()
    assert len(rows) == 4


def test_only_unstarted_jobs_finished(tmp_path, capsys):
    (tmp_path / "trace.csv").write_text(HEADER + "0,600,ResNet-18,32,1,3600\n")
    (tmp_path / "early.csv").write_text(HEADER + "5,0,ResNet-18,32,1,1800\n")
    (tmp_path / "g.sched").write_text(GRAPH.replace("first -> admit;", "first -> [finish] run;"))
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(out), "--quiet", "--no-explain"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs_finished"] == 2 and summary["jobs_started"] == 0
    assert summary["avg_queue_after_preemption_s"] is None
    assert summary["avg_responsiveness_s"] is None
