"""What the Tiresias and Gavel reproductions print beside the paper's numbers: a note only where ours
disagrees with the paper's claim, worked out from the measured values (made up here: no
simulation), pointing at the docs section that explains the gap; and, in quick runs, how the full
run came out, as the docs' tables record it."""

import re

import numpy as np
import polars as pl
import pytest

from roundhouse.tools.reproductions import _runs, gavel, tiresias
from tests.conftest import REPO

DOCS = (REPO / "docs" / "reproductions.md").read_text()


def _section(title: str) -> str:
    start = DOCS.index(f"### {title}")
    end = DOCS.find("\n### ", start + 1)
    return DOCS[start : end if end > 0 else None]


def _docs_rows(title: str) -> dict[str, list[str]]:
    """The cells of the docs section's "| | paper | ours |" table, by its first cell."""
    section = _section(title)
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| | paper"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("*", "") for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", text)]


@pytest.mark.parametrize(
    ("paper", "ours", "low", "high", "code"),
    [
        (5.11, 5.0, None, None, ""),  # within 10%
        (27.0, 20.0, 17.3, 37.0, ""),  # the paper's inside our range
        (5.11, 3.22, 2.77, 3.70, "smaller"),
        (0.74, 0.57, None, None, "larger"),  # further below 1
        (1.13, 1.00, None, None, "even"),
        (1.01, 1.30, None, None, "uneven"),
        (0.74, 1.40, None, None, "reversed"),
        (2.0, float("nan"), None, None, "unmeasured"),  # (a side finished none of its jobs)
        (2.0, 0.0, None, None, "unmeasured"),
    ],
)
def test_gap_says_how_a_ratio_differs(paper, ours, low, high, code):
    assert _runs.ratio_gap(paper, ours, low, high) == code


def test_a_note_is_empty_where_ours_agrees_and_names_the_docs_where_not():
    assert _runs.gap_note("", "5.11x", "why", "docs/reproductions.md, tiresias-sim") == ""
    text = _runs.gap_note("smaller", "5.11x", "why", "docs/reproductions.md, tiresias-sim")
    assert text == "the same way round as the paper's 5.11x, but less so: why (docs/reproductions.md, tiresias-sim)"
    assert _runs.gap_note("reversed", "0.74x", "", "D").startswith("the other way round from the paper's 0.74x")


def test_a_quick_note_says_where_the_full_run_came_out_otherwise():
    quick = ("one workload here", "five workloads", "")
    text = _runs.gap_note("smaller", "27x", "why", "D", quick)
    assert text == (
        "the same way round as the paper's 27x, but less so; one workload here; "
        "full run (five workloads): agrees with the paper (D)"
    )
    assert "why" not in text
    # Agreeing here where the full run does not is said too; the same verdict gives the full run's note.
    assert _runs.gap_note("", "5.11x", "why", "D", ("q", "f", "smaller")).startswith("agrees with the paper; q; full run (f)")
    assert _runs.gap_note("smaller", "5.11x", "why", "D", ("q", "f", "smaller")).endswith(": why (D)")
    assert _runs.gap_note("", "5.11x", "why", "D", ("q", "f", "")) == ""


def test_toy_notes_follow_the_measured_averages():
    avg = {"SRSF": 9.333, "2D-Gittins (K=2, limit 4)": 10.0, "2D-Gittins (K=2, limit 12)": 9.333}
    assert tiresias._toy_note(9.3, avg, ["SRSF"]) == ""
    assert tiresias._toy_note(9.3, {"SRSF": 9.5}, ["SRSF"]).startswith("SRSF gives 9.50, not the paper's 9.3")
    gittins = tiresias._toy_note(10.0, avg, ["2D-Gittins (K=2, limit 4)", "2D-Gittins (K=2, limit 12)"])
    assert gittins.startswith("2D-Gittins (K=2, limit 12) gives 9.33, not the paper's 10")
    assert "limit 4" not in gittins and "docs/reproductions.md, tiresias-toy" in gittins
    assert tiresias._toy_note(10.0, {**avg, "2D-Gittins (K=2, limit 12)": 10.0}, list(avg)[1:]) == ""


def _fake_sim(monkeypatch, jct: dict[str, float]):
    """tiresias-sim's report on made-up runs: each policy's every metric is `jct[policy]`."""
    monkeypatch.setattr(tiresias, "run", lambda specs: specs)
    monkeypatch.setattr(tiresias, "plot_cdf", lambda *a, **k: None)
    monkeypatch.setattr(tiresias, "plot_bars", lambda *a, **k: None)

    def summary(specs, sink="report"):
        metrics = ("avg_jct_s", "p95_jct_s", "median_jct_s", "avg_queue_s", "makespan_s")
        return pl.DataFrame([{**s.labels, **{m: jct[s.labels["policy"]] for m in metrics}} for s in specs])

    monkeypatch.setattr(tiresias, "summary_table", summary)
    monkeypatch.setattr(tiresias, "jobs_table", lambda specs, sink="report": pl.DataFrame([s.labels for s in specs]))


@pytest.mark.parametrize("quick", [True, False])
def test_sim_notes_follow_the_measured_ratios(tmp_path, monkeypatch, quick):
    # Every YARN-CS ratio 5.11x, SRTF 0.74x: rows whose paper figure is that agree; the rest do not.
    _fake_sim(monkeypatch, {"Tiresias-L": 1000.0, "Tiresias-G": 1010.0, "YARN-CS": 5110.0, "SRTF": 740.0})
    report = tiresias.tiresias_sim(tmp_path, quick)
    notes = {c.what: c.note for c in report.comparisons}
    assert set(notes) == set(tiresias.SIM_FULL_RUN)
    for what, text in notes.items():
        paper = next(c.paper for c in report.comparisons if c.what == what)
        agrees = paper.startswith(("5.11x", "0.74x", "1.01x", "5.5x"))
        full_agrees = tiresias.SIM_FULL_RUN[what] == ""
        if quick and agrees and not full_agrees:
            assert text.startswith("agrees with the paper; one workload (seed 0) here; full run (five workloads, seeds 0-4)")
        else:
            assert (text == "") == agrees, (what, text)
        if text:
            assert text.endswith("(docs/reproductions.md, tiresias-sim)")
    assert notes["p95 JCT, Tiresias-G / Tiresias-L (sim)"].startswith("about even, where the paper's 1.13x is not")
    assert (notes["avg JCT, YARN-CS / Tiresias-L (sim)"] == "") == (not quick)  # the full run's is smaller


def test_the_recorded_sim_verdicts_are_the_docs_table():
    rows = _docs_rows("tiresias-sim")
    docs_name = {
        "avg JCT, YARN-CS / Tiresias-L with placement slowdowns": "avg JCT, YARN-CS / Tiresias-L, spreading VGG/AlexNet costs 1.67x",
    }
    for what, recorded in tiresias.SIM_FULL_RUN.items():
        paper, ours = rows[docs_name.get(what, what)]
        if what.startswith("avg queueing"):
            theirs, mine = _numbers(paper), _numbers(ours)
            assert _runs.ratio_gap(theirs[0] / theirs[1], mine[0] / mine[1]) == recorded, what
            continue
        mean, low, high = _numbers(ours)[:3]
        assert _runs.ratio_gap(_numbers(paper)[0], mean, low, high) == recorded, what


def test_the_recorded_gavel_verdicts_are_the_docs_tables():
    def ratio(title, row):
        paper, ours = _docs_rows(title)[row]
        return _numbers(paper)[0], _numbers(ours)[0]

    rows = {
        "continuous-single: agnostic / aware average JCT, best over loads": ("gavel-las", None),
        "continuous-multiple: agnostic / aware average JCT, best over loads": ("gavel-las", None),
        "ftf: continuous-multiple: agnostic / aware average JCT, best over loads": (
            "gavel-ftf",
            "agnostic / aware average JCT, best over loads",
        ),
        "ftf: continuous-multiple: agnostic / aware average rho, best over loads": (
            "gavel-ftf",
            "agnostic / aware average ρ, best over loads",
        ),
        "FIFO / makespan policy, makespan, best over batch sizes": (
            "gavel-makespan",
            "FIFO / makespan policy, best over batch sizes",
        ),
        "total effective throughput, hierarchical (aware) / static agnostic partition": (
            "gavel-hierarchical",
            "total effective throughput, hierarchical / static partition",
        ),
    }
    for what, (title, row) in rows.items():
        paper, ours = ratio(title, row or what)
        assert _runs.ratio_gap(paper, ours) == gavel.FULL_RUN[what], what
    cost = _docs_rows("gavel-cost")
    for what, row in (
        ("min cost vs max throughput", "min cost against max throughput"),
        ("min cost + SLOs vs max throughput", "min cost with SLOs against max throughput"),
    ):
        paper, ours = (_numbers(c) for c in cost[row])
        assert _runs.ratio_gap(paper[0], ours[0]) == gavel.FULL_RUN[f"{what}: saving"], what
        assert gavel._pct_gap(paper[1], ours[1]) == gavel.FULL_RUN[f"{what}: violations"], what
    covered = set(rows) | {
        f"{w}: {m}" for w in ("min cost vs max throughput", "min cost + SLOs vs max throughput") for m in ("saving", "violations")
    }
    assert covered == set(gavel.FULL_RUN)


def test_cost_notes_follow_savings_and_violations():
    what = "min cost + SLOs vs max throughput"
    assert gavel.cost_note(what, ("", ""), ("1.23x", "0%"), None) == ""
    late = gavel.cost_note(what, ("", "more"), ("1.23x", "0%"), None)
    assert late.startswith("more SLO violations than the paper's 0%: not traced") and late.endswith(
        "(docs/reproductions.md, gavel-cost)"
    )
    # Quick: agrees here, where the full run (as recorded) has violations.
    quick = gavel.cost_note(what, ("", ""), ("1.23x", "0%"), ("quick run: 60 jobs", "500 jobs"))
    assert (
        quick
        == "agrees with the paper; quick run: 60 jobs; full run (500 jobs): more SLO violations (docs/reproductions.md, gavel-cost)"
    )
    cheap = gavel.cost_note("min cost vs max throughput", ("smaller", ""), ("1.4x", "35%"), None)
    assert cheap.startswith("a smaller saving than the paper's 1.4x: the saving depends on the prices")


@pytest.mark.parametrize(("ratio", "empty"), [(1.02, True), (0.96, True), (0.85, False), (1.3, False)])
def test_fidelity_notes_follow_the_measured_average(ratio, empty):
    for policy in ("fifo", "max_min_fairness_perf"):
        text = gavel.fidelity_note(policy, ratio)
        assert (text == "") == empty
        if not empty:
            assert text.startswith(f"{abs(ratio - 1):.1%} {'higher' if ratio > 1 else 'lower'} than Gavel's simulator")
            assert ("random type" in text) == (policy == "fifo") and "gavel-fidelity" in text


def test_hierarchical_and_best_over_loads_notes():
    assert gavel.hierarchical_note("", False) == ""
    larger = gavel.hierarchical_note(_runs.ratio_gap(1.2, 1.36), False)
    assert larger.startswith("the same way round as the paper's ~1.20x, and more so: the gain depends on")
    # A quick run as the full one (larger): the same note.
    assert gavel.hierarchical_note("larger", True) == larger


def test_quick_gavel_fidelity_notes(tmp_path):
    """One quick run (a few seconds): every row's note is empty exactly where ours is within 5%."""
    from roundhouse.tools.reproductions import load_all

    report = load_all()["gavel-fidelity"].run(tmp_path, True)
    table = report.tables["fidelity"]
    for row, comparison in zip(table.iter_rows(named=True), report.comparisons, strict=True):
        assert (comparison.note == "") == (abs(row["ratio"] - 1) <= gavel.FIDELITY_TOLERANCE), comparison
    assert any(c.note for c in report.comparisons) and np.isfinite(table["ratio"].to_numpy()).all()
