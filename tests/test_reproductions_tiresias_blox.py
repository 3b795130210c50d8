"""The shipped graphs of Tiresias, Optimus, Themis and the Blox case studies, and the cheap
`roundhouse reproduce` experiments (the load sweeps of Blox run in `roundhouse reproduce`)."""

import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.cli import main
from roundhouse.tools.reproductions import load_all
from tests.conftest import REPO

GRAPHS = ["tiresias", "tiresias-gittins", "yarn-cs", "optimus", "themis", "blox-accept-1.2x", "loss-termination"]
EXPERIMENTS = [
    "tiresias-toy",
    "tiresias-sim",
    "blox-policies",
    "blox-admission",
    "blox-loss-termination",
    "blox-placement",
    "blox-intranode",
]


@pytest.mark.parametrize("name", GRAPHS)
def test_shipped_graph_checks_and_runs(name, capsys):
    path = REPO / "graphs" / f"{name}.sched"
    assert main(["check", str(path)]) == 0
    header = path.read_text().splitlines()[0]
    assert header.startswith(f"// graphs/{name}.sched")
    graph = compile_file(path)
    until = 3600.0 if "tiresias" in name or name == "yarn-cs" else 48 * 3600.0
    result = simulate(graph, until=until)
    summary = next(r["summary"] for r in result.reports.values() if "summary" in r)
    assert summary["jobs_finished"] > 0


def test_every_experiment_is_registered():
    assert set(EXPERIMENTS) <= set(load_all())


def test_tiresias_toy_reproduces_fig7(tmp_path, capsys):
    assert main(["reproduce", "tiresias-toy", "--out", str(tmp_path)]) == 0
    table = pl.read_csv(tmp_path / "tiresias-toy" / "toy.csv")
    avg = dict(zip(table["policy"], table["avg_jct"]))
    assert avg["SRSF"] == pytest.approx(9.333, abs=1e-3)
    assert avg["2D-LAS (continuous)"] == pytest.approx(11.667, abs=1e-3)
    assert (tmp_path / "tiresias-toy" / "toy_avg_jct.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "11.67" in out and "9.33" in out


def test_tiresias_sim_quick(tmp_path):
    report = load_all()["tiresias-sim"].run(tmp_path, True)
    runs = report.tables["runs"].filter(pl.col("placement_effect") == "none")
    avg = {
        p: float(runs.filter(pl.col("policy") == p)["avg_jct_s"].mean()) for p in ("Tiresias-L", "Tiresias-G", "YARN-CS", "SRTF")
    }
    assert avg["YARN-CS"] > 2 * avg["Tiresias-L"]  # least attained service avoids head-of-line blocking
    assert avg["Tiresias-G"] == pytest.approx(avg["Tiresias-L"], rel=0.1)
    assert avg["SRTF"] < avg["Tiresias-L"]  # the oracle does better, as in the paper's simulation
    assert all(path.exists() for path in report.figures)
    graphs = sorted(p.name for p in (tmp_path / "graphs").iterdir())  # every graph it ran
    assert graphs == ["srtf.sched", "tiresias-gittins.sched", "tiresias.sched", "yarn-cs.sched"]


def test_loss_termination_quick(tmp_path):
    report = load_all()["blox-loss-termination"].run(tmp_path, True)
    runs = report.tables["runs"]
    epochs = runs.filter(pl.col("termination") == "epochs")["avg_jct_s"][0]
    loss = runs.filter(pl.col("termination") == "loss-based")["avg_jct_s"][0]
    assert loss < 0.8 * epochs
    assert runs["jobs_finished"].to_list() == [200, 200]
