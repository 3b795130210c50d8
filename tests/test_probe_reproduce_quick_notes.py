"""The notes a quick reproduction prints describe the quick run: one workload, one seed, no
ranges (a note that promised min-max in brackets beside rows without them misled the reader).
(synergy-philly's quick run names its one seed: tests/test_synergy.py, which runs it.)"""

from __future__ import annotations

import pytest

from roundhouse.tools.reproductions import load_all


@pytest.mark.slow
def test_tiresias_sim_quick_promises_no_ranges_it_does_not_print(tmp_path):
    report = load_all()["tiresias-sim"].run(tmp_path, True)
    ratios = [n for n in report.notes if n.startswith("Ratios:")]
    assert len(ratios) == 1
    bracketed = [c.ours for c in report.comparisons if "[" in c.ours]
    assert bracketed == []  # (one workload: no range)
    assert "min-max in brackets" not in ratios[0] and "(s)" not in ratios[0]
    assert ratios[0].startswith("Ratios: one generated workload (seed 0);")
