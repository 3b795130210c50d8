"""The engine is the world's only writer: whatever an element receives (port values, the round
context's arrays, job-table columns) is read-only, and the reader it gets offers no way to the
writable table."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Active, Events, Plan, Ranking
from roundhouse.traces.jobs import JobReader


@element
class WriteProbe(Element):
    """Passes the pool's jobs on in pool order, and tries to write everything it can see.

    Ports:
        active: admitted jobs.
        ranking: the same jobs in pool order.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none (a test element).
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    def start(self, ctx) -> None:
        self.arrays: list[tuple[str, np.ndarray]] = []
        self.reader: JobReader | None = None

    def tick(self, ctx, active: Active) -> Ranking:
        self.reader = ctx.jobs
        seen = [
            ("ctx.holder", ctx.holder),
            ("ctx.running_rows", ctx.running_rows),
            ("ctx.jobs.type_rates", ctx.jobs.type_rates),
            ("ctx.cluster.gpu_type", ctx.cluster.gpu_type),
            ("ctx.cluster.gpu_node", ctx.cluster.gpu_node),
            ("active.rows", active.rows),
        ]
        seen += [(f"ctx.jobs.column({n!r})", ctx.jobs.column(n)) for n in ("status", "done", "service", "held", "gpus")]
        seen += [(f"active.column({n!r})", active.column(n)) for n in ("status", "done", "service", "gpus", "job_id")]
        events = ctx.events
        seen += [("events.finished", events.finished), ("events.finished_at", events.finished_at)]
        if len(ctx.running_rows):
            seen.append(("ctx.gpus_of(...)", ctx.gpus_of(int(ctx.running_rows[0]))))
        self.arrays.extend(seen)
        return Ranking(active.rows, active.gpus)


@element
class PlanProbe(Element):
    """Records the events Launch passes on.

    Ports:
        events: the round's events.
    Arguments:
        none
    Counters:
        none
    See also: JobMetrics
    Paper: none (a test element).
    """

    category = "sink"
    inputs = (In("events", Events),)

    def start(self, ctx) -> None:
        self.arrays: list[tuple[str, np.ndarray]] = []

    def tick(self, ctx, events: Events) -> None:
        self.arrays += [("events.launched", events.launched), ("events.suspended", events.suspended)]


GRAPH = """
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=30/h, jobs=30, seed=3);
probe :: WriteProbe;
place :: Consolidated;
run :: Launch;
arrivals -> AcceptAll -> JobPool -> probe -> place -> run -> JobMetrics;
run -> sink :: PlanProbe;
"""


def test_writing_through_anything_an_element_receives_raises(tmp_path):
    (tmp_path / "g.sched").write_text(GRAPH)
    graph = compile_file(tmp_path / "g.sched")
    simulate(graph, until=3 * 3600)
    arrays = graph.elements["probe"].arrays + graph.elements["sink"].arrays
    assert len(arrays) > 100 and any(len(a) for _, a in arrays)
    for name, a in arrays:
        assert isinstance(a, np.ndarray), name
        assert not a.flags.writeable, (name, a.flags)
        if len(a):
            with pytest.raises(ValueError, match="read-only"):
                a[0] = a[0]
        # The world's own arrays are handed out as faces that cannot be made writeable again
        # (a copy of its own can be: writing it changes nothing).
        if name.startswith(("ctx.holder", "ctx.running_rows", "ctx.jobs", "ctx.cluster")):
            with pytest.raises(ValueError):
                a.setflags(write=True)


def test_the_reader_offers_no_way_to_the_writable_table():
    public = {name for name in dir(JobReader) if not name.startswith("_")}
    assert public == {"column", "has_column", "type_rates", "view", "row_of", "frame"}
    assert JobReader.__slots__ == ("_table",)


def test_a_plan_is_applied_only_by_the_engine():
    from roundhouse.elements.launch import Launch

    launch = Launch()
    launch.start(None)
    plan = Plan(launch_rows=[0], launch_gpus=[0], launch_counts=[1])
    assert launch.tick(None, plan) is plan  # Launch emits the plan; it has no backend to call
