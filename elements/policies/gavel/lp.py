"""Linear programs built in bulk and solved by OR-Tools.

A program is assembled from numpy arrays: variables in blocks (bounds and objective
coefficients as arrays) and constraints as sparse matrices over all variables, then handed to
OR-Tools' model builder in one call (`fill_model_from_sparse_data`), never one Python call per
coefficient. The built model is kept: a policy that solves a sequence of related programs (a
bisection, water filling) changes bounds or objective coefficients and solves again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.policies.gavel.libraries import mbh, sp

if TYPE_CHECKING:
    from ortools.linear_solver import pywraplp

INF = np.inf
# MPSolver drops rows with no finite bound when it loads a model, which would shift every row
# after them; in warm mode a row's missing bound is this instead (far beyond any activity here).
_FREE = 1e9
# Warm solves are bounded by counts of work, which are the same on every machine (a bound by
# the wall clock would make results depend on how busy the machine is). A warm LP re-solve that
# takes more simplex iterations than this per row and column has stalled (a degenerate program)
# and is solved again from scratch; a MILP stops at this many branch-and-bound nodes with its
# best solution. (The programs here take some hundreds of iterations and a few nodes.)
_ITERATIONS_PER_ROW_AND_COLUMN = 20
_WORK_FLOOR = 1000  # (iterations any program may take, however small)
_MILP_NODES = 10_000
# PDLP (first-order) stops at a tolerance, not at an exact vertex: tight ones, so that its
# allocations match GLOP's, bounded by a count of iterations, and quiet (its log would go to
# stdout). Row bounds beyond a tenth of _FREE are read as none: the warm mode's stand-ins for
# missing bounds, taken as finite, upset its rescaling and it stops with a numerical error.
_PDLP_PARAMETERS = (
    "verbosity_level: 0 num_threads: 1 "
    f"infinite_constraint_bound_threshold: {_FREE / 10:g} "
    "termination_criteria { simple_optimality_criteria { eps_optimal_absolute: 1e-9 eps_optimal_relative: 1e-9 } "
    "iteration_limit: 200000 }"
)
# Before it solves, PDLP checks the program's numbers and, for ones it finds extreme, writes a
# warning ("... performance may suffer") or a refusal ("The solver did not run because of
# invalid input") to stdout from C++. Nothing OR-Tools offers stops those lines: PDLP's logger
# is always on for them and writes to stdout when no callback is given, whatever its
# verbosity_level, MPSolver's SuppressOutput or the model builder's enable_output (and OR-Tools'
# MPModelRequest path for PDLP gives it no callback). So a program PDLP would speak about is
# solved by GLOP instead, silently: PDLP's limits are these (its CheckProblemStats), taken
# a little wider (no nonzero below _PDLP_TINY anywhere).
_PDLP_EXCESSIVE = 1e50  # (no nonzero above this)
_PDLP_TINY = 1e-50  # (no nonzero below this)
_PDLP_RANGE = 1e20  # (no more than this between the largest and the smallest nonzero of a kind)
# PDLP also writes to stdout while it solves, whatever its verbosity_level: a warning each time
# its adaptive step search needs more inner iterations than it allows ("WARNING: Inner
# iteration limit reached at iteration ..."), which happens on ordinary programs and does not
# stop it from reaching its tolerance. No parameter turns those lines off, so every PDLP solve
# runs with the process's stdout (file descriptor 1) pointed at the null device
# (`_stdout_silenced`).
# MPSolver's result codes, in words.
_STATUS_NAMES = {0: "OPTIMAL", 1: "FEASIBLE", 2: "INFEASIBLE", 3: "UNBOUNDED", 4: "ABNORMAL", 5: "MODEL_INVALID", 6: "NOT_SOLVED"}


@attrs.frozen
class RowBlock:
    """Constraint rows already in canonical CSR form (each row's column indices sorted, none
    repeated): the data, column indices and row pointers, without a SciPy matrix around them.
    A formulation whose rows it can lay out directly hands them over so (a solve stacks a few
    small blocks, and making each a SciPy matrix cost more than the rest of the assembly)."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray

    @property
    def nnz(self) -> int:
        return len(self.data)

    def tocsr(self, n_vars: int) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(len(self.indptr) - 1, n_vars))


@attrs.frozen
class Solution:
    optimal: bool
    status: str
    objective: float
    values: np.ndarray


class LinearProgram:
    """Variables and constraints collected as arrays, then built once into an OR-Tools model.

    With `warm=True` the built model is loaded once into a persistent solver (OR-Tools' MPSolver)
    and every later change goes to it, so that GLOP starts each re-solve from the previous
    basis: a sequence of related programs costs about a fifth of solving each from scratch.
    That needs GLOP's presolve off (it rebuilds the problem); a program whose coefficients
    change between solves keeps it on (`presolve=True`): warm starts after such changes can
    stall GLOP without it.
    """

    def __init__(self, warm: bool = False, presolve: bool = False) -> None:
        self.presolve = presolve
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._obj: list[np.ndarray] = []
        self._integer: list[np.ndarray] = []
        self._blocks: list[sp.spmatrix] = []
        self._row_lb: list[np.ndarray] = []
        self._row_ub: list[np.ndarray] = []
        self.n_vars = 0
        self.n_rows = 0
        self.maximize = True
        self.warm = warm
        self._model: mbh.ModelBuilderHelper | None = None
        self._solver: pywraplp.Solver | None = None  # the persistent MPSolver (warm mode), by solver name
        self._solver_name = ""

    # --- building ---
    def variables(self, n: int, lb=0.0, ub=INF, obj=0.0, integer: bool = False) -> np.ndarray:
        """Add `n` variables; returns their indices."""
        self._lb.append(np.broadcast_to(np.asarray(lb, dtype=np.float64), (n,)))
        self._ub.append(np.broadcast_to(np.asarray(ub, dtype=np.float64), (n,)))
        self._obj.append(np.broadcast_to(np.asarray(obj, dtype=np.float64), (n,)))
        self._integer.append(np.full(n, integer))
        start = self.n_vars
        self.n_vars += n
        return np.arange(start, start + n)

    def constraints(self, matrix, lb=-INF, ub=INF) -> np.ndarray:
        """Add rows `lb <= matrix @ variables <= ub` (matrix: scipy sparse or dense, with as many
        columns as there are variables so far, or fewer, or a `RowBlock`); returns the row indices."""
        if not isinstance(matrix, RowBlock):
            matrix = sp.csr_matrix(matrix)
        n = len(matrix.indptr) - 1
        self._blocks.append(matrix)
        self._row_lb.append(np.broadcast_to(np.asarray(lb, dtype=np.float64), (n,)))
        self._row_ub.append(np.broadcast_to(np.asarray(ub, dtype=np.float64), (n,)))
        start = self.n_rows
        self.n_rows += n
        return np.arange(start, start + n)

    def build(self) -> mbh.ModelBuilderHelper:
        matrix = _stacked(self._blocks, self.n_vars)
        model = mbh.ModelBuilderHelper()
        row_lb = np.concatenate(self._row_lb) if self._row_lb else np.zeros(0)
        row_ub = np.concatenate(self._row_ub) if self._row_ub else np.zeros(0)
        if self.warm:
            row_lb, row_ub = np.maximum(row_lb, -_FREE), np.minimum(row_ub, _FREE)
        self._row_lb, self._row_ub = [row_lb], [row_ub]
        model.fill_model_from_sparse_data(
            np.concatenate(self._lb) if self._lb else np.zeros(0),
            np.concatenate(self._ub) if self._ub else np.zeros(0),
            np.concatenate(self._obj) if self._obj else np.zeros(0),
            row_lb,
            row_ub,
            matrix.astype(np.float64),
        )
        integer = np.concatenate(self._integer) if self._integer else np.zeros(0, dtype=bool)
        for i in np.flatnonzero(integer).tolist():
            model.set_var_integrality(i, True)
        model.set_maximize(self.maximize)
        self._model = model
        # The bounds as they stand, so that a warm solver is sent only what changes.
        self._now_row_lb = np.concatenate(self._row_lb) if self._row_lb else np.zeros(0)
        self._now_row_ub = np.concatenate(self._row_ub) if self._row_ub else np.zeros(0)
        self._now_var_lb = np.concatenate(self._lb) if self._lb else np.zeros(0)
        self._now_var_ub = np.concatenate(self._ub) if self._ub else np.zeros(0)
        return model

    # --- changing a built model ---
    @property
    def model(self) -> mbh.ModelBuilderHelper:
        return self._model if self._model is not None else self.build()

    def set_row_bounds(self, rows: np.ndarray, lb=None, ub=None) -> None:
        if self.warm:
            lb = None if lb is None else np.maximum(lb, -_FREE)
            ub = None if ub is None else np.minimum(ub, _FREE)
        if self._solver is not None:
            for value, now, setter in ((lb, self._now_row_lb, "SetLb"), (ub, self._now_row_ub, "SetUb")):
                if value is None:
                    continue
                value = np.broadcast_to(np.asarray(value, dtype=np.float64), rows.shape)
                changed = np.flatnonzero(value != now[rows])  # only what changed goes to the solver
                for r, v in zip(rows[changed].tolist(), value[changed].tolist()):
                    getattr(self._rows[r], setter)(v)
                now[rows[changed]] = value[changed]
            return
        model = self.model
        if lb is not None:
            self._now_row_lb[rows] = lb
        if ub is not None:
            self._now_row_ub[rows] = ub
        lbs = None if lb is None else np.broadcast_to(lb, rows.shape).tolist()
        ubs = None if ub is None else np.broadcast_to(ub, rows.shape).tolist()
        for i, r in enumerate(rows.tolist()):
            if lbs is not None:
                model.set_constraint_lower_bound(r, lbs[i])
            if ubs is not None:
                model.set_constraint_upper_bound(r, ubs[i])

    def set_var_bounds(self, index: np.ndarray, lb=None, ub=None) -> None:
        if self._solver is not None:
            for value, now, setter in ((lb, self._now_var_lb, "SetLb"), (ub, self._now_var_ub, "SetUb")):
                if value is None:
                    continue
                value = np.broadcast_to(np.asarray(value, dtype=np.float64), index.shape)
                changed = np.flatnonzero(value != now[index])
                for i, v in zip(index[changed].tolist(), value[changed].tolist()):
                    getattr(self._vars[i], setter)(v)
                now[index[changed]] = value[changed]
            return
        model = self.model
        if lb is not None:
            self._now_var_lb[index] = lb
        if ub is not None:
            self._now_var_ub[index] = ub
        lbs = None if lb is None else np.broadcast_to(lb, index.shape).tolist()
        ubs = None if ub is None else np.broadcast_to(ub, index.shape).tolist()
        for i, v in enumerate(index.tolist()):
            if lbs is not None:
                model.set_var_lower_bound(v, lbs[i])
            if ubs is not None:
                model.set_var_upper_bound(v, ubs[i])

    def set_coefficients(self, rows: np.ndarray, var: int, coefficients) -> None:
        """Set the coefficient of variable `var` in each of `rows`."""
        values = np.broadcast_to(coefficients, rows.shape).astype(float).tolist()
        if self._solver is not None:
            column = self._vars[var]
            for r, v in zip(rows.tolist(), values):
                self._rows[r].SetCoefficient(column, v)
            return
        model = self.model
        for r, v in zip(rows.tolist(), values):
            model.set_constraint_coefficient(r, var, v)

    def set_objective(self, index: np.ndarray, coefficients) -> None:
        """Replace the objective: these coefficients on these variables, zero elsewhere."""
        values = np.broadcast_to(coefficients, index.shape).astype(float).tolist()
        if self._solver is not None:
            objective = self._solver.Objective()
            objective.Clear()
            for i, v in zip(index.tolist(), values):
                if v:
                    objective.SetCoefficient(self._vars[i], v)
            objective.SetOptimizationDirection(self.maximize)
            return
        model = self.model
        model.clear_objective()
        model.set_objective_coefficients(index.tolist(), values)
        model.set_maximize(self.maximize)

    # --- solving ---
    def solve(self, solver: str = "GLOP", time_limit_s: float | None = None) -> Solution:
        if self.warm:
            return self._solve_warm(solver, time_limit_s)
        model = self.model
        if solver == "PDLP" and _pdlp_would_speak(mbh.to_mpmodel_proto(model)):
            solver = "GLOP"
        engine = mbh.ModelSolverHelper(solver)
        if solver == "PDLP":
            engine.set_solver_specific_parameters(_PDLP_PARAMETERS)
        if time_limit_s is not None:
            engine.set_time_limit_in_seconds(time_limit_s)
        with _stdout_silenced() if solver == "PDLP" else contextlib.nullcontext():
            engine.solve(model)
        status = engine.status()
        optimal = status == mbh.SolveStatus.OPTIMAL
        values = engine.variable_values() if engine.has_solution() else np.full(self.n_vars, np.nan)
        objective = engine.objective_value() if engine.has_solution() else np.nan
        return Solution(optimal, status.name, float(objective), np.asarray(values))

    def _solve_warm(self, solver: str, time_limit_s: float | None) -> Solution:
        from ortools.linear_solver import linear_solver_pb2, pywraplp

        if self._solver is None:
            engine = pywraplp.Solver.CreateSolver(solver)
            if engine is None:
                raise RuntimeError(f"OR-Tools has no solver {solver!r}")
            problem = engine.LoadModelFromProto(mbh.to_mpmodel_proto(self.model))
            if problem:
                raise RuntimeError(f"OR-Tools could not load the program: {problem}")
            self._bound_work(engine, solver, preprocessing=self.presolve)
            self._solver, self._solver_name = engine, solver
            self._rows, self._vars = engine.constraints(), engine.variables()
        elif solver != self._solver_name:
            raise RuntimeError(f"this program is loaded into {self._solver_name}, not {solver}")
        if time_limit_s is not None:
            self._solver.SetTimeLimit(int(1000 * time_limit_s))
        if solver == "PDLP":
            current = linear_solver_pb2.MPModelProto()
            self._solver.ExportModelToProto(current)
            if _pdlp_would_speak(current):  # (GLOP solves this one, afresh: the PDLP solver stays)
                engine = pywraplp.Solver.CreateSolver("GLOP")
                engine.LoadModelFromProto(current)
                if time_limit_s is not None:
                    engine.SetTimeLimit(int(1000 * time_limit_s))
                return self._solution(engine, engine.Solve())
        with _stdout_silenced() if solver == "PDLP" else contextlib.nullcontext():
            status = self._solver.Solve()
        if solver == "GLOP" and status not in (
            pywraplp.Solver.OPTIMAL,
            pywraplp.Solver.INFEASIBLE,
            pywraplp.Solver.UNBOUNDED,
        ):
            # A warm start can stall on a degenerate program: solve the same program afresh, with
            # GLOP's presolve, in a new solver that later re-solves start from. (PDLP does not
            # start warm: it solves each program afresh already.)
            current = linear_solver_pb2.MPModelProto()
            self._solver.ExportModelToProto(current)
            engine = pywraplp.Solver.CreateSolver(solver)
            engine.LoadModelFromProto(current)
            self._solver, self._rows, self._vars = engine, engine.constraints(), engine.variables()
            status = self._solver.Solve()  # (unbounded: from scratch, it does not stall)
            self._bound_work(engine, solver, preprocessing=True)  # (the re-solves that start from it)
        return self._solution(self._solver, status)

    def _solution(self, engine, status: int) -> Solution:
        """What MPSolver `engine` found, its Solve() having returned `status`."""
        from ortools.linear_solver import linear_solver_pb2, pywraplp

        response = linear_solver_pb2.MPSolutionResponse()
        engine.FillSolutionResponseProto(response)
        has = status in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE) and len(response.variable_value) == self.n_vars
        values = np.asarray(response.variable_value) if has else np.full(self.n_vars, np.nan)
        objective = engine.Objective().Value() if has else np.nan
        name = _STATUS_NAMES.get(status, f"status {status}")
        return Solution(status == pywraplp.Solver.OPTIMAL, name, float(objective), values)

    def _bound_work(self, engine, solver: str, preprocessing: bool) -> None:
        """GLOP's iterations or SCIP's nodes per solve, PDLP's tolerances and iterations (CBC
        takes no such bound here)."""
        if solver == "GLOP":
            iterations = _ITERATIONS_PER_ROW_AND_COLUMN * (self.n_rows + self.n_vars) + _WORK_FLOOR
            engine.SetSolverSpecificParametersAsString(
                f"max_number_of_iterations: {iterations}" + ("" if preprocessing else " use_preprocessing: false")
            )
        elif solver == "PDLP":
            engine.SetSolverSpecificParametersAsString(_PDLP_PARAMETERS)
        elif solver == "SCIP":
            engine.SetSolverSpecificParametersAsString(f"limits/totalnodes = {_MILP_NODES}\n")


@contextlib.contextmanager
def _stdout_silenced():
    """Meanwhile, whatever C++ code writes to stdout (file descriptor 1) goes to the null
    device; Python's own stdout is flushed first, so nothing of it is lost. Without a file
    descriptor 1 to redirect, nothing is changed."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
        finally:
            os.close(null)
        try:
            yield
        finally:
            _flush_c_stdout()  # (lines still in the C library's buffer go to the null device too)
            os.dup2(saved, 1)
    finally:
        os.close(saved)


def _flush_c_stdout() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


def _pdlp_would_speak(proto) -> bool:
    """Whether PDLP would write a warning or a refusal about this program's numbers (an
    MPModelProto): a nonzero coefficient, bound or bound gap beyond _PDLP_EXCESSIVE or below
    _PDLP_TINY, or the largest of a kind more than _PDLP_RANGE times the smallest. Constraint
    bounds at or beyond its infinite_constraint_bound_threshold count as none, as it reads them."""
    threshold = _FREE / 10
    variables = proto.variable
    lb = np.fromiter((v.lower_bound for v in variables), np.float64, len(variables))
    ub = np.fromiter((v.upper_bound for v in variables), np.float64, len(variables))
    objective = np.fromiter((v.objective_coefficient for v in variables), np.float64, len(variables))
    rows = proto.constraint
    row_lb = np.fromiter((c.lower_bound for c in rows), np.float64, len(rows))
    row_ub = np.fromiter((c.upper_bound for c in rows), np.float64, len(rows))
    per_row = [np.abs(np.asarray(c.coefficient, dtype=np.float64)) for c in rows]
    entries = np.concatenate(per_row) if per_row else np.zeros(0)
    columns = np.concatenate([np.asarray(c.var_index, dtype=np.int64) for c in rows]) if rows else np.zeros(0, np.int64)
    col_norm = np.zeros(len(variables))
    np.maximum.at(col_norm, columns, entries)
    row_norm = np.array([r.max() if len(r) else 0.0 for r in per_row])
    row_lb = np.where(np.abs(row_lb) < threshold, np.abs(row_lb), 0.0)
    row_ub = np.where(np.abs(row_ub) < threshold, np.abs(row_ub), 0.0)
    gaps = ub - lb
    kinds = (
        entries,
        col_norm,
        row_norm,
        np.maximum(row_lb, row_ub),
        np.maximum(np.where(np.isfinite(lb), np.abs(lb), 0.0), np.where(np.isfinite(ub), np.abs(ub), 0.0)),
        np.where(np.isfinite(gaps), gaps, 0.0),
        np.abs(objective),
    )
    for values in kinds:
        values = values[values != 0]
        if len(values) and (
            values.max() > _PDLP_EXCESSIVE or values.min() < _PDLP_TINY or values.max() > _PDLP_RANGE * values.min()
        ):
            return True
    return False


def _stacked(blocks: list[sp.csr_matrix | RowBlock], n_vars: int) -> sp.csr_matrix:
    """The blocks' rows one under the other, over `n_vars` columns (what `sp.vstack` makes of
    CSR blocks, without its checks: a solve stacks a few small blocks)."""
    if not blocks:
        return sp.csr_matrix((0, n_vars))
    ends = np.cumsum([0] + [b.nnz for b in blocks[:-1]])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + end for b, end in zip(blocks, ends.tolist())])
    data = np.concatenate([b.data for b in blocks])
    indices = np.concatenate([b.indices for b in blocks])
    return sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, n_vars))


def with_column(matrix: sp.spmatrix, var: int, coefficients) -> sp.csr_matrix:
    """`matrix` with `coefficients` (one per row) added in the column of variable `var`."""
    m = matrix.tocsr() if sp.issparse(matrix) else sp.csr_matrix(matrix)
    n = m.shape[0]
    coefficients = np.broadcast_to(np.asarray(coefficients, dtype=np.float64), (n,))
    keep = coefficients != 0
    rows = np.concatenate([np.repeat(np.arange(n), np.diff(m.indptr)), np.arange(n)[keep]])
    cols = np.concatenate([m.indices, np.full(int(keep.sum()), var)])
    vals = np.concatenate([m.data, coefficients[keep]])
    return sparse_rows(rows, cols, vals, (n, max(m.shape[1], var + 1)))


def sparse_rows(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """The CSR matrix with entries (rows, cols, vals), duplicates summed: the same matrix, in
    the same canonical form (indices sorted), as `sp.csr_matrix((vals, (rows, cols)))`, built
    with two numpy passes rather than through scipy's COO conversion (a solver builds a few
    of these per solve, each in tens of microseconds)."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    order = np.lexsort((cols, rows))
    r, c = rows[order], cols[order]
    if len(r) > 1 and ((r[1:] == r[:-1]) & (c[1:] == c[:-1])).any():
        return sp.csr_matrix((vals, (rows, cols)), shape=shape)  # duplicates: scipy sums them
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((np.asarray(vals, dtype=np.float64)[order], c, indptr), shape=shape)
