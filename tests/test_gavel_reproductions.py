"""`roundhouse reproduce gavel-*`: the experiments are registered and the quick ones run."""

from __future__ import annotations

from roundhouse.tools.reproductions import load_all


def test_gavel_experiments_are_registered():
    names = set(load_all())
    assert {"gavel-las", "gavel-ftf", "gavel-makespan", "gavel-cost", "gavel-hierarchical", "gavel-fidelity"} <= names


def test_hierarchical_quick(tmp_path):
    report = load_all()["gavel-hierarchical"].run(tmp_path, True)
    assert (tmp_path / "hierarchical.png").exists()
    table = report.tables["hierarchical"]
    # The policy plans at least what a static agnostic split gives, round by round.
    assert (table["aware"] >= table["static"] - 1e-9).all()
    # The mechanism realizes the planned effective throughput (within rounding of rounds).
    realized = report.tables["hierarchical_realized"]["total"].head(table.height).mean()
    assert abs(realized / table["aware"].mean() - 1) < 0.05


def test_cost_quick(tmp_path):
    report = load_all()["gavel-cost"].run(tmp_path, True)
    means = {row["policy"]: row for row in report.tables["cost_means"].iter_rows(named=True)}
    assert means["min cost"]["total_cost_usd"] < means["max throughput"]["total_cost_usd"]
    assert means["min cost + SLOs"]["violation_pct"] <= means["min cost"]["violation_pct"]
    assert len(report.comparisons) == 3 and (tmp_path / "cost.png").exists()
