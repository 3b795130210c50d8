"""Trace fields no job can mean, refused where they are: Gavel's needs_data_dir that is not 0 or
1 and its empty priority weights and SLOs, ONES targets above 1 and a max_lr below the lr, a
file named .parquet that is not Parquet, and a source's job check said at the source's line."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import canonical, gavel, ones
from roundhouse.traces.formats import load_trace
from tests.conftest import fails
from tests.test_trace_readers_pieces import job_line, read_both

SAMPLES = Path(__file__).resolve().parents[1] / "traces" / "samples"


def gavel_trace(tmp_path, **fields: str) -> str:
    """Three Gavel lines, the second with `fields` (Gavel's names) replaced."""
    lines = [job_line(0), job_line(1, **fields), job_line(2)]
    path = tmp_path / "t.trace"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# --- Gavel: needs_data_dir, priority_weight, SLO ---


@pytest.mark.parametrize("value", ["nan", "-5", "2", "0.5", "inf"])
def test_gavel_needs_data_dir_other_than_0_or_1_is_refused_at_its_line(tmp_path, value):
    path = gavel_trace(tmp_path, needs_data_dir=value)
    with pytest.raises(TraceError) as caught:
        gavel.read(path)
    assert (caught.value.row, caught.value.column) == (2, "needs_data_dir")
    assert f"must be 0 or 1 (whether the job's command takes a data directory), got {value}" in str(caught.value)


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("needs_data_dir", "0 or 1"),
        ("priority_weight", "a priority weight (1 is the usual)"),
        ("SLO", "an SLO factor (-1 for none)"),
    ],
)
def test_gavel_empty_number_fields_are_refused(tmp_path, field, said):
    path = gavel_trace(tmp_path, **{field: " "})
    with pytest.raises(TraceError) as caught:
        gavel.read(path)
    assert (caught.value.row, caught.value.column) == (2, field)
    assert f"has no value: every line of a Gavel trace gives {said}" in str(caught.value)


def test_gavel_describe_refuses_a_bad_needs_data_dir(tmp_path, capsys):
    path = gavel_trace(tmp_path, needs_data_dir="-5")
    err = fails(capsys, "trace", "describe", path)
    assert f"{path}:2: error: column 'needs_data_dir': must be 0 or 1" in err


def test_gavel_zero_and_one_still_read(tmp_path):
    path = gavel_trace(tmp_path, needs_data_dir="0")
    frame = gavel.read(path)
    assert frame["needs_data_dir"].to_list() == [1.0, 0.0, 1.0]
    shipped = gavel.read(SAMPLES / "gavel-50.trace")
    assert shipped.height == 50 and set(shipped["needs_data_dir"].to_list()) <= {0.0, 1.0}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # One field's problems share a check: the first line with any of them is named.
        (
            {1700: job_line(1699, needs_data_dir="-5"), 1800: job_line(1799, needs_data_dir="abc")},
            ":1700: error: column 'needs_data_dir': must",
        ),
        (
            {1700: job_line(1699, needs_data_dir="abc"), 1800: job_line(1799, needs_data_dir="")},
            ":1700: error: column 'needs_data_dir': 'abc'",
        ),
        ({1700: job_line(1699, SLO=""), 1800: job_line(1799, SLO="x")}, ":1700: error: column 'SLO': has no value"),
        # needs_data_dir is checked after SLO, as its values were converted after SLO's.
        ({30: job_line(29, needs_data_dir="7"), 1500: job_line(1499, SLO="")}, ":1500: error: column 'SLO'"),
        # Every field's values before the schema's checks.
        (
            {20: job_line(19, scale_factor="0"), 1700: job_line(1699, priority_weight="")},
            ":1700: error: column 'priority_weight'",
        ),
    ],
)
def test_gavel_field_errors_read_in_pieces_are_those_read_at_once(tmp_path, changes, expected):
    path = tmp_path / "bad.trace"
    path.write_text("\n".join(changes.get(n + 1, job_line(n)) for n in range(2000)) + "\n")
    whole, parts = read_both(str(path), 5000)
    assert isinstance(parts, str), parts
    assert parts == whole
    assert expected in parts


def test_gavel_writer_refuses_a_needs_data_dir_it_could_not_read_back(tmp_path):
    jobs = pl.DataFrame(
        {
            "job_id": [0, 1],
            "arrival_s": [0.0, 5.0],
            "gpus": [1, 2],
            "model": ["ResNet-18", "LM"],
            "iterations": [100.0, 200.0],
            "batch_size": [32, 20],
            "needs_data_dir": [0.0, 3.0],
        }
    )
    with pytest.raises(TraceError, match="job 1: needs_data_dir must be 0 or 1 in a Gavel trace, got 3"):
        gavel.write(jobs, tmp_path / "w.trace")
    gavel.write(jobs.with_columns(needs_data_dir=pl.Series([0.0, None])), tmp_path / "ok.trace")
    assert gavel.read(tmp_path / "ok.trace")["needs_data_dir"].to_list() == [0.0, 1.0]  # (LM's, from Gavel's table)


# --- ONES: target accuracy and learning rates ---

ONES_HEADER = "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
ONES_ROW = "0,resnet50,imagenet,10000,10,32,{lr},{max_lr},{acc},16\n"


def ones_trace(tmp_path, lr="5e-4", max_lr="0.008", acc="0.55") -> Path:
    path = tmp_path / "ones.csv"
    path.write_text(
        ONES_HEADER + ONES_ROW.format(lr="5e-4", max_lr="0.008", acc="0.55") + ONES_ROW.format(lr=lr, max_lr=max_lr, acc=acc)
    )
    return path


@pytest.mark.parametrize("acc", ["1.01", "2", "55"])
def test_ones_target_accuracy_above_1_is_refused(tmp_path, acc):
    with pytest.raises(TraceError) as caught:
        ones.read_trace(ones_trace(tmp_path, acc=acc))
    assert (caught.value.row, caught.value.column) == (3, "target_acc")
    assert "is above 1: the target accuracy is a fraction (0.55 for 55%)" in str(caught.value)


@pytest.mark.parametrize(("column", "value"), [("acc", "0"), ("acc", "-0.5"), ("lr", "0"), ("lr", "inf"), ("max_lr", "nan")])
def test_ones_non_positive_or_non_finite_settings_are_refused(tmp_path, column, value):
    with pytest.raises(TraceError) as caught:
        ones.read_trace(ones_trace(tmp_path, **{column: value}))
    assert caught.value.row == 3 and "is not a number more than 0" in str(caught.value)


def test_ones_max_lr_below_lr_is_refused(tmp_path):
    with pytest.raises(TraceError) as caught:
        ones.read_trace(ones_trace(tmp_path, lr="0.01", max_lr="0.008"))
    assert (caught.value.row, caught.value.column) == (3, "max_lr")
    assert "'0.008' is below lr '0.01'" in str(caught.value)


def test_ones_bounds_themselves_and_the_artifact_s_settings_read(tmp_path):
    frame = ones.read_trace(ones_trace(tmp_path, lr="0.008", max_lr="0.008", acc="1"))
    assert frame["target_acc"].to_list() == [0.55, 1.0]
    generated = ones.generate(jobs=40)  # (every pair of Table 2, as the artifact's trace sets it)
    assert generated.height == 40 and generated["model"].n_unique() == 10


# --- A file named .parquet that is not Parquet ---


def test_csv_named_parquet_is_said_to_be_csv(tmp_path, capsys):
    path = tmp_path / "jobs.parquet"
    path.write_bytes(b"\xef\xbb\xbf" + (SAMPLES / "philly-1000.csv").read_bytes())
    with pytest.raises(TraceError) as caught:
        canonical.read_parquet(path)
    assert "is not a Parquet file: it looks like CSV text ('job_id,arrival_s," in str(caught.value)
    assert "name a CSV trace .csv" in str(caught.value) and "PAR1" not in str(caught.value)
    with pytest.raises(TraceError, match="looks like CSV text"):
        load_trace(path)
    err = fails(capsys, "trace", "describe", path)
    assert "looks like CSV text" in err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "is empty, not a Parquet file"),
        ((SAMPLES / "gavel-50.trace").read_bytes(), "is not a Parquet file: it holds text ('ResNet-18 (batch size 32)"),
        (bytes(range(256)) * 4, "is not a Parquet file (one begins and ends with the bytes PAR1)"),
    ],
    ids=["empty", "gavel-text", "binary"],
)
def test_other_files_named_parquet_are_said_to_be_no_parquet(tmp_path, content, said):
    path = tmp_path / "jobs.parquet"
    path.write_bytes(content)
    with pytest.raises(TraceError) as caught:
        canonical.read_parquet(path)
    assert said in str(caught.value)


def test_a_parquet_file_cut_short_is_said_so_and_a_whole_one_reads(tmp_path):
    jobs = canonical.read_csv(SAMPLES / "philly-1000.csv")
    whole = tmp_path / "whole.parquet"
    canonical.write_parquet(jobs, whole)
    assert canonical.read_parquet(whole).equals(jobs)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(whole.read_bytes()[:-100])
    with pytest.raises(TraceError, match="begins as a Parquet file but does not end as one"):
        canonical.read_parquet(cut)


# --- A source's job check, at the source's line ---

GRAPH = 'cluster = "1x4:V100";\n{source};\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'


def test_a_generated_job_larger_than_the_cluster_is_said_at_the_source_s_line(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(source="src :: PoissonSource(rate=8/h, jobs=200, seed=1)"))
    for command in ("check", "run"):
        argv = [command, graph] + (["--out", tmp_path / "out"] if command == "run" else [])
        err = fails(capsys, *argv)
        assert err.startswith(f"{graph}:2:1: error: element 'src' (PoissonSource): job "), err
        assert "GPUs but the cluster has 4" in err and " 2 | src :: PoissonSource" in err


def test_a_trace_s_job_larger_than_the_cluster_names_the_trace_and_the_source_s_line(tmp_path, capsys):
    trace = SAMPLES / "philly-1000.csv"
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(source=f'src :: TraceSource(path="{trace}")'))
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{trace}: error: job "), err
    assert f"GPUs but the cluster has 4 (a job of element 'src' (TraceSource), declared at {graph}:2:1)" in err


def test_a_run_given_csv_named_parquet_as_its_trace_is_told_so(tmp_path, capsys):
    from tests.conftest import REPO

    fake = tmp_path / "jobs.parquet"
    fake.write_bytes((REPO / "traces" / "samples" / "philly-1000.csv").read_bytes())
    err = fails(capsys, "run", str(REPO / "graphs" / "fifo.sched"), "--trace", str(fake))
    assert "is not a Parquet file: it looks like CSV text" in err and "PAR1" not in err
