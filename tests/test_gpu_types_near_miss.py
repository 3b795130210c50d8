"""A name in the `gpu_types` setting that is a near miss of a throughput profile's type (V1OO for
V100) is taken as a type of its own, where no job known by its model runs: it is warned of on
stderr, once per command, where the setting was given, and the run goes on. A name one
character replaced away (K40 beside K80, A100 beside V100) is a real type's, and is not warned
of; a profile's type in another case is the profile's type."""

from __future__ import annotations

import re
import subprocess
import sys

import polars as pl
import pytest

from roundhouse.runtime import near_gpu_types
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.near_gpu_types import near_types
from roundhouse.runtime.simulate import load_cluster
from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import REPO, fails
from tests.test_cluster_types_beyond_profile import _run

PROFILE = ProfileTable.load().gpu_types
# One ResNet-18 job (known by its model: runs only where the profile gives its speed) and one
# of four GPUs known by its duration.
TRACE = "job_id,arrival_s,gpus,model,iterations,duration_s\n0,0,1,ResNet-18,2000,\n1,0,4,,,600\n"


@pytest.fixture(autouse=True)
def _nothing_warned_yet(monkeypatch):
    """Each test is a command of its own: what an earlier one warned of is not remembered."""
    monkeypatch.setattr(near_gpu_types, "_WARNED", set())
    monkeypatch.delenv(near_gpu_types._WARNED_ENV, raising=False)


def _graph(tmp_path, head: str = "", trace: str = TRACE):
    (tmp_path / "t.csv").write_text(trace)
    path = tmp_path / "g.sched"
    path.write_text(
        f"round = 5min;\n{head}"
        'src :: TraceSource(path="t.csv");\nsrc -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n'
    )
    return path


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning:" in line]


def _cli(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", *map(str, argv)], capture_output=True, text=True, timeout=300
    )


def test_the_pairs_below_are_real_beside_the_shipped_profile():
    assert PROFILE == ("V100", "P100", "K80")  # (K40 and A100 are types it lacks)


@pytest.mark.parametrize(
    "name, near",
    [
        ("V1OO", ["V100"]),  # letter O for zero
        ("v1oo", ["V100"]),
        ("VlOO", ["V100"]),  # letter l for one
        ("VI00", ["V100"]),
        ("P10O", ["P100"]),
        ("K8O", ["K80"]),
        ("V10", ["V100"]),  # one dropped
        ("V1000", ["V100"]),  # one added
        ("V010", ["V100"]),  # two neighbours swapped
        ("V1O", ["V100"]),  # a confusable and one dropped
        ("V100S", ["V100"]),  # a real type, and near: warned of, the run goes on
        ("K40", []),  # one replaced: a real type beside K80
        ("A100", []),  # one replaced: a real type beside V100 and P100
        ("X100", []),
        ("T4", []),
        ("H100-SXM", []),
        ("V100", []),  # the profile's own
        ("v100", []),  # the profile's own, case aside
    ],
)
def test_the_rule(name, near):
    assert near_types(name, PROFILE) == near


def test_a_name_near_two_types_names_both():
    assert near_types("X10", ("X100", "X1O", "Y10")) == ["X100", "X1O"]


def test_a_near_miss_in_the_graph_is_warned_of_at_its_line_and_the_run_goes_on(tmp_path, capsys):
    graph = _graph(tmp_path, 'gpu_types = "V1OO";\ncluster = "1x1:V100,1x4:V1OO";\n')
    out = tmp_path / "out"
    assert main(["run", str(graph), "--quiet", "--out", str(out)]) == 0
    (warning,) = _warnings(capsys.readouterr().err)
    assert warning.startswith(f"{graph}:2:13: warning: setting 'gpu_types': 'V1OO' is near the throughput profile's V100")
    assert "if you meant V100, leave it out of gpu_types" in warning and "write V100 in the cluster" in warning
    assert pl.read_csv(out / "jobs.csv")["status"].to_list() == ["finished", "finished"]
    # It ran as the setting says: V1OO is a type of its own, where the job known by its model never runs.
    seen, _ = _run(graph)
    assert seen == {0: {"V100"}, 1: {"V1OO"}}


def test_a_profile_type_named_in_another_case_is_the_profiles_type(tmp_path, capsys):
    graph = _graph(tmp_path, 'gpu_types = "v100";\ncluster = "1x4:v100";\n')
    assert main(["run", str(graph), "--quiet"]) == 0
    assert not _warnings(capsys.readouterr().err)
    seen, _ = _run(graph)
    assert seen == {0: {"v100"}, 1: {"v100"}}  # (the job known by its model runs there: the profile has its speed)


@pytest.mark.parametrize("name", ["K40", "A100"])
def test_a_real_type_one_replaced_away_or_a_far_one_is_not_warned_of(tmp_path, capsys, name):
    graph = _graph(tmp_path, f'gpu_types = "{name}";\ncluster = "1x1:V100,1x4:{name}";\n')
    assert main(["run", str(graph), "--quiet"]) == 0
    assert not _warnings(capsys.readouterr().err)


def test_given_on_the_command_line_it_names_the_option_on_stderr_without_a_traceback(tmp_path):
    graph = _graph(tmp_path)
    ran = _cli("run", graph, "--cluster", "1x1:V100,1x4:V1OO", "--set", "gpu_types=A100,V1OO,v100", "--quiet")
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    (warning,) = _warnings(ran.stderr)
    assert warning.startswith("warning: --set gpu_types: 'V1OO' is near the throughput profile's V100")


def test_once_per_command_and_once_per_name(tmp_path, capsys):
    graph = compile_file(_graph(tmp_path, 'gpu_types = "V1OO,P10O,A100";\ncluster = "1x1:V100";\n'))
    for _ in range(3):
        load_cluster(graph, None)
    warnings = _warnings(capsys.readouterr().err)
    assert [re.search(r"'(\w+)' is near", w).group(1) for w in warnings] == ["V1OO", "P10O"]


def test_a_sweep_warns_once_not_once_per_run(tmp_path):
    graph = _graph(tmp_path, 'gpu_types = "V1OO";\ncluster = "1x1:V100,1x4:V1OO";\n')
    swept = _cli("sweep", graph, "--vary", "round=1min,2min,5min,10min", "--workers", "2", "--out", tmp_path / "sweep")
    assert swept.returncode == 0, swept.stderr
    assert "Traceback" not in swept.stderr
    (warning,) = _warnings(swept.stderr)
    assert warning.startswith(f"{graph}:2:13: warning: setting 'gpu_types': 'V1OO' is near")
    assert pl.read_csv(tmp_path / "sweep" / "summary.csv").height == 4


def test_a_refused_near_miss_is_told_the_type(tmp_path, capsys):
    graph = _graph(tmp_path)
    err = fails(capsys, "run", graph, "--cluster", "1x1:V1OO")
    assert "V1OO is none of these (if you meant the throughput profile's V100, write that in the cluster); " in err
    err = fails(capsys, "run", graph, "--cluster", "1x1:V1OO,1x1:K40,1x1:P10")
    assert "(if you meant the throughput profile's V100 for V1OO and P100 for P10, write those in the cluster)" in err
    assert "if you meant" not in fails(capsys, "run", graph, "--cluster", "1x1:K40")


def test_the_docs_show_what_it_prints(tmp_path, capsys):
    page = (REPO / "docs" / "clusters.md").read_text()
    (shown,) = re.findall(r"^\s*(g\.sched:2:13: warning: .*)$", page, re.M)
    graph = _graph(tmp_path, 'gpu_types = "V1OO";\ncluster = "1x1:V100,1x4:V1OO";\n')
    assert main(["check", str(graph)]) == 0
    assert _warnings(capsys.readouterr().err) == [shown.replace("g.sched", str(graph), 1)]
