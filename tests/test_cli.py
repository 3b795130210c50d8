"""The roundhouse command line, end to end (in-process)."""

import json
import shutil

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO, fails

TINY = """round = 5min;
cluster = "4x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> place :: Consolidated -> Launch -> report :: JobMetrics;
"""


@pytest.fixture
def tiny(tmp_path):
    pl.DataFrame(
        {"job_id": [0, 1, 2], "arrival_s": [0.0, 60.0, 900.0], "gpus": [1, 4, 2], "duration_s": [3000.0, 1200.0, 600.0]}
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(TINY)
    return tmp_path / "g.sched"


def test_run_writes_jobs_summary_and_run_info(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out)]) == 0
    jobs = pl.read_csv(out / "jobs.csv")
    for column in ("job_id", "arrival_s", "first_start_s", "finish_s", "jct_s", "queue_s", "gpus", "preemptions"):
        assert column in jobs.columns
    summary = json.loads((out / "summary.json").read_text())
    for key in (
        "avg_jct_s",
        "median_jct_s",
        "p95_jct_s",
        "p99_jct_s",
        "avg_responsiveness_s",
        "makespan_s",
        "utilization",
        "jobs_finished",
    ):
        assert key in summary
    assert summary["jobs_finished"] == 3
    info = json.loads((out / "run.json").read_text())
    assert info["cluster"].startswith("16 GPUs") and info["stop_reason"] == "every job finished"
    printed = capsys.readouterr().out
    assert "average JCT" in printed and "rounds" in printed


def test_run_is_deterministic_to_the_byte(tiny, tmp_path):
    for name in ("a", "b"):
        assert main(["run", str(tiny), "--out", str(tmp_path / name), "--quiet"]) == 0
    for f in ("jobs.csv", "summary.json", "run.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


TWO_SINKS = TINY.replace("-> Launch -> report :: JobMetrics;", "-> run :: Launch -> a :: JobMetrics;\nrun -> b :: JobMetrics;")


def test_a_run_into_an_earlier_runs_folder_replaces_all_of_its_files(tiny, tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "run.json").read_text())["files"] == ["explain.parquet", "jobs.csv", "run.json", "summary.json"]
    two = tmp_path / "two.sched"
    two.write_text(TWO_SINKS)
    assert main(["run", str(two), "--out", str(out), "--quiet", "--no-explain"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["a-jobs.csv", "a-summary.json", "b-jobs.csv", "b-summary.json", "run.json"]
    assert main(["run", str(tiny), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["explain.parquet", "jobs.csv", "run.json", "summary.json"]


def test_a_run_that_cannot_write_its_results_leaves_the_earlier_ones(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out), "--quiet"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "summary.json").unlink()
    (out / "summary.json").mkdir()  # (the last file replaced cannot be: a folder stands there)
    del before["summary.json"]
    later = tmp_path / "later.sched"
    later.write_text(TINY.replace("Las", "Fifo"))
    assert main(["run", str(later), "--out", str(out), "--quiet"]) == 2
    assert "cannot write" in capsys.readouterr().err
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before  # the earlier run's files as they were, and no partial file left


def test_run_and_sweep_refuse_each_others_folders(tiny, tmp_path, capsys):
    run_out, sweep_out = tmp_path / "run", tmp_path / "sweep"
    assert main(["run", str(tiny), "--out", str(run_out), "--quiet"]) == 0
    assert main(["sweep", str(tiny), "--vary", "round=5min", "--out", str(sweep_out)]) == 0
    assert main(["sweep", str(tiny), "--vary", "round=5min", "--out", str(run_out)]) == 2
    assert f"--out {run_out}: holds a run's results (run.json)" in capsys.readouterr().err
    assert main(["run", str(tiny), "--out", str(sweep_out), "--quiet"]) == 2
    assert f"--out {sweep_out}: holds a sweep's results (results, summary.csv, points.csv)" in capsys.readouterr().err


def test_run_overrides_cluster_trace_settings_and_until(tiny, tmp_path):
    other = tmp_path / "other.csv"
    pl.DataFrame({"job_id": [7], "arrival_s": [0.0], "gpus": [8], "duration_s": [100.0]}).write_csv(other)
    out = tmp_path / "o"
    assert (
        main(
            [
                "run",
                str(tiny),
                "--trace",
                str(other),
                "--cluster",
                "2x8:P100",
                "--set",
                "round=1min",
                "--set",
                "place.strict=false",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    jobs = pl.read_csv(out / "jobs.csv")
    assert jobs["job_id"].to_list() == [7] and jobs["finish_s"].to_list() == [100.0]
    assert main(["run", str(tiny), "--until", "10min", "--out", str(tmp_path / "u"), "--quiet"]) == 0
    assert json.loads((tmp_path / "u" / "summary.json").read_text())["end_s"] == 600.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--until", "10 minutes"], "--until"),
        (["--until", "-5h"], "--until -5h: must be 0 or more"),  # (a value with a minus, after a space)
        (["--cluster", "4xx"], "bad cluster"),
        (["--set", "place.strict=maybe"], "expects true or false"),
        (["--set", "nowhere.x=1"], "no element 'nowhere'"),
        (["--set", "round=-1min"], "error: --set round=-1min: setting 'round' must be at least 0.001s, got -1min\n"),
        (["--set", "place.strict="], "--set place.strict=: bad value: no value after '='"),
        (["--set", "src.path=other.csv"], "hint: text such as a file path is written in quotes: '\"other.csv\"'"),
        (["--trace", "/nonexistent.csv"], "no such file"),
    ],
)
def test_bad_command_line_values_exit_2_with_a_message(tiny, capsys, args, message):
    assert main(["run", str(tiny), "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_trace_row_exit_2_naming_file_and_row(tiny, tmp_path, capsys):
    (tmp_path / "trace.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,5,four,100\n")
    assert main(["run", str(tiny), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "trace.csv:3" in err and "gpus" in err


def test_check_reports_ok_and_errors(tiny, tmp_path, capsys):
    bad = tmp_path / "bad.sched"
    bad.write_text(TINY.replace("Las", "Lass"))
    assert main(["check", str(tiny)]) == 0
    assert main(["check", str(tiny), str(bad)]) == 2
    captured = capsys.readouterr()
    assert "ok (7 elements, 6 connections" in captured.out
    assert f"{bad}:4:" in captured.err and "did you mean 'Las'" in captured.err


def test_check_starts_the_elements_against_the_graphs_cluster(tiny, tmp_path, capsys):
    # What only the cluster or the trace's rows can show is found by check, as a run finds it at start.
    two_types = tmp_path / "gandiva.sched"
    two_types.write_text(
        'round = 5min;\ncluster = "2x4:V100,2x4:P100";\nsrc :: PoissonSource(rate=8/h, jobs=20, seed=0);\n'
        "src -> AcceptAll -> JobPool -> Fifo(backfill=true) -> Gandiva -> Launch -> JobMetrics;\n"
    )
    assert main(["check", str(two_types)]) == 2
    assert f"{two_types}:4:55: error: Gandiva@4 (Gandiva): needs a cluster of one GPU type" in capsys.readouterr().err
    (tmp_path / "trace.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,5,-2,100\n")
    assert main(["check", str(tiny)]) == 2
    err = capsys.readouterr().err
    assert "trace.csv:3" in err and "gpus" in err


def test_options_may_come_between_positional_arguments(tiny, tmp_path, capsys):
    bad = tmp_path / "bad.sched"
    bad.write_text(TINY.replace("Las", "Lass"))
    assert main(["check", str(tiny), "--fork", str(bad)]) == 2  # both files read, the option too
    assert f"{bad}:4:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ended:  # an unknown option is still named, by its command
        main(["check", str(tiny), "--nonsense", str(bad)])
    assert ended.value.code == 2 and "roundhouse check: error: unrecognized arguments: --nonsense" in capsys.readouterr().err
    # The trace after the options is read (with none, submit would ask what to run); nothing listens.
    assert main(["submit", "tcp://127.0.0.1:9", "--insecure", str(tmp_path / "trace.csv"), "--timeout", "0.2s"]) == 2
    said = capsys.readouterr().err
    assert "no answer from the scheduler at tcp://127.0.0.1:9 within 0.2s; no connection to it could be made" in said, said
    assert "is `roundhouse serve` running at that address" in said


def test_check_every_shipped_graph(capsys):
    graphs = sorted(str(p) for p in (REPO / "graphs").glob("*.sched"))
    assert graphs and main(["check", *graphs]) == 0


@pytest.mark.parametrize("fmt", ["dot", "svg", "png", "pdf"])
def test_render(tiny, tmp_path, fmt):
    if fmt != "dot" and shutil.which("dot") is None:
        pytest.fail("Graphviz's dot is required (the README's test command installs it)")
    out = tmp_path / f"g.{fmt}"
    assert main(["render", str(tiny), "-o", str(out)]) == 0
    data = out.read_bytes()
    if fmt == "dot":
        text = data.decode()
        assert "Las" in text and "n_src:out_jobs:e -> n_AcceptAll_40_1:in_jobs:w" in text
        assert "#ffd9c2" in text  # policies are coloured
    elif fmt == "svg":
        assert b"<svg" in data and b"Consolidated" in data
    elif fmt == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert data[:5] == b"%PDF-"


def test_render_keeps_elements_apart_whose_names_differ_only_in_punctuation(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        "src :: PoissonSource(rate=8/h);\nAcceptAll_1 :: AcceptAll;\n"
        "src -> AcceptAll -> AcceptAll_1 -> JobPool -> Las -> Consolidated -> Launch;\n"
    )
    out = tmp_path / "g.dot"
    assert main(["render", str(graph), "-o", str(out)]) == 0
    text = out.read_text()
    # One node per element, and the edge between the two gates joins two different nodes.
    assert text.count("[label=<") == 7
    assert "n_AcceptAll_40_1:out_admitted:e -> n_AcceptAll__1:in_jobs:w" in text


def test_render_needs_a_known_format(tiny, tmp_path, capsys):
    assert main(["render", str(tiny), "-o", str(tmp_path / "g.jpeg")]) == 2
    assert "format" in capsys.readouterr().err


def test_elements_list_and_reference(capsys):
    assert main(["elements"]) == 0
    listing = capsys.readouterr().out
    for name in (
        "TraceSource",
        "PoissonSource",
        "AcceptAll",
        "AcceptThreshold",
        "JobPool",
        "Fifo",
        "Las",
        "Srtf",
        "FirstFree",
        "Consolidated",
        "Launch",
        "JobMetrics",
    ):
        assert name in listing
    assert main(["elements", "AcceptThreshold"]) == 0
    ref = capsys.readouterr().out
    assert "factor" in ref and "multiplier" in ref and "required" in ref and "Blox" in ref
    # An optional argument without a value of its own is "not given": `none` is not a value a graph can write.
    assert main(["elements", "--markdown", "PoissonSource"]) == 0
    seed = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| `seed`"))
    assert "| not given |" in seed and "none" not in seed
    assert main(["elements", "Lass"]) == 2
    assert "did you mean 'Las'" in capsys.readouterr().err


def test_a_track_range_that_matches_no_job_is_noted(tiny, tmp_path, capsys):
    graph = tmp_path / "tracked.sched"
    graph.write_text(TINY.replace("report :: JobMetrics;", "report :: JobMetrics(track=100..200);"))
    assert main(["run", str(graph)]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # (rich wraps lines at the terminal's width)
    assert "note: report tracked no job: none in its track range arrived before the run ended" in printed
    assert main(["run", str(tiny)]) == 0
    assert "tracked no job" not in capsys.readouterr().out


def test_jobs_that_never_started_and_a_window_that_never_filled_are_noted(tiny, tmp_path, capsys):
    # One node of 4 GPUs, FIFO: job 1 (4 GPUs, arrived at 60 s) waits behind job 0 until 3,000 s,
    # so a run cut at 10 minutes has one of its two jobs never started.
    graph = tmp_path / "fifo.sched"
    graph.write_text(TINY.replace("Las", "Fifo").replace('"4x4:V100"', '"1x4:V100"'))
    assert main(["run", str(graph), "--until", "10min", "--out", str(tmp_path / "cut")]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "note: report: 1 of its 2 job(s) never started; responsiveness is over the 1 that did" in printed
    summary = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert (summary["jobs_tracked"], summary["jobs_started"], summary["jobs_finished"]) == (2, 1, 0)
    # A window naming ids the trace lacks (3 and 4) never fills: it does not stop the run.
    graph.write_text(TINY.replace("report :: JobMetrics;", "report :: JobMetrics(track=0..5);"))
    assert main(["run", str(graph)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "note: report tracks ids 0..5 but the run saw 3 of them: the window never filled" in printed


def test_run_out_never_replaces_files_no_run_wrote(tiny, tmp_path, capsys):
    # A folder without run.json holds no run: files named like a run's are the user's own.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "q3-summary.json").write_text('{"kept": 1}')
    (mine / "notes.txt").write_text("kept")
    err = fails(capsys, "run", tiny, "--quiet", "--out", mine)
    assert "holds q3-summary.json but no run.json" in err
    assert (mine / "q3-summary.json").read_text() == '{"kept": 1}' and sorted(p.name for p in mine.iterdir()) == [
        "notes.txt",
        "q3-summary.json",
    ]


def test_a_failed_run_removes_the_out_folder_it_made(tiny, tmp_path, capsys):
    (tmp_path / "trace.csv").write_text(
        "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,5,64,100\n"
    )  # (a job larger than the cluster)
    made, kept = tmp_path / "new", tmp_path / "old"
    kept.mkdir()
    fails(capsys, "run", tiny, "--quiet", "--out", made)
    fails(capsys, "run", tiny, "--quiet", "--out", kept)
    assert not made.exists() and kept.is_dir()


def test_one_trace_for_a_graph_of_two_trace_sources_is_refused(tmp_path, capsys):
    two = tmp_path / "two.sched"
    two.write_text(
        'round = 5min;\ncluster = "4x4:V100";\na :: TraceSource(path="t.csv");\nb :: TraceSource(path="t.csv");\n'
        "gate :: AcceptAll;\na -> gate;\nb -> gate;\ngate -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    err = fails(capsys, "run", two, "--trace", tmp_path / "t.csv")
    assert "--trace: " in err and "has 2 TraceSource elements (a, b), which would all read the same jobs" in err


def test_run_json_records_what_ran(tiny, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    out = tmp_path / "out"
    args = ["run", str(tiny), "--trace", str(other), "--set", "place.strict=false", "--cluster", "2x8:P100"]
    assert main([*args, "--quiet", "--out", str(out)]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["arguments"]["src"]["path"] == str(other.resolve()) and info["arguments"]["place"]["strict"] is False
    assert info["cluster"].endswith("(2x8:P100)") and "cluster" not in info["settings"]  # (the one used, once)


def test_a_flag_before_a_file_named_with_a_minus_and_a_digit_leaves_it_a_file(tiny, monkeypatch, capsys):
    """Only an option that takes a value takes a negative value after a space: after a flag,
    `-1` is the next positional argument (a file named so)."""
    (tiny.parent / "-1").write_text(TINY)
    monkeypatch.chdir(tiny.parent)
    assert main(["check", "--fork", "-1"]) == 0
    assert "ignored explicit argument" not in capsys.readouterr().err
    assert main(["run", "g.sched", "--until", "-5h"]) != 0
    assert "--until -5h: must be 0 or more" in capsys.readouterr().err


def test_a_run_of_one_round_says_round_not_rounds(tiny, tmp_path, capsys):
    # A trace of a header alone ends the run after its first round: the closing line counts it
    # as a round ("1 round"), and many as rounds, digits grouped.
    (tmp_path / "trace.csv").write_text("job_id,arrival_s,gpus,duration_s\n")
    assert main(["run", str(tiny)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "1 round, simulated 0.00 s" in printed and "1 rounds," not in printed
    pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [7 * 24 * 3600.0]}).write_csv(
        tmp_path / "trace.csv"
    )
    assert main(["run", str(tiny)]) == 0
    assert "2,017 rounds, simulated" in " ".join(capsys.readouterr().out.split())


def test_check_takes_a_trace_in_place_of_the_graphs_as_run_does(tiny, tmp_path, capsys):
    # `run --trace` has a `check --trace`: the trace is read whole against the graph and its
    # cluster, and a bad one is named with its row; a graph with no TraceSource is refused alone.
    other = tmp_path / "other.csv"
    other.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n1,10,64,60\n")
    err = fails(capsys, "check", tiny, "--trace", other)
    assert f"{other}: error: job 1 asks for 64 GPUs but the cluster has 16" in err
    other.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n1,ten,1,60\n")
    assert f"{other}:3: error: column 'arrival_s': 'ten' is not a number" in fails(capsys, "check", tiny, "--trace", other)
    other.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n")
    assert main(["check", str(tiny), "--trace", str(other)]) == 0
    assert "g.sched: ok (7 elements" in capsys.readouterr().out
    no_trace = tmp_path / "poisson.sched"
    no_trace.write_text(TINY.replace('TraceSource(path="trace.csv")', "PoissonSource(rate=4/h, jobs=5, seed=0)"))
    assert main(["check", str(tiny), str(no_trace), "--trace", str(other)]) == 2
    printed = capsys.readouterr()
    assert f"--trace: {no_trace} has no TraceSource element whose trace it could replace" in printed.err
    assert f"{no_trace}: refused" in printed.err and "g.sched: ok" in printed.out
    assert "keep one" in fails(capsys, "check", tiny, "--trace", other, "--set", f'src.path="{other}"')
