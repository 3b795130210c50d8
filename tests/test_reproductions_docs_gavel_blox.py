"""What docs/reproductions.md says of the Tiresias, Blox and Gavel reproductions against what the
code does: the water-filling MILP's limit, run times and quick scopes, what the agnostic Gavel
mechanism shuffles, Gavel's claims left out, and Blox's "Tiresias"."""

from __future__ import annotations

import inspect
import re

import pytest

from roundhouse.elements.policies.gavel import lp, waterfill
from roundhouse.elements.policies.gavel.mechanism import GavelRounds
from roundhouse.tools.reproductions import blox, gavel, load_all
from tests.conftest import REPO

DOCS = (REPO / "docs" / "reproductions.md").read_text()


def _section(title: str) -> str:
    start = DOCS.index(f"### {title}")
    end = DOCS.find("\n### ", start + 1)
    return DOCS[start : end if end > 0 else None]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_water_filling_milp_is_said_to_stop_at_its_node_count():
    speed = _flat(_section("Solver and simulation speed"))
    assert f"stops after {lp._MILP_NODES:,} branch-and-bound nodes" in speed
    assert "per level" not in speed  # (the wall-clock limit it once had)
    comments = _flat(inspect.getsource(waterfill))
    assert "time limit" not in comments and "node limit" in comments


FAMILIES = ("tiresias-", "blox-", "gavel-")


@pytest.mark.parametrize("name", sorted(n for n in load_all() if n.startswith(FAMILIES)))
def test_every_experiment_states_its_run_times_full_and_quick(name):
    section = _section(f"{name}:")
    lines = [line for line in section.split("\n\n") if line.startswith("Run time:")]
    assert len(lines) == 1, f"{name}: one 'Run time:' paragraph"
    assert "full" in lines[0] and "--quick" in lines[0], name


def test_the_quick_scopes_stated_are_the_codes():
    lo, hi, n = blox.window(True, single_gpu=True)
    for name in ("blox-admission", "blox-loss-termination", "blox-policies"):
        assert f"jobs {lo}-{hi - 1} of {n}" in _flat(_section(f"{name}:")), name
    lo, hi, n = blox.window(True)
    assert f"jobs {lo}-{hi - 1} of {n}" in _flat(_section("blox-placement:"))
    # Gavel's: the notes a quick run prints say what it ran.
    quick_las = gavel._window_note(True)
    assert re.search(r"quick: (\d+) jobs per run", quick_las)
    jobs = re.search(r"quick: (\d+) jobs per run", quick_las).group(1)
    for name in ("gavel-las", "gavel-ftf"):
        assert f"{jobs} jobs per run" in _flat(_section(f"{name}:")), name


def test_the_agnostic_mechanism_is_said_to_shuffle_gpu_types_not_jobs():
    assert "GPU types" in inspect.getdoc(GavelRounds).split("order:")[1].split("\n")[0]
    texts = {
        "gavel-ftf": _flat(_section("gavel-ftf:")),
        "gavel-fidelity": _flat(_section("gavel-fidelity:")),
        "FIDELITY_REASONS": gavel.FIDELITY_REASONS["max_min_fairness"],
    }
    for where, text in texts.items():
        assert "visits jobs in a shuffled order" not in text and "visiting jobs in a shuffled order" not in text, where
        assert "GPU types in a shuffled order" in text, where


def test_gavel_claims_not_reproduced_are_listed():
    listed = _flat(_section("Gavel's claims not reproduced"))
    for claim in ("2.2x", "3.8x", "1.1x", "1.4x", "8%", "Fig 20", "Figs 16 and 18", "AlloX"):
        assert claim in listed, claim


def test_blox_policies_says_bloxs_tiresias_is_plain_las_with_the_figures_it_cites():
    policies = _flat(_section("blox-policies:"))
    assert "plain least-attained-service order" in policies
    fifo_at_8 = next(line for line in DOCS.splitlines() if line.startswith("| avg JCT FIFO (h) |"))
    loads = next(line for line in DOCS.splitlines() if line.startswith("| load (jobs/h) |"))
    fifo = dict(zip(loads.strip("|").split("|")[1:], fifo_at_8.strip("|").split("|")[1:]))[" 8 "].strip()
    las = re.search(r"Accept All ([\d.]+) h", _flat(_section("blox-admission:"))).group(1)
    assert f"average JCT of {las} h, further below FIFO's {fifo} h" in policies
    assert float(las) < float(fifo)
