"""Bad traces and values reach the user as one clear sentence and exit status 2, never a
traceback or a corrupted run: trace columns that clash with the simulator's own job-table
columns, optional numeric columns holding text, and absurd numbers for `trace generate`."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import RoundhouseError, TraceError
from roundhouse.tools.cli import main
from roundhouse.traces import canonical, philly
from roundhouse.traces.formats import read_trace
from roundhouse.traces.jobs import OWN_COLUMNS
from roundhouse.traces.schema import validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "traces" / "samples"
LAS = str(ROOT / "graphs" / "las.sched")
HEADER = "job_id,arrival_s,gpus,duration_s"


def write(tmp_path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def fails(args: list[str], capsys, *words: str) -> str:
    """Run the command line; it must exit 2 with every one of `words` in its message."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    return err


# --- trace columns never overwrite the simulator's own ------------------------------------------


def test_shipped_philly_sample_runs_and_keeps_status_apart(capsys):
    path = SAMPLES / "philly-cluster-job-log-50.json"
    assert main(["run", LAS, "--trace", str(path), "--until", "1h"]) == 0
    frame = read_trace(path)
    assert "status" not in frame.columns and frame["philly_status"].drop_nulls().len() > 0


def test_philly_records_without_status_read(tmp_path):
    record = {
        "jobid": "a",
        "submitted_time": "2017-10-03 08:00:00",
        "attempts": [
            {"start_time": "2017-10-03 08:00:00", "end_time": "2017-10-03 09:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}
        ],
    }
    frame = read_trace(write(tmp_path, json.dumps([record]), "p.json"))
    assert frame["philly_status"].to_list() == [None] and frame["duration_s"].to_list() == [3600.0]


@pytest.mark.parametrize("column", sorted(OWN_COLUMNS))
def test_every_own_column_is_refused(column):
    frame = pl.DataFrame({"job_id": ["0"], "arrival_s": ["0"], "gpus": ["1"], "duration_s": ["100"], column: ["abc"]})
    with pytest.raises(TraceError) as info:
        validate(frame, "t.csv")
    assert info.value.column == column and "simulator keeps itself" in str(info.value)


def test_own_column_in_csv_fails_run_clearly(tmp_path, capsys):
    path = write(tmp_path, f"{HEADER},run_s\n0,0,1,100,5000\n")  # would have made queueing negative
    fails(["run", LAS, "--trace", str(path), "--until", "1h"], capsys, str(path), "column 'run_s'", "rename or drop")


def test_own_column_in_parquet_names_it(tmp_path, capsys):
    path = tmp_path / "t.parquet"
    pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [100.0], "status": [5]}).write_parquet(path)
    fails(["trace", "describe", str(path)], capsys, str(path), "column 'status'")


def test_a_runs_jobs_csv_is_not_a_trace(tmp_path, capsys):
    trace = write(tmp_path, f"{HEADER}\n0,0,1,100\n1,10,2,200\n")
    out = tmp_path / "out"
    assert main(["run", LAS, "--trace", str(trace), "--cluster", "1x4:V100", "--out", str(out)]) == 0
    capsys.readouterr()
    fails(["run", LAS, "--trace", str(out / "jobs.csv")], capsys, "jobs.csv", "results of a run", "'status'")


def test_live_submission_with_own_column_is_refused_and_not_journaled(tmp_path):
    from roundhouse.runtime.backends.live.submissions import Submissions
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.journal import Journal
    from roundhouse.runtime.world import World
    from roundhouse.traces.profiles import ProfileTable

    world = World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100")
    journal = Journal(tmp_path / "j.sqlite")
    submissions = Submissions(world, journal)
    with pytest.raises(RoundhouseError, match="column 'status'"):
        submissions.accept([{"job_id": 100, "gpus": 1, "duration_s": 100, "status": "Pass"}], 0.0)
    assert journal.submission_ids() == set() and len(world.jobs) == 0
    # `roundhouse submit` reads the file itself first, so its error names the file.
    path = write(tmp_path, f"{HEADER},status\n100,0,1,100,Pass\n")
    with pytest.raises(TraceError, match=f"{path}: error: column 'status'"):
        read_trace(path)


# --- optional numeric columns ------------------------------------------------------------------

LOSS_HEADER = f"{HEADER},loss_start,loss_final,loss_speed"


def test_loss_columns_are_numbers_even_as_5e3(tmp_path, capsys):
    path = write(tmp_path, f"{LOSS_HEADER}\n0,0,1,100,4.5,0.7,5e3\n")
    assert canonical.read_csv(path)["loss_speed"].to_list() == [5000.0]
    for graph in ("las.sched", "loss-termination.sched", "optimus.sched"):
        assert main(["run", str(ROOT / "graphs" / graph), "--trace", str(path), "--until", "1h"]) == 0


@pytest.mark.parametrize(
    "header, row, column",
    [
        (LOSS_HEADER, "0,0,1,100,4.5,0.7,fast", "loss_speed"),
        (f"{HEADER},loss", "0,0,1,100,abc", "loss"),
        (f"{HEADER},slo_factor", "0,0,1,100,twice", "slo_factor"),
        (f"{HEADER},tensor_skew", "0,0,1,100,big", "tensor_skew"),
    ],
)
def test_numeric_column_with_text_names_row_and_column(tmp_path, capsys, header, row, column):
    path = write(tmp_path, f"{header}\n{row}\n")
    fails(["run", LAS, "--trace", str(path), "--until", "1h"], capsys, f"{path}:2: error: column '{column}'", "not a number")


def test_incomplete_or_doubled_loss_columns(tmp_path, capsys):
    partial = write(tmp_path, f"{HEADER},loss_start,loss_final\n0,0,1,100,4.5,0.7\n", "partial.csv")
    fails(["run", LAS, "--trace", str(partial), "--until", "1h"], capsys, str(partial), "needs all three columns")
    both = write(tmp_path, f"{LOSS_HEADER},loss\n0,0,1,100,4.5,0.7,3,2\n", "both.csv")
    fails(["run", LAS, "--trace", str(both), "--until", "1h"], capsys, str(both), "column 'loss'")
    # Every reader checks the curves, so `trace describe` already says what `run` would.
    fails(["trace", "describe", str(partial)], capsys, str(partial), "needs all three columns")
    upside_down = write(tmp_path, f"{LOSS_HEADER}\n0,0,1,100,0.5,0.7,3\n", "upside-down.csv")
    fails(
        ["trace", "describe", str(upside_down)],
        capsys,
        f"{upside_down}:2: error: column 'loss_start': must be greater than loss_final",
    )


def test_loss_termination_without_loss_final(tmp_path, capsys):
    path = write(tmp_path, f"{HEADER},loss\n0,0,1,100,2.5\n")
    graph = str(ROOT / "graphs" / "loss-termination.sched")
    fails(["run", graph, "--trace", str(path), "--until", "1h"], capsys, "LossTermination", "no loss_final")


# --- readers and writers -----------------------------------------------------------------------


def test_gavel_batch_size_beyond_int64(tmp_path, capsys):
    line = "\t".join(["ResNet-18 (batch size 99999999999999999999999)", "cmd", ".", "--n", "1", "100", "1", "1", "-1", "0"])
    path = write(tmp_path, line + "\n", "g.trace")
    fails(["trace", "describe", str(path)], capsys, f"{path}:1", "column 'job_type'", "batch size", "too large")


def test_parquet_list_in_canonical_column(tmp_path, capsys):
    path = tmp_path / "l.parquet"
    pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [1.0], "model": [[1]]}).write_parquet(path)
    fails(["trace", "describe", str(path)], capsys, str(path), "column 'model'", "expected text")


@pytest.mark.parametrize("name, text", [("h.csv", f"{HEADER}\n"), ("e.json", "[]\n")])
def test_empty_trace_to_gavel(tmp_path, capsys, name, text):
    out = tmp_path / "o.trace"
    fails(["trace", "convert", str(write(tmp_path, text, name)), str(out)], capsys, str(out), "no jobs")
    assert not out.exists()


def test_deeply_nested_json(tmp_path, capsys):
    path = write(tmp_path, "[" * 100000 + "]" * 100000, "deep.json")
    with pytest.raises(TraceError, match="nested too deeply"):
        philly.read(path)
    fails(["trace", "describe", str(path)], capsys, str(path), "not valid JSON")


# --- trace generate numbers --------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--rate", "1e400/h"], ["--rate", "finite"]),
        (["--rate", "1e300/h"], ["--rate", "at most"]),
        (["--rate", "1e400/h", "--workload", "tiresias"], ["--rate"]),
        (["--start-id", "9223372036854775807"], ["--start-id", "at most"]),
        (["--start-id", "9223372036854775800"], ["--start-id", "64 bits"]),
        (["--rate", "1e-12/s", "--format", "philly"], ["--rate", "too low"]),
        (["--rate", "1e-300/s", "--format", "tiresias"], ["--rate", "too low"]),
        (["--jobs", "100000000000"], ["--jobs", "at most"]),
    ],
)
def test_generate_refuses_absurd_numbers(tmp_path, capsys, extra, words):
    # (each option once: one given twice would be refused as such, its value unread)
    given = {"--jobs": "10", "--rate": "8/h", "--seed": "1"} | dict(zip(extra[::2], extra[1::2]))
    args = ["trace", "generate", "-o", str(tmp_path / "g.csv"), *(text for pair in given.items() for text in pair)]
    fails(args, capsys, *words)
    assert not (tmp_path / "g.csv").exists()


def test_generate_largest_start_id_fits(tmp_path):
    out = tmp_path / "g.csv"
    args = ["trace", "generate", "-o", str(out), "--jobs", "3", "--rate", "8/h", "--seed", "1"]
    assert main(args + ["--start-id", str(2**63 - 3)]) == 0
    assert read_trace(out)["job_id"].max() == 2**63 - 1


# --- quoted text, kept values, optional numbers ----------------------------------------------


def test_a_quote_left_open_is_an_error_not_the_rest_of_the_file(tmp_path, capsys):
    path = write(tmp_path, f'{HEADER},user\n0,0,1,10,"a\n1,5,2,20,b\n2,6,1,1,c\n')
    fails(["trace", "describe", str(path)], capsys, f"{path}:2: error: a quoted value in this row is not closed")
    # A comment line holding a quote is a comment still, and quoted separators and lines are values.
    path = write(tmp_path, f'# the "users, quoted\n{HEADER},user\r\n0,0,1,10,"a,b"\r\n\r\n1,5,2,20,"two\nlines"\n')
    assert read_trace(path)["user"].to_list() == ["a,b", "two\nlines"]


@pytest.mark.parametrize("quoted", ["", '"'])
def test_an_empty_row_is_an_error_with_quotes_in_the_file_or_without(tmp_path, capsys, quoted):
    path = write(tmp_path, f"{HEADER},user\n0,0,1,10,{quoted}a{quoted}\n,,,,\n")
    fails(["trace", "describe", str(path)], capsys, f"{path}:3: error: column 'job_id': has no value")


def test_numbers_a_float_would_change_stay_text(tmp_path):
    path = write(tmp_path, f"{HEADER},name,origin,share\n0,0,1,10,007,9007199254740993,0.5\n1,5,2,20,012,1,0.25\n")
    frame = read_trace(path)
    assert frame["name"].to_list() == ["007", "012"] and frame["origin"].to_list() == ["9007199254740993", "1"]
    assert frame["share"].to_list() == [0.5, 0.25]  # plain numbers are numbers still


@pytest.mark.parametrize(
    "column, value, words",
    [
        ("slo_factor", "-3", "must be greater than 0, got -3"),
        ("slo_factor", "nan", "must be a finite number, got nan"),
        ("epochs", "-1", "must be greater than 0, got -1"),
        ("epoch_size", "0", "must be greater than 0, got 0"),
        ("max_gpus", "0.5", "must be at least 1, got 0.5"),
        ("cpus", "inf", "must be a finite number, got inf"),
        ("tensor_skew", "2", "must be between 0 and 1 (a share of the model), got 2"),
    ],
)
def test_optional_numbers_are_checked_like_the_canonical_ones(tmp_path, capsys, column, value, words):
    path = write(tmp_path, f"{HEADER},{column}\n0,0,1,10,1\n1,5,1,10,{value}\n")
    fails(["trace", "describe", str(path)], capsys, f"{path}:3: error: column '{column}': {words}")


def test_a_gavel_slo_of_minus_one_is_none_and_other_negatives_are_refused(tmp_path, capsys):
    line = "ResNet-18 (batch size 32)\tpython3 main.py\tcifar10\t--num_steps\t1\t1000\t1\t1.0\t{}\t0.0\n"
    assert read_trace(write(tmp_path, line.format("-1"), "a.trace"))["slo_factor"].to_list() == [None]
    path = write(tmp_path, line.format("-0.5"), "b.trace")
    fails(["trace", "describe", str(path)], capsys, f"{path}:1: error: column 'SLO': must be greater than 0, got -0.5")


def test_a_compressed_trace_and_a_text_format_in_a_parquet_file_are_refused(tmp_path, capsys):
    import gzip

    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(f"{HEADER}\n0,0,1,10\n".encode()))
    fails(["trace", "describe", str(path)], capsys, f"{path}: error: is gzip-compressed; decompress it first")
    out = tmp_path / "x.parquet"
    args = ["trace", "generate", "-o", str(out), "--format", "tiresias", "--jobs", "5", "--rate", "4/h", "--seed", "1"]
    fails(args, capsys, "a tiresias trace is text; a .parquet file holds a canonical trace")
    assert not out.exists()
