"""Placement sensitivity: how much each model suffers when its GPUs span more nodes than it
needs, and the tensor-size skew that Tiresias' placement uses to guess it.

The shipped table, `traces/profiles/placement.csv`, holds Tiresias' Table 6 (tensor skew of the
TensorFlow benchmark models) and the slowdowns we assume for Tiresias' testbed (its header says
which numbers are published and which are assumed). Jobs get two spec columns from it when they
are prepared, unless their trace carries them already (per job, which wins):

- `tensor_skew`: the largest tensor's share of the model (NaN: unknown);
- `spread_slowdown`: the factor by which a job known by its duration runs slower when spread
  (NaN or 1: not sensitive). Jobs whose model is in the throughput profile run at the
  profile's measured spread throughput instead; their column says what the profile implies.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import read_cells
from roundhouse.traces.distinct import DistinctNames
from roundhouse.traces.profiles import _key, canonical_model
from roundhouse.traces.schema import PLACEMENT_COLUMNS, cast_column, null_column

SHIPPED_PLACEMENT = Path(__file__).with_name("profiles") / "placement.csv"


def model_key(name: str) -> str:
    """One key for every spelling of a model (ResNet50, resnet-50 and ResNet-50 are one model)."""
    return _key(canonical_model(name) or name)


class PlacementTable:
    """Per-model tensor skew and spread slowdown, looked up by any spelling of the model."""

    def __init__(self, frame: pl.DataFrame, source: str):
        self.frame = frame
        self.source = source
        keys = [model_key(m) for m in frame["model"].to_list()]
        self._skew = dict(zip(keys, frame["tensor_skew"].fill_null(np.nan).to_list()))
        self._slowdown = dict(zip(keys, frame["spread_slowdown"].fill_null(np.nan).to_list()))

    @classmethod
    def load(cls, path: str | Path | None = None) -> PlacementTable:
        if path is None:
            return _shipped()
        return _read(str(path))

    def lookup(self, models) -> tuple[np.ndarray, np.ndarray]:
        """(tensor skew, spread slowdown) for each model name (None allowed); NaN if unknown."""
        models = list(models)
        known = {m: model_key(m) for m in set(models) if m is not None}  # a few distinct names
        keys = [known.get(m) for m in models]
        skew = np.array([np.nan if k is None else self._skew.get(k, np.nan) for k in keys], dtype=np.float64)
        slow = np.array([np.nan if k is None else self._slowdown.get(k, np.nan) for k in keys], dtype=np.float64)
        return skew, slow

    def __repr__(self) -> str:
        return f"PlacementTable({self.source!r}, {self.frame.height} models)"


@functools.cache
def _shipped() -> PlacementTable:
    return _read(str(SHIPPED_PLACEMENT))


def _read(path: str) -> PlacementTable:
    cells = read_cells(path)
    frame, lines = cells.frame, cells.lines
    for name in ("model", *PLACEMENT_COLUMNS):
        if name not in frame.columns:
            raise TraceError(path, f"missing column '{name}'; a placement table has model, tensor_skew, spread_slowdown")
    skew = cast_column(frame["tensor_skew"], pl.Float64, path, lines, "tensor_skew")
    slow = cast_column(frame["spread_slowdown"], pl.Float64, path, lines, "spread_slowdown")
    check_columns(path, skew, slow, lines)
    return PlacementTable(pl.DataFrame({"model": frame["model"], "tensor_skew": skew, "spread_slowdown": slow}), path)


def check_columns(path: str, skew: pl.Series, slowdown: pl.Series, lines=None, job_ids=None) -> None:
    """Tensor skews lie in [0, 1] and slowdowns are at least 1 (empty cells are allowed). A
    problem names the file's line, or the job when the rows are no longer the file's."""
    problems = (
        ("tensor_skew", skew, (skew < 0) | (skew > 1), "must be between 0 and 1 (a share of the model)"),
        ("spread_slowdown", slowdown, slowdown < 1, "must be 1 or more (1: not sensitive)"),
    )
    for column, values, wrong, sentence in problems:
        bad = (values.is_not_null() & ~values.is_nan() & wrong).fill_null(False)
        if not bad.any():
            continue
        i = int(bad.arg_true()[0])
        if job_ids is not None:
            raise TraceError(path, f"job {job_ids[i]}: {sentence}, got {values[i]:g}", column=column)
        raise TraceError(path, f"{sentence}, got {values[i]:g}", row=int(np.asarray(lines)[i]), column=column)


def placement_columns(trace: pl.DataFrame, models: DistinctNames, origin: str) -> dict[str, np.ndarray]:
    """The jobs' `tensor_skew` and `spread_slowdown`: the trace's own cells where it has them,
    else the shipped table's value for the job's model (NaN when neither knows)."""
    skew, slow = PlacementTable.load().lookup(models.names)
    out = {"tensor_skew": models.per_row(skew, np.nan, np.float64), "spread_slowdown": models.per_row(slow, np.nan, np.float64)}
    empty = null_column("empty", pl.Float64, trace.height)
    own = {name: trace[name].cast(pl.Float64, strict=False) if name in trace.columns else empty for name in PLACEMENT_COLUMNS}
    if any(name in trace.columns for name in PLACEMENT_COLUMNS):
        check_columns(origin, own["tensor_skew"], own["spread_slowdown"], job_ids=trace["job_id"].to_list())
    for name in PLACEMENT_COLUMNS:
        values = own[name].fill_null(np.nan).to_numpy()
        out[name] = np.where(np.isnan(values), out[name], values)
    return out
