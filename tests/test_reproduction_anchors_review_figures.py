"""The published figures the reproductions print beside ours, held to their sources: each
experiment's section citation names a section of the paper that discusses the figures it cites,
the figures typed into tools/reproductions/*.py are the paper's, and docs/reproductions.md gives
the same ones. The papers' text is read from ../shared/papers, the reference data from
../shared/data, as the other tests that compare with the original projects do."""

from __future__ import annotations

import re

import polars as pl
import pytest
from conftest import REPO, SHARED

from roundhouse.tools.reproductions import EXPERIMENTS, dally, gavel, load_all, ones, tiresias
from roundhouse.tools.reproductions import blox as blox_module

PAPERS = SHARED / "papers"
DOCS = (REPO / "docs" / "reproductions.md").read_text()

# The papers whose text is in ../shared/papers, by the name a citation gives them.
PAPER_FILES = {"Blox (EuroSys'24)": "blox.txt", "ONES (SC'21)": "ones.txt", "Tiresias (NSDI'19)": "tiresias.txt"}
# A section heading: "4.2 Comparing ..." (ONES, as plain text) or "#### 4.2 ..." / "## A ..." (Blox,
# Tiresias, as Markdown, sometimes with an anchor before the number).
HEADING = re.compile(r"^(?:#+\s*(?:<span[^>]*></span>)?\s*)?([0-9]+(?:\.[0-9]+)*|[A-C])\s+[A-Z$]")


def _sections(text: str) -> dict[str, str]:
    """Each numbered section's text, subsections included, up to the next heading of its level or above."""
    lines = text.splitlines()
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := HEADING.match(line))]
    out = {}
    for k, (i, number) in enumerate(starts):
        end = next((j for j, other in starts[k + 1 :] if not other.startswith(number + ".")), len(lines))
        out[number] = "\n".join(lines[i:end])
    return out


def _cited(paper: str) -> list[tuple[str, str, list[tuple[str, int]]]]:
    """(paper, section, [(kind, number)]) for each part of a citation that names a section of a
    paper in PAPER_FILES: "Blox (EuroSys'24) §5.2, Figs 14-15; Appendix A, Figs 20-21"."""
    out, name = [], None
    for part in paper.split(";"):
        part = part.strip()
        named = next((n for n in PAPER_FILES if part.startswith(n)), None)
        if named or re.match(r"[A-Z][a-z]+ \(", part):
            name = named
        section = re.search(r"§([0-9.]+)|Appendix ([A-C])", part)
        if name is None or section is None:
            continue
        figures = []
        for kind, first, last in re.findall(r"(Figs?|Table)\.?\s*([0-9]+)(?:-([0-9]+))?", part):
            figures += [("Table" if kind == "Table" else "Fig", n) for n in range(int(first), int(last or first) + 1)]
        out.append((name, section.group(1) or section.group(2), figures))
    return out


def test_each_cited_section_is_where_the_paper_discusses_the_cited_figures():
    load_all()
    checked = 0
    for exp in EXPERIMENTS.values():
        for name, number, figures in _cited(exp.paper):
            sections = _sections((PAPERS / PAPER_FILES[name]).read_text())
            assert number in sections, f"{exp.name}: {name} has no section {number}"
            for kind, n in figures:
                word = r"Table" if kind == "Table" else r"(?:Figure|Fig\.?)"
                mention = re.compile(rf"{word}s?\s*\[?\(?{n}(?![0-9])")
                assert mention.search(sections[number]), f"{exp.name}: {name} §{number} does not discuss {kind} {n}"
                checked += 1
    assert checked >= 20  # every Blox, ONES and Tiresias experiment's cited figures


def test_the_ones_section_is_the_same_in_the_listing_and_the_docs():
    load_all()
    cited = re.search(r"§([0-9.]+)", EXPERIMENTS["ones-64gpu"].paper).group(1)
    heading = next(line for line in DOCS.splitlines() if line.startswith("## ones-64gpu"))
    assert f"(ONES §{cited}," in heading


def test_ones_figures_are_the_papers():
    text = (PAPERS / "ones.txt").read_text()
    assert f"average JCT of {ones.PAPER_ONES_JCT}s" in text
    jct = re.search(r"reduce the average JCT by [0-9.]+%, ([0-9.]+)% and ([0-9.]+)%, compared to DRL, Tiresias", text)
    assert tuple(map(float, jct.groups())) == (ones.PAPER_REDUCTION["Tiresias"], ones.PAPER_REDUCTION["Optimus"])
    queue = re.search(r"Tiresias by ([0-9.]+)%, and Optimus by ([0-9.]+)%", text)
    assert tuple(map(float, queue.groups())) == (ones.PAPER_QUEUE_REDUCTION["Tiresias"], ones.PAPER_QUEUE_REDUCTION["Optimus"])
    for base, p in ones.PAPER_WILCOXON.items():
        assert re.search(rf"vs\. {base}\s+{p:.3g}".replace("e-0", "e-"), text), base
    scaling = re.search(r"from [0-9]+%/([0-9]+)%/([0-9]+)% to [0-9]+%/([0-9]+)%/([0-9]+)%", text)
    small_t, small_o, large_t, large_o = map(int, scaling.groups())
    assert ones.PAPER_SCALING == {"Tiresias": (small_t, large_t), "Optimus": (small_o, large_o)}


def _paper_table(text: str, caption: str) -> dict[str, tuple[float, ...]]:
    """A Dally JCT table (scheme -> average, median, P95, P99) from the rows just before its caption."""
    before = text[: text.index(caption)].splitlines()
    header = next(i for i in range(len(before) - 1, -1, -1) if before[i].strip().startswith("Gandiva"))
    schemes = before[header].split()
    rows = [before[header + 1 + k].split()[1:] for k in range(4)]
    return {s: tuple(float(row[j]) for row in rows) for j, s in enumerate(schemes)}


@pytest.mark.parametrize(("workload", "caption"), [("batch", "TABLE II:"), ("poisson", "TABLE III:")])
def test_dally_tables_are_the_papers_and_the_docs(workload, caption):
    text = (PAPERS / "dally.txt").read_text()
    assert _paper_table(text, caption) == {s: tuple(map(float, v)) for s, v in dally.TABLES[workload].items()}
    name = "Table II" if workload == "batch" else "Table III"
    section = DOCS[DOCS.index(f"{name} (8 racks), average / median / p95 / p99 JCT in seconds") :]
    for scheme, values in dally.TABLES[workload].items():
        row = next(line for line in section.splitlines() if line.startswith(f"| {scheme} |"))
        shown = [float(v.strip().removesuffix("M")) for v in row.split("|")[2].split(" / ")]
        # The docs give millions to two decimals, or three significant figures from ten up.
        assert shown == pytest.approx([v / 1e6 for v in values], rel=0.006, abs=0.005), scheme


def test_tiresias_and_blox_figures_are_the_papers():
    tiresias_text = (PAPERS / "tiresias.txt").read_text()
    averages = re.search(r"average JCTs in this example are ([0-9.]+), ([0-9.]+) and ([0-9.]+) units", tiresias_text)
    srsf, gittins, las = map(float, averages.groups())
    assert tiresias.TOY_PAPER == {"SRSF": srsf, "2D-LAS": las, "2D-Gittins": gittins}
    for policy, seconds in tiresias.PAPER_QUEUE.items():
        assert re.search(rf"{policy}\s+{seconds:.0f}s", tiresias_text), policy
    blox_text = (PAPERS / "blox.txt").read_text()
    for policy, gbps in blox_module.INTRANODE_PAPER.items():
        assert re.search(rf"{policy.split()[0]}.*\s{gbps}\b", blox_text), policy
    assert f"improves bandwidth observed by {blox_module.INTRANODE_RATIO}" in blox_text


def test_gavel_fidelity_names_the_job_counts_of_its_philly_traces():
    """docs/reproductions.md's gavel-fidelity sentence on the Philly-derived traces names each
    trace's job count as its own table gives it (the jobs compared for max_min_fairness_perf)."""
    section = DOCS[DOCS.index("### gavel-fidelity") :]
    sentence = re.search(r"two\s+Philly-derived traces \(([^)]*)\) on 36:36:36", section)
    named = sorted(int(n.replace(",", "")) for n in re.findall(r"[0-9][0-9,]*", sentence.group(1)))
    counts = sorted(
        int(line.split("|")[3])
        for line in section.splitlines()
        if line.startswith("| msr ") and line.split("|")[2].strip() == "max_min_fairness_perf"
    )
    assert named == counts


def test_gavel_fidelity_tables_job_counts_are_the_traces():
    for name, (trace, _, _) in gavel.FIDELITY_TRACES.items():
        if not name.startswith("msr"):
            continue
        jobs = pl.read_csv(SHARED / "data" / "gavel" / trace.replace("seed0_", "").replace(".trace", "_36-36-36_input_jobs.csv"))
        row = next(line for line in DOCS.splitlines() if line.startswith(f"| {name} | max_min_fairness_perf |"))
        assert int(row.split("|")[3]) == jobs.height, name
