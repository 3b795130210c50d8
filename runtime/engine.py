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
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.bulk import Bulk
from roundhouse.runtime.context import Round
from roundhouse.runtime.element import Element
from roundhouse.runtime.explain import Recorder
from roundhouse.runtime.passing import Passing
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.skipping import Skipping
from roundhouse.runtime.types import Events, Jobs, Plan, Ranking
from roundhouse.runtime.values import format_duration
from roundhouse.runtime.world import PlanError, World
from roundhouse.traces.jobs import JobBatch

# Rounds with jobs waiting, none running and no arrivals before the run is declared stalled.
STALL_ROUNDS = 2000


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


class ElementFailure(RoundhouseError):
    """An element's own code failed: it raised, or emitted a value its port does not carry.
    `detail` holds the Python traceback, which the command line prints under `--debug`."""

    detail: str = ""


def element_failure(el: Element, ctx: Round, what: str, cause: BaseException | None = None) -> ElementFailure:
    """An ElementFailure naming the element (graph name, class, where the graph declares it
    and where its class is defined), the round and the time."""
    import inspect
    import traceback

    cls = type(el)
    try:
        defined = f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        defined = cls.__module__
    where = f"declared at {el.declared_at}, " if el.declared_at is not None else ""
    failure = ElementFailure(
        f"error: element '{el.name}' ({cls.__name__}; {where}class defined at {defined}) failed in round "
        f"{ctx.round_index} (t={format_duration(ctx.now)}): {what}"
    )
    failure.detail = "".join(traceback.format_exception(cause)) if cause is not None else ""
    return failure


def call_element(el: Element, what: str, ctx: Round, fn, *args, **kwargs):
    """Call an element's code; an exception from it is reported naming the element."""
    try:
        return fn(*args, **kwargs)
    except SchedError as err:
        if err.location is None:  # (a check of the element's arguments against the world: point at its line)
            err.location = el.declared_at
        raise
    except (RoundhouseError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as err:  # (sys.exit() in element code is its failure, not the end of the run)
        raise element_failure(el, ctx, f"its {what} raised {type(err).__name__}: {err}", err) from err


def exhausted(sources: list[Element]) -> bool:
    """Whether no source will bring another job."""
    return all(s.exhausted() for s in sources)


def refuse_shared_ids(sources: list[Element]) -> None:
    """Two sources that would emit one job id are refused before the first round, naming the
    later source and the id (the job table would refuse it only when that job arrived)."""
    known = [(el, ids) for el in sources if (ids := el.coming_job_ids()) is not None and len(ids)]
    for k, (el, ids) in enumerate(known[1:], 1):
        for other, earlier in known[:k]:
            shared = np.intersect1d(ids, earlier)
            if len(shared):
                raise SchedError(
                    f"element '{el.name}' ({type(el).__name__}): job id {int(shared[0])} is also one of "
                    f"element '{other.name}'s jobs (job ids must be unique in a run)",
                    el.declared_at,
                    hint=_parting_hint(el, other, max(int(i.max()) for _, i in known) + 1),
                )


def _parting_hint(el: Element, other: Element, past: int) -> str:
    """How to give two sources' jobs different ids: a generated source numbers its jobs from its
    `start_id` (a trace's ids are its own), which `past` (one past every id known) is free for."""
    for source in (el, other):
        if attrs.has(type(source)) and "start_id" in attrs.fields_dict(type(source)):
            return f"give '{source.name}' a start_id past the other source's ids, e.g. start_id={past}"
    return (
        "give the traces' jobs different ids; a generated source (PoissonSource, BurstSource, CostWorkload) "
        "numbers its jobs from its start_id"
    )


def describe_value(value: object) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name} ({value!r:.60})"


def check_emitted(el: Element, ctx: Round, port: str, value: object, port_type: type) -> None:
    """Raise ElementFailure unless `value` is a `port_type`."""
    if not isinstance(value, port_type):
        on = f"on its port '{port}'" if port != "tick" else "from its tick"
        raise element_failure(el, ctx, f"it emitted {describe_value(value)} {on}, where a {port_type.__name__} belongs")


def check_own_output(el: Element, ctx: Round, out: object) -> None:
    """What an element defined outside the library returned, beyond its type (which the engine
    checks after): a dict of its several output ports holds exactly their keys, and a Ranking
    asks at least one GPU for each job it ranks, ranks each job once, and ranks only jobs of the
    job table. (Else a placer would fail on it, or nothing would run, far from the cause.)"""
    outputs = el.outputs
    if len(outputs) == 1:
        if outputs[0].type is Ranking and type(out) is Ranking:
            check_ranking(el, ctx, outputs[0].name, out)
        return
    if not outputs or not isinstance(out, dict) or el.category in ("source", "launch"):
        return  # (the engine says what is wrong with anything else)
    names = [p.name for p in outputs]
    extra = [str(k) for k in out if k not in names]
    if extra:
        raise element_failure(
            el,
            ctx,
            f"its tick returned key(s) {', '.join(repr(k) for k in extra)} that are not output ports "
            f"(its output ports: {', '.join(names)})",
        )
    missing = [n for n in names if n not in out]
    if missing:
        raise element_failure(
            el, ctx, f"its tick did not return port {missing[0]!r} (a dict by port name holds each of {', '.join(names)})"
        )
    for p in outputs:
        got = out[p.name]
        if p.type is Ranking and type(got) is Ranking:
            check_ranking(el, ctx, p.name, got)


def check_ranking(el: Element, ctx: Round, port: str, ranking: Ranking) -> None:
    """A Ranking's contents: rows of the job table, each once, each asked at least one GPU."""
    rows, gpus = ranking.rows, ranking.gpus
    if not len(rows):
        return
    on = f"on its port '{port}'"
    known = len(ctx.jobs)
    outside = np.flatnonzero((rows < 0) | (rows >= known))
    if len(outside):
        raise element_failure(
            el,
            ctx,
            f"it emitted a Ranking {on} that ranks row {rows[outside[0]]}, which is not a row of the job table (it has {known} job(s))",
        )
    ids = ctx.jobs.column("job_id")
    ordered = np.sort(rows, kind="stable")
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(twice):
        raise element_failure(el, ctx, f"it emitted a Ranking {on} that ranks job {ids[twice[0]]} (row {twice[0]}) twice")
    none = np.flatnonzero(gpus < 1)
    if len(none):
        row = rows[none[0]]
        raise element_failure(
            el,
            ctx,
            f"it emitted a Ranking {on} that asks {gpus[none[0]]} GPUs for job {ids[row]} (row {row}): "
            f"each job it ranks needs 1 GPU or more ({len(none)} of its {len(rows)} job(s) ask fewer)",
        )


def without_known(batch: JobBatch, world: World) -> JobBatch:
    """The batch without the jobs the world already has (a graph that took over a world)."""
    ids = batch.columns["job_id"].tolist()
    new = np.fromiter((world.jobs.row_of(i) is None for i in ids), dtype=bool, count=len(ids))
    if new.all():
        return batch
    return JobBatch({k: v[new] for k, v in batch.columns.items()}, batch.type_rates[new], batch.origin)


class StalledError(RoundhouseError):
    """Jobs wait, nothing runs, and nothing will change: the graph cannot make progress."""


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

    def look_ahead(self, until: float, goals: bool = True) -> None:
        """Simulate ahead to `until` without the run's per-round hook (runtime/lookahead.py); with
        `goals` false no sink's goal ends it (what-if's projections, runtime/whatif.py)."""
        self.until = self._skipping.until = until
        self.on_round = None
        self._sinks = self._sinks if goals else []

    def stop_arrivals(self) -> None:
        """From the next round on, no new jobs: the sources tick no more (their ports carry no
        jobs) and count as exhausted (a look-ahead knows only the jobs in the system)."""
        silent = {id(el) for el in self._sources}
        self._wiring = [(Silenced(w[0], self._no_arrivals), w[1], w[2], None) if id(w[0]) in silent else w for w in self._wiring]
        self._skipping.asked = [e for e in self._skipping.asked if id(e) not in silent]
        self._sources = self._skipping.sources = []
        self._passing.roles = None

    def carry_in(self, rows: np.ndarray) -> None:
        """Take over a world another graph has run (runtime/whatif.py): these jobs already in it
        enter this graph at the next round, as arrivals of the first source to tick, and from
        then on a source's jobs that the world already has are not added again."""
        self._carried = np.asarray(rows, dtype=np.int64)
        self._taken_over = True

    # --- the two boundary crossings: arrivals and the plan ---
    def _arrivals(self, batch: JobBatch) -> Jobs:
        """A source's new jobs join the job table."""
        carried = None
        if self._taken_over:
            batch = without_known(batch, self.world)
            carried, self._carried = self._carried, None
        if not len(batch):
            return self._no_arrivals if carried is None else Jobs(self.world.jobs.reader, carried)
        rows = self.world.add_jobs(batch)
        if self._record is not None:
            self._record.reserve(len(self.world.jobs))
        return Jobs(self.world.jobs.reader, rows if carried is None else np.concatenate([carried, rows]))

    def _carry_out(self, plan: Plan) -> Events:
        """A launcher's final plan: checked, handed to the backend, applied to the books."""
        ctx = self._ctx
        assert ctx is not None  # plans are carried out only inside a round
        try:
            self.world.check_plan(plan)
            self.backend.apply(plan)  # a backend may refuse what it cannot do, before it starts
            applied = self.world.apply_plan(plan, ctx.now)
        except PlanError as err:
            producer = self.graph.producer_of(ctx.element.name, "plan") if ctx.element else None
            who = f"'{producer}' ({type(self.graph.elements[producer]).__name__})" if producer else "the graph"
            raise PlanError(f"round {ctx.round_index} (t={ctx.now:g}s): plan from {who}: {err}") from None
        self._plan_changed = applied is not None or len(plan.complete) > 0
        if self._record is not None:
            placer, launcher = self._plan_ids[ctx.element.name]
            self._record.plan(plan, self.world, placer, launcher, ctx.now)
        if len(plan.complete):
            self._completed.append(Events(time=ctx.now, finished=plan.complete, finished_at=np.full(len(plan.complete), ctx.now)))
        if applied is None:
            return ctx.events
        return applied if ctx.events.is_quiet() and ctx.events.time <= applied.time else Events.merge([ctx.events, applied])

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


def fed_by_own_code(graph, el: Element, inputs) -> str:
    """When a library element fails on its inputs, which of them came from elements defined
    outside the library (a `require`d file): the likelier cause, named in the message."""
    if not type(el).__module__.startswith("roundhouse."):
        return ""
    feeding = [graph.elements[name] for name in sorted({n for *_, sources in inputs for n, _ in sources})]
    own = [f"'{e.name}' ({type(e).__name__})" for e in feeding if not type(e).__module__.startswith("roundhouse.")]
    return f" (its input came from {', '.join(own)}, defined outside the library: check what it emits)" if own else ""


def wired_inputs(graph, el: Element) -> list[tuple[str, tuple[str, str] | None, Any, list]]:
    """An element's inputs: port name, the key of its value when it has one source (else None),
    its type, and its sources."""
    out = []
    for p in el.inputs:
        sources = graph.sources_of(el.name, p.name)
        out.append((p.name, sources[0] if len(sources) == 1 else None, p.type, sources))
    return out


def count_idle(engine: Engine, ctx: Round, values: dict[tuple[str, str], object]) -> None:
    """After the round `ctx` (its port values `values`): in a simulation in which jobs wait,
    none runs and no more will arrive, the round counts as idle, and what each placer was asked
    in it is kept (`stall_message` names it); STALL_ROUNDS idle rounds in a row and the run has
    stalled. A live cluster can change (nodes join), so only a simulation can stall for good."""
    world = engine.world
    if engine._can_stall and len(world.running_rows) == 0 and world.unfinished > 0 and exhausted(engine._sources):
        engine._idle_rounds += 1
        engine._asked = [(el, got) for el, key in placer_inputs(engine._wiring) if isinstance(got := values.get(key), Ranking)]
        if engine._idle_rounds >= STALL_ROUNDS:
            raise StalledError(stall_message(world, ctx.now, engine._order, engine._asked))
    else:
        engine._idle_rounds = 0


def placer_inputs(wiring) -> list[tuple[Element, tuple[str, str]]]:
    """(placer, key of a port value) for each source of each placer's ranking input, in tick
    order: where the rankings the placers are asked to place come from."""
    return [
        (el, key)
        for el, inputs, _, _ in wiring
        if el.category == "placement"
        for _, _, port_type, sources in inputs
        if port_type is Ranking
        for key in sources
    ]


def pass_quiet(engine: Engine, round_s: float) -> Events:
    """Pass the rounds ahead that need no tick (runtime/skipping.py); returns the events of
    the next round to tick, folded into the world, with the completions that waited."""
    events, waited = engine._poll(), []
    while True:
        if engine._skipping.quiet(engine.backend, events, bool(engine._completed)):
            idle = engine._idle_rounds
            skipped = engine._skipping.pass_quiet_rounds(engine.backend, STALL_ROUNDS - idle if idle else None)
            engine._rounds += skipped
            if idle:  # (the state of the last ticked round, which counted as idle)
                engine._idle_rounds += skipped
                if engine._idle_rounds >= STALL_ROUNDS:
                    asked = getattr(engine, "_asked", [])  # (an engine from an older snapshot has none)
                    raise StalledError(stall_message(engine.world, engine.backend.now - round_s, engine._order, asked))
        elif engine._skipping.may_wait(engine.backend, events, bool(engine._completed)):
            waited.append(engine._fold(events))  # (into the world's books at once)
            if engine.goal_in_books() or not engine._skipping.pass_waiting_round(engine.backend):
                return Events.merge(waited)
            engine._rounds += 1
        elif engine._passing.may_pass(engine, events):
            folded = engine._fold(events)
            if engine.goal_in_books():
                return Events.merge([*waited, folded]) if waited else folded
            if engine._bulk.may_carry(engine):  # (this round and those after it, as far as they may pass)
                carried, after = engine._bulk.carry(engine, folded)
                if after == "front":  # an arrival finds no room: that round is ticked, from the pool on
                    return engine._passing.ticked_with(Events.merge([*waited, carried]) if waited else carried)
                if after == "tick":  # a sink's goal is met: that round is ticked
                    return Events.merge([*waited, carried]) if waited else carried
                waited.append(carried)
            else:
                passed = engine._passing.pass_round(engine, folded)
                if passed is None:  # an arrival finds no room: the round is ticked, from the pool on
                    return engine._passing.ticked_with(Events.merge([*waited, folded]) if waited else folded)
                waited += (folded, passed)
        else:
            folded = engine._fold(events)
            return Events.merge([*waited, folded]) if waited else folded
        events = engine._poll()


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
            return f"{sink.name}: every tracked job finished"
    if engine.world.unfinished == 0 and exhausted(engine._sources):
        return "every job finished"
    return ""


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


class Silenced:
    """A source in a look-ahead: ticked in its place, it adds no jobs (`Engine.look_ahead`)."""

    category = "source"

    def __init__(self, source: Element, none: Jobs):
        self.name = source.name
        self._none = none

    def tick(self, ctx: Round) -> Jobs:
        return self._none


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


def stall_message(
    world: World, now: float, elements: Sequence[Element] = (), asked: Sequence[tuple[Element, Ranking]] = ()
) -> str:
    """Why a simulation cannot make progress, naming the largest waiting job and what it is
    measured against: the cluster's GPUs, or on a cluster of several GPU types the largest
    type's (a placer puts a job on GPUs of one type); and an element of `elements` that counts
    waiting jobs it cannot start (`unschedulable`: Pollux, jobs of no elastic application).

    A job's GPUs are those a placer was last asked for it (`asked`: each placer and the ranking
    it was given in the last round ticked), which a policy may choose (Optimus does), else those
    its trace asks for, and the message says which."""
    cols = world.jobs
    status = cols.column("status")
    waiting = (status == 0).nonzero()[0]
    trace = cols.column("gpus")[waiting]
    counts, by = _asked_counts(len(cols), waiting, asked)
    gpus = np.where(counts >= 0, counts, trace)
    detail = ""
    if len(waiting):
        at = int(np.argmax(gpus))
        biggest, want = int(waiting[at]), int(gpus[at])
        if counts[at] < 0:
            source = " (the count its trace asks for" + (": no placer was asked to place it)" if asked else ")")
        elif want != trace[at]:
            placer = asked[by[at]][0]
            source = (
                f" (what placer '{placer.name}' ({type(placer).__name__}) was last asked for it; its trace asks for {trace[at]})"
            )
        else:
            source = ""
        cluster = world.cluster
        of = f"of {cluster.n_gpus}"
        if len(cluster.gpu_types) > 1:
            largest = int(np.argmax(cluster.gpus_by_type))
            of = f"of one type, and the largest type, {cluster.gpu_types[largest]}, has {cluster.gpus_by_type[largest]}"
        detail = f"; the largest waiting job ({cols.column('job_id')[biggest]}) wants {want} GPUs{source} {of}"
    return (
        f"run stalled at t={now:g}s: {len(waiting)} job(s) wait, none has run for {STALL_ROUNDS} rounds "
        f"and no more jobs will arrive{detail}.{_unschedulable(world, waiting, elements)} Check the placer and admission arguments."
    )


def _asked_counts(n: int, waiting: np.ndarray, asked: Sequence[tuple[Element, Ranking]]) -> tuple[np.ndarray, np.ndarray]:
    """For each waiting job: the most GPUs a placer of `asked` was asked for it (-1: none was
    asked to place it), and which entry of `asked` asked that."""
    count = np.full(n, -1, dtype=np.int64)
    by = np.full(n, -1, dtype=np.int64)
    for k, (_, ranking) in enumerate(asked):
        rows, gpus = np.asarray(ranking.rows, dtype=np.int64), np.asarray(ranking.gpus, dtype=np.int64)
        inside = (rows >= 0) & (rows < n)
        rows, gpus = rows[inside], gpus[inside]
        more = gpus > count[rows]
        count[rows[more]], by[rows[more]] = gpus[more], k
    return count[waiting], by[waiting]


def _unschedulable(world: World, waiting: np.ndarray, elements) -> str:
    """What an element that counts waiting jobs it cannot start says of them: Pollux starts only
    jobs of its elastic profile's applications."""
    for el in elements:
        count = (el.counters or {}).get("unschedulable", 0)
        if not count or not world.jobs.has_column("elastic_model") or not len(waiting):
            continue
        outside = waiting[world.jobs.column("elastic_model")[waiting] < 0]
        if not len(outside):
            continue
        first, jobs = int(outside[0]), world.jobs
        model = jobs.column("model")[first] if jobs.has_column("model") else None
        named = f"job {jobs.column('job_id')[first]}" + (f", model {model}" if model is not None else "")
        return (
            f" Element '{el.name}' ({type(el).__name__}) cannot start {count} waiting job(s), of no application"
            f" of the elastic profile ({named})."
        )
    return ""
