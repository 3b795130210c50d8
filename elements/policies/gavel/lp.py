"""Linear programs built in bulk and solved by OR-Tools.

A program is assembled from numpy arrays: variables in blocks (bounds and objective
coefficients as arrays) and constraints as sparse matrices over all variables, then handed to
OR-Tools' model builder in one call (`fill_model_from_sparse_data`), never one Python call per
coefficient. The built model is kept: a policy that solves a sequence of related programs (a
bisection, water filling) changes bounds or objective coefficients and solves again.
"""

from __future__ import annotations

import attrs
import numpy as np
import scipy.sparse as sp
from ortools.linear_solver.python import model_builder_helper as mbh

INF = np.inf


@attrs.frozen
class Solution:
    optimal: bool
    status: str
    objective: float
    values: np.ndarray


class LinearProgram:
    """Variables and constraints collected as arrays, then built once into an OR-Tools model."""

    def __init__(self) -> None:
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
        self._model: mbh.ModelBuilderHelper | None = None

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
        columns as there are variables so far, or fewer); returns the row indices."""
        matrix = sp.csr_matrix(matrix)
        n = matrix.shape[0]
        self._blocks.append(matrix)
        self._row_lb.append(np.broadcast_to(np.asarray(lb, dtype=np.float64), (n,)))
        self._row_ub.append(np.broadcast_to(np.asarray(ub, dtype=np.float64), (n,)))
        start = self.n_rows
        self.n_rows += n
        return np.arange(start, start + n)

    def build(self) -> mbh.ModelBuilderHelper:
        blocks = [sp.csr_matrix((b.data, b.indices, b.indptr), shape=(b.shape[0], self.n_vars)) for b in self._blocks]
        matrix = sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, self.n_vars))
        model = mbh.ModelBuilderHelper()
        model.fill_model_from_sparse_data(
            np.concatenate(self._lb) if self._lb else np.zeros(0),
            np.concatenate(self._ub) if self._ub else np.zeros(0),
            np.concatenate(self._obj) if self._obj else np.zeros(0),
            np.concatenate(self._row_lb) if self._row_lb else np.zeros(0),
            np.concatenate(self._row_ub) if self._row_ub else np.zeros(0),
            matrix.astype(np.float64),
        )
        integer = np.concatenate(self._integer) if self._integer else np.zeros(0, dtype=bool)
        for i in np.flatnonzero(integer).tolist():
            model.set_var_integrality(i, True)
        model.set_maximize(self.maximize)
        self._model = model
        return model

    # --- changing a built model ---
    @property
    def model(self) -> mbh.ModelBuilderHelper:
        return self._model if self._model is not None else self.build()

    def set_row_bounds(self, rows: np.ndarray, lb=None, ub=None) -> None:
        model = self.model
        if lb is not None:
            for r, v in zip(rows.tolist(), np.broadcast_to(lb, rows.shape).tolist()):
                model.set_constraint_lower_bound(r, v)
        if ub is not None:
            for r, v in zip(rows.tolist(), np.broadcast_to(ub, rows.shape).tolist()):
                model.set_constraint_upper_bound(r, v)

    def set_var_bounds(self, index: np.ndarray, lb=None, ub=None) -> None:
        model = self.model
        if lb is not None:
            for i, v in zip(index.tolist(), np.broadcast_to(lb, index.shape).tolist()):
                model.set_var_lower_bound(i, v)
        if ub is not None:
            for i, v in zip(index.tolist(), np.broadcast_to(ub, index.shape).tolist()):
                model.set_var_upper_bound(i, v)

    def set_objective(self, index: np.ndarray, coefficients) -> None:
        """Replace the objective: these coefficients on these variables, zero elsewhere."""
        model = self.model
        model.clear_objective()
        model.set_objective_coefficients(index.tolist(), np.broadcast_to(coefficients, index.shape).astype(float).tolist())
        model.set_maximize(self.maximize)

    # --- solving ---
    def solve(self, solver: str = "GLOP", time_limit_s: float | None = None) -> Solution:
        model = self.model
        engine = mbh.ModelSolverHelper(solver)
        if time_limit_s is not None:
            engine.set_time_limit_in_seconds(time_limit_s)
        engine.solve(model)
        status = engine.status()
        optimal = status == mbh.SolveStatus.OPTIMAL
        values = engine.variable_values() if engine.has_solution() else np.full(self.n_vars, np.nan)
        objective = engine.objective_value() if engine.has_solution() else np.nan
        return Solution(optimal, status.name, float(objective), np.asarray(values))


def with_column(matrix: sp.spmatrix, var: int, coefficients) -> sp.csr_matrix:
    """`matrix` with `coefficients` (one per row) added in the column of variable `var`."""
    m = sp.coo_matrix(matrix)
    n = m.shape[0]
    coefficients = np.broadcast_to(np.asarray(coefficients, dtype=np.float64), (n,))
    keep = coefficients != 0
    rows = np.concatenate([m.row, np.arange(n)[keep]])
    cols = np.concatenate([m.col, np.full(int(keep.sum()), var)])
    vals = np.concatenate([m.data, coefficients[keep]])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, max(m.shape[1], var + 1)))
