"""A graph that `check` passes but that would run to no use says so: a sink whose `track` range
names none of the jobs its sources bring (warned of before the run, and said at its end, in the
printed summary and summary.json), and a Pollux given jobs of no elastic application (warned of
before the run, and the run's end says how many it never started and why)."""

from __future__ import annotations

import json

import pytest

from roundhouse.tools.cli import main
from roundhouse.traces import readonce

HEADER = "job_id,arrival_s,gpus,duration_s,model,batch_size\n"
THIRTY = HEADER + "".join(f"{i},{60.0 * i},1,600.0,ResNet-18,16\n" for i in range(30))

TRACKED = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> report :: JobMetrics(track=3000..4000);
"""

POLLUX = """\
round = 60s;
cluster = "2x4:V100";{profile}
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> sched :: Pollux(seed=0, population=8, generations=4) -> PolluxAgent -> Launch -> report :: JobMetrics;
"""
ELASTIC = '\nelastic_profile = "pollux";'
# Pollux's own applications, as its workloads name them (cifar10 for 0.01 epochs: minutes).
CIFAR = "job_id,arrival_s,gpus,model,batch_size,epochs,duration_s\n" + "".join(f"{i},0.0,1,cifar10,128,0.01,\n" for i in range(3))


def flat(text: str) -> str:
    """Printed text as one line: rich wraps lines at the terminal's width."""
    return " ".join(text.split())


def graph_in(tmp_path, text: str, trace: str = THIRTY):
    (tmp_path / "trace.csv").write_text(trace)
    (tmp_path / "g.sched").write_text(text)
    return tmp_path / "g.sched"


TRACK_WARNING = (
    "g.sched:4:66: warning: element 'report' (JobMetrics): track=3000..4000 (ids 3000 to 3999) names none of the "
    "30 jobs the graph's sources bring (ids 0 to 29): it will measure no job"
)


def test_check_warns_of_a_track_range_that_names_none_of_the_traces_jobs(tmp_path, capsys):
    graph = graph_in(tmp_path, TRACKED)
    assert main(["check", str(graph)]) == 0  # (a warning, not a refusal)
    out, err = capsys.readouterr()
    assert "g.sched: ok" in out
    assert TRACK_WARNING in flat(err)
    # A range that holds some of the ids is no cause for one.
    graph_in(tmp_path, TRACKED.replace("3000..4000", "20..40"))
    assert main(["check", str(graph)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_run_that_tracked_no_job_says_so_at_its_end(tmp_path, capsys):
    graph = graph_in(tmp_path, TRACKED)
    assert main(["run", str(graph), "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert TRACK_WARNING in flat(err)  # before the run
    assert (
        "note: report tracked no job: none in its track range arrived before the run ended: track=3000..4000 holds "
        "ids 3000 to 3999, and the 30 jobs that arrived have ids 0 to 29" in flat(out)
    )
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["jobs_tracked"] == 0
    # (the summary is the sink's own, as from the Simulation API or a sweep: `report` reads it)
    assert main(["report", str(tmp_path / "o"), "-o", str(tmp_path / "r.html")]) == 0, capsys.readouterr().err


def test_a_run_that_tracked_jobs_writes_its_summary_as_before(tmp_path, capsys):
    graph = graph_in(tmp_path, TRACKED.replace("3000..4000", "0..10"))
    assert main(["run", str(graph), "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err and "tracked no job" not in out
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["jobs_tracked"] == 10


def test_ids_with_gaps_are_said_to_run_from_the_lowest_to_the_highest(tmp_path, capsys):
    trace = HEADER + "".join(f"{i},{60.0 * k},1,600.0,ResNet-18,16\n" for k, i in enumerate((4, 9, 17)))
    graph = graph_in(tmp_path, TRACKED, trace)
    assert main(["run", str(graph)]) == 0
    out, err = capsys.readouterr()
    assert "names none of the 3 jobs the graph's sources bring (ids from 4 to 17)" in flat(err)
    assert "the 3 jobs that arrived have ids from 4 to 17" in flat(out)


@pytest.mark.parametrize(
    "source, warned",
    [
        ("PoissonSource(rate=8/h, jobs=20, seed=1)", "names none of the 20 jobs the graph's sources bring (ids 0 to 19)"),
        ("PoissonSource(rate=8/h, jobs=20, seed=1, start_id=3010)", None),  # (its ids are in the range)
        ("BurstSource(jobs=5, bursts=2, start_id=10)", "names none of the 10 jobs the graph's sources bring (ids 10 to 19)"),
        ("CostWorkload(jobs=4)", "names none of the 4 jobs the graph's sources bring (ids 0 to 3)"),
        ("LiveSource", None),  # (a live source's jobs are not known before the run)
    ],
)
def test_a_generators_ids_are_known_before_the_run(tmp_path, capsys, source, warned):
    graph = graph_in(tmp_path, TRACKED.replace('TraceSource(path="trace.csv")', source))
    assert main(["check", str(graph)]) == 0
    err = flat(capsys.readouterr().err)
    if warned is None:
        assert "warning" not in err
    else:
        assert "warning: element 'report' (JobMetrics): track=3000..4000" in err and warned in err


def test_a_source_whose_ids_are_not_known_keeps_the_warning_back(tmp_path, capsys):
    # Live submissions beside the trace may bring any id: no warning of the trace's.
    text = TRACKED.replace("src -> AcceptAll", "live :: LiveSource;\nsrc -> admit :: AcceptAll").replace(
        "report :: JobMetrics(track=3000..4000);", "report :: JobMetrics(track=3000..4000);\nlive -> admit;"
    )
    graph = graph_in(tmp_path, text)
    assert main(["check", str(graph)]) == 0, capsys.readouterr().err
    assert "warning" not in capsys.readouterr().err


def test_every_sink_with_a_track_range_is_warned_of(tmp_path, capsys):
    text = TRACKED.replace("Launch -> report", "run :: Launch -> report") + "run -> slo :: SloMetrics(track=50..60);\n"
    graph = graph_in(tmp_path, text)
    assert main(["check", str(graph)]) == 0
    err = flat(capsys.readouterr().err)
    assert "warning: element 'slo' (SloMetrics): track=50..60 (ids 50 to 59) names none of the 30 jobs" in err


def test_the_warnings_read_the_trace_once_and_quiet_runs_print_none(tmp_path, capsys, monkeypatch):
    readonce.clear()  # (what an earlier test in this process left kept is not this test's)
    reads = []
    real = readonce._read
    monkeypatch.setattr(readonce, "_read", lambda *a: reads.append(a) or real(*a))
    graph = graph_in(tmp_path, TRACKED)
    assert main(["run", str(graph), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["check", str(graph)]) == 0
    assert len(reads) == 2 and readonce.kept() == 0  # (one read each, taken by the source's start)


def test_check_and_run_warn_of_pollux_without_an_elastic_profile(tmp_path, capsys):
    graph = graph_in(tmp_path, POLLUX.format(profile=""))
    assert main(["check", str(graph)]) == 0
    err = flat(capsys.readouterr().err)
    assert "g.sched:4:32: warning: element 'sched' (Pollux) starts only elastic jobs" in err
    assert "the graph sets none: it will never start any of the 30 jobs the graph's sources bring" in err
    assert 'give elastic_profile = "pollux"' in err
    # The run's end says how many it never started, and why (here cut at 20 minutes).
    assert main(["run", str(graph), "--until", "20min"]) == 0
    out, err = capsys.readouterr()
    assert "warning: element 'sched' (Pollux)" in flat(err)
    assert (
        "note: element 'sched' (Pollux) left 21 waiting job(s) it never started: it starts only elastic jobs, "
        'and the graph sets no elastic_profile; give elastic_profile = "pollux"' in flat(out)
    )


def test_a_run_of_pollux_without_an_elastic_profile_stalls_saying_it_sets_none(tmp_path, capsys):
    """Left without a time limit, the run stalls; its message said the jobs were "of no
    application of the elastic profile", where there is no profile."""
    graph = graph_in(tmp_path, POLLUX.format(profile=""))
    assert main(["run", str(graph), "--quiet"]) == 2
    err = flat(capsys.readouterr().err)
    assert "Element 'sched' (Pollux) cannot start" in err
    assert 'it starts only elastic jobs, and the graph sets no elastic_profile (give one, e.g. elastic_profile = "pollux")' in err
    assert "of no application of the elastic profile" not in err


def test_pollux_given_jobs_of_no_application_of_its_profile_is_warned_of(tmp_path, capsys):
    trace = CIFAR + "".join(f"{i},0.0,1,ResNet-18,16,,600.0\n" for i in range(3, 5))
    graph = graph_in(tmp_path, POLLUX.format(profile=ELASTIC), trace)
    assert main(["check", str(graph)]) == 0
    err = flat(capsys.readouterr().err)
    assert (
        "g.sched:5:32: warning: element 'sched' (Pollux) starts only elastic jobs, those whose model (the 'model' column) "
        "names an application of elastic profile 'pollux' (bert, cifar10, deepspeech2, imagenet, ncf, yolov3): 2 of the "
        "5 jobs the graph's sources bring name none (job 3, model ResNet-18, for one), and it will never start them"
    ) in err
    assert main(["run", str(graph), "--until", "1h"]) == 0
    out = flat(capsys.readouterr().out)
    assert (
        "note: element 'sched' (Pollux) left 2 waiting job(s) it never started: it starts only elastic jobs, and their "
        "model names no application of elastic profile 'pollux' (job 3, model ResNet-18)"
    ) in out


def test_pollux_given_only_elastic_jobs_is_not_warned_of(tmp_path, capsys):
    graph = graph_in(tmp_path, POLLUX.format(profile=ELASTIC), CIFAR)
    assert main(["check", str(graph)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["run", str(graph)]) == 0
    out = flat(capsys.readouterr().out)
    assert "never started" not in out and "3 / 3" in out
