"""Sweep corners: a value given twice under two spellings, the tables written whole or not at
all, and a sweep's runs the same as `roundhouse run`'s."""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import polars as pl
import pytest

from roundhouse.runtime.results_store import ResultsStore
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails
from tests.own_elements import element_class, element_file

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"


def small_graph(folder: Path) -> Path:
    """Ten jobs whose arrivals are redrawn at `rate` from the graph's seed, on 16 GPUs."""
    graph = folder / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "4x4:V100";\n'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=10, rate=6/h);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> report :: JobMetrics;\n"
    )
    return graph


@pytest.mark.parametrize(
    ("vary", "first", "second"),
    [("round=5min,300s", "5min", "300s"), ("seed=1,01", "1", "01"), ("arrivals.rate=4/h,96/d", "4/h", "96/d")],
)
def test_two_spellings_of_one_value_are_refused(tmp_path, capsys, vary, first, second):
    out = tmp_path / "out"
    err = fails(capsys, "sweep", small_graph(tmp_path), "--vary", vary, "--workers", "1", "--out", out)
    assert f"--vary {vary}: {first} and {second} are the same value" in err
    assert not out.exists()  # (refused before anything runs or is made)


def test_one_file_named_two_ways_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_bytes(TRACE.read_bytes())
    err = fails(capsys, "sweep", small_graph(tmp_path), "--vary", 'arrivals.path="a.csv","./a.csv"', "--workers", "1")
    assert '"a.csv" and "./a.csv" are the same value' in err


def test_distinct_values_and_copies_of_a_file_still_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_bytes(TRACE.read_bytes())
    (tmp_path / "b.csv").write_bytes(TRACE.read_bytes())
    graph = small_graph(tmp_path)
    assert main(["sweep", str(graph), "--vary", "round=5min,10min", "--workers", "1"]) == 0
    assert main(["sweep", str(graph), "--vary", 'arrivals.path="a.csv","b.csv"', "--workers", "1"]) == 0


def test_tables_are_written_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    """A disk that fills while the tables are written leaves neither cut short (nor a hidden
    partial file); the runs stay in the store, and the same command then writes both."""
    out = tmp_path / "out"
    graph = small_graph(tmp_path)
    argv = ["sweep", str(graph), "--vary", "round=5min,10min", "--workers", "1", "--out", str(out)]
    original = pl.DataFrame.write_csv
    calls = []

    def full_disk(self, file=None, *args, **kwargs):
        calls.append(file)
        if len(calls) < 2:
            return original(self, file, *args, **kwargs)
        buffer = io.BytesIO()
        original(self, buffer, *args, **kwargs)
        half = buffer.getvalue()[: len(buffer.getvalue()) // 2]
        if isinstance(file, (str, Path)):
            Path(file).write_bytes(half)
        else:
            file.write(half)
        raise OSError(errno.ENOSPC, "No space left on device", str(getattr(file, "name", file)))

    monkeypatch.setattr(pl.DataFrame, "write_csv", full_disk)
    err = fails(capsys, *argv)
    assert "No space left on device" in err
    assert sorted(p.name for p in out.iterdir()) == ["results"]
    assert len(ResultsStore(out / "results").read()) == 2

    monkeypatch.setattr(pl.DataFrame, "write_csv", original)
    assert main(argv) == 0
    assert pl.read_csv(out / "summary.csv").height == 2
    assert pl.read_csv(out / "points.csv").height == 2


def test_a_sweeps_runs_are_those_of_roundhouse_run(tmp_path, capsys):
    """Each run of a sweep (its seed and varied value) reports what `roundhouse run` with the
    same --set reports, metric by metric."""
    graph = small_graph(tmp_path)
    out = tmp_path / "sweep"
    assert (
        main(["sweep", str(graph), "--vary", "arrivals.rate=4/h,8/h", "--seeds", "2", "--workers", "2", "--out", str(out)]) == 0
    )
    rows = pl.read_csv(out / "summary.csv", schema_overrides={"arrivals.rate": pl.String})
    assert rows.height == 4
    for row in rows.iter_rows(named=True):
        alone = tmp_path / f"run-{row['arrivals.rate'].replace('/', '_')}-{row['seed']}"
        argv = ["run", str(graph), "--set", f"arrivals.rate={row['arrivals.rate']}", "--set", f"seed={row['seed']}"]
        assert main([*argv, "--out", str(alone), "--quiet", "--no-explain"]) == 0
        summary = json.loads((alone / "summary.json").read_text())
        compared = {k: v for k, v in summary.items() if k in row}
        assert compared and compared == {k: row[k] for k in compared}


# A sink of the user's whose report has a summary too (of its own numbers).
TALLY = element_file(
    element_class(
        "Tally",
        "Count the rounds.",
        "self.n += 1",
        category="sink",
        inputs=(("events", "Events", "the round's events."),),
        outputs=(),
        multi=True,
        declares='state = ("n",)',
        see_also="JobMetrics",
        after="""
        def start(self, ctx):
            self.n = 0

        def finish(self, ctx):
            return {"summary": {"rounds_seen": self.n}}
        """,
    )
)


def test_runs_are_compared_by_the_job_metrics_summary_beside_another_sinks(tmp_path, capsys):
    """With one JobMetrics and a sink of the user's that also reports a summary, each run's row
    holds JobMetrics' summary (the sink its key names), whichever sink reports first."""
    (tmp_path / "tally.py").write_text(TALLY)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "tally.py";\nround = 5min;\ncluster = "4x4:V100";\n'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=10);\ntally :: Tally;\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> run :: Launch -> report :: JobMetrics;\nrun -> tally;\n"
    )
    out = tmp_path / "out"
    assert main(["sweep", str(graph), "--vary", "round=5min,10min", "--workers", "1", "--out", str(out)]) == 0
    rows = pl.read_csv(out / "summary.csv")
    assert "rounds_seen" not in rows.columns
    assert rows["jobs_finished"].to_list() == [10, 10]
    assert "avg_jct_s_mean" in pl.read_csv(out / "points.csv").columns


def test_an_element_with_its_own_seed_is_named_when_seeds_vary(tmp_path, capsys):
    """--seeds varies the graph's seed: an element that sets its own draws the same in every
    run, and the sweep says so (not when its own seed is varied, nor with one seed)."""
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "4x4:V100";\n'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=10, rate=6/h, seed=3);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> report :: JobMetrics;\n"
    )
    assert main(["sweep", str(graph), "--seeds", "2", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "warning: --seeds 2: element 'arrivals' (TraceSource) sets its own seed (3)" in err
    assert "--vary arrivals.seed=" in err
    assert main(["sweep", str(graph), "--seeds", "2", "--vary", "arrivals.seed=3,4", "--workers", "1"]) == 0
    assert main(["sweep", str(graph), "--workers", "1"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_seeds_that_draw_nothing_are_said_to_repeat_one_run(tmp_path, capsys):
    """A trace read as it is draws nothing from the graph's seed: --seeds N runs one run N times,
    and its intervals of 0 are said to measure nothing (not when the seeds' runs differ)."""
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "4x4:V100";\n'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=10);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> report :: JobMetrics;\n"
    )
    assert main(["sweep", str(graph), "--seeds", "2", "--workers", "1"]) == 0
    captured = capsys.readouterr()
    assert "± 0" in captured.out
    assert "note: every point's seeds gave the same results: nothing in g.sched draws at random" in captured.err
    drawn = tmp_path / "drawn.sched"
    drawn.write_text(graph.read_text().replace("jobs=10)", "jobs=10, rate=6/h)"))
    assert main(["sweep", str(drawn), "--seeds", "2", "--workers", "1"]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("graph", "vary", "said"),
    [
        (None, "arrivals.rate=4/h,96/d", "4/h and 96/d are the same value (4/h)"),
        ("tiresias.sched", "order.thresholds=[1h],[60min]", "[1h] and [60min] are the same value ([1h])"),
    ],
)
def test_the_same_value_is_said_as_a_sched_file_writes_it(tmp_path, capsys, graph, vary, said):
    # (A list was said as ["list", [3600.0]], the form values are compared in, and a
    # rate in events per second.)
    path = small_graph(tmp_path) if graph is None else REPO / "graphs" / graph
    err = fails(capsys, "sweep", path, "--vary", vary, "--workers", "1")
    assert f"--vary {vary}: {said}; give each value once" in err
