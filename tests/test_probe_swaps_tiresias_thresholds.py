"""Swapping in Tiresias' policies with edge thresholds: a refused `thresholds` argument is named
once, with the value written, at its place in the `.sched` file."""

from __future__ import annotations

import pytest

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file


def _graph(tmp_path, order: str):
    path = tmp_path / "g.sched"
    path.write_text(
        'round = 10s;\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=4/h, jobs=5);\n'
        f"order :: {order};\n"
        "src -> AcceptAll -> JobPool -> order -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return path


@pytest.mark.parametrize("policy", ["TiresiasLas", "TiresiasGittins"])
@pytest.mark.parametrize(
    "thresholds, problem",
    [
        ("[0s]", "must be greater than 0 (GPU-time, e.g. 3200s or 1h), got [0s]"),
        ("[-5s]", "must be greater than 0 (GPU-time, e.g. 3200s or 1h), got [-5s]"),
        ("[2h, 1h]", "must increase from one queue to the next, got [2h, 1h]"),
    ],
)
def test_bad_thresholds_are_named_once_with_their_value(tmp_path, policy, thresholds, problem):
    queues = thresholds.count(",") + 2
    with pytest.raises(RoundhouseError) as caught:
        compile_file(_graph(tmp_path, f"{policy}(queues={queues}, thresholds={thresholds})"))
    text = str(caught.value)
    assert f"argument 'thresholds' of {policy} {problem}" in text, text
    assert f"{policy} thresholds" not in text, text  # (the argument named once, not twice)
    assert "g.sched:4:" in text, text
