"""Event skipping: rounds in which nothing can change are passed without ticking them.

After a round whose plan changed nothing (after any round, when every element sets
`quiet_after_change`), every element the engine ticks is asked until when ticking it again
would change nothing (`Element.quiet_until`); the rounds whose boundaries lie before the
earliest answer, and before the next arrival or completion (a round with events is always
ticked), pass without a tick, the simulator's in one go. Results are those of ticking every
round: a skipped round's tick would have emitted the same values, and its plan would have
changed nothing. When every element also says that completions may wait
(`Element.completions_wait`), a round whose only events are completions passes too: they go
into the world's books at once and reach the elements with the next ticked round's events.
An element that declares nothing is ticked every round. With no job in the system at all,
the clock jumps to the round of the next arrival.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from roundhouse.runtime.element import Element

if TYPE_CHECKING:
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.types import Events
    from roundhouse.runtime.world import World

ARRIVAL_TOLERANCE = 1e-9  # (the one sources read arrivals with: an arrival this close after a boundary is read there)


class Skipping:
    """The engine's event skipping: when the rounds ahead are quiet, and passing them."""

    def __init__(self, world: World, round_s: float, sources: list[Element], asked: list[Element], enabled: bool):
        self.world = world
        self.round_s = round_s
        self.sources = sources
        self.asked = asked  # (sources first, then placers: they answer cheaply)
        self.enabled = enabled
        # Whether every element answers for the world a changing plan left, too: then the
        # rounds after a launch need not be ticked once more before they may pass.
        self.after_change = all(el.quiet_after_change for el in asked)
        self._quiet_until = -math.inf  # rounds whose boundary lies before it are not ticked
        self.waits = False  # whether completions may wait for the next ticked round
        self.skipped = 0
        # Never skip past these: the run's time limit, and where a caller stepping the engine
        # wants it to pause (runtime/simulation.py's run_until).
        self._until: float | None = None
        self._pause_at: float | None = None
        self._end = math.inf  # (the earlier of the two, as `bound` gives it)
        self._quiet_end = -math.inf  # rounds whose boundary lies before it may pass: the smaller of the two
        # A jump over an empty system that a pause cut short: the next step finishes it, so that
        # a run stepped to a time and on gives what a run straight through gives.
        self.jump_cut = False

    @property
    def until(self) -> float | None:
        return self._until

    @until.setter
    def until(self, t: float | None) -> None:
        self._until = _bound(t)
        self._set_end()

    @property
    def pause_at(self) -> float | None:
        return self._pause_at

    @pause_at.setter
    def pause_at(self, t: float | None) -> None:
        self._pause_at = _bound(t)
        self._set_end()

    def _set_end(self) -> None:
        ends = [] if self._until is None else [self._until - 1e-9]
        if self._pause_at is not None:  # (the round before the pause is ticked, so the step ends there)
            ends.append(self._pause_at - self.round_s - 1e-9)
        self._end = min(ends) if ends else math.inf
        self._quiet_end = min(self._quiet_until, self._end)

    def bound(self) -> float:
        """No round at or after this time passes untouched (the time limit, a pause)."""
        return self._end

    @property
    def quiet_until(self) -> float:
        """Rounds whose boundary lies before it are not ticked (as the elements answered)."""
        return self._quiet_until

    @quiet_until.setter
    def quiet_until(self, t: float) -> None:
        self._quiet_until = t
        self._quiet_end = min(t, self._end)

    # (The backend is passed in, not kept: a what-if run swaps the engine's backend for a simulator.)
    def after_tick(self, ctx: Round, backend, plan_changed: bool, call: Callable, unordered: Element | None = None) -> None:
        """After a ticked round (or one carried out in passing): until when the rounds ahead are
        quiet (nothing to skip when its plan changed something, unless every element answers for
        the world the plan left). `unordered`: a policy not to ask, because the order of its
        ranking does not matter to the plan meanwhile (runtime/passing.py)."""
        asks = self.enabled and (self.after_change or not plan_changed)
        self.waits = False
        self.quiet_until = self._quiet_time(ctx, backend, call, unordered) if asks else -math.inf

    def quiet(self, backend, events: Events, completing: bool) -> bool:
        """Whether the round at the backend's clock may pass untouched."""
        return backend.now < self._quiet_end and events.is_quiet() and not completing

    def may_wait(self, backend, events: Events, completing: bool) -> bool:
        """Whether the round at the backend's clock, whose only events are completions, may pass
        untouched, its completions reaching the elements at the next ticked round (every
        element said `completions_wait`)."""
        return self.waits and backend.now < self._quiet_end and not completing and only_finished(events)

    def pass_waiting_round(self, backend) -> bool:
        """After a round whose completions wait (already in the world's books): pass it unless
        the run may end here (no job left) or nothing runs any more."""
        if not self.world.unfinished or not len(self.world.running_rows):
            return False
        backend.advance()
        self.skipped += 1
        return True

    def _quiet_time(self, ctx: Round, backend, call: Callable, unordered: Element | None) -> float:
        """The time before which no element's output can change unless something happens (an
        arrival, a completion: the backend reports those as events)."""
        # A round passes when its boundary lies before every answer: an answer before the next
        # boundary ends the asking, so the cheap answers (arrivals, placers) come first.
        # Asking about completions costs about as much as ticking a quiet round: when one ends
        # the quiet rounds within two, they are worth passing only if completions may wait.
        worth = ctx.now + ctx.round_s
        quiet = self._end
        el = None
        try:  # (one try for all: an element's exception is reported naming `el`)
            for el in self.asked:
                if el is unordered:
                    continue
                ctx.element = el
                t = el.quiet_until(ctx)
                if t is None or _before(t, worth):
                    ctx.element = None
                    return -math.inf
                quiet = min(quiet, t)
        except _NotATime as err:
            assert el is not None  # (raised for an element's answer)
            raise _not_a_time(el, ctx, err.args[0]) from None
        except Exception as err:
            if el is None:
                raise
            call(el, "quiet_until", ctx, _reraise, err)
        ctx.element = None
        next_finish = getattr(backend, "next_finish_s", None)
        finish_soon = next_finish is not None and next_finish() < ctx.now + 2 * ctx.round_s
        # (asked either way, for completions inside the quiet rounds)
        self.waits = all_say(self.asked, "completions_wait", ctx, call)
        return -math.inf if finish_soon and not self.waits else quiet

    def pass_quiet_rounds(self, backend, at_most: int | None) -> int:
        """From a quiet boundary: advance the rounds that start before the quiet time (at most
        `at_most`) without ticking them, the simulator's whole quiet rounds in one go; stops
        after a round in which something happens. Returns how many rounds passed."""
        # Rounds starting before the quiet time, one fewer to be safe from the clock's rounding
        # (a round left over is found quiet again at the next pass).
        n = min((self._quiet_end - backend.now) / self.round_s, 10_000_000.0)
        n = max(1, math.ceil(n) - 1)
        if at_most is not None:
            n = min(n, at_most)
        passed = 0
        if hasattr(backend, "advance_quiet"):
            passed, progress = backend.advance_quiet(n)
            if passed:
                self.world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s, passed, progress.block)
        if not passed:  # the first round has an event (or the backend cannot tell): one round as usual
            backend.advance()
            passed = 1
        self.skipped += passed
        return passed

    def skip_idle_rounds(self, backend) -> None:
        """With no job in the system, jump straight to the round in which the next one arrives
        (ticking empty rounds would change nothing)."""
        if self.world.unfinished or not hasattr(backend, "jump_to"):
            return
        upcoming = [s.next_arrival_s() for s in self.sources if hasattr(s, "next_arrival_s")]
        if len(upcoming) != len(self.sources) or not upcoming:
            return
        nxt = min(upcoming)
        if not math.isfinite(nxt):
            return
        round_s = self.round_s
        boundary = arrival_offset(nxt, 0.0, round_s) * round_s  # (the round whose boundary reads it)
        if self.until is not None:
            boundary = min(boundary, math.ceil(self.until / round_s - 1e-12) * round_s)
        if self.pause_at is not None:
            pause = math.ceil(self.pause_at / round_s - 1e-12) * round_s
            self.jump_cut = pause <= boundary  # (landing on the pause is cut short too: its round is not ticked)
            boundary = min(boundary, pause)
        if boundary > backend.now:
            backend.jump_to(boundary)

    def finish_jump(self, backend) -> bool:
        """Go on with a jump over an empty system that a pause cut short (`jump_cut`); returns
        whether a pause cuts it short again, before the round of the next arrival."""
        self.jump_cut = False
        self.skip_idle_rounds(backend)
        return self.jump_cut


def _before(t: float, worth: float) -> bool:
    """Whether an element's quiet time `t` comes before `worth`; _NotATime if `t` is no time
    (not a number, or NaN, which `min` would take as no time at all, as `inf`)."""
    try:
        if t < worth:
            return True
    except TypeError:
        raise _NotATime(t) from None
    if t != t:
        raise _NotATime(t)
    return False


class _NotATime(Exception):
    """An element's quiet_until answered what is no time."""


def _not_a_time(el: Element, ctx: Round, t: object) -> Exception:
    from roundhouse.runtime.element_failures import element_failure

    shown = repr(t) if isinstance(t, float) else f"{t!r:.60} (a {type(t).__name__})"
    return element_failure(el, ctx, f"its quiet_until returned {shown}, not a time (seconds, inf, or None for not declared)")


def _bound(t: float | None) -> float | None:
    """A time limit or pause as kept: one at infinity is none (None), as no round ever reaches it."""
    return None if t is None or t == math.inf else t


def arrival_offset(t: float, b0: float, round_s: float) -> int:
    """Offset from the boundary `b0` of the round whose boundary first reads an arrival at `t`
    (as sources read)."""
    k = max(0, math.ceil((t - ARRIVAL_TOLERANCE - b0) / round_s))
    while t > b0 + k * round_s + ARRIVAL_TOLERANCE:
        k += 1
    while k > 0 and t <= b0 + (k - 1) * round_s + ARRIVAL_TOLERANCE:
        k -= 1
    return k


def all_say(asked: list[Element] | tuple[Element, ...], question: str, ctx: Round, call: Callable) -> bool:
    """Whether every element answers yes to `question` (a method taking the round context, such
    as `completions_wait`), asked in order until one says no; an element's exception is reported
    naming it (`call`: the engine's `call_element`)."""
    el = None
    try:
        for el in asked:
            ctx.element = el
            if not getattr(el, question)(ctx):
                return False
        return True
    except Exception as err:
        if el is None:
            raise
        return call(el, question, ctx, _reraise, err)
    finally:
        ctx.element = None


def _reraise(err: BaseException):
    raise err


def only_finished(events: Events) -> bool:
    """Whether jobs finished and nothing else happened."""
    return bool(len(events.finished)) and events.is_quiet_but_finished()
