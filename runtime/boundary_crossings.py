"""The engine's two boundary crossings, the only points of a round at which it writes the world:
a source's new jobs join the job table (`_arrivals`), and a launcher's final plan is checked,
handed to the backend and applied to the books (`_carry_out`).

Engine binds these functions as its methods (runtime/engine.py), so that a call costs what a
method of its own would. They keep the names of the methods they were: the engine's tick order
holds them as bound methods, which a snapshot pickles by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.element_failures import describe_element
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.types import Events, Jobs, Plan
from roundhouse.traces.jobs import JobBatch

if TYPE_CHECKING:
    from roundhouse.runtime.engine import Engine
    from roundhouse.runtime.world import World


def _arrivals(engine: Engine, batch: JobBatch) -> Jobs:
    """A source's new jobs join the job table."""
    carried = None
    if engine._taken_over:
        batch = without_known(batch, engine.world)
        carried, engine._carried = engine._carried, None
    if not len(batch):
        return engine._no_arrivals if carried is None else Jobs(engine.world.jobs.reader, carried)
    rows = engine.world.add_jobs(batch)
    if engine._record is not None:
        engine._record.reserve(len(engine.world.jobs))
    return Jobs(engine.world.jobs.reader, rows if carried is None else np.concatenate([carried, rows]))


def _carry_out(engine: Engine, plan: Plan) -> Events:
    """A launcher's final plan: checked, handed to the backend, applied to the books."""
    ctx = engine._ctx
    assert ctx is not None  # plans are carried out only inside a round
    try:
        engine.world.check_plan(plan)
        engine.backend.apply(plan)  # a backend may refuse what it cannot do, before it starts
        applied = engine.world.apply_plan(plan, ctx.now)
    except PlanError as err:
        producer = engine.graph.producer_of(ctx.element.name, "plan") if ctx.element else None
        who = describe_element(engine.graph.elements[producer]) if producer else "the graph"
        raise PlanError(f"round {ctx.round_index} (t={ctx.now:g}s): plan from {who}: {err}") from None
    engine._plan_changed = applied is not None or len(plan.complete) > 0
    if engine._record is not None:
        placer, launcher = engine._plan_ids[ctx.element.name]
        engine._record.plan(plan, engine.world, placer, launcher, ctx.now)
    if len(plan.complete):
        engine._completed.append(Events(time=ctx.now, finished=plan.complete, finished_at=np.full(len(plan.complete), ctx.now)))
    if applied is None:
        return ctx.events
    return applied if ctx.events.is_quiet() and ctx.events.time <= applied.time else Events.merge([ctx.events, applied])


def without_known(batch: JobBatch, world: World) -> JobBatch:
    """The batch without the jobs the world already has (a graph that took over a world)."""
    ids = batch.columns["job_id"].tolist()
    new = np.fromiter((world.jobs.row_of(i) is None for i in ids), dtype=bool, count=len(ids))
    if new.all():
        return batch
    return JobBatch({k: v[new] for k, v in batch.columns.items()}, batch.type_rates[new], batch.origin)
