"""Gavel's cost policies under prices of any scale (only their ratios matter; prices too far
apart are refused at the argument), and PDLP kept off stdout under `roundhouse run --quiet`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roundhouse.elements.policies.gavel import solvers as solvers_module
from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import write_trace

REPO = Path(__file__).resolve().parents[1]
PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
ja,1,V100,1,consolidated,4.0
ja,1,P100,1,consolidated,2.5
ja,1,K80,1,consolidated,1.0
jb,1,V100,1,consolidated,3.0
jb,1,P100,1,consolidated,2.0
jb,1,K80,1,consolidated,1.0
jc,1,V100,1,consolidated,2.0
jc,1,P100,1,consolidated,1.5
jc,1,K80,1,consolidated,1.0
"""
CLUSTER = "1x1:V100,1x1:P100,1x1:K80"
NORMAL = (2.48, 1.46, 0.45)


def _graph(tmp_path: Path, solver: str, profile: str = PROFILE, n: int = 5) -> Path:
    (tmp_path / "profile.csv").write_text(profile)
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model=("ja", "jb", "jc")[i % 3], iterations=1e6) for i in range(n)]
    write_trace(tmp_path / "trace.csv", jobs)
    path = tmp_path / "g.sched"
    path.write_text(
        f'round = 6min;\ncluster = "{CLUSTER}";\nprofile = "profile.csv";\nsrc :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> solve :: {solver} -> GavelRounds -> GavelPlacer -> run :: Launch -> m :: JobMetrics;\n"
    )
    return path


def _cost_solver(policy: str, prices, lp: str = "GLOP") -> str:
    listed = ", ".join(f'"{t}:{p}"' for t, p in zip(("V100", "P100", "K80"), prices))
    return f'{policy}(prices=[{listed}], lp="{lp}")'


def _allocate(tmp_path: Path, solver: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    graph = compile_file(_graph(tmp_path, solver))
    simulate(graph, until=1.0)
    element = graph.elements["solve"]
    return element.allocation.fractions, dict(element.counters)


# --- prices of any scale ---


@pytest.mark.parametrize("lp", ["GLOP", "PDLP"])
@pytest.mark.parametrize("policy", ["MinCost", "MinCostSLO"])
@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_prices_of_any_scale_give_the_allocation_of_ordinary_prices(tmp_path, policy, lp, scale):
    ordinary, _ = _allocate(tmp_path / "ordinary", _cost_solver(policy, NORMAL, lp))
    scaled, counters = _allocate(tmp_path / "scaled", _cost_solver(policy, [f"{p * scale:.17g}" for p in NORMAL], lp))
    assert counters["unsolved"] == 0 and counters["floor_relaxed"] == 0  # (the cost program was solved)
    assert np.allclose(scaled, ordinary, atol=1e-6)


@pytest.mark.parametrize("lp", ["GLOP", "PDLP"])
@pytest.mark.parametrize("policy", ["MinCost", "MinCostSLO"])
def test_ordinary_prices_give_the_allocation_they_gave_unscaled(tmp_path, monkeypatch, policy, lp):
    # Dividing the prices by the largest keeps the cost program's optimum: the allocation is the
    # one the program gave with the prices as written.
    now, _ = _allocate(tmp_path / "scaled", _cost_solver(policy, NORMAL, lp))
    monkeypatch.setattr(solvers_module, "_scaled", lambda price: price, raising=False)
    before, counters = _allocate(tmp_path / "unscaled", _cost_solver(policy, NORMAL, lp))
    assert counters["unsolved"] == 0
    assert np.allclose(now, before, atol=1e-6)
    assert (now > 0.01).sum() > len(now)  # (some job runs on more than one type: the prices decide)


@pytest.mark.parametrize("policy", ["MinCost", "MinCostSLO"])
@pytest.mark.parametrize(
    ("prices", "said"),
    [
        pytest.param(
            ("1e300", "1.46", "0.45"),
            r"V100's price 1e\+300 and K80's 0\.45 are 2\.22e\+300 times apart; the cost program is solved reliably only for prices at most 1e\+06 times apart",
            id="huge",
        ),
        pytest.param(
            ("2.48", "1.46", "1e-300"),
            r"V100's price 2\.48 and K80's 1e-300 are 2\.48e\+300 times apart; the cost program is solved reliably only for prices at most 1e\+06 times apart",
            id="tiny",
        ),
        pytest.param(("2.48", "1.46", "1e-400"), r"'K80:1e-400' is too small to tell from 0", id="underflow"),
    ],
)
def test_prices_too_far_apart_are_refused_at_the_argument(tmp_path, policy, prices, said):
    with pytest.raises(RoundhouseError, match=rf"argument 'prices' of {policy}.*{said}"):
        compile_file(_graph(tmp_path, _cost_solver(policy, prices)))


def test_prices_a_million_times_apart_and_free_types_are_taken(tmp_path):
    _, counters = _allocate(tmp_path / "wide", _cost_solver("MinCost", ("2.48", "1.46", "2.48e-6")))
    assert counters["unsolved"] == 0
    _, counters = _allocate(tmp_path / "free", _cost_solver("MinCost", ("2.48", "0", "2.48e-6")))
    assert counters["unsolved"] == 0  # (a free type does not count towards the spread)


# --- PDLP stays off stdout ---

# A model that runs 1e22 times slower on a K80 than on a V100: coefficients PDLP warns about.
SKEWED = PROFILE.replace("jc,1,K80,1,consolidated,1.0", "jc,1,K80,1,consolidated,1e-22")


def _run_quiet(tmp_path: Path, solver: str, profile: str) -> subprocess.CompletedProcess:
    path = _graph(tmp_path, solver, profile)
    command = [sys.executable, "-m", "roundhouse.tools.cli", "run", str(path), "--quiet", "--until", "1h"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("solver", "profile"),
    [
        pytest.param('MaxMinFairness(lp="PDLP")', SKEWED, id="max-min"),
        pytest.param('MaxMinFairness(water_filling=true, lp="PDLP")', SKEWED, id="water-filling"),  # (warm programs)
        pytest.param('MinMakespan(lp="PDLP")', SKEWED, id="makespan"),
        pytest.param('MaxThroughput(lp="PDLP")', SKEWED, id="throughput"),
        pytest.param(_cost_solver("MinCost", [f"{p * 1e-300:.17g}" for p in NORMAL], "PDLP"), PROFILE, id="tiny-prices"),
    ],
)
def test_pdlp_prints_nothing_under_quiet(tmp_path, solver, profile):
    done = _run_quiet(tmp_path, solver, profile)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_a_program_pdlp_would_warn_about_gets_glops_allocation(tmp_path):
    got = {}
    for lp in ("GLOP", "PDLP"):
        (tmp_path / lp).mkdir()
        graph = compile_file(_graph(tmp_path / lp, f'MaxMinFairness(lp="{lp}")', SKEWED))
        simulate(graph, until=1.0)
        got[lp] = graph.elements["solve"].allocation.fractions
    assert np.allclose(got["PDLP"], got["GLOP"], atol=1e-9)
