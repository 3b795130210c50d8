"""Folding the backend's events into the world: arrivals, running jobs' progress, completions,
failures, jobs that lost their GPUs without a plan, GPUs going offline or online, and the
metrics jobs report. The engine folds them in at the start of each round (docs/architecture.md,
"One round"); elements never call these.

World binds these functions as its methods (runtime/world.py), so that the engine's calls,
every round of a run, cost no more than methods of its own.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime import rowsets
from roundhouse.runtime.launch_rates import NO_FLAGS, flags
from roundhouse.runtime.repeated_sums import add_repeatedly
from roundhouse.runtime.space_sharing import count_shared
from roundhouse.traces.jobs import FINISHED, OWN_COLUMNS, PENDING, RUNNING, SPEC_COLUMNS, JobBatch

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


# --- arrivals ---
def add_jobs(world: World, batch: JobBatch) -> np.ndarray:
    """Add a batch of job specs to the job table; returns their rows."""
    rows = world.jobs.append(batch)
    rowsets.reserve(len(world.jobs))
    world.unfinished += len(rows)
    if len(rows):
        # A batch that is a slice of a larger one (`batch.whole`) is looked at through the
        # whole, whose earliest arrival and flags are worked out once and kept in its memo.
        # Indexing and counting flags are cheaper than numpy's reductions at these sizes.
        whole = batch.whole
        if whole is None or not least_arrival(whole) >= world.first_arrival_s:  # else none of it comes sooner
            arrival = batch.columns["arrival_s"]
            world.first_arrival_s = min(world.first_arrival_s, float(arrival[arrival.argmin()]))
        if whole is not None and "flags" not in whole.memo:
            whole.memo["flags"] = flags(whole.columns, *NO_FLAGS)
        if whole is None or whole.memo["flags"] != NO_FLAGS:
            # Each flag, once set, stays set, so its column need not be looked at again; and a
            # slice of a whole none of whose jobs sets a flag sets none.
            world._any_model, world._any_slowdown, world._any_comm = flags(
                batch.columns, world._any_model, world._any_slowdown, world._any_comm
            )
    return rows


def least_arrival(whole: JobBatch) -> float:
    """The earliest arrival of a whole batch, worked out once and kept in its memo (NaN if an
    arrival is NaN; infinity for an empty batch)."""
    least = whole.memo.get("least_arrival")
    if least is None:
        arrival = whole.columns["arrival_s"]
        least = whole.memo["least_arrival"] = float(arrival[arrival.argmin()]) if len(arrival) else math.inf
    return least  # type: ignore[return-value]


# --- progress ---
def apply_progress(world: World, rows, done, service, run_s, rounds: int = 1, block: np.ndarray | None = None) -> None:
    """Running jobs' progress over a round (over `rounds` rounds alike: the same additions,
    repeated, so that the totals match round by round to the last bit). `block`: the four
    steps in one array, compute seconds included (backends/base.py's Progress)."""
    if len(rows) == 0:
        return
    world.progress_log.note(rows)
    cols = world._cols
    count_shared(world, rows, service if block is None else block[1], rounds)  # does nothing until a plan launches a pair
    if block is None:
        # Rates are fixed per launch, so each round's work over the launch's compute rate adds
        # up to the job's compute time. A compute rate of 0 only marks a job that never ran.
        compute_s = compute_seconds(done, cols["compute_rate"][rows])
        add_progress(cols, rows, (done, service, run_s, compute_s), rounds)
    else:
        add_progress(cols, rows, block, rounds)
    if "loss_speed" in cols:  # simulated loss curves (live jobs report their own loss)
        update_loss(cols, rows)


def update_loss(cols: dict[str, np.ndarray], rows: np.ndarray) -> None:
    """The live `loss` of jobs with a loss curve, from their progress (traces/losscurves.py)."""
    speed = cols["loss_speed"][rows]
    rows = rows[~np.isnan(speed)]
    if len(rows):
        from roundhouse.traces.losscurves import loss_at

        fraction = cols["done"][rows] / cols["work"][rows]
        cols["loss"][rows] = loss_at(cols["loss_start"][rows], cols["loss_final"][rows], cols["loss_speed"][rows], fraction)


_PROGRESS = ("done", "service", "run_s", "compute_s")


def compute_seconds(done: np.ndarray, compute_rate: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Seconds of compute that `done` work took at these compute rates (0 where a rate is 0)."""
    ran = compute_rate > 0
    if np.count_nonzero(ran) == len(ran):  # as running jobs' rates are: a plain division is cheaper than a masked one
        return np.divide(done, compute_rate, out=out)
    if out is None:
        out = np.zeros(len(done))
    else:
        out.fill(0.0)
    return np.divide(done, compute_rate, out=out, where=ran)


def add_progress(cols: dict[str, np.ndarray], rows: np.ndarray, steps, rounds: int) -> None:
    """Add each step (done, service, run_s, compute_s) to its column at `rows`, `rounds` times
    over (repeated additions, not one of `rounds` times the step: the same bits as round by
    round). Over several rounds, one array of the four steps is added in one pass per round."""
    if rounds == 1:  # a gather, an addition and a scatter per column: cheaper than the block's copies
        done, service, run_s, compute_s = steps
        cols["done"][rows] += done
        cols["service"][rows] += service
        cols["run_s"][rows] += run_s
        cols["compute_s"][rows] += compute_s
        return
    total = np.empty((4, len(rows)))
    for i, name in enumerate(_PROGRESS):
        cols[name].take(rows, out=total[i])
    add_repeatedly(total, steps if isinstance(steps, np.ndarray) else np.stack(steps), rounds)
    for i, name in enumerate(_PROGRESS):
        cols[name][rows] = total[i]


# --- completions and failures ---
def apply_finished(world: World, rows: np.ndarray, times: np.ndarray) -> None:
    """Jobs that completed their work."""
    world._leave(rows, times)
    world._cols["done"][rows] = world._cols["work"][rows]


def apply_failed(world: World, rows: np.ndarray, times: np.ndarray) -> None:
    """Jobs that failed for good leave the system without completing their work."""
    keep = world._cols["status"][rows] != FINISHED
    rows, times = rows[keep], times[keep]
    world._leave(rows, times)
    world._cols["failed"][rows] = True


# --- faults and node changes (live backends) ---
def set_online(world: World, online: np.ndarray) -> None:
    """Which GPUs can run jobs from now on."""
    world.online[:] = np.asarray(online, dtype=bool)
    world.all_online = bool(world.online.all())


def apply_requeued(world: World, rows: np.ndarray) -> None:
    """Jobs that lost their GPUs without a plan wait again (rows not running are left)."""
    cols = world._cols
    rows = rows[cols["status"][rows] == RUNNING] if len(rows) else rows
    if not len(rows):
        return
    cols["status"][rows] = PENDING
    cols["interruptions"][rows] += 1
    world._release(rows)


# --- what jobs report ---
def apply_metrics(world: World, metrics) -> None:
    """Store the latest metrics jobs reported (loss, iteration time, ...) as float columns
    of the job table, for policies to read (`active.column("loss")`)."""
    for row, values in metrics.items():
        for name, value in values.items():
            if name in SPEC_COLUMNS or name in OWN_COLUMNS:
                continue  # the protocol refuses these names; never let a job overwrite its books
            column = world.jobs.float_column(name)
            if column.dtype.kind == "f":  # not a trace's own text column of that name
                column[row] = value
