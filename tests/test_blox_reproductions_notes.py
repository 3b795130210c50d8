"""What the Blox reproductions print beside the paper's numbers: notes that follow the sign of the
measured result (placement on Tiresias' testbed, admission control in the quick and full
windows), the docs they point to, and the descriptions of the quick windows and shipped graphs."""

import re

import polars as pl
import pytest

from roundhouse.tools.reproductions import _runs
from roundhouse.tools.reproductions import blox as module
from roundhouse.tools.reproductions._runs import gap_words, pct_lower
from tests.conftest import REPO

DOCS = (REPO / "docs" / "reproductions.md").read_text()


def _section(title: str) -> str:
    start = DOCS.index(f"### {title}")
    end = DOCS.find("\n### ", start + 1)
    return DOCS[start : end if end > 0 else None]


def _drawn_not_rendered(path, draw, size=(5.5, 3.6)):
    """`save_figure` without its layout and PNG (nine tenths of a report's time on made-up
    results, and nothing a note reads): each figure is still drawn, so a plot that fails on the
    report's tables fails the test. (The reproductions' own tests write their figures.)"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    try:
        draw(ax)
    finally:
        plt.close(fig)
    return path


def _fake_runs(monkeypatch, metrics):
    """Run an experiment's report-building code on made-up results: `metrics(labels)` gives each
    run's summary; no simulation, and figures drawn but not rendered."""
    monkeypatch.setattr(module, "run", lambda specs: specs)
    monkeypatch.setattr(_runs, "save_figure", _drawn_not_rendered)

    def summary(specs, sink="report"):
        return pl.DataFrame([{**spec.labels, **metrics(spec.labels)} for spec in specs], infer_schema_length=None)

    def jobs(specs, sink="report"):
        rows = [{**spec.labels, "jct_s": metrics(spec.labels)["avg_jct_s"] * f} for spec in specs for f in (0.5, 1.5)]
        return pl.DataFrame(rows, infer_schema_length=None)

    monkeypatch.setattr(module, "summary_table", summary)
    monkeypatch.setattr(module, "jobs_table", jobs)


def _comparison(report, what: str):
    (found,) = [c for c in report.comparisons if c.what == what]
    return found


P100_ROW = "P100/100 Gbps: consolidate-all vs skew placement, avg JCT"


@pytest.mark.parametrize(
    ("consolidated", "expected"),
    [
        ({4: 90.0, 8: 95.0}, "differs at every load"),  # consolidate-all lower at both loads
        ({4: 110.0, 8: 95.0}, "differs at 8 jobs/h"),  # only at 8 jobs/h
        ({4: 110.0, 8: 120.0}, ""),  # skew placement better everywhere, as on Tiresias' testbed
    ],
)
def test_the_p100_note_follows_the_sign_of_the_measured_result(tmp_path, monkeypatch, consolidated, expected):
    def metrics(labels):
        jct = 100.0
        if labels.get("scenario", "").startswith("P100") and labels["placer"] == "consolidate all":
            jct = consolidated[labels["load"]]
        queue = 10.0 if labels["placer"] == "consolidate all" else 20.0
        return {"avg_jct_s": jct, "avg_queue_s": queue, "avg_responsiveness_s": 1.0}

    _fake_runs(monkeypatch, metrics)
    row = _comparison(module.blox_placement(tmp_path, True), P100_ROW)
    if expected:
        assert row.note.startswith(expected), row.note
        assert "queued longer" in row.note and "docs/reproductions.md, blox-placement" in row.note
        assert "lower" in row.ours.split(f"{8} jobs/h:")[1]
    else:
        assert row.note == "" and "lower" not in row.ours


def test_the_p100_note_only_says_skew_placement_queued_longer_where_it_did():
    note = module._p100_note({4: 1.0, 8: 2.0}, {4: (5.0, 10.0), 8: (20.0, 10.0)})
    assert "queued longer at 8 jobs/h" in note
    assert "queued" not in module._p100_note({4: 1.0}, {4: (5.0, 10.0)})


ADMISSION_ROWS = [
    "avg JCT, Accept 1.2x vs Accept All",
    "avg JCT, Accept 1.5x vs Accept All",
    "avg JCT, Accept 1.0x vs Accept All",
    "spike: avg JCT, Accept 1.5x vs Accept All",
    "spike: avg JCT, Accept 1.2x vs Accept All",
]


def _admission_metrics(factor: float):
    """Every gate's average JCT `factor` times Accept All's."""

    def metrics(labels):
        jct = 100.0 if labels["admission"] == "Accept All" else 100.0 * factor
        return {"avg_jct_s": jct, "avg_responsiveness_s": 1.0}

    return metrics


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_quick_admission_notes_name_the_early_window_and_the_full_runs_sign(tmp_path, monkeypatch, factor):
    _fake_runs(monkeypatch, _admission_metrics(factor))
    report = module.blox_admission(tmp_path, True)
    lo, hi, _ = module.window(True, single_gpu=True)
    full_lo, full_hi, _ = module.window(False, single_gpu=True)
    assert set(module.FULL_RUN_LOWERS) == set(ADMISSION_ROWS)
    for what, full_lowers in module.FULL_RUN_LOWERS.items():
        row = _comparison(report, what)
        assert row.ours.endswith("lower" if factor < 1 else "higher")
        assert f"early window (jobs {lo}-{hi - 1}" in row.note
        assert f"full run (jobs {full_lo}-{full_hi - 1}): {'lower' if full_lowers else 'higher'}" in row.note
        agrees = (factor < 1) == full_lowers
        assert row.note.endswith(f"{'as here' if agrees else 'the other way'} (docs/reproductions.md, blox-admission)")


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_full_admission_notes_explain_only_a_result_of_the_other_sign(tmp_path, monkeypatch, factor):
    _fake_runs(monkeypatch, _admission_metrics(factor))
    report = module.blox_admission(tmp_path, False)
    for what in ADMISSION_ROWS:
        row = _comparison(report, what)
        assert "early window" not in row.note
        if factor < 1:
            # lower, as the paper's every figure; only a gain far from the paper's is explained
            assert row.note == "" or row.note.startswith("a much "), row.note
        else:
            assert row.note.startswith("higher, where the paper's is lower") and "blox-admission" in row.note


def test_the_recorded_full_run_signs_are_the_docs_table():
    section = _section("blox-admission")
    header = next(line for line in section.splitlines() if line.startswith("| |"))
    column = [c.strip() for c in header.strip("|").split("|")].index("ours, jobs 3000-3999")
    full_lo, full_hi, _ = module.window(False, single_gpu=True)
    assert f"jobs {full_lo}-{full_hi - 1}" in header
    recorded = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ADMISSION_ROWS:
            recorded[cells[0]] = cells[column].endswith("lower")
    assert recorded == module.FULL_RUN_LOWERS


def test_the_placement_docs_say_where_the_p100_row_differs():
    section = _section("blox-placement")
    row = next(line for line in section.splitlines() if line.startswith("| P100"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    if any(c.endswith("lower") for c in cells):  # consolidate-all ahead, where Tiresias' testbed has skew placement
        prose = section.split(row, 1)[1]
        assert "Both of the paper's findings hold" not in prose
        assert "P100" in prose and "random placement" in prose


def test_the_module_describes_its_quick_windows():
    doc = " ".join(module.__doc__.split())
    for single_gpu in (True, False):
        lo, hi, n = module.window(True, single_gpu=single_gpu)
        assert f"jobs {lo} to {hi - 1} of {n}" in doc


def _trace_of(graph: str):
    text = (REPO / "graphs" / graph).read_text()
    (path,) = re.findall(r'TraceSource\(path="([^"]+)"', text)
    header = " ".join(line.removeprefix("//").strip() for line in text.splitlines() if line.startswith("//"))
    return header, pl.read_csv(REPO / "graphs" / path)


@pytest.mark.parametrize("graph", ["blox-accept.sched", "blox-accept-1.2x.sched"])
def test_the_blox_accept_graphs_describe_the_trace_they_read(graph):
    header, trace = _trace_of(graph)
    multi = float((trace["gpus"] > 1).mean())
    if multi > 0:
        assert "As in the paper" not in header and "Not the paper's workload" in header
        served = 128 / float((trace["gpus"] * trace["duration_s"]).mean() / 3600)
        (claimed,) = re.findall(r"serve about (\d+) of its jobs an hour", header)
        assert round(served) == int(claimed)
        assert f"{round(float(trace['gpus'].mean()))} GPUs a job on average" in header
    else:
        assert "one GPU" in header


# --- every row's note follows the measured values -------------------------------------------------


def _docs_sections(note: str) -> list[str]:
    return re.findall(r"docs/reproductions\.md, ([a-z0-9-]+)", note)


def _assert_points_at_docs(note: str, section: str):
    assert _docs_sections(note) == [section], note
    _section(section)  # the section it names exists


def _policy_metrics(jct: dict[str, float], resp: dict[str, float]):
    """Each policy's average JCT and responsiveness, the same at every load."""

    def metrics(labels):
        return {"avg_jct_s": jct[labels["policy"]], "avg_responsiveness_s": resp[labels["policy"]]}

    return metrics


POLICY_ROWS = ("lowest average JCT at 2 jobs/h", "best responsiveness at 8 jobs/h", "worst responsiveness at 8 jobs/h")


def test_blox_policies_notes_are_empty_where_ours_agrees(tmp_path, monkeypatch):
    _fake_runs(
        monkeypatch,
        _policy_metrics({"FIFO": 100.0, "Tiresias": 102.0, "Optimus": 60.0}, {"FIFO": 9.0, "Tiresias": 1.0, "Optimus": 2.0}),
    )
    report = module.blox_policies(tmp_path, True)
    assert [c.note for c in report.comparisons] == ["", "", "", ""]


def test_blox_policies_notes_say_how_ours_differs_and_why(tmp_path, monkeypatch):
    # Tiresias 2% below FIFO and lowest; Optimus most responsive; Tiresias least.
    _fake_runs(
        monkeypatch,
        _policy_metrics({"FIFO": 50.0, "Tiresias": 49.0, "Optimus": 60.0}, {"FIFO": 2.0, "Tiresias": 9.0, "Optimus": 1.0}),
    )
    report = module.blox_policies(tmp_path, True)
    row = _comparison(report, "Tiresias' average JCT above FIFO's at high load")
    assert row.note.startswith("no: Tiresias 2.0% below FIFO at 8 jobs/h; ")
    assert module.CHEAP_PREEMPTION in row.note
    _assert_points_at_docs(row.note, "blox-policies")
    for what, note in zip(POLICY_ROWS, ("Tiresias, not Optimus", "Optimus, not Tiresias", "Tiresias, not FIFO")):
        row = _comparison(report, what)
        assert row.note.startswith(note), row.note
        _assert_points_at_docs(row.note, "blox-policies")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({7: 0.0, 8: -1.0, 9: -3.0}, ""),  # above at 8 and 9, as the paper's
        (
            {7: 0.01, 8: 2.04, 9: 3.9},
            "no: Tiresias 2.0% below FIFO at 8 jobs/h, 3.9% below FIFO at 9 jobs/h; the same at 7 jobs/h; ",
        ),
        ({8: 2.0, 9: -1.0}, "only at 9 jobs/h: Tiresias 2.0% below FIFO at 8 jobs/h; "),
        ({7: 0.0}, "no: the same as FIFO at 7 jobs/h (docs/reproductions.md, blox-policies)"),
        ({8: None}, ""),
    ],
)
def test_the_tiresias_note_names_each_load_where_it_is_not_above_fifo(changes, expected):
    note = module._tiresias_note(changes)
    assert note.startswith(expected) and bool(note) == bool(expected), note


@pytest.mark.parametrize(("ratio", "code"), [(0.56, ""), (0.52, ""), (0.40, "larger"), (0.80, "smaller"), (1.1, "reversed")])
def test_the_loss_termination_note_follows_the_measured_gain(tmp_path, monkeypatch, ratio, code):
    _fake_runs(monkeypatch, lambda labels: {"avg_jct_s": 100.0 * (ratio if labels["termination"] == "loss-based" else 1.0)})
    row = _comparison(module.blox_loss_termination(tmp_path, True), "avg JCT, loss-based termination vs all epochs")
    assert row.ours == pct_lower(100.0, 100.0 * ratio)  # "-10.0% lower" never
    if not code:
        assert row.note == ""
        return
    assert row.note.startswith(gap_words(code, "~44% lower"))
    assert (module.WORK_REMOVED in row.note) == (code in ("smaller", "larger"))
    _assert_points_at_docs(row.note, "blox-loss-termination")


V100_ROW = "V100/10 Gbps: consolidate-all vs skew placement, avg JCT"
PLUS_ROW = "Tiresias+ vs Tiresias, avg JCT, 5 to 8 sensitive models"


def _placement_metrics(v100_consolidated: dict[int, float], plus: dict[int, float]):
    """Skew placement and Tiresias at 100 s; consolidate-all on the V100 cluster and Tiresias+ as given."""

    def metrics(labels):
        jct = 100.0
        if labels["figure"] == "10" and labels["scenario"].startswith("V100") and labels["placer"] == "consolidate all":
            jct = v100_consolidated[labels["load"]]
        if labels["figure"] == "11" and labels["placer"].startswith("Tiresias+"):
            jct = plus[labels["sensitive"]]
        return {"avg_jct_s": jct, "avg_queue_s": 1.0, "avg_responsiveness_s": 1.0}

    return metrics


@pytest.mark.parametrize(
    ("v100", "expected"),
    [({4: 95.0, 8: 80.0}, ""), ({4: 120.0, 8: 90.0}, ""), ({4: 90.0, 8: 100.0}, "differs at 8 jobs/h: skew placement as good")],
)
def test_the_v100_note_follows_the_measured_result_above_4_jobs_an_hour(tmp_path, monkeypatch, v100, expected):
    _fake_runs(monkeypatch, _placement_metrics(v100, {5: 100.0, 6: 98.0, 7: 95.0, 8: 90.0}))
    report = module.blox_placement(tmp_path, True)
    row = _comparison(report, V100_ROW)
    if not expected:
        assert row.note == ""
    else:
        assert row.note.startswith(expected) and module.ALL_SENSITIVE in row.note
        _assert_points_at_docs(row.note, "blox-placement")
    assert any(module.ALL_SENSITIVE in note for note in report.notes)  # the assumption is always said
    assert _comparison(report, PLUS_ROW).note == ""


@pytest.mark.parametrize(
    ("plus", "expected"),
    [
        ({5: 100.0, 6: 97.0, 7: 97.0, 8: 90.0}, ""),
        ({5: 100.0, 6: 90.0, 7: 95.0, 8: 105.0}, "Tiresias+ higher at 8 sensitive models; the gap shrinks from 6 to 7, 7 to 8"),
        ({5: 99.0, 6: 99.0, 7: 99.0, 8: 99.0}, "the gap does not grow"),
    ],
)
def test_the_tiresias_plus_note_follows_the_measured_gaps(tmp_path, monkeypatch, plus, expected):
    _fake_runs(monkeypatch, _placement_metrics({4: 95.0, 8: 80.0}, plus))
    row = _comparison(module.blox_placement(tmp_path, True), PLUS_ROW)
    if not expected:
        assert row.note == ""
    else:
        assert row.note.startswith(expected), row.note
        _assert_points_at_docs(row.note, "blox-placement")


class _Outcome:
    def __init__(self, spec, bandwidth):
        self.spec = spec
        self.reports = {"links": {"bandwidth": bandwidth, "links": pl.DataFrame({"gbps": [1.0]})}}


def _intranode(tmp_path, monkeypatch, quick, bandwidths):
    """blox-intranode on made-up bandwidths: `bandwidths[policy]` = (all jobs, 2-GPU jobs)."""
    monkeypatch.setattr(_runs, "save_figure", _drawn_not_rendered)
    monkeypatch.setattr(
        module,
        "run",
        lambda specs: [
            _Outcome(s, dict(zip(("avg_gbps", "avg_gbps_2gpu"), bandwidths[s.labels["policy"]], strict=True))) for s in specs
        ],
    )
    return module.blox_intranode(tmp_path, quick)


def test_the_intranode_notes_are_empty_where_ours_is_the_papers(tmp_path, monkeypatch):
    report = _intranode(tmp_path, monkeypatch, False, {"Random": (58.7, 60.0), "Bandwidth aware": (86.5, 88.0)})
    assert [c.note for c in report.comparisons] == ["", "", "", ""]


def test_the_intranode_notes_say_ours_are_ratings_and_which_way_the_ratio_differs(tmp_path, monkeypatch):
    report = _intranode(tmp_path, monkeypatch, False, {"Random": (262.1, 256.0), "Bandwidth aware": (309.8, 300.0)})
    random, aware, ratio, two = report.comparisons
    assert random.note.startswith("4.5x the paper's: ") and aware.note.startswith("3.6x the paper's: ")
    for row in (random, aware, ratio, two):
        _assert_points_at_docs(row.note, "blox-intranode")
    assert ratio.note.startswith(gap_words("smaller", "1.47x") + ": " + module.WHOLE_NODES)
    assert two.note.startswith(gap_words("smaller", "1.47x (all jobs)") + ": " + module.FULLEST_NODE)
    larger = _intranode(tmp_path, monkeypatch, False, {"Random": (50.0, 50.0), "Bandwidth aware": (100.0, 100.0)})
    assert larger.comparisons[2].note == gap_words("larger", "1.47x") + " (docs/reproductions.md, blox-intranode)"


def test_a_quick_intranode_note_says_where_the_full_run_differs(tmp_path, monkeypatch):
    report = _intranode(tmp_path, monkeypatch, True, {"Random": (100.0, 100.0), "Bandwidth aware": (147.0, 147.0)})
    _, _, ratio, two = report.comparisons
    assert ratio.note.startswith(f"{gap_words('')}; 300 jobs here; full run (3000 jobs): {gap_words('smaller')}")
    assert two.note.startswith(
        f"{gap_words('', '1.47x (all jobs)')}; 300 jobs here; full run (3000 jobs): {gap_words('smaller')}"
    )
    same = _intranode(tmp_path, monkeypatch, True, {"Random": (100.0, 100.0), "Bandwidth aware": (147.0, 120.0)})
    assert "full run" not in same.comparisons[3].note  # (the full run's verdict is the quick one's: nothing to add)


def test_the_recorded_intranode_verdicts_are_the_docs_table():
    section = _section("blox-intranode")
    (overall, two) = re.findall(r"\*\*([0-9.]+)x\*\* \(2-GPU jobs alone: ([0-9.]+)x", section)[0]
    recorded = {
        "bandwidth-aware / random": module.ratio_gap(module.INTRANODE_RATIO, float(overall)),
        "2-GPU jobs only: bandwidth-aware / random": module.ratio_gap(module.INTRANODE_RATIO, float(two)),
    }
    assert recorded == module.INTRANODE_FULL_RUN


@pytest.mark.parametrize(
    ("section", "reason"),
    [
        ("blox-policies", "CHEAP_PREEMPTION"),
        ("blox-admission", "SMALL_GAIN"),
        ("blox-loss-termination", "WORK_REMOVED"),
        ("blox-placement", "ALL_SENSITIVE"),
        ("blox-intranode", "WHOLE_NODES"),
        ("blox-intranode", "FULLEST_NODE"),
        ("blox-intranode", "RATINGS"),
    ],
)
def test_each_reason_a_note_gives_is_the_one_its_docs_section_gives(section, reason):
    """The reason's distinctive words (numbers, model names, the comparison it makes) are in the
    section the note points at."""
    text = " ".join(_section(section).lower().replace("**", "").split())
    words = {
        "CHEAP_PREEMPTION": [
            "60 s charge per preemption",
            "the paper's result needs preemptions to cost blox's las more than they cost ours",
        ],
        "SMALL_GAIN": ["the paper's gain needs las to lose more capacity to preemption than a 60 s charge takes from it"],
        "WORK_REMOVED": ["75% of jobs x 60% of their work = 45%", "less work also means less waiting"],
        "ALL_SENSITIVE": ["we assume every model is 1.67x slower when spread", "blox gives no per-model numbers"],
        "WHOLE_NODES": ["a 4-gpu job takes a whole node", "under either policy"],
        "FULLEST_NODE": ["a 2-gpu job goes to the fullest node that can hold it, which often has only one free pair left"],
        "RATINGS": ["link ratings", "nvlink 2.0", "only the ratio compares"],
    }[reason]
    for phrase in words:
        assert phrase in text and phrase in getattr(module, reason).lower(), phrase


# Each admission row's paper figure (percent lower) by scenario and gate.
PAPER_GAINS = {
    ("Philly-Trace", "Accept 1.2x"): 15.0,
    ("Philly-Trace", "Accept 1.5x"): 5.0,
    ("Philly-Trace", "Accept 1.0x"): 30.0,
    ("with daily spike", "Accept 1.5x"): 15.4,
    ("with daily spike", "Accept 1.2x"): 27.3,
    ("with daily spike", "Accept 1.0x"): 30.0,
}


def _admission_gains(scale: float):
    """Every gate's gain over Accept All `scale` times the paper's."""

    def metrics(labels):
        gain = 0.0 if labels["admission"] == "Accept All" else PAPER_GAINS[labels["scenario"], labels["admission"]] * scale
        return {"avg_jct_s": 100.0 - gain, "avg_responsiveness_s": 1.0 + (labels["admission"] == "Accept 1.0x")}

    return metrics


@pytest.mark.parametrize(("scale", "words"), [(1.0, ""), (1.4, ""), (1 / 1.4, ""), (0.05, "smaller"), (1.6, "larger")])
@pytest.mark.parametrize("quick", [True, False])
def test_admission_notes_say_when_a_gain_is_far_from_the_papers(tmp_path, monkeypatch, scale, words, quick):
    _fake_runs(monkeypatch, _admission_gains(scale))
    report = module.blox_admission(tmp_path, quick)
    assert _comparison(report, "avg responsiveness, Accept 1.0x vs Accept All").note == ""  # worse, as the paper's
    for what in ADMISSION_ROWS:
        row = _comparison(report, what)
        paper = float(row.paper.lstrip("~").split("%")[0])
        said = f"a much {words} gain than the paper's {paper:g}%"
        if words:
            assert row.note.startswith(said), row.note
            assert (module.SMALL_GAIN in row.note) == (words == "smaller" and not quick)
            _assert_points_at_docs(row.note, "blox-admission")
        else:
            assert "much" not in row.note
            assert row.note == "" or quick


def test_the_admission_gain_words_compare_within_a_factor_of_one_and_a_half():
    assert module._gain_words(1.0, 30.0) == "a much smaller gain than the paper's 30%"
    assert module._gain_words(0.1, 5.0) == "a much smaller gain than the paper's 5%"
    assert module._gain_words(11.5, 15.0) == "" and module._gain_words(10.8, 15.4) == ""
    assert module._gain_words(0.0, 5.0).startswith("a much smaller")
