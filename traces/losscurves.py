"""Per-job loss curves, so that loss-driven policies (Optimus, loss-based termination) have
something real to read in simulation.

A trace may give each job three optional columns (all or none; empty cells: no curve):

- `loss_start`: the loss before training (> `loss_final`);
- `loss_final`: the value the loss converges to (> 0), which the job's owner declares as its
  target (Blox §5.3: termination needs users to know the loss they are after);
- `loss_speed`: how fast it gets there.

The loss after a fraction p of the job's work is Optimus' curve (Peng et al., EuroSys'18, §3.1,
l(k) = 1/(b0 k + b1) + b2) written with those three numbers:

    loss(p) = loss_final + (loss_start - loss_final) / (1 + loss_speed * p)

The simulator keeps each job's current loss in a live column, `loss`, updated as the job
progresses (the live backend will fill it from the metrics jobs report).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from roundhouse.errors import TraceError

LOSS_COLUMNS = ("loss_start", "loss_final", "loss_speed")


def loss_at(start, final, speed, fraction):
    """The loss after `fraction` of the work (arrays or numbers)."""
    return final + (start - final) / (1.0 + speed * fraction)


def relative_gap(start, final, speed, fraction):
    """(loss - loss_final) / loss_final after `fraction` of the work."""
    return (start - final) / (final * (1.0 + speed * fraction))


def speed_for(start, final, threshold, fraction):
    """The speed at which the loss comes within `threshold` (relative) of its final value after
    exactly `fraction` of the work."""
    return ((start - final) / (final * threshold) - 1.0) / fraction


def fraction_to_converge(start, final, speed, threshold):
    """The fraction of the work after which the loss is within `threshold` of its final value
    (may exceed 1: the job's work ends first)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(((start - final) / (final * threshold) - 1.0) / speed, 0.0)


def initial_loss(trace: pl.DataFrame, origin: str, rows: np.ndarray | None = None) -> np.ndarray | None:
    """The jobs' loss before they start (NaN: no curve), or None if the trace has no curves.
    Checks the curve columns: all three or none, all finite, final > 0, start > final, speed >= 0. A
    problem names the row's line in `origin` (`rows[i]`), or the job once rows are not the file's."""
    present = [c for c in LOSS_COLUMNS if c in trace.columns]
    if not present:
        return None
    if len(present) < len(LOSS_COLUMNS):
        missing = ", ".join(c for c in LOSS_COLUMNS if c not in present)
        raise TraceError(origin, f"has {', '.join(present)} but not {missing}: a loss curve needs all three columns")
    if "loss" in trace.columns:  # the simulator derives `loss` from the curve; two sources would disagree
        raise TraceError(
            origin, "a trace with loss curves (loss_start, loss_final, loss_speed) cannot also give it", column="loss"
        )
    # (traces/schema.py has made them numbers; a frame built in code may hold other types)
    start, final, speed = (trace[c].cast(pl.Float64, strict=False).fill_null(np.nan).to_numpy() for c in LOSS_COLUMNS)
    given = ~np.isnan(start) | ~np.isnan(final) | ~np.isnan(speed)
    ids = trace["job_id"].to_numpy()
    checks = (
        (
            np.isnan(start) | np.isnan(final) | np.isnan(speed),
            "loss_start",
            "a loss curve needs loss_start, loss_final and loss_speed",
        ),
        (~(final > 0) | ~np.isfinite(final), "loss_final", "must be a finite number greater than 0"),
        (~np.isfinite(start), "loss_start", "must be a finite number"),
        (~(start > final), "loss_start", "must be greater than loss_final"),
        (~(speed >= 0) | ~np.isfinite(speed), "loss_speed", "must be a finite number of 0 or more"),
    )
    for wrong, column, sentence in checks:
        bad = given & wrong
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            if rows is not None:
                raise TraceError(origin, sentence, row=int(rows[i]), column=column)
            raise TraceError(origin, f"job {ids[i]}: {sentence}", column=column)
    return np.where(given, start, np.nan)
