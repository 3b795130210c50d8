"""Elements' arguments said at the argument: CostMetrics' prices that its dollars would overflow
or lose (a nonzero price that reads as 0 refused where prices are parsed, as Gavel's cost
solvers refuse it too), BurstSource's bursts that would arrive past a century, and
LossTermination's missing loss_final said at the element's line."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from roundhouse.elements.objectives import parse_prices
from roundhouse.tools.cli import main
from tests.conftest import fails

COST = """round = 5min;
cluster = "1x2:V100";
arrivals :: PoissonSource(rate=10/h, jobs=4, gpus=single, seed=0);
run :: Launch;
arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run -> m :: JobMetrics;
run -> cost :: CostMetrics(prices=["V100:{price}"]);
"""


@pytest.mark.parametrize(
    ("price", "said"),
    [
        pytest.param("1e300", "V100's price 1e+300 is not a price in dollars per GPU-hour", id="overflows"),
        pytest.param("1e13", "V100's price 1e+13 is not a price in dollars per GPU-hour", id="too-dear"),
        pytest.param("5e-324", "V100's price 4.94066e-324 is not a price in dollars per GPU-hour", id="subnormal"),
        pytest.param("1e-400", "'V100:1e-400' is too small to tell from 0", id="underflows"),
    ],
)
def test_cost_metrics_refuses_prices_its_dollars_would_overflow_or_lose(tmp_path, capsys, price, said):
    # 1e300 made every job's cost inf (and summary "Infinity"); 1e-400 was taken as free.
    graph = tmp_path / "g.sched"
    graph.write_text(COST.format(price=price))
    err = fails(capsys, "check", graph)
    assert f"{graph}:6:" in err and "argument 'prices' of CostMetrics" in err and said in err


@pytest.mark.parametrize("price", ["1e12", "1e-12", "0", "0e-400", "2.5"])
def test_cost_metrics_counts_prices_within_its_range(tmp_path, capsys, price):
    graph = tmp_path / "g.sched"
    graph.write_text(COST.format(price=price))
    assert main(["run", str(graph), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    cost = json.loads((tmp_path / "out" / "cost-cost.json").read_text())
    summary = json.loads((tmp_path / "out" / "m-summary.json").read_text())
    gpu_hours = pl.read_csv(tmp_path / "out" / "cost-costs.csv")["V100_gpu_h"].sum()
    assert summary["jobs_finished"] == 4
    # The GPU-hours held, as the run's utilization counts them, at the price given.
    assert gpu_hours > 0 and gpu_hours == pytest.approx(summary["utilization"] * 2 * summary["end_s"] / 3600, rel=1e-9)
    assert math.isfinite(cost["total_cost_usd"])
    assert cost["total_cost_usd"] == pytest.approx(float(price) * gpu_hours, rel=1e-9, abs=0.0)


@pytest.mark.parametrize("written", ["1e-400", "0.5e-330", "1_0e-400", " 3E-999"])
def test_parse_prices_refuses_a_nonzero_price_that_reads_as_0(written):
    with pytest.raises(ValueError, match=r"is too small to tell from 0 \(write 0 for a free GPU type\)"):
        parse_prices([f"K80:{written}", "V100:2.48"])


@pytest.mark.parametrize("written", ["0", "0.0", "0e-400", "-0", "000.000e5"])
def test_parse_prices_takes_a_zero_written_any_way(written):
    assert parse_prices([f"K80:{written}"]) == {"K80": 0.0}


def test_cost_solvers_refuse_what_parse_prices_refuses(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 6min;\ncluster = "1x1:V100,1x1:K80";\narrivals :: CostWorkload(jobs=2, seed=0);\n'
        'arrivals -> AcceptAll -> JobPool -> MinCost(prices=["V100:2.48", "K80:1e-400"]) -> GavelRounds -> '
        "GavelPlacer -> Launch -> JobMetrics;\n"
    )
    err = fails(capsys, "check", graph)
    assert "argument 'prices' of MinCost" in err and "'K80:1e-400' is too small to tell from 0" in err


BURSTS = """round = 5min;
cluster = "4x4:V100";
arrivals :: BurstSource(jobs=2, {arguments}, seed=0);
arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param("bursts=5, every=36500d, length=1h", id="bursts"),
        pytest.param("bursts=2, offset=36000d, every=36500d, length=1h", id="offset"),
        pytest.param("offset=36500d, length=1h", id="length"),
    ],
)
def test_bursts_arriving_past_a_century_are_refused_at_check(tmp_path, capsys, arguments):
    # They passed the check and failed at the run's start, "must be at most 3.1536e+09 s (a
    # century), got 3.1536e+09".
    graph = tmp_path / "g.sched"
    graph.write_text(BURSTS.format(arguments=arguments))
    err = fails(capsys, "check", graph)
    assert f"{graph}:3:" in err and "its last burst would end at" in err and "more than a century" in err


def test_bursts_ending_at_a_century_run(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(BURSTS.format(arguments="bursts=2, every=18250d, length=18250d"))
    assert main(["run", str(graph), "--out", str(tmp_path / "out"), "--quiet"]) == 0


LOSS_ONLY = """job_id,arrival_s,gpus,duration_s,loss
0,0,1,600,1.0
1,0,1,1200,2.0
"""


def test_a_loss_without_loss_final_is_said_at_the_elements_line(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(LOSS_ONLY)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x4:V100";\narrivals :: TraceSource(path="t.csv");\n'
        "pool :: JobPool; stop :: LossTermination(threshold=0.01); run :: Launch;\n"
        "arrivals -> AcceptAll -> pool -> stop -> Fifo -> Consolidated -> run -> JobMetrics;\n"
        "stop [converged] -> [finish] run;\n"
    )
    err = fails(capsys, "run", graph, "--quiet")
    assert f"{graph}:4:" in err and "stop (LossTermination)" in err and "no loss_final" in err
