"""Rounds carried out in bulk: a run of rounds carried out in passing (runtime/passing.py) whose
books are written once for the whole run.

While every job in the system runs on what it asks for, a round carried out in passing needs,
from the rounds before it, only which GPUs are free: its sources and admission gates tick, the
policy ranks the arrivals and the placer packs them on the free GPUs. Everything else the round
does is bookkeeping: the world's books for the launches, the progress of every running job, the
completions, and the simulator's clock. When the simulator runs whole rounds
(`Simulator.runs_whole_rounds`: one unit of work per second wherever a job runs, rounds and clock
in whole seconds, no checkpoint or restore to wait for), that bookkeeping does not depend on the
order of the rounds either:

- a job's progress over a whole round is the same whole numbers every round (the round's seconds
  of work, run time and compute time, its GPUs times the round of service), so k rounds add
  exactly k times as much;
- the simulator's test finds a job finishing at the start of its round plus its remaining work,
  and that sum is the same number in every round (one rounding of the same exact value: the work
  done and the clock grow by the same whole numbers), so the round each job finishes in is known
  when it starts.

Where jobs run profiled models (or slow down when spread), their progress over a round is
not a whole number but a fixed float while they run on the same GPUs (their launch's rate
times the round: `Simulator.runs_fixed_rounds`). Then k rounds are k roundings, and the round a
job finishes in is found by running sums of its steps, tested as the simulator tests them;
its books are the same running sums (runtime/bulk_profiled.py). The rest is as below.

So a run of such rounds is carried out with, per round, only the front's tick, the ranking and
the packing of the arrivals (as in passing), and freeing the GPUs of the jobs that finished; the
launches, the completions and the progress of every job are written into the world's books at
the end, and the simulator takes up the run at the boundary after the last round, holding that
round's completions, as round by round. The rounds between arrivals, with completions or with
nothing, are carried out in the same pass (they are the rounds event skipping passes: every
element says that completions wait, and none but the source asks for a tick before the next
arrival).

Why results are identical. Each round's plan is the one passing makes: the same placer packs the
same arrivals, in the same order, on the same free GPUs. The books end as round by round: whole
numbers added in bulk are the same bits, each finishing job's last partial round is added to
the same whole-round total, and the completions go through the world's usual calls. The
explanation record, the pool, the launcher, the sources and admission gates get the same calls
in the same order, round by round. The run ends where round by round a round would be ticked
or the run would stop: at a round whose arrivals do not all find room (ticked from the pool on,
as in passing), at a round whose completions meet a sink's goal in the world's books (ticked),
at the memory bound of passing, at the time limit, where the system empties, before a round
whose completions the search at fixed rates has not found (its horizon), where a job that does
not run at one unit of work per second arrives in a whole-rounds run, or where a launch's rate
is not fixed or not positive (that round is ticked, with the same plan).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import numpy as np

from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.bulk_profiled import book_whole_rounds, finishes
from roundhouse.runtime.element_failures import describe_element
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.skipping import ARRIVAL_TOLERANCE, all_say, arrival_offset
from roundhouse.runtime.types import Events, Jobs, Plan
from roundhouse.runtime.world import book_launches, compute_seconds
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.passing import Passing

_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_FLOATS = np.zeros(0)
_NEVER = np.iinfo(np.int64).max
_TABLE_ROUNDS = 1 << 20  # (the deadlines of a run's rounds worked out at once, at most: 8 MB)
_EXACT_S = 2.0**52  # (seconds from a run's start past which the clock's sums would not be whole numbers)


class Bulk:
    """The engine's rounds carried out in bulk: whether a run of them may start, and carrying it out."""

    def __init__(self, passing: Passing, call: Callable):
        self._passing = passing
        self._call = call  # (the engine's `call_element`: an element's exception names it)

    def may_carry(self, engine) -> bool:
        """Whether the round about to be carried out in passing may start a run carried out in
        bulk: the placer packs arrivals on a mask (`packs_arrivals`), the simulator runs whole
        rounds or rounds at fixed rates (runtime/bulk_profiled.py), completions wait, no element
        but the source asks for a tick before the next arrival, and every running job holds GPUs."""
        roles, backend = self._passing.roles, engine.backend
        if roles is None or not getattr(roles.placer, "packs_arrivals", False):
            return False
        if not hasattr(backend, "runs_whole_rounds") or not (backend.runs_whole_rounds() or backend.runs_fixed_rounds()):
            return False
        ctx = engine._ctx
        if not all_say(roles.asked, "completions_wait", ctx, self._call):
            return False
        for el in roles.asked:
            if el is roles.source or el is roles.policy:
                continue
            ctx.element = el
            t = self._call(el, "quiet_until", ctx, el.quiet_until, ctx)
            ctx.element = None
            if t is None or t != math.inf:
                return False
        world = engine.world  # (every running job holds GPUs: its completion is found by them)
        return not np.count_nonzero(world.jobs.writable["held"][world.running_rows] <= 0)

    def carry(self, engine, folded: Events) -> tuple[Events, str]:
        """Carry out the rounds from the backend's clock (whose own events, `folded`, are in the
        world's books) for as long as they may pass. Returns their events (the sinks get them at
        their next tick) and what comes next: "poll" (the backend's next poll gives the next
        round's events, as after any round carried out in passing), "front" (the round after
        them is ticked from the pool on: its arrivals found no room, `Passing.ticked_with`) or
        "tick" (that round, its events folded in, is ticked: they meet a sink's goal)."""
        run = _Run(engine, self._passing, self._call)
        after = run.go(folded)
        run.book(after)
        return Events.merge([folded, run.events()]), after


class _Run:
    """One run of rounds carried out in bulk: the rounds as they go, then the books."""

    def __init__(self, engine, passing: Passing, call: Callable):
        self.engine, self.passing, self.call = engine, passing, call
        world, backend = engine.world, engine.backend
        self.world, self.backend, self.cols = world, backend, world.jobs.writable
        self.round_s = engine._skipping.round_s
        self.b0 = backend.now
        self.profiled = not world._plain()  # (jobs at fixed float rates: runtime/bulk_profiled.py)
        self.horizon = _NEVER  # (the first round whose completions are not all known)
        # The jobs running now, by the round (offset from this one) each finishes in.
        running = world.running_rows
        cols = self.cols
        if self.profiled:
            offset, finish_at, self.horizon = finishes(self.backend, cols, running, cols["rate"][running], self.b0, 0, _NEVER)
        else:
            finish_at = self.b0 + (cols["work"][running] - cols["done"][running]) / cols["rate"][running]
            self._deadlines = RoundDeadlines(backend, self.b0, self.round_s)
            offset = self._deadlines.offsets(finish_at, 0)
        self.first, self.first_offset = running, offset
        holder = world.holder
        self._due = DueRounds(holder, running, offset, finish_at)  # (when the jobs finish, by round)
        self.available = holder < 0
        # What the run did, for the books and the sinks.
        # per round: rows, GPU counts, GPUs, time, offset, the offsets of the rounds they finish in, rates
        self.launched: list[tuple[np.ndarray, np.ndarray, np.ndarray, float, int, np.ndarray, np.ndarray]] = []
        self.finished: list[tuple[np.ndarray, np.ndarray, int]] = []  # rows, times, offset (per round, in row order)
        self.rounds = 0  # rounds carried out
        self.folded = 0  # jobs whose completions were folded in (not yet in the world's books)
        self.last_time = self.b0  # the last round with events
        self.last_ctx = None
        self.end = 0  # offset of the boundary the run ends at

    # --- the rounds ---
    def go(self, folded: Events) -> str:
        """Carry out rounds from this one; returns what comes after them (`Bulk.carry`)."""
        engine, passing, world = self.engine, self.passing, self.world
        roles = passing.roles
        assert roles is not None
        limit = engine._skipping.bound()
        j, b, events = 0, self.b0, cast("Events | None", folded)
        unfinished, running = world.unfinished, len(world.running_rows)
        arrives = True  # (the round carried out in passing that starts the run)
        while True:
            stop_after = False
            if arrives:
                placed = self._pass(j, b, events)
                if placed is None:
                    self.end = j
                    return "front"
                unfinished = world.unfinished - self.folded
                running += placed
                stop_after = passing.full
            # The round's end: the jobs that finish in it are the next round's events.
            rows, times, gpus = self._due.take(j)
            j, b = j + 1, b + self.round_s
            bound = min(limit, self.b0 + self.horizon * self.round_s)  # (completions known up to the horizon)
            self.rounds += 1
            self.end = j
            if stop_after or b >= bound:
                self._pending = (rows, times)
                return "poll"
            arrives = roles.source.next_arrival_s() <= b + ARRIVAL_TOLERANCE
            if len(rows) and not arrives and (unfinished - len(rows) == 0 or running - len(rows) == 0):
                self._pending = (rows, times)  # (a round whose completions empty the system is ticked)
                return "poll"
            if len(rows):
                events = self._fold(rows, times, gpus, j, b, arrives)
                unfinished -= len(rows)
                running -= len(rows)
                if engine.goal_in_books():
                    self.end = j
                    return "tick"
            else:
                events = None  # (nothing happened: made when a round needs them)
            if not arrives and not len(rows):
                skip = self._quiet_rounds(j, b, bound)  # rounds with nothing in them
                if skip is None:  # (nothing ahead at all: left to event skipping)
                    self._pending = (_NO_ROWS, _NO_FLOATS)
                    return "poll"
                j, b = j + skip, b + skip * self.round_s
                self.rounds += skip
                self.end = j
                if b >= bound:
                    self._pending = (_NO_ROWS, _NO_FLOATS)
                    return "poll"
                arrives = roles.source.next_arrival_s() <= b + ARRIVAL_TOLERANCE

    def _pass(self, j: int, b: float, events: Events | None) -> int | None:
        """Round j, with its events (None: none), carried out in passing: the number of jobs
        launched, or None when the round is to be ticked from the pool on (its front has ticked)."""
        engine, passing, call = self.engine, self.passing, self.call
        roles = passing.roles
        assert roles is not None
        ctx = engine._context(Events(time=b) if events is None else events, int(round(b / self.round_s)), b)
        engine._ctx = ctx
        values: dict[tuple[str, str], object] = {}
        engine._tick_all(ctx, values, 0, roles.front)
        admitted = roles.admitted
        arrivals = (
            cast(Jobs, values[admitted[0]]) if len(admitted) == 1 else Jobs.merge([cast(Jobs, values[key]) for key in admitted])
        )
        packed = None
        if len(arrivals) and not self.profiled and not self.world._plain():  # (profiled arrivals: at fixed rates on)
            self.profiled = self.backend.runs_fixed_rounds()
        if len(arrivals) and (self.profiled and self.backend.runs_fixed_rounds() or self.world._plain()):
            ctx.element = roles.policy
            ranking = call(roles.policy, "rank_arrivals", ctx, roles.policy.rank_arrivals, ctx, arrivals)
            if ranking is not None:
                ctx.element = roles.placer
                packed = call(roles.placer, "pack_arrivals", ctx, roles.placer.pack_arrivals, ctx, ranking, self.available)
        ctx.element = None
        if packed is None:
            passing._front = (ctx, values, roles.front)
            return None
        rows, counts, gpus = packed
        plan = Plan(launch_rows=rows, launch_gpus=gpus, launch_counts=counts)
        rates = self.world.launch_rates(plan)
        if self.profiled and len(rates) and rates.min() <= 0:  # (ticked: the plan's error is the launcher's)
            passing._front = (ctx, values, roles.front)
            return None
        holder = self.world.holder
        taken = holder[gpus]
        if len(taken) and taken[taken.argmax()] >= 0:  # (argmax: one call, where a count is a few)
            raise PlanError(
                f"round {ctx.round_index} (t={b:g}s): plan from {describe_element(roles.placer)}: it launches on a GPU already held"
            )
        holder[gpus] = rows if len(gpus) == len(rows) else rows.repeat(counts)
        roles.pool.join_later(arrivals)
        ctx.element = engine._wiring[roles.launcher][0]
        call(ctx.element, "tick", ctx, ctx.element.tick, ctx, plan)
        ctx.element = None
        if engine._record is not None:
            placer_id, launcher_id = engine._plan_ids[engine._wiring[roles.launcher][0].name]
            engine._record.plan(plan, self.world, placer_id, launcher_id, b)
        due = self._note_due(rows, counts, gpus, b, j, rates if self.profiled else None)
        self.launched.append((rows, counts, gpus, b, j, due, rates))
        self.last_time = b
        passing.passed += 1
        passing.total += 1
        self.last_ctx = ctx
        return len(rows)

    def _note_due(self, rows: np.ndarray, counts: np.ndarray, gpus: np.ndarray, b: float, j: int, rates) -> np.ndarray:
        """Launches of round j (`rates`: theirs, None in a whole-rounds run): when each
        finishes, queued by its round; returns the rounds they finish in."""
        cols = self.cols
        if rates is not None:
            offsets, finish_at, self.horizon = finishes(self.backend, cols, rows, rates, b, j, self.horizon)
        elif len(rows) == 1:  # (a round's usual launch: its round found without arrays' passes)
            r = rows[0]
            at = b + (cols["work"][r] - cols["done"][r])  # (as below: a whole-rounds run's rate is 1)
            k = self._deadlines.offset(at, j)
            if k != _NEVER:
                self._due.expect(k, rows, np.array([at]), gpus)
            return np.array([k])
        else:
            finish_at = b + (cols["work"][rows] - cols["done"][rows])  # (a whole-rounds run: every rate is 1)
            offsets = self._deadlines.offsets(finish_at, j)
        if len(rows) == 1:  # (a round's usual launch)
            if int(offsets[0]) != _NEVER:
                self._due.expect(int(offsets[0]), rows, finish_at, gpus)
        else:
            ends = counts.cumsum()
            for i, k in enumerate(offsets.tolist()):
                if k != _NEVER:
                    self._due.expect(k, rows[i : i + 1], finish_at[i : i + 1], gpus[ends[i] - counts[i] : ends[i]])
        return offsets

    def _fold(self, rows: np.ndarray, times: np.ndarray, freed: np.ndarray, j: int, b: float, needed: bool) -> Events | None:
        """Round j's events, the completions of the round before: their GPUs (`freed`) are free.
        Returns them as `Events` when `needed` (the round is carried out in passing) or recorded."""
        self.world.holder[freed] = -1
        self.available[freed] = True
        self.cols["status"][rows] = FINISHED  # (ahead of their books: what a sink's goal reads)
        record = self.engine._record
        events = Events(time=b, finished=rows, finished_at=times) if needed or record is not None else None
        if record is not None:
            record.events(events)
        self.finished.append((rows, times, j - 1))
        self.folded += len(rows)
        self.last_time = b
        return events

    def _quiet_rounds(self, j: int, b: float, bound: float) -> int | None:
        """How many rounds from round j (which has no events) have none either: up to the next
        arrival's round, the next round with completions, or the bound, whichever comes first
        (None: none of them lies ahead)."""
        roles = self.passing.roles
        assert roles is not None
        upto = math.inf
        t = roles.source.next_arrival_s()
        if t != math.inf:
            upto = arrival_offset(t, self.b0, self.round_s)
        due = self._due.next_round()
        if due != _NEVER:
            upto = min(upto, due)
        if bound != math.inf:
            upto = min(upto, j + max(0, math.ceil((bound - b) / self.round_s)))
        return None if upto == math.inf else max(0, int(upto) - j)

    # --- the books ---
    def book(self, after: str) -> None:
        """Write the run into the world's books and hand the simulator the boundary after it
        (holding the last round's completions when the next poll is to give them)."""
        rows, start, finish = self._book_launches()
        self._book_progress(rows, start, finish)
        now = self.b0 + self.end * self.round_s
        events, progress = None, Progress.empty()
        if after == "poll":
            rows, at = self._pending
            events = Events(time=now, finished=rows, finished_at=at) if len(rows) else Events(time=now)
            if len(rows):
                block = np.stack(last_part(self.cols, rows, at, np.full(len(rows), now - self.round_s)))
                progress = Progress(rows, block[0], block[1], block[2], block)
        self.backend.resume(now, events, progress)
        engine = self.engine
        engine._rounds += self.rounds
        engine._idle_rounds = 0
        engine._skipping.skipped += self.rounds
        engine._plan_changed = False
        if after == "poll" and self.last_ctx is not None:  # (as after the last round carried out in passing)
            engine._ctx = self.last_ctx
            self.passing.check(self.last_ctx)
            engine._skipping.after_tick(self.last_ctx, self.backend, True, self.call, self.passing.unordered)

    def _book_launches(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The run's launches into the books; returns the rows launched, the rounds they launched
        in and the rounds they finish in."""
        launched = self.launched
        if not launched:
            return _NO_ROWS, _NO_ROWS, _NO_ROWS
        rows, counts, gpus, finish = (np.concatenate([x[i] for x in launched]) for i in (0, 1, 2, 5))
        start = np.repeat([x[4] for x in launched], [len(x[0]) for x in launched])
        world = self.world
        plan = Plan(launch_rows=rows, launch_gpus=gpus, launch_counts=counts)
        rates = np.concatenate([x[6] for x in launched])  # (as `apply_plan` books them)
        book_launches(world, plan, rates, None, self.b0 + start * self.round_s)
        world._set_running(np.sort(np.concatenate([world.running_rows, rows])))
        return rows, start, finish

    def _book_progress(self, rows: np.ndarray, start: np.ndarray, finish: np.ndarray) -> None:
        """Every job that ran: its whole rounds; for those whose completions were folded in, the
        last part of a round, and their completions."""
        cols, R = self.cols, self.round_s
        every = np.concatenate([self.first, rows])
        since = np.concatenate([np.zeros(len(self.first), dtype=np.int64), start])
        whole = np.minimum(np.concatenate([self.first_offset, finish]), self.end) - since
        if self.profiled:  # (float steps: added round by round, in running sums)
            book_whole_rounds(cols, every, whole, R)
        else:
            step = whole * R  # (whole numbers: exact)
            cols["done"][every] += step
            cols["run_s"][every] += step
            cols["compute_s"][every] += step
            cols["service"][every] += cols["held"][every] * step
        self.world.progress_log.note(every)  # (`gone` are among them)
        if not self.finished:
            return
        gone, at = (np.concatenate([f[i] for f in self.finished]) for i in (0, 1))
        boundary = self.b0 + np.repeat([f[2] for f in self.finished], [len(f[0]) for f in self.finished]) * R
        done, service, run_s, compute_s = last_part(cols, gone, at, boundary)
        cols["done"][gone] += done
        cols["service"][gone] += service
        cols["run_s"][gone] += run_s
        cols["compute_s"][gone] += compute_s
        self.world.apply_finished(gone, at)

    def events(self) -> Events:
        """The run's completions and launches, as the sinks get them at their next tick."""
        finished = [f for f in self.finished if len(f[0])]
        launched = self.launched
        cat = np.concatenate
        return Events(
            time=self.last_time,
            finished=cat([f[0] for f in finished]) if finished else _NO_ROWS,
            finished_at=cat([f[1] for f in finished]) if finished else _NO_FLOATS,
            launched=cat([x[0] for x in launched]) if launched else _NO_ROWS,
            launched_gpus=cat([x[2] for x in launched]) if launched else _NO_ROWS,
            launched_counts=cat([x[1] for x in launched]) if launched else _NO_ROWS,
        )


class DueRounds:
    """The completions ahead in a run in bulk, by the round they fall in: those of the jobs
    running at its start in arrays in that order (each job's GPUs together, in the same order),
    those of its launches in a queue of rounds, each with its pieces (a launch's jobs, their
    finish times and their GPUs). A round's completions are taken as it ends, and the next round
    with any is the first of either, with no pass over the GPUs (every running job holds GPUs:
    `Bulk.may_carry`)."""

    def __init__(self, holder: np.ndarray, running: np.ndarray, offset: np.ndarray, finish_at: np.ndarray):
        order = offset.argsort(kind="stable")  # (in row order within a round)
        self._first_due, self._first_rows, self._first_at = offset[order], running[order], finish_at[order]
        ids = (holder >= 0).nonzero()[0]
        place = np.empty_like(order)
        place[order] = np.arange(len(order))
        place = place[running.searchsorted(holder[ids])]  # (each GPU's job, by its place in that order)
        self._first_gpus = ids[place.argsort(kind="stable")]
        self._first_ends = np.bincount(place, minlength=len(order)).cumsum()
        self._first_next = 0  # (the first of them not yet finished)
        self._pieces: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._queue: list[int] = []

    def expect(self, k: int, rows: np.ndarray, at: np.ndarray, gpus: np.ndarray) -> None:
        """Jobs (`rows`, finishing at `at`, on `gpus`) that finish in round k."""
        pieces = self._pieces.get(k)
        if pieces is None:
            self._pieces[k] = [(rows, at, gpus)]
            heapq.heappush(self._queue, k)
        else:
            pieces.append((rows, at, gpus))

    def take(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The jobs that finish in round j (in row order), their finish times and their GPUs.
        Rounds are taken in order, so none is left behind."""
        first, queue = self._first_due, self._queue
        p = self._first_next
        from_first = p < len(first) and first[p] == j
        from_queue = bool(queue) and queue[0] == j
        if not (from_first or from_queue):
            return _NO_ROWS, _NO_FLOATS, _NO_ROWS
        pieces = []
        if from_first:
            q = int(first.searchsorted(j, side="right"))
            ends = self._first_ends
            pieces.append((self._first_rows[p:q], self._first_at[p:q], self._first_gpus[ends[p - 1] if p else 0 : ends[q - 1]]))
            self._first_next = q
        if from_queue:
            heapq.heappop(queue)
            pieces.extend(self._pieces.pop(j))
        if len(pieces) == 1:  # (the running jobs' in row order; a launch's, one job)
            return pieces[0]
        rows, at, gpus = (np.concatenate([piece[i] for piece in pieces]) for i in (0, 1, 2))
        order = rows.argsort()  # (rows are distinct)
        return rows[order], at[order], gpus

    def next_round(self) -> int:
        """The next round with completions (`_NEVER`: none known)."""
        p = self._first_next
        due = int(self._first_due[p]) if p < len(self._first_due) else _NEVER
        return min(due, self._queue[0]) if self._queue else due


class RoundDeadlines:
    """The simulator's deadline (`finish_deadline`) at the end of each round of a run, by offset
    from its first boundary `b0`: a job finishing at f finishes in the first round whose
    deadline is f or later. The table grows as later rounds are asked for, up to `_TABLE_ROUNDS`;
    a job finishing beyond it has its round worked out alone, with the same test."""

    def __init__(self, backend, b0: float, round_s: float):
        self._deadline, self._b0, self._round_s = backend.finish_deadline, b0, round_s
        self._table = _NO_FLOATS

    def offsets(self, finish_at: np.ndarray, start) -> np.ndarray:
        """The round each job finishes in, running from round `start` (one for all, or one each)."""
        k = self._table.searchsorted(finish_at)
        if len(k) and k[k.argmax()] == len(self._table):  # (argmax: a call, where max is a few)
            if len(self._table) < _TABLE_ROUNDS:
                self._grow(float(finish_at.max()))
                k = self._table.searchsorted(finish_at)
            far = (k == len(self._table)).nonzero()[0]
            if len(far):
                k[far] = [self._far(f) for f in finish_at[far].tolist()]
        np.maximum(k, start, out=k)
        return k

    def offset(self, finish_at: float, start: int) -> int:
        """`offsets` for one job."""
        table = self._table
        k = int(table.searchsorted(finish_at))
        if k == len(table):
            return int(self.offsets(np.array([finish_at]), start)[0])
        return max(k, start)

    def _grow(self, latest: float) -> None:
        n = max(1024, 2 * len(self._table))
        while n < _TABLE_ROUNDS and self._b0 + n * self._round_s < latest:
            n *= 2
        ends = self._b0 + np.arange(1, min(n, _TABLE_ROUNDS) + 1) * self._round_s  # (whole numbers: the clock's own sums)
        self._table = self._deadline(ends)

    def _far(self, finish_at: float) -> int:
        """The round of a job that finishes past the table (none, `_NEVER`, so far ahead that the
        clock's sums would no longer be whole numbers: no run gets there)."""
        b0, round_s, deadline = self._b0, self._round_s, self._deadline
        if finish_at - b0 >= _EXACT_S:
            return _NEVER
        k = max(len(self._table), math.ceil((finish_at - b0) / round_s) - 1)
        while finish_at > deadline(b0 + (k + 1) * round_s):
            k += 1
        while k > len(self._table) and finish_at <= deadline(b0 + k * round_s):
            k -= 1
        return k


def last_part(cols: dict[str, np.ndarray], rows: np.ndarray, at: np.ndarray, boundary: np.ndarray):
    """The progress of jobs over the round they finish in, which began at `boundary` (their
    whole rounds booked): as the simulator's `advance` adds it."""
    done = cols["work"][rows] - cols["done"][rows]
    run_s = at - boundary
    service = cols["held"][rows] * run_s
    compute_s = compute_seconds(done, cols["compute_rate"][rows])
    return done, service, run_s, compute_s
