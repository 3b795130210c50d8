"""A simulation whose round failed (an element of the user's raised in it) is left with that round
half done: the elements before the failure ticked, those after did not. Going on from there gave
a run no graph gives (the metrics sink missed a completion) without a word; now stepping, running,
forking, saving and a result mid-run are refused, naming the failure, and the world can still be
read."""

from __future__ import annotations

import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime.element_failures import ElementFailure
from tests.own_elements import policy_file

POLICY = policy_file(
    "FailsOnce",
    "Rank in the pool's order; raise once, in the first round a job finishes.",
    """
    if len(ctx.events.finished) and not self._failed:
        self._failed = True
        raise ValueError("a completion")
    return Ranking(active.rows, active.gpus)
    """,
    after="def start(self, ctx):\n    self._failed = False",
    declares='state = ("_failed",)',
)

GRAPH = """require "fails_once.py";
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=30, seed=1);
src -> AcceptAll -> JobPool -> FailsOnce -> Consolidated -> Launch -> metrics :: JobMetrics;
"""


@pytest.fixture
def failed(tmp_path):
    (tmp_path / "fails_once.py").write_text(POLICY)
    (tmp_path / "g.sched").write_text(GRAPH)
    sim = Simulation(tmp_path / "g.sched")
    with pytest.raises(ElementFailure, match=r"element 'FailsOnce@3'.*its tick raised ValueError: a completion"):
        sim.run_until(10**9)
    return sim, tmp_path


@pytest.mark.parametrize("action", ["step", "run", "run_until", "fork", "save", "summary", "result"])
def test_a_simulation_whose_round_failed_does_not_go_on(failed, action):
    sim, tmp_path = failed
    rounds, now = sim.rounds, sim.now
    calls = {
        "step": sim.step,
        "run": sim.run,
        "run_until": lambda: sim.run_until(10**9),
        "fork": sim.fork,
        "save": lambda: sim.save(tmp_path / "s.snap"),
        "summary": sim.summary,
        "result": sim.result,
    }
    with pytest.raises(UsageError, match=rf"{action}: this simulation cannot go on: .*FailsOnce.*a completion.*half done"):
        calls[action]()
    assert (sim.rounds, sim.now) == (rounds, now)
    assert not (tmp_path / "s.snap").exists()


def test_its_world_can_still_be_read_and_it_says_it_failed(failed):
    sim, _ = failed
    assert "failed" in repr(sim)
    assert len(sim.jobs()) > 0 and sim.world_now().as_of == sim.now


def test_a_fork_made_before_the_failure_runs_on(tmp_path):
    (tmp_path / "fails_once.py").write_text(POLICY)
    (tmp_path / "g.sched").write_text(GRAPH)
    sim = Simulation(tmp_path / "g.sched")
    sim.run_until(600)
    before = sim.fork()
    with pytest.raises(ElementFailure):
        sim.run()
    with pytest.raises(ElementFailure):  # (the fork's element fails the same way in the same round)
        before.run()


def test_a_round_interrupted_is_a_failed_round_too(tmp_path):
    (tmp_path / "fails_once.py").write_text(POLICY.replace('raise ValueError("a completion")', "raise KeyboardInterrupt"))
    (tmp_path / "g.sched").write_text(GRAPH)
    sim = Simulation(tmp_path / "g.sched")
    with pytest.raises(KeyboardInterrupt):
        sim.run()
    with pytest.raises(UsageError, match=r"step: this simulation cannot go on: .* failed: KeyboardInterrupt; the round"):
        sim.step()


def test_a_write_of_a_failed_simulation_is_refused_as_the_write(failed):
    # (It was refused, but said as `result:`, a call the user had not made.)
    sim, tmp_path = failed
    with pytest.raises(UsageError, match=r"^write: this simulation cannot go on: .*FailsOnce.*a completion"):
        sim.write(tmp_path / "out")
    assert not (tmp_path / "out").exists()
