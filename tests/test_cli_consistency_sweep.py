"""The command line alike across commands: a trace's header checked before serve binds or
writes anything, options spelled in full, and sweep's --trace, --cluster with --set cluster,
--timeout bounds and --debug as run and serve have them."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime import registry
from roundhouse.runtime.results_store import ResultsStore
from roundhouse.runtime.sweep import RunSpec, compile_spec, record_run
from roundhouse.tools.cli import build_parser, main
from roundhouse.tools.loopback import free_port
from roundhouse.tools.results import compile_with_trace
from tests.conftest import REPO, fails

FIFO = REPO / "graphs" / "fifo.sched"

# A policy element that raises in its first round.
BOOM = '''
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking
import attrs


@element
class Boom(Element):
    """Raise in round `at`.

    Ports:
        active: admitted, unfinished jobs.
        ranking: never.
    Arguments:
        at: the round to raise in.
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    at: int = attrs.field(default=1)

    def start(self, ctx):
        self.n = 0

    def tick(self, ctx, active):
        self.n += 1
        if self.n >= self.at:
            raise RuntimeError("boom")
        return Ranking(active.rows, active.gpus, backfill=True)
'''


def traced_graph(folder: Path) -> Path:
    """A graph whose one TraceSource reads a trace of 10 jobs, on 16 GPUs."""
    graph = folder / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "4x4:V100";\n'
        f'arrivals :: TraceSource(path="{REPO / "traces" / "samples" / "philly-1000.csv"}", jobs=10);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph


def small_trace(path: Path, jobs: int) -> Path:
    rows = "".join(f"{i},{60 * i},1,600\n" for i in range(1, jobs + 1))
    path.write_text("job_id,arrival_s,gpus,duration_s\n" + rows)
    return path


def bad_trace(path: Path) -> Path:
    path.write_text("job_id,arrival_s,gpus\n1,0,1\n")  # (no duration_s, nor model and iterations)
    return path


# --- a trace's header, checked before anything is bound or made --------------------------------


def test_serve_refuses_a_trace_missing_a_column_before_binding_or_making_a_journal(tmp_path, capsys):
    ck = tmp_path / "ck"
    started = time.monotonic()
    argv = ["serve", FIFO, "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--checkpoints", ck]
    err = fails(capsys, *argv, "--wait-for-agents", "60s", "--trace", bad_trace(tmp_path / "bad.csv"))
    assert "missing column 'duration_s'" in err and "bad.csv" in err
    assert time.monotonic() - started < 30  # (not after waiting a minute for agents)
    assert not ck.exists()  # no journal to block the corrected restart
    # The graph's own trace, the same: said at the argument that names it.
    own = tmp_path / "own.sched"
    own.write_text(FIFO.read_text().replace("../traces/samples/philly-1000.csv", str(bad_trace(tmp_path / "b2.csv"))))
    started = time.monotonic()
    err = fails(capsys, "serve", own, *argv[2:], "--wait-for-agents", "60s")
    assert "argument 'path' of TraceSource" in err and "missing column 'duration_s'" in err, err
    assert time.monotonic() - started < 30 and not ck.exists()


def test_whatif_run_trace_is_checked_by_its_header_too(tmp_path):
    with pytest.raises(TraceError, match="missing column 'duration_s'"):
        compile_with_trace(FIFO, [], str(bad_trace(tmp_path / "bad.csv")), flag="--run-trace")


def test_only_the_header_is_read(tmp_path):
    """A bad row further down is the run's to find (a header check reads no rows)."""
    trace = small_trace(tmp_path / "t.csv", 3)
    trace.write_text(trace.read_text() + "4,not-a-number,1,600\n")
    graph = compile_with_trace(FIFO, [], str(trace))
    assert str(graph.elements["arrivals"].path) == str(trace.resolve())


# --- options spelled in full ---------------------------------------------------------------------


def test_every_parser_takes_options_only_in_full():
    def walk(parser: argparse.ArgumentParser) -> int:
        assert parser.allow_abbrev is False, parser.prog
        seen = 1
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                seen += sum(walk(child) for child in action.choices.values())
        return seen

    assert walk(build_parser()) > 15  # (the main parser and every command's)


def argparse_refuses(capsys, *argv) -> str:
    """What argparse says of a command line it refuses (it exits 2)."""
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in argv])
    assert stopped.value.code == 2
    return capsys.readouterr().err


def test_sweep_seed_is_not_taken_for_seeds(tmp_path, capsys):
    err = argparse_refuses(capsys, "sweep", traced_graph(tmp_path), "--seed", "3", "--vary", "round=5min")
    assert "unrecognized arguments: --seed 3" in err


def test_plot_out_is_not_taken_for_output(tmp_path, capsys):
    err = argparse_refuses(capsys, "plot", tmp_path, "--out", tmp_path / "p.png")
    assert "--out" in err
    assert not (tmp_path / "p.png").exists()


# --- sweep: --cluster with --set cluster, and --timeout ----------------------------------------------


def test_sweep_refuses_cluster_given_twice(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["sweep", traced_graph(tmp_path), "--cluster", "4x4:V100", "--set", 'cluster="8x4:V100"']
    err = fails(capsys, *argv, "--vary", "round=5min", "--out", out)
    assert '--cluster 4x4:V100 and --set cluster="8x4:V100": the cluster is given twice; keep one' in err
    assert not out.exists()


@pytest.mark.parametrize("timeout", ["200000d", "8d", "0s"])
def test_sweep_bounds_its_timeout(tmp_path, capsys, timeout):
    err = fails(capsys, "sweep", traced_graph(tmp_path), "--vary", "round=5min", "--timeout", timeout)
    assert f"--timeout {timeout}:" in err


# --- sweep --trace -----------------------------------------------------------------------------------


def test_sweep_trace_replaces_every_trace_source_and_is_carried_whole(tmp_path, capsys, monkeypatch):
    graph = traced_graph(tmp_path)
    trace = small_trace(tmp_path / "three.csv", 3)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # (given relative to here; the runs read it by its whole path)
    assert main(["sweep", "g.sched", "--trace", "three.csv", "--vary", "round=5min,10min", "--until", "2h", "--out", "out"]) == 0
    runs = ResultsStore(out / "results").read()
    assert runs.height == 2 and set(runs["status"]) == {"ok"}
    assert set(runs["jobs_finished"]) == {3}  # (the graph's own trace has 10 jobs)
    # A run in another folder (a Dask worker's) reads the same file, and finds the same key.
    spec = RunSpec(str(graph), ("round=5min", "seed=0"), None, 7200.0, {"round": "5min", "seed": 0}, str(trace.resolve()))
    monkeypatch.chdir(REPO)
    key = compile_spec(spec)[1]
    assert key in set(runs["key"])
    row = record_run(spec, key)
    assert row["status"] == "ok" and row["jobs_finished"] == 3


def test_a_sweep_trace_is_in_the_run_key(tmp_path):
    graph = traced_graph(tmp_path)
    trace = small_trace(tmp_path / "t.csv", 3)
    spec = RunSpec(str(graph), (), None, None, {"seed": 0}, str(trace))
    with_trace = compile_spec(spec)[1]
    assert with_trace != compile_spec(RunSpec(str(graph), (), None, None, {"seed": 0}))[1]
    small_trace(trace, 4)
    assert compile_spec(spec)[1] != with_trace  # (its contents, not its name)


def test_sweep_trace_refuses_what_it_would_contradict(tmp_path, capsys):
    graph = traced_graph(tmp_path)
    trace = small_trace(tmp_path / "t.csv", 3)
    out = tmp_path / "out"
    base = ["sweep", graph, "--trace", trace, "--out", out]
    err = fails(capsys, *base, "--set", 'arrivals.path="x.csv"', "--vary", "round=5min")
    assert "--trace replaces arrivals.path; keep one" in err and "--set arrivals.path" in err
    err = fails(capsys, *base, "--vary", 'arrivals.path="a.csv","b.csv"')
    assert "--trace replaces arrivals.path; keep one" in err and "--vary arrivals.path" in err
    err = fails(capsys, *base[:2], "--trace", bad_trace(tmp_path / "bad.csv"), "--out", out, "--vary", "round=5min")
    assert "missing column 'duration_s'" in err
    boom = tmp_path / "boom.sched"
    boom.write_text(
        'round = 5min;\ncluster = "4x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=5);\nsrc -> AcceptAll -> JobMetrics;\n'
    )
    err = fails(capsys, "sweep", boom, "--trace", trace, "--vary", "round=5min", "--out", out)
    assert "has no TraceSource element" in err
    assert not out.exists()


# --- sweep --debug -------------------------------------------------------------------------------------


@pytest.fixture
def boom_graph(tmp_path):
    (tmp_path / "boom.py").write_text(BOOM)
    graph = tmp_path / "boom.sched"
    graph.write_text(
        'require "boom.py";\nround = 5min;\ncluster = "4x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=20, seed=1);\n'
        "src -> AcceptAll -> JobPool -> b :: Boom -> Consolidated -> Launch -> JobMetrics;\n"
    )
    with registry.scope():  # (each test's Boom is its own class)
        yield graph


def test_sweep_debug_prints_each_failed_runs_traceback(boom_graph, capsys):
    assert main(["--debug", "sweep", str(boom_graph), "--vary", "b.at=1,2"]) == 1
    err = capsys.readouterr().err
    assert "2 of 2 runs failed:" in err
    assert err.count("Traceback (most recent call last)") == 2
    assert err.index("2 of 2 runs failed:") < err.index("Traceback")
    assert 'raise RuntimeError("boom")' in err


def test_sweep_without_debug_says_where_the_tracebacks_are(boom_graph, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(boom_graph), "--vary", "b.at=1,2", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count(f"{out}/results/KEY.parquet") == 1 and "--debug" in err
    stored = pl.concat([pl.read_parquet(p) for p in (out / "results").glob("*.parquet")], how="diagonal_relaxed")
    assert all("RuntimeError: boom" in text for text in stored["traceback"])
    assert main(["sweep", str(boom_graph), "--vary", "b.at=1,2"]) == 1
    assert "run again with --debug" in capsys.readouterr().err


def test_a_path_set_on_the_command_line_is_named_as_given(tmp_path, capsys):
    """Not at the graph's own (valid) path: the file read is the one named."""
    bad = bad_trace(tmp_path / "bad.csv")
    err = fails(capsys, "run", FIFO, "--set", f'arrivals.path="{bad}"', "--until", "1h")
    assert err.startswith(f"{bad}: error: missing column 'duration_s'"), err


def test_a_trace_in_a_folder_named_beyond_ascii_is_read(tmp_path, capsys):
    folder = tmp_path / "dé"
    folder.mkdir()
    trace = small_trace(folder / "t.csv", 3)
    assert main(["run", str(FIFO), "--trace", str(trace), "--until", "1h", "--quiet"]) == 0, capsys.readouterr().err
    assert main(["sweep", str(FIFO), "--trace", str(trace), "--vary", "round=5min", "--until", "1h", "--workers", "1"]) == 0
