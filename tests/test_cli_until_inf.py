"""`--until inf` (or `infinity`, in any case) on every command that takes --until: no limit,
the run going on until every job finishes, as with no --until and as the Python API's
`Simulation.run_until(math.inf)`. A negative, NaN or malformed value is refused naming the
option; durations in a .sched file, and other options' durations, stay finite."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from roundhouse.runtime.simulation import Simulation
from roundhouse.runtime.values import duration_from_text
from roundhouse.tools.cli import main
from tests.conftest import fails

GRAPH = """\
round = 5min;
cluster = "1x2:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;
"""
# Six jobs on two GPUs, the last arriving after 2 h: a run to the end lasts well past it.
JOBS = {"job_id": list(range(6)), "arrival_s": [0.0, 60.0, 600.0, 900.0, 3000.0, 7500.0], "gpus": [1, 2, 1, 1, 2, 1]}


@pytest.fixture
def graph(tmp_path):
    pl.DataFrame({**JOBS, "duration_s": [1800.0, 1200.0, 3600.0, 300.0, 2400.0, 900.0]}).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(GRAPH)
    return tmp_path / "g.sched"


def files(folder) -> dict[str, str]:
    return {name: (folder / name).read_text() for name in ("jobs.csv", "summary.json", "run.json")}


@pytest.mark.parametrize("value", ["inf", "INF", "Infinity", "infinity", " inf "])
def test_run_until_inf_is_a_run_to_the_end(graph, tmp_path, capsys, value):
    assert main(["run", str(graph), "--quiet", "--out", str(tmp_path / "all")]) == 0
    assert main(["run", str(graph), "--quiet", f"--until={value}", "--out", str(tmp_path / "inf")]) == 0
    assert files(tmp_path / "inf") == files(tmp_path / "all")
    info = json.loads((tmp_path / "inf" / "run.json").read_text())
    assert info["stop_reason"] == "every job finished" and info["end_s"] > 7500.0
    assert pl.read_csv(tmp_path / "inf" / "jobs.csv")["finish_s"].null_count() == 0


def test_run_until_inf_ends_where_the_python_api_does(graph, tmp_path):
    assert main(["run", str(graph), "--quiet", "--until", "inf", "--out", str(tmp_path / "inf")]) == 0
    simulation = Simulation(graph).run_until(math.inf)
    assert simulation.done
    assert json.loads((tmp_path / "inf" / "run.json").read_text())["end_s"] == pytest.approx(simulation.now)


def test_sweep_until_inf_is_a_sweep_to_the_end(graph, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    vary = ["--vary", "round=5min,10min", "--workers", "1"]
    assert main(["sweep", str(graph), *vary, "--out", "all"]) == 0
    assert main(["sweep", str(graph), *vary, "--until", "Infinity", "--out", "inf"]) == 0
    # (All but the wall-clock time each run took and where; the same key: the same run asked for.)
    every, endless = (pl.read_csv(tmp_path / f / "summary.csv").drop("run_s", "worker") for f in ("all", "inf"))
    assert endless.equals(every) and endless["jobs_finished"].to_list() == [6, 6]


@pytest.mark.parametrize("command", ["run", "sweep", "serve", "run --live"])
@pytest.mark.parametrize(
    "value, words",
    [
        ("nan", "--until: 'nan' is not a duration"),
        ("-inf", "--until -inf: must be 0 or more"),
        ("-Infinity", "--until -Infinity: must be 0 or more"),
        ("-5h", "--until -5h: must be 0 or more"),
        ("infh", "--until: 'infh' is not a duration"),
        ("1e999s", "--until: '1e999s' is too large"),
        ("forever", "--until: 'forever' is not a duration"),
    ],
)
def test_a_bad_until_is_refused_naming_the_option(graph, tmp_path, capsys, command, value, words):
    argv = {
        "run": ["run", graph, "--quiet"],
        "sweep": ["sweep", graph, "--vary", "round=5min", "--workers", "1", "--out", tmp_path / "s"],
        "serve": ["serve", graph, "--bind", "tcp://127.0.0.1:0", "--insecure", "--checkpoints", tmp_path / "ck"],
        "run --live": ["run", graph, "--live", "tcp://127.0.0.1:0", "--insecure", "--checkpoints", tmp_path / "ck"],
    }[command]
    err = fails(capsys, *argv, f"--until={value}")
    assert err.startswith("error: ") and words in err
    if value.startswith("-"):  # written as two words, it is still read as the option's value
        assert words in fails(capsys, *argv, "--until", value)
    if "not a duration" in words:  # (says how to ask for no limit)
        assert "--until inf runs until every job finishes" in err
    assert not (tmp_path / "s").exists() and not (tmp_path / "ck").exists()


@pytest.mark.parametrize("command", ["serve", "run --live"])
def test_a_live_run_takes_until_inf(graph, tmp_path, capsys, command):
    """The live commands read --until before the cluster: with `inf` they go on to the cluster,
    and refuse that (no network, no agent needed to see --until taken)."""
    bind = ["--bind", "tcp://127.0.0.1:0"] if command == "serve" else ["--live", "tcp://127.0.0.1:0"]
    name = command.split()[0]
    err = fails(
        capsys, name, graph, *bind, "--insecure", "--checkpoints", tmp_path / "ck", "--until", "INF", "--cluster", "1x2:NOPE"
    )
    assert "--cluster: bad cluster '1x2:NOPE'" in err and "--until" not in err


def test_inf_stays_no_duration_elsewhere(graph, tmp_path, capsys):
    """Only --until means "no limit" by inf: the language's durations and other options' refuse it."""
    for text in ("inf", "Infinity"):
        with pytest.raises(ValueError, match="is not a duration"):
            duration_from_text(text)
    (tmp_path / "inf.sched").write_text(GRAPH.replace("round = 5min", "round = inf"))
    assert main(["check", str(tmp_path / "inf.sched")]) == 2
    assert "inf" in capsys.readouterr().err
    err = fails(capsys, "sweep", graph, "--vary", "round=5min", "--timeout", "inf")
    assert "--timeout" in err and "not a duration" in err
    assert "--horizon" in fails(capsys, "whatif", tmp_path / "nowhere.sqlite", "--horizon", "inf")
