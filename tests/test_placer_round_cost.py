"""What a built-in placer's tick spends on an overloaded cluster, where nearly every round is
ticked: a queue that wants more GPUs than there are is seen once (step 1's shortcut is not
tested again); the plans are those of the same placer without this cut. Elements store their
private state without attrs' guard of their fields, which stay frozen."""

import attrs
import numpy as np
import pytest

from roundhouse.elements.placement import placer as placer_module
from roundhouse.elements.placement.builtin import Consolidated, FirstFree
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

GRAPH = """
round = 5min;
cluster = "4x4:V100";
src :: PoissonSource(rate=8/h, jobs=120, seed=3);
src -> AcceptAll -> JobPool -> Las -> {placer} -> Launch -> m :: JobMetrics;
"""


def _run(placer: str):
    return simulate(compile_file("cost.sched", text=GRAPH.format(placer=placer)))


def _books(result) -> dict:
    jobs = result.world.jobs
    return {name: np.array(jobs.column(name)) for name in ("finish_s", "first_start_s", "preemptions", "service", "launches")}


@pytest.mark.parametrize("placer", ["Consolidated", "FirstFree"])
def test_an_overfull_queue_skips_the_test_that_every_ranked_job_fits(placer, monkeypatch):
    asked = []
    wants_fit = placer_module._wants_fit
    monkeypatch.setattr(
        placer_module, "_wants_fit", lambda want, gpus: asked.append(int(want.sum()) > gpus) or wants_fit(want, gpus)
    )
    result = _run(placer)
    (counters,) = (c for name, c in result.counters.items() if name.startswith(placer))
    assert counters["preempted"] > 1000  # (overloaded: jobs are preempted nearly every round)
    assert asked.count(True) == 0  # never asked of a queue whose wants add up past the GPUs
    monkeypatch.undo()
    # The same books with step 1's shortcut tested in every round, as before the cut.
    monkeypatch.setattr(placer_module.Placer, "tick", _tick_testing_every_round)
    again = _run(placer)
    for name, column in _books(result).items():
        np.testing.assert_array_equal(column, _books(again)[name], err_msg=name)


_plain_tick = placer_module.Placer.tick


def _tick_testing_every_round(self, ctx, ranking):
    # The tick with its ranking put in order first: no plan of newcomers alone, and step 1's
    # shortcut tested whatever the queue wants.
    ranking.rows  # noqa: B018 (reading the rows puts the ranking in order)
    return _plain_tick(self, ctx, ranking)


def test_an_elements_state_is_stored_without_attrs_guard_and_its_fields_stay_frozen():
    for cls in (Consolidated, FirstFree):
        assert cls.__setattr__.__module__ == "roundhouse.runtime.element", cls  # (not attrs' generated hook)
        placer = cls()
        placer._last = None  # private state: stored
        assert placer.__dict__["_last"] is None
    placer = Consolidated(strict=False)
    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        placer.strict = True  # type: ignore[misc]
    assert placer.strict is False
