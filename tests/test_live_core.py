"""The core's live extensions: offline GPUs, requeued and failed jobs, metrics columns, and the
engine folding a live backend's events (here from a scripted backend)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.engine import Engine
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events, Plan, Ranking
from roundhouse.runtime.world import PlanError, World
from roundhouse.traces.jobs import FINISHED, PENDING
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import jobs_of


def _world(spec="2x2:V100", n=3, gpus=1):
    world = World(Cluster.parse(spec), ProfileTable.load(), "V100")
    frame = pl.DataFrame({"job_id": list(range(n)), "arrival_s": [0.0] * n, "gpus": [gpus] * n, "duration_s": [100.0] * n})
    batch, _ = world.prepare(frame, "t")
    world.add_jobs(batch)
    return world


@pytest.mark.parametrize("placer", ["FirstFree", "Consolidated"])
def test_placers_use_only_online_gpus(placer):
    import roundhouse.elements  # noqa: F401  (registers the element classes)
    from roundhouse.runtime import registry

    world = _world(n=4)
    world.set_online(np.array([False, False, True, True]))
    el = registry.get(placer)()
    el.start(None)
    plan = el.tick(Round(world, GraphSettings(), 0.0, 0, Events(time=0.0)), Ranking(np.arange(4), np.ones(4, dtype=np.int64)))
    assert sorted(plan.launch_gpus.tolist()) == [2, 3]  # two jobs fit; the others wait
    world.check_plan(plan)
    world.set_online(np.ones(4, dtype=bool))
    assert world.all_online


def test_a_plan_onto_an_offline_gpu_is_refused():
    world = _world()
    world.set_online(np.array([True, False, True, True]))
    with pytest.raises(PlanError, match="GPU 1, which is offline"):
        world.check_plan(Plan(launch_rows=[0], launch_gpus=[1], launch_counts=[1]))


def test_requeued_and_failed_jobs():
    world = _world()
    world.apply_plan(Plan(launch_rows=[0, 1], launch_gpus=[0, 1], launch_counts=[1, 1]), 0.0)
    world.apply_requeued(np.array([0, 2]))  # 2 is not running: left alone
    cols = world.jobs
    assert cols.column("status")[0] == PENDING and cols.column("interruptions").tolist() == [1, 0, 0]
    assert world.holder.tolist() == [-1, 1, -1, -1] and world.running_rows.tolist() == [1]
    world.apply_failed(np.array([1]), np.array([5.0]))
    assert cols.column("status")[1] == FINISHED and cols.column("failed")[1] and world.unfinished == 2
    assert world.holder.tolist() == [-1, -1, -1, -1]
    world.apply_metrics({0: {"loss": 0.25, "done": 99.0}})
    assert cols.column("loss")[0] == 0.25 and np.isnan(cols.column("loss")[1]) and cols.column("done")[0] == 0


def test_events_merge_keeps_live_fields():
    online = np.array([True, False])
    merged = Events.merge([Events(time=1.0, requeued=[3], online=online), Events(time=2.0, requeued=[4])])
    assert merged.requeued.tolist() == [3, 4] and merged.online is online and merged.submitted is None


def test_events_merge_with_nothing_new_keeps_the_other_and_the_latest_time():
    busy = Events(time=1.0, launched=[5], suspended=[2])
    merged = Events.merge([Events(time=2.0), busy])
    assert merged.time == 2.0 and merged.launched.tolist() == [5] and merged.suspended.tolist() == [2]
    assert Events.merge([busy, Events(time=1.0)]) is busy
    assert Events.merge([Events(time=1.0), Events(time=3.0)]).time == 3.0


class _Scripted:
    """A backend that reports given events at given rounds (and nothing else)."""

    wall_clock = True

    def __init__(self, world, script):
        self.world, self.script, self._now, self.k = world, script, 0.0, 0
        self.stop_requested = ""

    @property
    def now(self):
        return self._now

    def poll(self):
        events = self.script.get(self.k, Events(time=self._now))
        if self.k == max(self.script):
            self.stop_requested = "script done"
        return events, Progress.empty()

    def apply(self, plan):
        pass

    def advance(self):
        self.k += 1
        self._now += 1.0


def test_the_engine_folds_live_events_into_the_world(tmp_path):
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,0,1,100\n")
    (tmp_path / "g.sched").write_text(
        'round = 1s; cluster = "1x2:V100"; src :: TraceSource(path="t.csv"); '
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;"
    )
    graph = compile_file(tmp_path / "g.sched")
    world = World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100")
    down = np.array([True, False])
    script = {
        2: Events(time=2.0, requeued=[0, 1], online=down, metrics={0: {"loss": 1.5}}),
        4: Events(time=4.0, finished=[0, 1], finished_at=[3.5, 3.9], failed=[1]),
    }
    result = Engine(graph, world, _Scripted(world, script)).run()
    jobs = jobs_of(result)
    assert jobs[0]["status"] == "finished" and jobs[0]["finish_s"] == 3.5
    assert jobs[1]["status"] == "failed" and jobs[1]["finish_s"] is None
    assert result.stop_reason == "script done"
    assert result.reports["m"]["summary"]["jobs_failed"] == 1 and result.counters["m"]["failed"] == 1
    assert world.online.tolist() == [True, False] and world.jobs.column("loss")[0] == 1.5
    assert world.jobs.column("interruptions").tolist() == [1, 1]


def test_live_source_brings_no_jobs_in_a_simulation(run_graph):
    result = run_graph(
        """
        round = 1min;
        cluster = "1x2:V100";
        live :: LiveSource(jobs=3);
        src :: TraceSource(path="trace.csv");
        admit :: AcceptAll;
        live -> admit;
        src -> admit -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
        """,
        jobs=[{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 120.0}],
    )
    assert result.stop_reason == "every job finished" and list(jobs_of(result)) == [0]
