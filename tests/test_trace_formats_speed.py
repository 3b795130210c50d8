"""`roundhouse trace generate`'s writers: the synthetic Philly log and the Gavel trace are drawn,
formatted and written a chunk at a time, and ONES' workload is drawn in bulk, with the same bytes
for a seed as before (checked against the shipped samples and, for Philly and ONES, against the
former one-record-at-a-time algorithms, kept here as references); a workload/format pair that
cannot be written, and an extension that names another format, are refused before any drawing."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.tools import trace_cmd
from roundhouse.tools.cli import main
from roundhouse.traces import gavel, ones, philly, pollux
from roundhouse.traces.formats import read_trace, write_trace
from roundhouse.traces.generators import philly_durations, philly_gpus, poisson_arrivals
from tests.conftest import fails

SAMPLES = Path(__file__).resolve().parents[1] / "traces" / "samples"


# --- references: the former algorithms, one record at a time --------------------------------


def _reference_philly(jobs, rate_per_s, seed, start="2017-10-02 08:00:00", never_ran=0.15) -> list[dict]:
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]
    arrival_rng, size_rng, shape_rng, name_rng = streams
    submitted = poisson_arrivals(jobs, rate_per_s, arrival_rng)
    durations = philly_durations(jobs, size_rng)
    gpus = philly_gpus(jobs, size_rng)
    users = [f"{u:06x}" for u in name_rng.integers(0, 16**6, size=12)]
    vcs = [f"vc{v:04x}" for v in name_rng.integers(0, 16**4, size=4)]
    origin = dt.datetime.strptime(start, philly.TIME_FORMAT)

    def stamp(seconds):
        return (origin + dt.timedelta(seconds=int(seconds))).strftime(philly.TIME_FORMAT)

    records = []
    for i in range(jobs):
        ran = shape_rng.random() >= never_ran
        kind = shape_rng.random()
        queued = float(shape_rng.exponential(600.0))
        tries = 1 if shape_rng.random() < 5 / 6 else int(shape_rng.integers(2, 4))
        split = shape_rng.dirichlet(np.ones(tries)) * durations[i]
        gaps = shape_rng.exponential(120.0, size=tries)
        status = ("Pass", "Killed", "Failed")[int(np.searchsorted([0.6, 0.85], shape_rng.random(), side="right"))]
        machine = int(shape_rng.integers(100, 999))
        detail = philly._detail(int(gpus[i]), machine, spread=shape_rng.random() < 0.3)
        attempts = []
        clock = submitted[i] + queued
        if ran:
            for part, gap in zip(split, gaps):
                begin, clock = clock, clock + max(part, 1.0)
                attempts.append({"start_time": stamp(begin), "end_time": stamp(clock), "detail": detail})
                clock += gap
        elif kind < 0.5:
            status = "Killed"
        else:
            status = "Failed"
            attempts.append({"start_time": stamp(clock), "end_time": "None", "detail": detail})
        records.append(
            {
                "status": status,
                "vc": vcs[int(name_rng.integers(0, len(vcs)))],
                "jobid": f"application_1500000000000_{i + 1:05d}",
                "attempts": attempts,
                "submitted_time": stamp(submitted[i]),
                "user": users[int(name_rng.integers(0, len(users)))],
            }
        )
    return records


def _reference_text(records: list[dict]) -> str:
    body = ",\n".join(json.dumps(r, separators=(", ", ": ")) for r in records)
    return "[\n" + body + "\n]\n" if records else "[]\n"


def _reference_ones(jobs, mean_gap_s, seed) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    pick = rng.permutation(np.arange(jobs) % len(ones.PAIRS))
    arrival = np.concatenate(([0.0], np.cumsum(rng.exponential(mean_gap_s, jobs - 1))))
    rows = []
    for p, t in zip(pick.tolist(), np.floor(arrival).tolist(), strict=True):
        name, gpus, local, base_lr, max_lr, target, patience, sizes, *_ = ones.PAIRS[p]
        model, task = name.split("-")
        rows.append((t, model, task, int(rng.choice(sizes)), patience, local, base_lr, max_lr, target, gpus))
    return ones.parse_trace(pl.DataFrame(rows, schema=list(ones.TRACE_COLUMNS), orient="row"), "generated")


# --- the same bytes -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 2, 11])
@pytest.mark.parametrize("jobs, never_ran", [(1, 0.15), (3, 0.0), (40, 0.15), (40, 1.0), (257, 0.5)])
def test_synthetic_philly_log_writes_the_former_bytes_in_chunks(tmp_path, monkeypatch, seed, jobs, never_ran):
    monkeypatch.setattr(philly, "_CHUNK", 16)  # many chunks, and a last one part full
    expected = _reference_philly(jobs, 1 / 90, seed, start="2019-12-31 23:58:00", never_ran=never_ran)
    log = philly.SyntheticLog(jobs, 1 / 90, seed, start="2019-12-31 23:58:00", never_ran=never_ran)
    assert log.write(tmp_path / "log.json") == jobs
    assert (tmp_path / "log.json").read_text() == _reference_text(expected)
    assert log.write(tmp_path / "again.json") == jobs  # (a second pass draws the same)
    assert (tmp_path / "again.json").read_text() == _reference_text(expected)
    assert philly.synthetic_cluster_job_log(jobs, 1 / 90, seed, start="2019-12-31 23:58:00", never_ran=never_ran) == expected
    stamps = [dt.datetime.strptime(r["submitted_time"], philly.TIME_FORMAT) for r in (expected[0], expected[-1])]
    assert log.span_s == (stamps[1] - stamps[0]).total_seconds()


def test_write_cluster_job_log_streams_records_with_the_former_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(philly, "_CHUNK", 4)
    records = _reference_philly(10, 1 / 60, 5)
    assert philly.write_cluster_job_log(iter(records), tmp_path / "a.json") == 10
    assert (tmp_path / "a.json").read_text() == _reference_text(records)
    assert philly.write_cluster_job_log([], tmp_path / "none.json") == 0
    assert (tmp_path / "none.json").read_text() == "[]\n"


@pytest.mark.parametrize("name, module", [("philly-cluster-job-log-50.json", philly), ("gavel-50.trace", gavel)])
def test_shipped_samples_regenerate_byte_identical_in_small_chunks(tmp_path, monkeypatch, capsys, name, module):
    from tests.traces.test_traces_samples import readme_commands

    monkeypatch.setattr(module, "_CHUNK", 7)
    argv = readme_commands()[name]
    argv[argv.index("-o") + 1] = str(tmp_path / name)
    assert main(argv) == 0
    assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes()


def test_gavel_writer_rewrites_a_trace_it_read_byte_identical(tmp_path, monkeypatch):
    monkeypatch.setattr(gavel, "_CHUNK", 3)
    assert gavel.write(read_trace(SAMPLES / "gavel-50.trace"), tmp_path / "again.trace") == []
    assert (tmp_path / "again.trace").read_bytes() == (SAMPLES / "gavel-50.trace").read_bytes()


def test_gavel_writer_fills_job_types_and_commands_per_job(tmp_path):
    """Unbatched models, missing batch sizes and a command of the job's own, in one trace."""
    frame = read_trace(SAMPLES / "philly-1000.csv").head(6)
    frame = frame.with_columns(
        model=pl.Series(["A3C", "CycleGAN", "ResNet-18", "ResNet-18", "LM", "Mystery"]),
        batch_size=pl.Series([None, 7, None, 64, 20, 3], dtype=pl.Int64),
        iterations=pl.lit(55.0),
        duration_s=pl.lit(None, pl.Float64),
        command=pl.Series([None, None, None, "run it", None, None], dtype=pl.String),
    )
    write_trace(frame, tmp_path / "t.trace", "gavel")
    lines = [line.split("\t") for line in (tmp_path / "t.trace").read_text().splitlines()]
    assert [f[0] for f in lines] == [
        "A3C",
        "CycleGAN",
        "ResNet-18",
        "ResNet-18 (batch size 64)",
        "LM (batch size 20)",
        "Mystery (batch size 3)",
    ]
    default = gavel.ProfileTable.load().default_batch_size("ResNet-18")
    assert lines[2][1] == gavel.COMMANDS["ResNet-18"][1].format(bs=default)
    assert lines[3][1] == "run it"
    assert lines[5][1:5] == ["python3 main.py --batch_size 3", ".", "--num_steps", "1"]
    assert [f[5] for f in lines] == ["55"] * 6


@pytest.mark.parametrize("seed", [0, 1, 9])
@pytest.mark.parametrize("jobs", [1, 2, 10, 33, 400])
def test_ones_workload_is_the_former_one(seed, jobs):
    assert ones.generate(jobs, 30.0, seed).equals(_reference_ones(jobs, 30.0, seed))


# --- refused before drawing ---------------------------------------------------------------


def _never(*args, **kwargs):
    raise AssertionError("drew the jobs before checking the format")


@pytest.fixture
def no_drawing(monkeypatch):
    from roundhouse.traces import generators

    for module, name in (
        (generators, "generate"),
        (generators, "tiresias_testbed"),
        (generators, "dally_workload"),
        (generators, "synergy_philly"),
        (ones, "generate"),
        (pollux, "generate"),
        (philly, "SyntheticLog"),
    ):
        monkeypatch.setattr(module, name, _never)


UNWRITABLE = [
    (w, f) for w in trace_cmd.WORKLOAD_CHOICES for f in trace_cmd.GENERATE_FORMATS if f not in trace_cmd.WORKLOAD_FORMATS[w]
]
EXTENSION = {"canonical": ".csv", "gavel": ".trace", "tiresias": ".csv", "philly": ".json"}


def _generate(out, workload, *extra, seed: int = 0) -> list[str]:
    rate = [] if workload == "dally-batch" else ["--rate", "8/h"]
    return ["trace", "generate", "-o", str(out), "--jobs", "3", "--seed", str(seed), "--workload", workload, *rate, *extra]


@pytest.mark.parametrize("workload, format", UNWRITABLE)
def test_a_workload_format_pair_that_cannot_be_written_is_refused_before_drawing(tmp_path, capsys, no_drawing, workload, format):
    out = tmp_path / f"x{EXTENSION[format]}"
    err = fails(capsys, *_generate(out, workload, "--format", format))
    assert f"--workload {workload} cannot be written as --format {format}: " in err
    writable = trace_cmd.WORKLOAD_FORMATS[workload]
    assert f"--workload {workload} can be written as canonical (.csv, .parquet or .pq)" in err
    assert all(f in err.split("can be written as")[1] for f in writable)
    assert not out.exists()
    if format in ("gavel", "philly"):  # told by the extension alone (.csv is canonical), the message says so
        err = fails(capsys, *_generate(out, workload))
        assert f"--workload {workload} cannot be written as {format} (the format of -o '{out}', by its extension)" in err


def test_the_workload_formats_table_matches_what_the_writers_do(tmp_path):
    """Every pair in WORKLOAD_FORMATS writes (a few seeds), and every pair left out fails for some
    seed when its frame is written anyway (Philly's own log is a generator of its own)."""
    for workload, formats in trace_cmd.WORKLOAD_FORMATS.items():
        for format in ("gavel", "tiresias"):
            results = []
            for seed in range(4):
                extra = ["--models", "blox"] if workload == "philly" and format == "gavel" else []
                out = tmp_path / f"{workload}-{seed}{EXTENSION[format]}"
                if format in formats:
                    assert main(_generate(out, workload, "--format", format, *extra, seed=seed)) == 0
                    continue
                assert main(_generate(tmp_path / "frame.parquet", workload, seed=seed)) == 0
                try:
                    write_trace(read_trace(tmp_path / "frame.parquet"), out, format)
                    results.append(True)
                except Exception:
                    results.append(False)
            assert format in formats or not all(results), (workload, format)


@pytest.mark.parametrize(
    "name, format, words",
    [
        (
            "x.json",
            "canonical",
            "-o '{out}': --format canonical writes CSV, but a .json file is read as a Philly cluster_job_log",
        ),
        ("x.trace", "tiresias", "--format tiresias writes a Tiresias CSV, but a .trace file is read as a Gavel trace"),
        ("x.csv", "philly", "--format philly takes .json or none (as Philly's own cluster_job_log)"),
        ("x.pq", "tiresias", "a tiresias trace is text; a .pq file holds a canonical trace (--format tiresias takes .csv)"),
        ("x.csv", "gavel", "--format gavel writes a tab-separated Gavel trace, but a .csv file holds comma-separated values"),
    ],
)
def test_an_extension_naming_another_format_is_refused_before_drawing(tmp_path, capsys, no_drawing, name, format, words):
    out = tmp_path / name
    extra = ["--models", "blox"] if format == "gavel" else []
    err = fails(capsys, *_generate(out, "philly", "--format", format, *extra))
    assert words.format(out=out) in err
    assert not out.exists()


def test_extensions_no_format_uses_are_left_be(tmp_path, capsys):
    assert main(_generate(tmp_path / "cluster_job_log", "philly", "--format", "philly")) == 0
    assert read_trace(tmp_path / "cluster_job_log").height > 0
    assert main(_generate(tmp_path / "jobs.txt", "ones", "--format", "canonical")) == 0
    assert read_trace(tmp_path / "jobs.txt").height == 3


def test_convert_refuses_an_extension_naming_another_format(tmp_path, capsys):
    out = tmp_path / "y.json"
    err = fails(capsys, "trace", "convert", SAMPLES / "philly-1000.csv", out, "--to", "canonical")
    assert f"OUTPUT '{out}': --to canonical writes CSV, but a .json file is read as a Philly cluster_job_log" in err
    assert not out.exists()
