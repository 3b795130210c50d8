"""The round engine: fold the backend's events into the world, tick every element once in
topological order, hand the plan to the backend, advance the clock.

The engine is the world's only writer, and it writes at two named points of a round, the
graph's two boundary crossings:

- **Arrivals.** A source's `tick` returns a `JobBatch` of new job specs. The engine adds them
  to the job table and passes them downstream as a `Jobs` view.
- **The plan.** A launcher's `tick` returns the round's final `Plan`. The engine checks it,
  hands it to the backend and applies it to the world's books, and passes the round's `Events`
  downstream (to sinks).

Every other element only reads (read-only views through the round context) and emits port
values. The engine checks each value against the port's declared type, and reports an element
that raises or emits the wrong type by its graph name, class, declaration and round.

This module holds the engine and a round's life, from the events folded in to why the run
stops. The rest is in modules of their own, one idea each (Engine binds the functions of the
first two as its methods, at no extra call):

- the two boundary crossings: runtime/boundary_crossings.py;
- a run ahead of its run, for look-aheads and what-if's projections: runtime/run_ahead.py;
- the rounds passed without a tick before the next: runtime/quiet_rounds.py;
- idle rounds counted, and the message of a stalled run: runtime/stalls.py;
- an element's failure reported: runtime/element_failures.py; what it emits, checked:
  runtime/output_checks.py;
- the graph's sources as a whole (exhausted; no job id twice): runtime/graph_sources.py.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from roundhouse.errors import RoundhouseError
from roundhouse.runtime import boundary_crossings, run_ahead
from roundhouse.runtime.bulk import Bulk
from roundhouse.runtime.context import Round
from roundhouse.runtime.element import Element
from roundhouse.runtime.element_failures import ElementFailure, call_element, element_failure, fed_by_own_code
from roundhouse.runtime.explain import Recorder
from roundhouse.runtime.graph_sources import exhausted, refuse_shared_ids
from roundhouse.runtime.output_checks import check_emitted, check_own_output, describe_value
from roundhouse.runtime.passing import Passing
from roundhouse.runtime.quiet_rounds import pass_quiet
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.run_ahead import Silenced
from roundhouse.runtime.skipping import Skipping
from roundhouse.runtime.stalls import STALL_ROUNDS, StalledError, count_idle, count_stuck, stall_message
from roundhouse.runtime.types import Events, Jobs, Plan, Ranking
from roundhouse.runtime.values import format_duration
from roundhouse.runtime.world import World
from roundhouse.traces.jobs import FINISHED, JobBatch

# Names other modules take from here, kept here for them since they moved to modules of their
# own; and `Silenced`, which snapshots made before it moved name as this module's.
__all__ = [
    "Engine",
    "RunResult",
    "ElementFailure",
    "StalledError",
    "STALL_ROUNDS",
    "Silenced",
    "call_element",
    "check_emitted",
    "check_own_output",
    "describe_value",
    "element_failure",
    "last_round_start",
    "stall_message",
]


@attrs.define
class RunResult:
    world: World
    rounds: int
    end_s: float
    stop_reason: str
    reports: dict[str, dict]
    counters: dict[str, dict]
    wall_s: float
    skipped_rounds: int = 0  # rounds not ticked (event skipping): nothing could change in them
    passed_rounds: int = 0  # of which rounds carried out in passing: jobs arrived and found room

    def __repr__(self) -> str:
        # (attrs' own would print the whole world and every report's tables: thousands of lines)
        jobs = self.world.jobs
        finished = int((jobs.column("status") == FINISHED).sum()) if len(jobs) else 0
        return (
            f"RunResult({self.rounds:,} rounds, ended at {format_duration(self.end_s)} ({self.end_s:g} s), "
            f"stopped: {self.stop_reason or 'not yet'}, {finished:,} of {len(jobs):,} jobs finished, "
            f"reports by {', '.join(self.reports) or 'no element'}, wall {self.wall_s:.2f} s)"
        )


class Engine:
    def __init__(
        self,
        graph,
        world: World,
        backend,
        until: float | None = None,
        on_round: Callable[[Round], None] | None = None,
        explain: bool = False,
    ):
        self.graph = graph
        self.world = world
        self.backend = backend
        self.until = until
        self.on_round = on_round
        self._order = list(graph.elements.values())
        self._sources = [e for e in self._order if e.category == "source"]
        self._sinks = [e for e in self._order if e.category == "sink"]
        self._ctx: Round | None = None
        self._no_arrivals = Jobs(world.jobs.reader, np.zeros(0, dtype=np.int64))
        # What each category's `tick` returns, when it is not its output port's value: the
        # engine turns it into the port value at one of the two boundary crossings.
        crossings: dict[str, tuple[type, Callable[[Any], object]]] = {
            "source": (JobBatch, self._arrivals),
            "launch": (Plan, self._carry_out),
        }
        # Per element: its inputs (name, type, sources), its outputs (name, type), and its
        # crossing (what its tick returns and how the engine applies it), if it has one.
        self._wiring = [
            (el, wired_inputs(graph, el), [((el.name, p.name), p.name, p.type) for p in el.outputs], crossings.get(el.category))
            for el in self._order
            if el.name not in graph.held  # (a candidate is ticked by its holder)
        ]
        self._can_stall = not getattr(backend, "wall_clock", False)
        self._asked: list[tuple[Element, Ranking]] = []  # each placer's ranking in the last idle round (`count_idle`)
        # Event skipping (simulations only: a live cluster's events come from outside).
        ticked = [el for el, *_ in self._wiring]
        self._skipping = Skipping(
            world,
            float(graph.settings.round),
            self._sources,
            sorted(ticked, key=lambda e: (e.category != "source", e.category != "placement")),
            self._can_stall and bool(getattr(graph.settings, "skip_rounds", True)),
        )
        self._skipping.until = until
        # Rounds carried out in passing (runtime/passing.py), within event skipping.
        self._passing = Passing(graph, self._wiring, self._skipping.enabled and self._skipping.after_change, call_element)
        self._bulk = Bulk(self._passing, call_element)  # (runs of them carried out in bulk: runtime/bulk.py)
        self._plan_changed = False
        # Jobs a plan completed: reported as finished in the next round's events, as a job
        # that finishes inside a round is (the world's books already show them finished).
        self._completed: list[Events] = []
        self._wall = WallClock()
        self._rounds = 0
        self._idle_rounds = 0
        self._stuck = (0, -1)  # rounds in a row in which jobs held GPUs without progressing, and the last (`count_stuck`)
        self.stop_reason = ""
        self._carried: np.ndarray | None = None
        self._taken_over = False
        if explain and world.explain is None:  # (a forked world goes on with its own record)
            world.explain = Recorder.for_graph(graph)
        self._record: Recorder | None = world.explain
        # Per launcher: the ids of the element whose plan it carries out, and its own.
        self._plan_ids = self._record.plan_ids(graph) if self._record is not None else {}

    @property
    def rounds(self) -> int:
        """Rounds run so far."""
        return self._rounds

    def skip_idle_rounds(self) -> None:
        """With no job in the system, move the clock to the round of the next arrival."""
        self._skipping.skip_idle_rounds(self.backend)

    def pause_at(self, t: float | None) -> None:
        """Skip no round past `t` (None: no bound): a caller steps the engine to a time (Simulation.run_until)."""
        self._skipping.pause_at = t

    # A run ahead of its run, on a fork: look-ahead runs and what-if's projections (runtime/run_ahead.py).
    look_ahead = run_ahead.look_ahead
    stop_arrivals = run_ahead.stop_arrivals
    carry_in = run_ahead.carry_in

    # The two boundary crossings, arrivals and the plan (runtime/boundary_crossings.py).
    _arrivals = boundary_crossings._arrivals
    _carry_out = boundary_crossings._carry_out

    def goal_in_books(self) -> bool:
        """Whether the world's books show a sink's goal met (`Element.goal_met_in_books`): the round
        whose events were just folded in is then ticked, so that the run stops in it."""
        ctx = self._ctx
        assert ctx is not None  # (after a round)
        return any(call_element(sink, "goal_met_in_books", ctx, sink.goal_met_in_books, ctx) for sink in self._sinks)

    def _context(self, events: Events, round_index: int, now: float | None = None) -> Round:
        """The context of a round (at the backend's clock, or at `now`)."""
        ctx = Round(self.world, self.graph.settings, self.backend.now if now is None else now, round_index, events)
        ctx.fork = functools.partial(_fork, self, ctx)
        return ctx

    def run(self) -> RunResult:
        self.begin()
        while not self.step():
            pass
        return self.end()

    def restart_wall_clock(self) -> None:
        """Count the run's wall time from now: a live run whose elements began before the wait
        for its agents counts from round 0, as `begin` would have."""
        self._wall = WallClock()

    # A run is `begin`, then `step` until it returns a stop reason, then `end` (runtime/simulation.py
    # steps it; between two steps the engine's whole state can be forked, runtime/snapshot.py).
    def begin(self) -> None:
        """Start every element, before the first round."""
        self._wall = WallClock()
        self._rounds = 0
        self._idle_rounds = 0
        self._stuck = (0, -1)
        self.stop_reason = ""
        self._ctx = ctx = self._context(Events(time=self.backend.now), 0)
        for el in self._order:
            ctx.element = el
            call_element(el, "start", ctx, el.start, ctx)
        refuse_shared_ids(self._sources)
        submissions = getattr(self.backend, "submissions", None)
        if submissions is not None:  # (live: no submission may take an id a source will bring)
            submissions.expect(self._sources)

    def step(self) -> str:
        """Run one round, after the quiet rounds before it pass; returns why the run stops ("" while it goes on)."""
        if self._skipping.jump_cut and self._skipping.finish_jump(self.backend):
            return ""  # (paused again before the next arrival: no round to run yet)
        return self.play_round(pass_quiet(self, float(self.graph.settings.round)))

    def play_round(self, events: Events | None = None) -> str:
        """Tick the round at the backend's clock with its events (`fold_in`), then move to the
        next: `step` without its start. None: the round being ticked, again from its start (a
        look-ahead forked in it: runtime/lookahead.py). Returns why the run stops, or ""."""
        if events is None:
            assert self._ctx is not None
            events = self._ctx.events
        round_s = float(self.graph.settings.round)
        values: dict[tuple[str, str], object] = {}
        start = 0
        front = self._passing.take_front()  # (a round that could not pass: its front has ticked)
        if front is not None:
            ctx, values, start = front
        else:
            ctx = self._context(events, int(round(self.backend.now / round_s)))
        self._ctx = ctx
        self._plan_changed = False
        self._tick_all(ctx, values, start)
        self._rounds += 1
        self._passing.check(ctx)
        self._skipping.after_tick(ctx, self.backend, self._plan_changed, call_element, self._passing.unordered)
        if self.on_round is not None:
            self.on_round(ctx)
        reason = why_stop(self, ctx)
        if reason:
            self.stop_reason = reason
            return reason
        count_idle(self, ctx, values)
        self.backend.advance()
        count_stuck(self, ctx)
        self._skipping.skip_idle_rounds(self.backend)
        return ""

    def fold_in(self) -> Events:
        """A round's first part: what the backend reports since the last round, folded into the
        world; returns the round's events."""
        return self._fold(self._poll())

    def _poll(self) -> Events:
        """The backend's events since the last round, with the jobs' progress applied."""
        events, progress = self.backend.poll()
        self.world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s, block=progress.block)
        return events

    def _fold(self, events: Events) -> Events:
        """The round's events folded into the world, with the jobs that the last plan completed."""
        fold_events(self.world, events)
        if self._record is not None:
            self._record.events(events)  # (completions a plan made were recorded with the plan)
        if self._completed:
            events = Events.merge([events, *self._completed])
            self._completed = []
        return events

    def observe(self, events: Events) -> None:
        """Events the world was told of after the last round (a live run's end): the elements
        that count events take them before `end`, as they take a last plan's completions."""
        self._completed.append(events)

    def end(self) -> RunResult:
        """Finish every element (their reports) after the last round."""
        ctx = self._ctx
        assert ctx is not None  # begun
        observe_completions(self, ctx)
        reports = {}
        for el in self._order:
            ctx.element = el
            got = call_element(el, "finish", ctx, el.finish, ctx)
            if got:
                reports[el.name] = got
        counters = {el.name: dict(el.counters) for el in self._order if el.counters}
        return RunResult(
            world=self.world,
            rounds=self._rounds,
            end_s=self.backend.now,
            stop_reason=self.stop_reason,
            reports=reports,
            counters=counters,
            wall_s=self._wall.elapsed(),
            skipped_rounds=self._skipping.skipped,
            passed_rounds=self._passing.total,
        )

    def _tick_all(self, ctx: Round, values: dict[tuple[str, str], object], start: int = 0, stop: int | None = None) -> None:
        """Tick the elements `start` to `stop` of the tick order (all, by default), their port
        values read from and written to `values`."""
        el: Element | None = None
        try:  # (one try for the round: an element's exception is reported naming `el`)
            for el, inputs, outputs, crossing in self._wiring[start:stop] if start or stop is not None else self._wiring:
                kwargs: dict[str, Any] = {}
                for port, key, port_type, sources in inputs:  # (key: the one source's value, if one)
                    kwargs[port] = values[key] if key is not None else port_type.merge([values[s] for s in sources]) if sources else None  # fmt: skip
                ctx.element = el
                out = el.tick(ctx, **kwargs)
                if crossing is not None:
                    check_emitted(el, ctx, "tick", out, crossing[0])
                    out = crossing[1](out)
                if len(outputs) == 1:
                    key, port, port_type = outputs[0]
                    if type(out) is not port_type:  # (exact types: cheaper than isinstance, and ports are final)
                        check_emitted(el, ctx, port, out, port_type)
                    values[key] = out
                elif outputs:
                    if not isinstance(out, dict):
                        raise element_failure(el, ctx, f"its tick returned {describe_value(out)}, not a dict of its output ports")
                    for key, port, port_type in outputs:
                        got = out.get(port)
                        check_emitted(el, ctx, port, got, port_type)
                        values[key] = got
        except (RoundhouseError, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as err:  # (sys.exit() in an element's tick is its failure, not the end of the run)
            if el is None:  # not raised by an element
                raise
            what = f"its tick raised {type(err).__name__}: {err}"
            raise element_failure(el, ctx, what + fed_by_own_code(self.graph, el, inputs), err) from err
        ctx.element = None


def wired_inputs(graph, el: Element) -> list[tuple[str, tuple[str, str] | None, Any, list]]:
    """An element's inputs: port name, the key of its value when it has one source (else None),
    its type, and its sources."""
    out = []
    for p in el.inputs:
        sources = graph.sources_of(el.name, p.name)
        out.append((p.name, sources[0] if len(sources) == 1 else None, p.type, sources))
    return out


def observe_completions(engine: Engine, ctx: Round) -> None:
    """After the last round (`ctx`), before `finish`: the jobs its plan completed, which the next
    round's events would have carried (`Engine._fold`), are delivered as the events of an
    observation step, at that round's time, to the elements that count events: the pools and
    sinks that say `completions_wait` (a completion may reach them at a later tick, in its
    events, with the same results and counters). It is no round: no other element ticks, the
    clock and the count of rounds stay, and the completions are delivered once."""
    if not engine._completed:
        return
    events = Events.merge(engine._completed)
    engine._completed = []
    step = engine._context(events, ctx.round_index, ctx.now)
    given = {Events: events, Jobs: engine._no_arrivals}
    for el, inputs, _, _ in engine._wiring:
        if el.category not in ("pool", "sink") or any(p[2] not in given for p in inputs):
            continue
        step.element = el
        if call_element(el, "completions_wait", step, el.completions_wait, step):
            call_element(el, "tick", step, el.tick, step, **{p[0]: given[p[2]] if p[3] else None for p in inputs})
    step.element = None


def last_round_start(engine: Engine) -> float:
    """When the engine's last ticked round began (its clock, before any)."""
    ctx = engine._ctx
    return engine.backend.now if ctx is None else float(ctx.now)


def why_stop(engine: Engine, ctx: Round) -> str:
    """Why the run stops after the round `ctx` ("" while it goes on)."""
    requested = getattr(engine.backend, "stop_requested", "")  # a live backend told to stop
    if requested:
        return requested
    if engine.until is not None and ctx.now + 1e-9 >= engine.until:
        # Rounds are not cut short: the run ends at the first boundary at or after the limit.
        past = "" if ctx.now - engine.until <= 1e-9 else f"; the run ends at the round boundary {format_duration(ctx.now)}"
        return f"reached the time limit ({format_duration(engine.until)}{past})"
    for sink in engine._sinks:
        if sink.goal_met(ctx):
            return f"{sink.name}: {sink.goal}"
    if engine.world.unfinished == 0 and exhausted(engine._sources):
        return every_job_ended(engine.world)
    return ""


def every_job_ended(world: World) -> str:
    """Why a run (or a projection) with no job left stops: the jobs that failed for good left
    too, and a run whose jobs all failed did not go well, so the reason says they failed."""
    failed = int(world.jobs.column("failed").sum())  # (counted once, when the run stops)
    if not failed:
        return "every job finished"
    if failed == len(world.jobs):
        return "every job failed"
    return f"every job finished or failed ({failed} of {len(world.jobs)} failed)"


def all_jobs_ended(reason: str) -> bool:
    """Whether a stop reason is `every_job_ended`'s: the run ended with no job left."""
    return reason in ("every job finished", "every job failed") or reason.startswith("every job finished or failed (")


def _fork(engine: Engine, ctx: Round):
    """The state at the start of the round being ticked, for look-ahead runs
    (runtime/lookahead.py); only the round's first element may ask, before any acted."""
    from roundhouse.runtime.lookahead import Fork

    first = engine._wiring[0][0] if engine._wiring else None
    if ctx.element is not first:
        raise element_failure(ctx.element, ctx, "it forked the world after other elements had ticked this round")
    return Fork.of(engine, ctx)


class WallClock:
    """The wall time since this process began running the engine, or took it up from a
    snapshot or a fork: no part of the run's state, so a copy is a clock started afresh (and
    two snapshots of one state are the same bytes)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def __reduce__(self):
        return WallClock, ()


def fold_events(world: World, events: Events) -> None:
    """What the backend reports, into the world's books: finished, failed and requeued jobs,
    nodes online, metrics."""
    if len(events.failed):
        failed = isin_rows(events.finished, events.failed)
        world.apply_failed(events.finished[failed], events.finished_at[failed])
        world.apply_finished(events.finished[~failed], events.finished_at[~failed])
    elif len(events.finished):
        world.apply_finished(events.finished, events.finished_at)
    if len(events.requeued):
        world.apply_requeued(events.requeued)
    if events.online is not None:
        world.set_online(events.online)
    if events.metrics:
        world.apply_metrics(events.metrics)
