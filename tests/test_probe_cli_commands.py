"""The reading commands used as a new user uses them: output piped into a reader that leaves,
`explain` on folders that hold no run's record yet (or never will), and traces of no jobs
converted and read back."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO, fails, write_trace

SAMPLES = REPO / "traces" / "samples"

# --- output piped into a reader that leaves (`| head`) ---


@pytest.mark.parametrize(
    "argv",
    [
        ["elements"],
        ["elements", "Fifo"],
        ["trace", "describe", str(SAMPLES / "philly-1000.csv")],
    ],
    ids=["elements", "one-element", "trace-describe"],
)
def test_a_table_piped_into_a_reader_that_leaves_exits_0_without_a_word(argv):
    # (Rich's console ends the process with status 1 on a broken pipe, as if the command had
    # failed; `| head` in a script with `set -o pipefail` then stops it.)
    command = [sys.executable, "-c", "import sys; from roundhouse.tools.cli import main; sys.exit(main())", *argv]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # (before it prints: it starts in about a second)
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0
    assert err == ""


def test_a_table_still_prints_whole_to_a_reader_that_stays(capsys):
    assert main(["elements", "Fifo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Fifo (policy)") and "paper: " in out


# --- explain on folders without a record ---

GRAPH = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.fixture
def finished_run(tmp_path):
    (tmp_path / "trace.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,60,1,600\n")
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(GRAPH))
    out = tmp_path / "out"
    assert main(["run", str(graph), "--cluster", "1x1:V100", "--out", str(out), "--quiet"]) == 0
    return out


def test_explain_on_a_run_still_writing_its_record_says_so(finished_run, capsys):
    # As while the run goes: the record is written beside its name and moved in place at the
    # end, and run.json is written last.
    (finished_run / "explain.parquet").rename(finished_run / "explain.parquet.part")
    (finished_run / "run.json").unlink()
    err = fails(capsys, "explain", finished_run, "0")
    assert f"{finished_run}: no explain.parquet yet: a run is still writing its record there (explain.parquet.part)" in err
    assert "once the run has ended" in err
    assert "kept no record" not in err and "not a run's" not in err


def test_explain_on_a_folder_that_is_no_run_says_so_plainly(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello\n")
    err = fails(capsys, "explain", tmp_path, "0")
    assert f"{tmp_path}: not a run's folder (it holds no run.json, nor a run's results)" in err
    assert "the run kept no record" not in err  # (there was no run)


def test_explain_on_a_run_kept_without_a_record_says_to_run_it_again(finished_run, capsys):
    (finished_run / "explain.parquet").unlink()
    err = fails(capsys, "explain", finished_run, "0")
    assert f"{finished_run}: a run's folder with no explain.parquet: the run kept no record" in err


def test_explain_on_a_sweeps_results_store_names_the_sweep(tmp_path, capsys, monkeypatch):
    sweep = tmp_path / "sweep"
    (sweep / "results").mkdir(parents=True)
    (sweep / "summary.csv").write_text("round,runs\n60s,1\n")
    (sweep / "points.csv").write_text("round\n60s\n")
    err = fails(capsys, "explain", sweep / "results", "0")
    assert f"{sweep / 'results'}: a sweep's results store (of {sweep}): sweeps keep no record" in err
    monkeypatch.chdir(sweep / "results")
    err = fails(capsys, "explain", ".", "0")
    assert f".: a sweep's results store (of {sweep}): sweeps keep no record" in err
    # (A folder named results that is no sweep's is no sweep's store.)
    (tmp_path / "other" / "results").mkdir(parents=True)
    err = fails(capsys, "explain", tmp_path / "other" / "results", "0")
    assert "not a run's folder" in err and "a sweep's" not in err


# --- traces of no jobs ---


@pytest.mark.parametrize(
    "header",
    [
        "job_id,arrival_s,gpus,duration_s",  # canonical
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval",  # Tiresias
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus",  # ONES
        "name,time,application,num_replicas,batch_size",  # Pollux
    ],
    ids=["canonical", "tiresias", "ones", "pollux"],
)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_trace_of_no_jobs_converts_to_a_file_that_reads_back(tmp_path, capsys, header, suffix):
    source = tmp_path / "header-only.csv"
    source.write_text(header + "\n")
    out = tmp_path / f"out{suffix}"
    assert main(["trace", "convert", str(source), str(out)]) == 0
    assert main(["trace", "describe", str(out)]) == 0
    described = capsys.readouterr()
    assert "error" not in described.err
    assert "jobs" in described.out and "│ 0 " in described.out


def test_a_trace_with_jobs_still_leaves_out_its_empty_columns(tmp_path):
    from roundhouse.traces import formats

    trace = write_trace(tmp_path / "t.csv", [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 10}])
    out = tmp_path / "out.csv"
    formats.write_trace(formats.load_trace(trace, "auto").frame, out)
    assert pl.read_csv(out).columns == ["job_id", "arrival_s", "gpus", "model", "iterations"]


# --- a job id written as a decimal number ---


def test_a_large_job_id_written_with_a_fraction_of_zero_names_that_job(tmp_path, capsys):
    # (Read as a float, 9223372036854775806.0 is ...808: the job was said not to exist.)
    (tmp_path / "trace.csv").write_text(
        "job_id,arrival_s,gpus,duration_s\n9223372036854775807,0,1,600\n9223372036854775806,10,1,600\n"
    )
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(GRAPH))
    out = tmp_path / "out"
    assert main(["run", str(graph), "--cluster", "1x1:V100", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    for spelled in ("9223372036854775806.0", "9.223372036854775806e18", "+9223372036854775806"):
        assert main(["explain", str(out), spelled]) == 0
        assert capsys.readouterr().out.startswith("job 9223372036854775806: ")


def test_a_job_id_of_a_huge_exponent_is_refused_at_once(tmp_path):
    from roundhouse.tools.explain_cmd import whole_number

    assert whole_number("1e999999999") is None  # (spelled out, it would take minutes)
    assert whole_number("1e3") == 1000 and whole_number("5.5") is None and whole_number("nan") is None


# --- a trace read in another format than its own ---


@pytest.mark.parametrize(
    ("sample", "named", "found"),
    [
        ("gavel-50.trace", "canonical", "gavel"),
        ("philly-1000.csv", "gavel", "canonical"),
        ("philly-1000.csv", "philly", "canonical"),
        ("tiresias-60.csv", "pollux", "tiresias"),
        ("philly-cluster-job-log-50.json", "helios", "philly"),
    ],
)
def test_a_trace_read_as_another_format_names_the_one_its_contents_are(capsys, sample, named, found):
    err = fails(capsys, "trace", "describe", "--format", named, SAMPLES / sample)
    assert f"{SAMPLES / sample}" in err
    assert f"by its contents it is a {found} trace: read it as {found} (format={found}, or no format)" in err
    assert main(["trace", "describe", "--format", found, str(SAMPLES / sample)]) == 0  # (as the hint says)


def test_a_bad_row_of_a_trace_in_its_own_format_gets_no_such_hint(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,5,0,200\n")
    err = fails(capsys, "trace", "describe", "--format", "canonical", trace)
    assert f"{trace}:3: error: column 'gpus'" in err and "by its contents" not in err
    # (a file that is no trace of any format is not said to be one)
    trace.write_text("hello there\n")
    assert "by its contents" not in fails(capsys, "trace", "describe", "--format", "gavel", trace)


def test_a_run_whose_reader_leaves_still_writes_its_results_and_exits_0(tmp_path):
    # (Rich's console ended the process with status 1 at the summary, before `--out` was written.)
    out = tmp_path / "out"
    argv = ["run", str(REPO / "graphs" / "las.sched"), "--out", str(out), "--until", "2h"]
    command = [sys.executable, "-c", "import sys; from roundhouse.tools.cli import main; sys.exit(main())", *argv]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0, err
    assert (out / "jobs.csv").is_file() and (out / "summary.json").is_file()


@pytest.mark.parametrize("text", ["", "  \n"])
def test_an_empty_json_trace_is_said_to_be_empty(tmp_path, capsys, text):
    path = tmp_path / "jobs.json"
    path.write_text(text)
    err = fails(capsys, "trace", "describe", path, "--format", "philly")
    assert "is empty; a cluster_job_log is a JSON list of jobs" in err and "not valid JSON" not in err
