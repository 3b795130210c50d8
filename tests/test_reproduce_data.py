"""The reference data the reproductions read (`--data`, by default ../shared/data): where it is
missing, or damaged, `roundhouse reproduce` says which file and line, with exit status 2 and
never a traceback, a BrokenProcessPool or a table of silently wrong numbers; and the formats of
that data read exactly (a duplicate id's other line, a batch size of 0, an epoch size too large)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.parser import parse
from roundhouse.runtime.sweep import RunSpec
from roundhouse.tools.cli import main
from roundhouse.tools.reproductions import DEFAULT_DATA, EXPERIMENTS, experiment, load_all
from roundhouse.tools.reproductions._runs import path_from_graphs, run, sched_string
from roundhouse.traces.formats import read_trace
from tests.conftest import REPO, SHARED, fails

DATA = SHARED / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="the reference data is not on this machine")
RESULTS = "phys_las_8-16-24_results_all_policies.csv"


def data_with(tmp_path: Path, project: str, damaged: dict[str, str]) -> Path:
    """A data folder holding one project's folder from the reference data, every file linked to
    the original (read in place, never copied) except those in `damaged`, written as given."""
    folder = tmp_path / "data" / project
    for source in (DATA / project).rglob("*"):
        target = folder / source.relative_to(DATA / project)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif str(source.relative_to(DATA / project)) not in damaged:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    for name, text in damaged.items():
        (folder / name).write_text(text)
    return tmp_path / "data"


def changed(project: str, name: str, line: int, field: int, value: str, separator: str = ",") -> str:
    """The text of a reference file with one cell (1-based line and field) replaced."""
    lines = (DATA / project / name).read_text().split("\n")
    cells = lines[line - 1].split(separator)
    cells[field - 1] = value
    lines[line - 1] = separator.join(cells)
    return "\n".join(lines)


# --- no data --------------------------------------------------------------------------------


def test_the_default_data_folder_is_beside_the_project():
    assert DEFAULT_DATA == DATA
    for name in ("gavel-fidelity", "ones-64gpu", "pollux-interval", "pollux-load"):
        assert load_all()[name].data, f"{name} reads the reference data but does not say which"


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("gavel-fidelity", "gavel"),
        ("ones-64gpu", "ones"),
        ("pollux-interval", "pollux/workloads"),
        ("pollux-load", "pollux/workloads"),
    ],
)
def test_without_the_data_an_experiment_says_where_it_looked(tmp_path, capsys, name, folder):
    empty = tmp_path / "nothing here"
    empty.mkdir()
    err = fails(capsys, "reproduce", name, "--quick", "--data", empty, "--out", tmp_path / "out")
    assert err.strip() == (
        f"error: experiment {name} reads reference data from {empty / folder}, which is not a folder; "
        f"give the folder that holds {folder.split('/')[0]}/ with --data FOLDER"
    )
    assert not (tmp_path / "out").exists()  # (found before anything ran or was written)


def test_a_missing_data_folder_is_found_before_any_experiment_runs(tmp_path, capsys):
    ran = []

    @experiment("unit-test-no-data", "needs nothing", "nobody (2026)")
    def first(out, quick):
        ran.append(out)
        raise AssertionError("must not run")

    try:
        fails(capsys, "reproduce", "unit-test-no-data", "gavel-fidelity", "--data", tmp_path, "--out", tmp_path / "o")
        assert ran == []
    finally:
        EXPERIMENTS.pop("unit-test-no-data")


def test_a_file_an_experiment_cannot_read_is_not_called_unwritable(tmp_path, capsys):
    missing = tmp_path / "missing.csv"

    @experiment("unit-test-reads", "reads a file that is not there", "nobody (2026)")
    def reads(out, quick):
        missing.read_text()

    try:
        err = fails(capsys, "reproduce", "unit-test-reads", "--out", tmp_path / "out")
    finally:
        EXPERIMENTS.pop("unit-test-reads")
    assert err.strip() == f"error: experiment unit-test-reads failed: {missing}: No such file or directory"


# --- a damaged file, read in a worker process -------------------------------------------------

GRAPH = 'round = 1min;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="jobs.csv");\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;\n'


def test_a_damaged_trace_in_a_worker_is_its_file_and_line(tmp_path, capsys):
    """Two runs in worker processes (spawned): the TraceError of the one whose trace is damaged
    reaches the command as itself, not as a BrokenProcessPool."""
    for name, duration in (("good", "30"), ("bad", "thirty")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "graph.sched").write_text(GRAPH)
        (tmp_path / name / "jobs.csv").write_text(f"job_id,arrival_s,gpus,duration_s\n0,0,1,60\n1,5,1,{duration}\n")

    @experiment("unit-test-worker-error", "runs a damaged trace in a worker", "nobody (2026)")
    def damaged(out, quick):
        run([RunSpec(str(tmp_path / name / "graph.sched")) for name in ("good", "bad")])
        raise AssertionError("the damaged run must fail")

    try:
        err = fails(capsys, "reproduce", "unit-test-worker-error", "--out", tmp_path / "out")
    finally:
        EXPERIMENTS.pop("unit-test-worker-error")
    assert err.strip() == f"{tmp_path / 'bad' / 'jobs.csv'}:3: error: column 'duration_s': 'thirty' is not a number"
    assert not (tmp_path / "out" / "unit-test-worker-error" / "failure.txt").exists()


@needs_data
@pytest.mark.slow
def test_a_damaged_gavel_trace_is_named_by_gavel_fidelity(tmp_path, capsys):
    bad = changed("gavel", "phys_las.trace", 5, 6, "abc", "\t")
    data = data_with(tmp_path, "gavel", {"phys_las.trace": bad})
    err = fails(capsys, "reproduce", "gavel-fidelity", "--quick", "--data", data, "--out", tmp_path / "out")
    assert (
        err.strip().splitlines()[-1]
        == f"{data / 'gavel' / 'phys_las.trace'}:5: error: column 'total_steps': 'abc' is not a number"
    )


# --- Gavel's per-job results ------------------------------------------------------------------


def _results_lines() -> list[str]:
    return (DATA / "gavel" / RESULTS).read_text().split("\n")


@needs_data
@pytest.mark.parametrize(
    ("damage", "where", "words"),
    [
        (lambda: changed("gavel", RESULTS, 3, 9, "abc"), ":3", "column 'jct_s': 'abc' is not a number more than 0"),
        (lambda: changed("gavel", RESULTS, 3, 9, "-5000000"), ":3", "column 'jct_s': '-5000000' is not a number more than 0"),
        (lambda: changed("gavel", RESULTS, 3, 2, "1.5"), ":3", "column 'job_id': '1.5' is not a whole number, 0 or more"),
        (
            lambda: changed("gavel", RESULTS, 1, 9, "jct"),
            "",
            "missing column(s) jct_s (what is read of Gavel's per-job results: policy, job_id, jct_s)",
        ),
        (lambda: "", "", "is empty (no header line)"),
        (
            lambda: "\n".join(",".join(ln.split(",")[:5]) if n == 3 else ln for n, ln in enumerate(_results_lines(), start=1)),
            ":3",
            "has 5 values but the header names 10 columns",
        ),
        (
            lambda: "\n".join(ln for ln in _results_lines() if not ln.startswith("fifo,")),
            "",
            "no per-job results for policy fifo",
        ),
    ],
)
def test_damaged_gavel_results_are_named_before_any_run(tmp_path, capsys, damage, where, words):
    data = data_with(tmp_path, "gavel", {RESULTS: damage()})
    err = fails(capsys, "reproduce", "gavel-fidelity", "--quick", "--data", data, "--out", tmp_path / "out")
    assert err.strip().splitlines()[-1] == f"{data / 'gavel' / RESULTS}{where}: error: {words}"
    assert not list((tmp_path / "out" / "gavel-fidelity").glob("*.sched"))  # (nothing ran)


@needs_data
def test_gavel_results_without_a_jct_leave_that_job_out():
    from roundhouse.tools.reproductions.gavel import FIDELITY_POLICIES, gavel_results

    path = DATA / "gavel" / "msr_0e4a51_36-36-36_results_all_policies.csv"  # (fifo job 87: no jct_s)
    theirs = gavel_results(path, tuple(FIDELITY_POLICIES))
    rows = pl.read_csv(path, infer_schema=False)
    assert theirs.height == rows.height - 1
    assert 87 not in theirs.filter(pl.col("policy") == "fifo")["job_id"].to_list()
    assert (theirs["gavel_jct_s"] > 0).all()


# --- Pollux's workload ------------------------------------------------------------------------


@needs_data
def test_a_damaged_pollux_workload_is_named_not_its_copy(tmp_path, capsys):
    bad = changed("pollux", "workloads/workload-6.csv", 4, 3, "resnet")
    data = data_with(tmp_path, "pollux", {"workloads/workload-6.csv": bad})
    err = fails(capsys, "reproduce", "pollux-interval", "--quick", "--data", data, "--out", tmp_path / "out")
    assert err.strip().splitlines()[-1] == (
        f"{data / 'pollux' / 'workloads' / 'workload-6.csv'}:4: error: column 'application': "
        "unknown application 'resnet' (known: bert, cifar10, deepspeech2, imagenet, ncf, yolov3)"
    )
    assert not (tmp_path / "out" / "pollux-interval" / "workloads").exists()  # (no copy written)


# --- paths written into graphs ----------------------------------------------------------------


@pytest.mark.parametrize("text", ['q"uote', "back\\slash\\", 'both\\"', "line\nbreak", "tab\there", "plain"])
def test_sched_string_reads_back_as_the_same_string(text):
    (statement,) = parse(f"x = {sched_string(text)};\n", "g.sched").statements
    assert statement.value.value == text


def test_a_graph_naming_a_path_with_quotes_and_backslashes_reads_that_path(tmp_path):
    folder = tmp_path / 'a "quoted" \\ folder'
    folder.mkdir()
    (folder / "jobs.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,30\n")
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.replace('"jobs.csv"', sched_string(folder / "jobs.csv")))
    compiled = compile_file(graph)
    assert str(compiled.elements["src"].path) == str(folder / "jobs.csv")


def test_a_file_the_experiment_wrote_is_named_from_the_graphs_folder():
    out = Path("/x/out/NAME")
    assert path_from_graphs(out, out / "workloads" / "w.csv") == "../workloads/w.csv"
    assert path_from_graphs(out, Path("/data/pollux/w.csv")) == "/data/pollux/w.csv"  # (the reference data stays put)


@needs_data
def test_the_ones_graphs_name_their_trace_from_their_own_folder_and_move_with_it(tmp_path):
    from roundhouse.tools.reproductions import ones

    specs = ones.specs(tmp_path / "out" / "ones-64gpu", quick=True)  # (writes the trace and graphs, runs nothing)
    (tmp_path / "out").rename(tmp_path / "moved")
    for spec in specs:
        graph = tmp_path / "moved" / Path(spec.graph).relative_to(tmp_path / "out")
        assert 'TraceSource(path="../traces/ones-trace.csv")' in graph.read_text()
        assert compile_file(graph).elements["report"]


@needs_data
@pytest.mark.slow
def test_gavel_fidelity_runs_with_quotes_and_backslashes_in_its_folders(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    data = data_with(tmp_path / 'da"ta\\', "gavel", {})
    out = tmp_path / 'o"ut\\'
    assert main(["reproduce", "gavel-fidelity", "--quick", "--data", str(data), "--out", str(out)]) == 0
    table = pl.read_csv(out / "gavel-fidelity" / "fidelity.csv")
    assert table.height == 12 and (table["ours_avg_jct_s"] > 0).all()


# --- the formats of the reference data --------------------------------------------------------


def test_a_repeated_id_in_a_json_list_names_both_records_by_their_lines(tmp_path):
    records = [{"job_id": str(i), "max_parallelism": "1", "arrival_time": "0", "duration": "5"} for i in (1, 2, 1)]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(records, indent=1))
    lines = path.read_text().split("\n")
    starts = [n for n, line in enumerate(lines, start=1) if line == " {"]
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert str(caught.value) == (
        f"{path}:{starts[2]}: error: column 'job_id': record 3: job id 1 is used twice: here and at {path}:{starts[0]}"
    )


@needs_data
@pytest.mark.parametrize("name", ["validation-0.csv", "validation-.csv", "validation-x1.csv", "validation--128.csv"])
def test_an_elastic_profile_needs_a_batch_size_of_at_least_1(tmp_path, name):
    from roundhouse.traces.goodput import ElasticProfile

    shutil.copytree(DATA / "pollux" / "traces" / "cifar10", tmp_path / "cifar10")
    (tmp_path / "cifar10" / "validation-128.csv").rename(tmp_path / "cifar10" / name)
    with pytest.raises(TraceError) as caught:
        ElasticProfile.load_pollux(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'cifar10' / name}: error: a validation file's name must end in its batch size, "
        "at least 1: validation-<batch>.csv"
    )


ONES_HEADER = "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus"
ONES_ROW = "0,bert,cola,5000,5,16,5.00E-06,2.00E-05,0.8,2"


@pytest.mark.filterwarnings("error")  # (a numpy RuntimeWarning must not leak)
@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("epoch_size", "1e308", "the job's work in samples (its epochs x epoch_size) exceeds 2**53"),
        ("num_gpus", "1e30", "four times it (the GPUs a job may grow to) exceeds 2**63"),
        ("batch_size", "1e19", "the global batch (x num_gpus) exceeds 2**63"),
        ("batch_size", "1e200", "the global batch (x num_gpus) exceeds 2**63"),
    ],
)
def test_an_ones_number_too_large_is_named_by_its_line_and_own_column(tmp_path, column, value, why):
    cells = ONES_ROW.split(",")
    cells[ONES_HEADER.split(",").index(column)] = value
    path = tmp_path / "trace.csv"
    path.write_text(f"# ONES trace\n{ONES_HEADER}\n{ONES_ROW}\n\n{','.join(cells)}\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert str(caught.value) == f"{path}:5: error: column '{column}': {value} is too large: {why}"


@pytest.mark.filterwarnings("error")
def test_an_ones_trace_keeps_its_work_and_a_cap_too_large_to_matter(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(f"{ONES_HEADER}\n{ONES_ROW}\n")
    assert read_trace(path)["epochs"].to_list() == pytest.approx([5 * 5000 / 20000])  # BERT-CoLA: 5 epochs
    tiny_lr = ONES_ROW.replace("5.00E-06", "1e-300")  # (the cap, batch x max_lr / lr: 3.2e301)
    path.write_text(f"{ONES_HEADER}\n{tiny_lr}\n")
    assert read_trace(path)["max_batch_size"].to_list() == [2.0**53]


def test_a_cluster_spec_with_a_byte_order_mark_reads_as_without(tmp_path):
    from roundhouse.errors import ClusterError
    from roundhouse.runtime.cluster import ClusterSpec

    plain = REPO / "clusters" / "gavel-simulated.toml"
    marked = tmp_path / "marked.toml"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert ClusterSpec.from_toml(marked) == ClusterSpec.from_toml(plain)
    # A bad byte is still named by its place in the file, as an editor shows it (the mark is no column).
    marked.write_bytes(b'\xef\xbb\xbfname = "a\xff"\n')
    with pytest.raises(ClusterError, match=r"not UTF-8 text \(byte 0xff at line 1, column 10 cannot be decoded\)"):
        ClusterSpec.from_toml(marked)
