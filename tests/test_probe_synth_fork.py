"""What-if from a simulation stopped at its time limit: the refusal says which snapshot does
work, and that snapshot's what-if goes on as the run without the limit does."""

from __future__ import annotations

import json
import math

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails

GRAPH = str(REPO / "graphs" / "fifo.sched")
LIMIT = 6 * 3600.0


def _simulation(until: float | None = LIMIT) -> Simulation:
    return Simulation(GRAPH, cluster="2x4:V100", overrides=["arrivals.jobs=12"], seed=1, until=until)


def test_a_snapshot_stopped_at_its_time_limit_is_refused_saying_which_to_save(tmp_path, capsys):
    stopped = _simulation()
    stopped.run_until(math.inf)
    assert stopped.done and stopped.stop_reason.startswith("reached the time limit")
    stopped.save(tmp_path / "stopped.snap")
    err = fails(capsys, "whatif", tmp_path / "stopped.snap")
    assert "its run had already stopped (reached the time limit (6h))" in err, err
    assert "save it after run_until(21600)" in err, err


def test_the_snapshot_the_refusal_names_goes_on_as_the_run_without_a_limit(tmp_path, capsys):
    at_limit = _simulation()
    at_limit.run_until(LIMIT)
    assert not at_limit.done
    at_limit.save(tmp_path / "at-limit.snap")
    unfinished = int(at_limit.world_now().unfinished)
    assert unfinished > 0  # (something is left to simulate)
    assert main(["whatif", str(tmp_path / "at-limit.snap"), "--json"]) == 0
    projection = json.loads(capsys.readouterr().out)["projections"][0]
    assert projection["stop"] == "every job finished"
    # The same jobs, run on without a limit: their average JCT is the what-if's.
    unlimited = _simulation(until=None)
    unlimited.run()
    jobs = unlimited.jobs()
    after = jobs.filter((jobs["finish_s"] > LIMIT) | jobs["finish_s"].is_null())
    assert projection["metrics"]["jobs"] == after.height
    assert math.isclose(projection["metrics"]["avg_jct_s"], float((after["finish_s"] - after["arrival_s"]).mean()), rel_tol=1e-12)
