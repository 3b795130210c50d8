"""Rounds carried out in passing: while every job in the system runs on what it asks for, a round
whose news is jobs arriving (and, maybe, jobs finishing) is carried out without ticking the
graph's middle.

The plan of such a round is known without ranking the whole pool: every running job keeps its
GPUs, and the arrivals, in the policy's order among themselves, are packed on the free GPUs (step
3 of every placer, elements/placement/placer.py), provided they all find room. So, while every
element the engine ticks says so (`Element.arrivals_wait`, asked after each ticked or passed
round), such a round is carried out thus:

1. its events are folded into the world's books, as for any round;
2. the graph's front (the sources and admission gates, ticked before the pool) ticks as usual;
3. the policy ranks only the jobs admitted (`Policy.rank_arrivals`) and the placer places only
   them (`Placer.place_arrivals`); when one would not find room, the round is ticked after all,
   from the pool on, with the front's port values (no element ticks twice);
4. the launcher ticks with that plan, and the engine carries it out as it carries out any plan;
5. the pool takes the admitted jobs at its next tick (`JobPool.join_later`), and the sinks get
   the round's launches and completions with the next ticked round's events.

Why results are identical. The plan is the one the placer would have made: with every running
job ranked and kept and every ranked job fitting, its steps come down to packing the jobs not
running, in ranking order among themselves (`Placer._place_newcomers`); and that order is the
policy's order of the arrivals alone (`KeyOrder`: each key is a job's own, and the sort is stable
over admission order, in which they come last). The world's books, the backend and the
explanation record are written by the same calls as in a ticked round. The pool joins the
arrivals in order and drops finished jobs at its next tick, as round by round; the policy keeps
only its last ranking (to guess the next one's order); the sinks count the same events one tick
later, and a round whose completions meet a sink's goal in the world's books
(`Element.goal_met_in_books`: `JobMetrics`' tracked window) is ticked, so that the run stops in
it. While every job runs, the order of a ranking does not
matter to the plan, and the ranking goes to the placer alone: so the policy's quiet time (when
its order could next change) is not asked either, before rounds that pass untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from roundhouse.runtime.skipping import all_say
from roundhouse.runtime.types import Events, Jobs

if TYPE_CHECKING:
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.element import Element


@attrs.frozen
class Roles:
    """Who does what in a round carried out in passing (the graph's shape allows it). The
    elements are typed by what is asked of them: a source's `next_arrival_s`, the pool's
    `join_later`, the policy's `rank_arrivals`, the placer's `place_arrivals`."""

    source: Any
    front: int  # how many elements tick before the pool (the sources and admission gates)
    pool: Any
    admitted: tuple[tuple[str, str], ...]  # the port values the pool takes its jobs from
    policy: Any
    placer: Any
    plan: tuple[str, str]  # the placer's plan, as the launcher takes it
    launcher: int  # the launcher's place in the tick order
    events: tuple[str, str]  # the launcher's events
    asked: tuple[Element, ...]  # every element ticked


def roles(graph, wiring: list) -> Roles | None:
    """The roles, for a graph of one source, admission gates, one pool, a policy that ranks it for
    the placer alone, the placer and one launcher taking only its plan (sinks and other elements
    after them); None for any other shape."""
    ticked = [w[0] for w in wiring]
    by_category = {c: [el for el in ticked if el.category == c] for c in ("source", "pool", "launch")}
    if any(len(found) != 1 for found in by_category.values()):
        return None
    (source,), (pool,), (launcher,) = by_category.values()
    front = ticked.index(pool)
    admitted = tuple(graph.sources_of(pool.name, "jobs"))
    if (
        any(el.category not in ("source", "admission") for el in ticked[:front])
        or not admitted
        or not hasattr(source, "next_arrival_s")
    ):
        return None
    placer = graph.elements.get(graph.producer_of(launcher.name, "plan") or "")
    policy = graph.elements.get(graph.producer_of(placer.name, "ranking") or "") if placer is not None else None
    if placer is None or policy is None or placer.category != "placement" or policy.category != "policy":
        return None
    fed = {(c.src, c.dst) for c in graph.connections if c.src in (policy.name, placer.name)}
    inputs = {(c.dst, c.dst_port) for c in graph.connections if c.dst in (policy.name, placer.name, launcher.name)}
    if (
        fed != {(policy.name, placer.name), (placer.name, launcher.name)}
        or inputs != {(policy.name, "active"), (placer.name, "ranking"), (launcher.name, "plan")}
        or graph.producer_of(policy.name, "active") != pool.name
    ):
        return None
    return Roles(
        source=source,
        front=front,
        pool=pool,
        admitted=admitted,
        policy=policy,
        placer=placer,
        plan=(placer.name, "plan"),
        launcher=ticked.index(launcher),
        events=(launcher.name, "events"),
        asked=tuple(ticked),
    )


# Rounds carried out in passing one after another before one is ticked: the arrivals, launches
# and completions they hand on wait in memory until then (a headline million's run passes almost
# every round), so a tick now and then bounds what waits.
MAX_PASSED = 4096


class Passing:
    """The engine's rounds carried out in passing: whether the next may be, and carrying it out."""

    def __init__(self, graph, wiring: list, enabled: bool, call: Callable):
        self.roles = roles(graph, wiring) if enabled else None
        self._call = call  # (the engine's `call_element`: an element's exception names it)
        self.ready = False  # every element said `arrivals_wait` after the last round
        self.passed = 0  # rounds carried out in passing since the last tick
        self.total = 0  # and in all
        self._front: tuple[Round, dict, int] | None = None

    @property
    def unordered(self) -> Element | None:
        """The policy whose order does not matter now (None: every element is asked)."""
        return self.roles.policy if self.ready and self.roles is not None else None

    @property
    def full(self) -> bool:
        """Whether the rounds passed since the last tick reach the bound on what waits in memory."""
        return self.passed >= MAX_PASSED

    def check(self, ctx: Round) -> None:
        """After a ticked or passed round: whether every element says `arrivals_wait`."""
        self.ready = self.roles is not None and not self.full and all_say(self.roles.asked, "arrivals_wait", ctx, self._call)

    def may_pass(self, engine, events: Events) -> bool:
        """Whether the round at the backend's clock, with these events (not yet folded), is one
        to carry out in passing: jobs arrive in it and nothing else happens but completions."""
        if not self.ready or engine._carried is not None or engine._completed:
            return False
        now = engine.backend.now
        assert self.roles is not None  # (ready)
        return (
            now < engine._skipping.bound() and events.is_quiet_but_finished() and self.roles.source.next_arrival_s() <= now + 1e-9
        )

    def pass_round(self, engine, events: Events) -> Events | None:
        """Carry out the round at the backend's clock, whose own `events` are folded into the
        world (the front ticks with them); returns the round's launches, which the sinks get at
        their next tick with those events, or None when an arrival finds no room: the round is then
        ticked from the pool on (`ticked_with`, `take_front`)."""
        call = self._call
        roles = self.roles
        assert roles is not None  # (ready)
        ctx = engine._context(events, int(round(engine.backend.now / engine._skipping.round_s)))
        engine._ctx = ctx
        engine._plan_changed = False
        values: dict[tuple[str, str], object] = {}
        engine._tick_all(ctx, values, 0, roles.front)
        arrivals = Jobs.merge([cast(Jobs, values[key]) for key in roles.admitted])
        plan = None
        if len(arrivals):
            ctx.element = roles.policy
            ranking = call(roles.policy, "rank_arrivals", ctx, roles.policy.rank_arrivals, ctx, arrivals)
            if ranking is not None:
                ctx.element = roles.placer
                plan = call(roles.placer, "place_arrivals", ctx, roles.placer.place_arrivals, ctx, ranking)
        if plan is None:
            ctx.element = None
            self._front = (ctx, values, roles.front)
            return None
        roles.pool.join_later(arrivals)
        values[roles.plan] = plan
        ctx.events = Events(time=ctx.now)  # (the launcher's events: the launches alone)
        engine._tick_all(ctx, values, roles.launcher, roles.launcher + 1)
        self.passed += 1
        self.total += 1
        engine._rounds += 1
        engine._idle_rounds = 0
        skipping = engine._skipping
        skipping.skipped += 1
        self.check(ctx)
        skipping.after_tick(ctx, engine.backend, True, call, self.unordered)
        engine.backend.advance()
        return cast(Events, values[roles.events])

    def ticked_with(self, events: Events) -> Events:
        """The round that could not pass is ticked, from the pool on, with `events` (its own and
        those that waited for it)."""
        assert self._front is not None
        self._front[0].events = events
        return events

    def take_front(self) -> tuple[Round, dict, int] | None:
        """Before a round is ticked: a round that could not pass, its context, its front's port
        values and where the tick goes on (None: none)."""
        self.passed = 0
        front, self._front = self._front, None
        return front
