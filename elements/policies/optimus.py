"""Optimus (EuroSys'18), as Blox implements it (Table 7): jobs in order of expected remaining
time, one GPU each, then extra GPUs where they speed convergence up the most."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.policies.base import Policy
from roundhouse.elements.policies.optimus_quiet import Ahead
from roundhouse.elements.policies.optimus_room import Layout
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active, Ranking
from roundhouse.runtime.values import at_least, at_most, non_negative, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


# Candidate values of the curve's floor b2, as fractions of the lowest loss seen: a grid from 0
# to just below it, dense near the top where flat curves need it.
_FLOOR_GRID = 1.0 - np.geomspace(1.0, 1e-4, 48)


def fit_loss_curves(x: np.ndarray, loss: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares fits of loss = 1/(b0 x + b1) + b2, one per row of the (jobs, samples)
    arrays (`valid` marks real samples), as Optimus fits its loss curves (§3.1). For each b2
    below the lowest loss, 1/(loss - b2) is linear in x; the b2 with the smallest squared error
    in loss wins, searched on a coarse grid and then a fine one around the best. Returns
    (b0, b1, b2); NaN where no curve with b0, b1 > 0 fits."""
    n = len(x)
    if n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    low = np.where(valid, loss, np.inf).min(axis=1)
    grid = np.broadcast_to(_FLOOR_GRID, (n, len(_FLOOR_GRID)))
    error, b0, b1 = _fit_on(x, loss, valid, low[:, None] * grid)
    best = np.argmin(error, axis=1)
    # A fine grid between the coarse neighbours of the best floor.
    left = _FLOOR_GRID[np.maximum(best - 1, 0)]
    right = _FLOOR_GRID[np.minimum(best + 1, len(_FLOOR_GRID) - 1)]
    fine = left[:, None] + (right - left)[:, None] * np.linspace(0.0, 1.0, 33)[None, :]
    floor = low[:, None] * fine
    error, b0, b1 = _fit_on(x, loss, valid, floor)
    best = np.argmin(error, axis=1)
    pick = lambda a: a[np.arange(n), best]  # noqa: E731
    ok = np.isfinite(pick(error))
    return np.where(ok, pick(b0), np.nan), np.where(ok, pick(b1), np.nan), np.where(ok, pick(floor), np.nan)


def _fit_on(x, loss, valid, floor):
    """For each job and candidate floor b2 (jobs, grid): the squared error of the best (b0, b1),
    and those; inf where b0 or b1 is not positive. z = 1/(loss - b2) is fitted linearly in x
    with weights 1/z^4, so that an error in z counts as the error in loss it causes
    (d loss = -dz / z^2): a fit of the losses, not of their inverses."""
    valid3 = valid[:, None, :]
    xs = np.where(valid, x, 0.0)[:, None, :]
    gap = np.where(valid, loss, 1.0)[:, None, :] - floor[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        gap = np.where(valid3 & (gap > 0), gap, np.nan)
        z = np.where(valid3, 1.0 / gap, 0.0)
        w = np.where(valid3, gap**4, 0.0)
        w = w / np.nanmax(np.where(valid3, w, np.nan), axis=-1, keepdims=True)
        w = np.nan_to_num(w)
        z = np.nan_to_num(z)
        sw, sx, sz = w.sum(-1), (w * xs).sum(-1), (w * z).sum(-1)
        sxx, sxz = (w * xs * xs).sum(-1), (w * xs * z).sum(-1)
        b0 = (sw * sxz - sx * sz) / (sw * sxx - sx * sx)
        b1 = (sz - b0 * sx) / sw
        predicted = floor[:, :, None] + 1.0 / (b0[:, :, None] * xs + b1[:, :, None])
        error = np.where(valid3, (predicted - np.where(valid, loss, 0.0)[:, None, :]) ** 2, 0.0).sum(-1)
        bad = (np.isnan(gap) & valid3).any(axis=-1)  # a floor at or above some loss
    error = np.where((b0 > 0) & (b1 > 0) & np.isfinite(error) & ~bad, error, np.inf)
    return error, b0, b1


def _row_gains(counts: list[int], speed, usable, level: int, remaining: float, keep, j: int) -> tuple[list[float], list[float]]:
    """`gains` for one job, in plain floats (a handful of counts: numpy costs more here)."""
    hold, restart, margin = int(keep[0][j]), float(keep[1][j]), float(keep[2][j])
    now = float(speed[level])
    gain, real = [-np.inf] * len(counts), [-np.inf] * len(counts)
    for k in range(level + 1, len(counts)):
        if usable[k]:
            saved = remaining * (1.0 / now - 1.0 / float(speed[k]))
            change = (k == hold) - (level == hold)
            step = counts[k] - counts[level]
            gain[k] = (saved + change * margin) / step
            real[k] = (saved + change * restart) / step
    return gain, real


def gains(counts: np.ndarray, speed, usable, level, remaining, keep) -> tuple[np.ndarray, np.ndarray]:
    """(jobs, counts), twice: the drop in remaining time per extra GPU when a job goes from
    count index `level` to each larger usable count (-inf elsewhere), counting a change
    from the count a running job holds as a loss of its restart plus the hysteresis, and a
    return to it as a gain of as much; then the same with the restart alone (`keep`, from
    `Optimus._keep`)."""
    hold, restart, margin = keep
    idx = np.arange(len(counts))[None, :]
    larger = usable & (idx > level[:, None])
    now = speed[np.arange(len(level)), level][:, None]
    change = (idx == hold[:, None]).astype(float) - (level == hold)[:, None]
    step = counts[None, :] - counts[level][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        saved = remaining[:, None] * (1.0 / now - 1.0 / speed)
        gain = (saved + change * margin[:, None]) / step
        real = (saved + change * restart[:, None]) / step
    return np.where(larger, gain, -np.inf), np.where(larger, real, -np.inf)


@element
class Optimus(Policy):
    """Optimus: give GPUs where they bring jobs closest to convergence, soonest.

    Each job's expected remaining work is read from a loss curve fitted to the losses it has
    reported (1/(b0 k + b1) + b2 over iterations k, as Optimus fits): the iterations until the
    fitted loss is within `threshold` of its floor, capped by the work the job declared; a job
    with fewer than three reported losses (or none: no loss curve) is expected to do all its
    declared work, as in Blox's implementation. In order of expected remaining time, each job
    gets one GPU (a job whose model the profile does not know keeps the GPUs it asked for);
    GPUs still free then go, one step at a time, to the job whose remaining time drops the most
    per extra GPU, its speed at each GPU count read from the profile (consolidated up to a
    node; at most a node's worth, or what the job asked for if more, or `max_gpus`). Every job
    asks for a consolidated placement.

    A running job keeps the GPU count it holds unless changing it pays: a change suspends the
    job and launches it again, which costs it the graph's checkpoint (plus checkpoint per GPU
    held) and restore, and is charged against the remaining time the change saves, plus
    `hysteresis` of the job's remaining time, so that near-ties keep what jobs hold (without
    it, gains a percent apart flip jobs between 1, 2 and 4 GPUs every few rounds: the job
    given more runs faster, so its gain falls below the other's). Free GPUs still go to a
    step that saves more than its restart costs.

    Every count is one the placer has room for, as a consolidating placer would pack the jobs
    (worked out from who holds which GPU): on one node, or on the fewest nodes if larger, all
    of one GPU type (the fastest of the types the job can run on that has its count left and
    room for it: a job whose fastest type has GPUs left only scattered over its nodes goes to a
    slower type with room, and the ranking then names each job's type to the placer). On a
    cluster of several GPU types a job gets only counts it runs at on each type it can run on
    (a placer picks the type by the count the job asked for). A
    running job whose new count would find no room keeps the GPUs it holds (no job is
    suspended, or preempted, for a resize that cannot happen); a waiting job gets the largest
    of its counts that finds room, taking extra GPUs back from other jobs if its first
    allocation finds none; GPUs this leaves go out again, each step to a count that finds room,
    larger than a node too (otherwise a job asked for 4 GPUs while the free ones are scattered
    1 to 3 per node would get none).

    Differs from Blox's code (schedulers/optimus.py), which starts each job at the GPUs it
    asked for and hands free GPUs out one at a time, round-robin in order of remaining time:
    here extra GPUs follow marginal gains (the drop in remaining time per GPU), as Optimus'
    paper allocates them.

    Ports:
        active: admitted, unfinished jobs (with their reported losses).
        ranking: jobs by expected remaining time, each with the GPUs it should get.
    Arguments:
        threshold: relative distance to the fitted floor at which a job counts as converged.
        samples: losses kept per job for the fit (the latest ones; 3 to 1000).
        max_gpus: the most GPUs a job may get (default: a node's worth, or its own request if more); a job whose model the profile does not know keeps the GPUs it asked for, above it too.
        hysteresis: share of its remaining time a running job's change of GPU count must save beyond the restart it costs (0 to 0.5).
    Counters:
        fitted: jobs whose remaining work comes from a fitted curve this round.
        extra_gpus: GPUs given beyond each job's first allocation this round.
        no_room: job rounds so far in which a job's chosen count would have found no room on a
            node, so that it kept what it held or got a count that does.
    Cost: O(n g) over the pool's jobs n and candidate GPU counts g (marginal gains, greedy), plus a
        sort, O(n log n). Event skipping (after a round whose plan changed nothing): between
        events only running jobs' remaining work moves, linearly, so the order holds until two
        neighbours' remaining times could meet, and the greedy's choices, each a comparison of
        gains affine in time, until the first comes within a relative margin of 1e-9 (worked out
        from this round's gains and the next's, O(s n g) over its s steps); a round before the
        earlier of the two. Not declared while a job is given more than one GPU and not the
        count it holds (its room is worked out anew each round, `no_room` may grow), with
        reported losses (curves fitted anew), with a resize pause of a round or more, or for a
        greedy path of 32 steps or more (it seldom holds two rounds; checking costs a tick).
    See also: Srtf, Themis, Consolidated, LossTermination
    Paper: Optimus (EuroSys'18) §3-4; Blox (EuroSys'24) Table 7 and §4.2 (Figs 6-7).
    """

    state = ("_ahead", "_count", "_elastic", "_loss", "_speed", "_x")
    fixed = ("_counts", "_counts_list")

    threshold: float = attrs.field(default=0.001, validator=positive)
    # (three: a curve has three parameters; a sample buffer per job: bounded)
    samples: int = attrs.field(default=8, validator=[at_least(3), at_most(1000)])
    max_gpus: int | None = attrs.field(default=None, validator=positive)
    hysteresis: float = attrs.field(default=0.05, validator=[non_negative, at_most(0.5)])

    def start(self, ctx: RoundContext) -> None:
        m = self.samples
        self._x = np.zeros((0, m))
        self._loss = np.zeros((0, m))
        self._count = np.zeros(0, dtype=np.int64)
        counts = ctx.profile.frame["gpus"].unique().sort().to_list() if ctx.profile.frame.height else []
        self._counts = np.asarray(sorted(set(counts) | {1}), dtype=np.int64)
        self._counts_list = self._counts.tolist()
        self._speed = np.zeros((0, len(self._counts)))
        self._elastic = np.zeros(0, dtype=bool)
        self._ahead: Ahead | None = None  # (what the last tick decided, for quiet_until)
        self.counters.update(fitted=0, extra_gpus=0, no_room=0)

    # --- loss samples ---
    def _record(self, ctx: RoundContext, active: Active) -> None:
        n = len(ctx.jobs)
        if len(self._count) < n:
            grow = n - len(self._count)
            self._x = np.vstack([self._x, np.zeros((grow, self.samples))])
            self._loss = np.vstack([self._loss, np.zeros((grow, self.samples))])
            self._count = np.concatenate([self._count, np.zeros(grow, dtype=np.int64)])
        if not ctx.jobs.has_column("loss"):
            return
        rows = active.rows
        loss, done = active.column("loss"), active.done
        last = self._x[rows, (self._count[rows] - 1) % self.samples]
        new = ~np.isnan(loss) & ((self._count[rows] == 0) | (done > last))
        rows, loss, done = rows[new], loss[new], done[new]
        slot = self._count[rows] % self.samples
        self._x[rows, slot] = done
        self._loss[rows, slot] = loss
        self._count[rows] += 1

    def remaining_iterations(self, ctx: RoundContext, active: Active) -> np.ndarray:
        """Expected iterations left: to the fitted convergence point, at most the declared work."""
        declared = active.work - active.done
        rows = active.rows
        have = np.minimum(self._count[rows], self.samples)
        fit = np.flatnonzero(have >= 3)
        self.counters["fitted"] = len(fit)
        if not len(fit):
            return declared
        sub = rows[fit]
        valid = np.arange(self.samples)[None, :] < have[fit][:, None]
        b0, b1, b2 = fit_loss_curves(self._x[sub], self._loss[sub], valid)
        with np.errstate(divide="ignore", invalid="ignore"):
            converged_at = (1.0 / (self.threshold * b2) - b1) / b0
        expected = np.clip(converged_at - active.done[fit], 0.0, declared[fit])
        out = declared.copy()
        out[fit] = np.where(np.isnan(expected), declared[fit], expected)
        return out

    # --- allocation ---
    def _speeds(self, ctx: RoundContext, active: Active) -> tuple[np.ndarray, np.ndarray]:
        """(jobs, candidate counts) iterations/s on the reference GPU type, and whether each job
        can change its GPU count (its model is profiled). Computed once per job."""
        counts = self._counts
        n = len(ctx.jobs)
        if len(self._speed) < n:
            grow = n - len(self._speed)
            self._speed = np.vstack([self._speed, np.full((grow, len(counts)), np.nan)])
            self._elastic = np.concatenate([self._elastic, np.zeros(grow, dtype=bool)])
        rows = active.rows
        new = np.flatnonzero(np.isnan(self._speed[rows, 0]))
        if len(new):
            self._speed[rows[new]] = self._job_speeds(ctx, active.select(new))
            self._elastic[rows[new]] = active.column("has_model")[new]
        return self._speed[rows], self._elastic[rows]

    def _job_speeds(self, ctx: RoundContext, jobs: Active) -> np.ndarray:
        counts = self._counts
        speed = np.zeros((len(jobs), len(counts)))
        per_node = ctx.cluster.max_gpus_per_node
        profiled = jobs.column("has_model")
        idx = np.flatnonzero(profiled)
        if len(idx):
            models, batch = jobs.column("model")[idx], jobs.column("batch_size")[idx]
            for k, c in enumerate(counts.tolist()):
                speed[idx, k] = ctx.profile.rates(models, batch, ctx.reference_gpu, c, c <= per_node)
            _drop_counts_off_types(ctx, jobs, idx, speed, counts)
        # A job known by its duration runs only on the GPUs it asked for.
        rigid = np.flatnonzero(~profiled)
        at = np.minimum(np.searchsorted(counts, jobs.gpus[rigid]), len(counts) - 1)
        known = counts[at] == jobs.gpus[rigid]
        speed[rigid[known], at[known]] = jobs.reference_rate[rigid[known]]
        return speed

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        self._record(ctx, active)
        n = len(active)
        self._ahead = None
        if n == 0:
            self.counters.update(fitted=0, extra_gpus=0)  # (this round's: none)
            self._ahead = Ahead.empty()
            return Ranking.empty()
        remaining = self.remaining_iterations(ctx, active)
        order = np.lexsort((np.arange(n), remaining / active.reference_rate))
        speed, elastic = self._speeds(ctx, active)
        counts = self._counts
        cap = np.full(n, self.max_gpus) if self.max_gpus else np.maximum(active.gpus, ctx.cluster.max_gpus_per_node)
        usable = (speed > 0) & (counts[None, :] <= cap[:, None])
        elastic = elastic & usable.any(axis=1)
        first = np.argmax(usable, axis=1)
        base = np.where(elastic, counts[first], active.gpus)

        # One allocation each, in order; a job that does not fit is skipped for the ones behind.
        free = ctx.cluster.n_gpus
        given = np.zeros(n, dtype=bool)
        cumulative = np.cumsum(base[order])
        if cumulative[-1] <= free:
            given[:] = True
            free -= int(cumulative[-1])
        else:
            for i in order.tolist():
                if base[i] <= free:
                    given[i] = True
                    free -= int(base[i])
                    if free == 0:
                        break
        alloc = np.where(given, base, 0)
        extra = 0
        grow = np.flatnonzero(given & elastic)
        ahead = Ahead(active, remaining, order, grow, free, speed, usable, first)
        if free > 0 and len(grow):
            keep = self._keep(ctx, active.held[grow], speed[grow], usable[grow], remaining[grow])
            extra = self._spread_extra(
                speed[grow], usable[grow], first[grow], remaining[grow], alloc, grow, free, keep, trace=ahead.trace
            )
        moving = given & (alloc != active.held) & (alloc > 1)
        # (Moving jobs: their room is worked out anew each round; losses: curves fitted anew.)
        self._ahead = None if np.count_nonzero(moving) or ctx.jobs.has_column("loss") else ahead
        types = None  # the GPU type of each job, when the placer is to be told them
        if np.count_nonzero(moving):  # (jobs of one GPU, each, find room wherever GPUs are left)
            types = self._placeable(ctx, active, alloc, given, base, order, speed, usable, elastic, remaining)
            extra = int(np.maximum(alloc - base, 0)[given & elastic].sum())
        self.counters["extra_gpus"] = extra
        rank = np.concatenate([order[given[order]], order[~given[order]]])
        want = np.where(given, alloc, base)[rank]
        gpu_type = None if types is None else types[rank]
        return Ranking(active.rows[rank], want, gpu_type=gpu_type, consolidate=np.ones(n, dtype=bool), backfill=True)

    def quiet_until(self, ctx: RoundContext) -> float | None:
        return None if self._ahead is None else self._ahead.quiet_until(ctx, self)

    def _placeable(self, ctx, active, alloc, given, base, order, speed, usable, elastic, remaining) -> np.ndarray | None:
        """Make the counts ones a consolidating placer can hold (`Layout.fit`, in
        elements/policies/optimus_room.py); the GPUs this leaves go first to waiting jobs not
        given any, in order, then as extra GPUs, each step to a count that finds room, and the
        counts are checked again. Updates `alloc` and `given`; returns each job's GPU type when
        the placer must be told them (`Layout.pinned`), else None."""
        counts = self._counts
        layout = Layout(ctx, active, order)
        held = active.held
        options = np.where(elastic[:, None], usable, counts[None, :] == base[:, None])
        for _ in range(3):
            if not layout.fit(alloc, given, held, base, options, counts):
                break  # every count found room: nothing was cut
            free = layout.total - int(alloc[given].sum())
            added = 0
            for i in order[~given[order]].tolist():
                if 0 < base[i] <= free and layout.take(i, 0, int(base[i])):
                    alloc[i], given[i], free, added = base[i], True, free - int(base[i]), added + 1
            grow = np.flatnonzero(given & elastic)
            level = np.minimum(np.searchsorted(counts, alloc[grow]), len(counts) - 1)
            grow, level = grow[counts[level] == alloc[grow]], level[counts[level] == alloc[grow]]
            if free > 0 and len(grow):
                keep = self._keep(ctx, held[grow], speed[grow], usable[grow], remaining[grow])
                reach = usable[grow] & layout.reachable(grow, alloc[grow], counts)
                added += self._spread_extra(speed[grow], reach, level, remaining[grow], alloc, grow, free, keep, layout.take)
            if not added:
                break
        else:
            layout.fit(alloc, given, held, base, options, counts)
        self.counters["no_room"] += int(np.count_nonzero(layout.no_room))
        return layout.pinned(given)

    def _keep(self, ctx: RoundContext, held, speed, usable, remaining) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What changing each running job's GPU count costs, as (count index it holds, or -1;
        restart seconds; restart seconds plus the hysteresis). A change suspends the job and
        launches it again: the graph's checkpoint (and checkpoint per GPU held) and restore."""
        counts = self._counts
        at = np.minimum(np.searchsorted(counts, held), len(counts) - 1)
        holds = (held > 0) & (counts[at] == held) & usable[np.arange(len(held)), at]
        hold = np.where(holds, at, -1)
        s = ctx.settings
        restart = float(s.checkpoint) + float(s.restore) + float(s.checkpoint_per_gpu) * held
        with np.errstate(divide="ignore", invalid="ignore"):
            left = remaining / speed[np.arange(len(held)), at]  # seconds left at the count held
        margin = np.where(holds, restart + self.hysteresis * np.nan_to_num(left), 0.0)
        return hold, np.where(holds, restart, 0.0), margin

    def _spread_extra(self, speed, usable, level, remaining, alloc, grow, free, keep, room=None, trace=None) -> int:
        """Give `free` GPUs, a step at a time, to the job (of `grow`) and larger GPU count whose
        remaining time drops the most per extra GPU, a running job's change of count charged
        its restart and the hysteresis (`keep`, from `_keep`); only steps that save more time
        than the restart costs are taken, and with `room` (`Layout.take`) only steps to a
        count that finds room. Updates `alloc`; returns the GPUs given (`trace`: each step's job
        index, count index and GPUs, appended)."""
        counts = self._counts
        k = len(counts)
        gain, real = gains(counts, speed, usable, level, remaining, keep)
        given = 0
        while free > 0:
            step = counts[None, :] - counts[level][:, None]
            masked = np.where((step <= free) & (real > 0), gain, -np.inf)
            best = int(np.argmax(masked))
            j, to = divmod(best, k)
            if not masked[j, to] > -np.inf:
                break
            added = int(step[j, to])
            if room is not None and not room(int(grow[j]), int(alloc[grow[j]]), int(counts[to])):
                gain[j, to] = -np.inf
                continue
            if trace is not None:
                trace.append((j, to, added))
            alloc[grow[j]] += added
            level[j] = to
            free -= added
            given += added
            gain[j], real[j] = _row_gains(self._counts_list, speed[j], usable[j], to, float(remaining[j]), keep, j)
        return given


def _drop_counts_off_types(ctx: RoundContext, jobs: Active, idx: np.ndarray, speed: np.ndarray, counts: np.ndarray) -> None:
    """Zero the speed (jobs `idx` of `jobs`, by count) at each count some GPU type the job may
    be placed on (one it runs on at the count it asked for) cannot run it at: a placer picks a
    type by the job's asked count, so a count only the reference type runs would make a plan
    that cannot run (ResNet-50 at batch size 128 runs on a K80 only on one GPU)."""
    per_node = ctx.cluster.max_gpus_per_node
    rates = np.asarray(ctx.jobs.type_rates[jobs.rows[idx]])
    models, batch = jobs.column("model")[idx], jobs.column("batch_size")[idx]
    reference = ctx.profile.canonical_gpu_type(ctx.reference_gpu)
    for t, name in enumerate(ctx.cluster.gpu_types):
        on = np.flatnonzero(rates[:, t] > 0)
        if not len(on) or ctx.profile.canonical_gpu_type(name) == reference:
            continue  # (the reference type's rates are the speeds themselves)
        for k, c in enumerate(counts.tolist()):
            runs = ctx.profile.rates(models[on], batch[on], name, c, c <= per_node) > 0
            speed[idx[on[~runs]], k] = 0.0
