"""Water filling (§4.3, Appendix A.1): weighted max-min fairness that keeps raising every job
that can still gain, until each is bottlenecked.

Each level solves an LP: raise the normalized throughput of every job still in play at rates
proportional to its weight, as far as possible, without lowering anyone's throughput from the
level before. A MILP then finds the largest set of jobs that could all still gain (a binary per
job: 1 if its throughput can exceed the level's by a small factor); the others are bottlenecked
and frozen at their level, and their weight is handed on as the caller's policy says (FIFO: to
the next job of the entity; fairness: shared by the rest). Both programs are built once and
only their bounds and coefficients change from level to level.
"""

from __future__ import annotations

import attrs
import numpy as np

from roundhouse.elements.policies.gavel.formulation import relative_weights
from roundhouse.elements.policies.gavel.lp import LinearProgram, with_column

EPSILON = 1e-5  # a job "gains" when its throughput can pass its level by this much (Gavel's value)
SLACK = 1.0001
# A class's throughput on a column below this fraction of its best column's counts as none in
# the programs: it adds nothing a level could see, and coefficients that far apart in one row
# (1e-18 of the largest, say, for a job a billion times faster on one type than another) lead
# GLOP's presolve to call the bounded level LP unbounded.
NEGLIGIBLE = 1e-9


@attrs.frozen
class WaterFilling:
    values: np.ndarray | None  # the last level's solution (None if the first LP failed)
    levels: list  # normalized throughput of each class after each level
    frozen_at: np.ndarray  # level at which each class was frozen (-1: never in play)
    milp_stopped: int = 0  # bottleneck MILPs stopped at their node limit (their best solution used)
    failed: str | None = None  # the LP solver's status when the first level's LP found no allocation


def water_fill(
    form, scale: np.ndarray, weights_for, lp_solver: str = "GLOP", milp_solver: str = "SCIP", screen_first: bool = True
) -> WaterFilling:
    """Water-fill over `form`'s classes. `scale[c]` turns a member's throughput into its
    normalized throughput (e.g. 1 / its equal-share throughput); `weights_for(frozen)` gives each
    class's per-member weight at a level, given which classes are frozen (0: not raised).

    Before each bottleneck MILP, two LPs screen the classes (`screen_first`): classes an LP shows
    can all gain together are not bottlenecked, and when no other class can gain even alone, the
    rest are; the MILP is solved only when that leaves a class undecided. The answer is the
    MILP's either way; the screens only spare solving it (it costs SCIP tens of milliseconds)."""
    c = form.c
    runnable = form.runnable
    sf = form.sf

    lp = LinearProgram(warm=True, presolve=True)  # its z coefficients change at every level
    form.add_variables(lp)
    z = int(lp.variables(1, lb=0.0, obj=1.0)[0])  # (raising nobody is always feasible)
    norm = _without_negligible(form.throughput(scale))
    level_rows = lp.constraints(with_column(norm, z, -1.0), lb=-np.inf)
    floor_rows = lp.constraints(norm, lb=0.0)
    form.validity(lp)
    lp.build()

    # Big M per class: above any normalized throughput the class could reach.
    big_m = 2.0 * np.asarray(abs(norm).sum(axis=1)).ravel() + 1.0
    milp = None  # built the first time it is needed

    def bottleneck_milp():
        program = LinearProgram(warm=True)
        form.add_variables(program)
        binaries = program.variables(c, lb=0.0, ub=0.0, integer=True)
        indicators = program.constraints(_with_columns(norm, binaries, -big_m), lb=-np.inf)
        floors = program.constraints(norm, lb=0.0)
        form.validity(program)
        program.build()
        return program, binaries, indicators, floors

    # A screening LP, before each MILP: maximize the (capped) gains of all classes at once. The
    # classes it raises above their threshold are witnessed able to gain together, so their
    # binaries are fixed to 1 and the MILP decides only the rest.
    screen = LinearProgram(warm=True)
    form.add_variables(screen)
    gain = screen.variables(c, lb=0.0, ub=0.0)
    gain_rows = screen.constraints(_with_columns(norm, gain, -np.ones(c)), lb=-np.inf)
    screen_floor_rows = screen.constraints(norm, lb=0.0)
    form.validity(screen)
    screen.build()

    so_far = np.zeros(c)
    final = np.zeros(c)
    frozen = np.zeros(c, dtype=bool)
    frozen_at = np.full(c, -1)
    levels = []
    values = None
    milp_stopped = 0
    failed = None
    for level in range(c + 1):
        weights = np.asarray(weights_for(frozen.copy()), dtype=np.float64)
        active = (weights > 0) & ~frozen & runnable
        if not active.any():
            break
        rate = np.zeros(c)
        rate[active] = relative_weights(weights[active] / sf[active])  # (a level's rates are relative)
        lp.set_coefficients(level_rows, z, -rate)
        lp.set_row_bounds(level_rows, lb=np.where(active, so_far, -np.inf))
        lp.set_row_bounds(floor_rows, lb=np.where(frozen, final, so_far))
        got = lp.solve(lp_solver)
        if not got.optimal:
            # (raising nobody is feasible, so only trouble in the solver ends a level here: after
            # the first, the levels before stand; at the first, there is no allocation at all)
            failed = got.status if values is None else None
            break
        values = got.values
        so_far = so_far + np.where(active, max(got.values[z], 0.0) * rate, 0.0)
        levels.append(so_far.copy())

        # Which jobs could still all gain together? The rest are bottlenecked.
        lower = np.where(frozen, final, so_far)
        target = SLACK * so_far
        # Gains are measured above each class's level; the MILP's threshold is `needed` above it.
        needed = target - so_far + EPSILON
        cap = 2.0 * needed + 1e-3 * so_far
        screen.set_row_bounds(screen_floor_rows, lb=lower)
        screen.set_row_bounds(gain_rows, lb=np.where(active, so_far, -np.inf))
        screen.set_var_bounds(gain, ub=np.where(active, cap, 0.0))
        screen.set_objective(gain, np.where(active, form.counts, 0.0))
        seen = screen.solve(lp_solver) if screen_first else None
        witnessed = active & (seen.values[gain] >= needed) if seen is not None and seen.optimal else np.zeros(c, dtype=bool)
        undecided = active & ~witnessed
        if undecided.any() and screen_first:
            # Can any undecided class pass its threshold at all, even if the witnessed ones do
            # not gain? If not, each is bottlenecked and the MILP's answer is known unsolved.
            screen.set_var_bounds(gain, ub=np.where(undecided, cap, 0.0))
            screen.set_objective(gain, np.where(undecided, 1.0, 0.0))
            alone = screen.solve(lp_solver)
            if alone.optimal and not (alone.values[gain][undecided] >= needed[undecided] - EPSILON / 2).any():
                undecided[:] = False
        if undecided.any():
            if milp is None:
                milp, gains, indicator_rows, milp_floor_rows = bottleneck_milp()
            milp.set_row_bounds(milp_floor_rows, lb=lower)
            milp.set_row_bounds(
                indicator_rows,
                lb=np.where(active, target - big_m, -np.inf),
                ub=np.where(active, target - EPSILON, np.inf),
            )
            milp.set_var_bounds(gains, lb=np.where(witnessed, 1.0, 0.0), ub=np.where(active, 1.0, 0.0))
            milp.set_objective(gains, np.where(active, form.counts, 0.0))
            found = milp.solve(milp_solver)
            # Stopped at its node limit (lp.py's _MILP_NODES branch-and-bound nodes, a count of
            # work, not of seconds), the best set found can still gain together: the others are
            # frozen a level early (a less fair but valid allocation), and it is counted.
            if not found.optimal and found.status == "FEASIBLE":
                milp_stopped += 1
            can_gain = found.values[gains] > 0.5 if found.status in ("OPTIMAL", "FEASIBLE") else witnessed
        else:
            can_gain = witnessed
        newly = active & ~can_gain
        if not newly.any():
            break
        frozen |= newly
        final[newly] = so_far[newly]
        frozen_at[newly] = level
    return WaterFilling(values, levels, frozen_at, milp_stopped, failed)


def _without_negligible(matrix):
    """`matrix` (CSR, nonnegative) without the entries below NEGLIGIBLE times their row's largest."""
    matrix = matrix.tocsr(copy=True)
    if matrix.nnz:
        top = np.maximum.reduceat(matrix.data, matrix.indptr[:-1][np.diff(matrix.indptr) > 0])
        per_entry = np.repeat(top, np.diff(matrix.indptr)[np.diff(matrix.indptr) > 0])
        matrix.data[matrix.data < NEGLIGIBLE * per_entry] = 0.0
        matrix.eliminate_zeros()
    return matrix


def _with_columns(matrix, variables: np.ndarray, coefficients: np.ndarray):
    """`matrix` with coefficients[i] in row i's column variables[i]."""
    from roundhouse.elements.policies.gavel.libraries import sp

    m = sp.coo_matrix(matrix)
    n = m.shape[0]
    rows = np.concatenate([m.row, np.arange(n)])
    cols = np.concatenate([m.col, variables])
    vals = np.concatenate([m.data, coefficients])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, max(m.shape[1], int(variables.max()) + 1)))
