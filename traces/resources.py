"""CPU and memory sensitivity: how fast a job trains with the CPU cores and memory that come
with its GPUs, per model, as Synergy (Mohan et al., OSDI 2022) profiles it.

The profile, `traces/profiles/resources.csv` (transcribed from Synergy's simulator), gives each
model's throughput on a grid of CPU cores per GPU (1 to 24) and GB of memory per GPU (20.83 to
250), relative to the GPU-proportional share of Synergy's servers (3 cores and 62.5 GB per GPU).
Between grid points the speed is interpolated linearly in both directions (bilinear); beyond
the grid's edges it stays at the edge's value (fewer than one core per GPU runs as one core,
more than 24 as 24).

The throughput model (traces/throughput.py) uses it as a ratio: a job's speed on an allocation
over its speed at the GPU-proportional share of the machines its GPUs are on. Throughputs
elsewhere (the profile table, a trace's durations) are taken as measured at that share, so
a GPU-proportional allocation changes nothing, on any cluster.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import read_cells
from roundhouse.traces.placement import model_key

SHIPPED_RESOURCES = Path(__file__).with_name("profiles") / "resources.csv"


class ResourceTable:
    """Per-model speed on a grid of CPU cores and GB of memory per GPU, looked up by any
    spelling of the model's name."""

    def __init__(self, models, also_named, cpu_grid, memory_grid, speed, source: str):
        self.models: tuple[str, ...] = tuple(models)
        self.cpu_grid = np.asarray(cpu_grid, dtype=np.float64)
        self.memory_grid = np.asarray(memory_grid, dtype=np.float64)
        self.speed = np.asarray(speed, dtype=np.float64)  # (models, CPU levels, memory levels)
        self.source = source
        keys: dict[str, int] = {}
        for i, (model, others) in enumerate(zip(self.models, also_named)):
            for name in [model, *others]:
                keys.setdefault(model_key(name), i)
        self._keys = keys
        # Best case: the smallest grid point (fewest cores, then least memory) at the model's
        # top speed, which is what Synergy's profiles list as each model's demand.
        self.best_cpus = np.empty(len(self.models))
        self.best_memory_gb = np.empty(len(self.models))
        for i in range(len(self.models)):
            top = self.speed[i] >= self.speed[i].max() - 1e-9
            c, m = np.argwhere(top)[0]  # argwhere is row-major: fewest cores first
            self.best_cpus[i], self.best_memory_gb[i] = self.cpu_grid[c], self.memory_grid[m]

    @classmethod
    def load(cls, path: str | Path | None = None) -> ResourceTable:
        return _shipped() if path is None else _read(str(path))

    def index(self, names) -> np.ndarray:
        """Each name's row in the table; -1 for None or a model the table lacks."""
        names = list(names)
        found = {m: self._keys.get(model_key(m), -1) for m in set(names) if m is not None}
        return np.array([found.get(m, -1) if m is not None else -1 for m in names], dtype=np.int64)

    def relative_speed(self, rows: np.ndarray, cpus_per_gpu, memory_gb_per_gpu) -> np.ndarray:
        """Speed of models `rows` with these CPU cores and GB of memory per GPU, relative to
        Synergy's GPU-proportional share (bilinear in the grid, clamped at its edges)."""
        i, wi = _locate(self.cpu_grid, np.asarray(cpus_per_gpu, dtype=np.float64))
        j, wj = _locate(self.memory_grid, np.asarray(memory_gb_per_gpu, dtype=np.float64))
        s = self.speed
        return (
            (1 - wi) * (1 - wj) * s[rows, i, j]
            + (1 - wi) * wj * s[rows, i, j + 1]
            + wi * (1 - wj) * s[rows, i + 1, j]
            + wi * wj * s[rows, i + 1, j + 1]
        )

    def __repr__(self) -> str:
        return f"ResourceTable({self.source!r}, models={list(self.models)})"


def _locate(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid cell each value falls in (its lower index) and the weight of the upper point."""
    x = np.clip(x, grid[0], grid[-1])
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


@functools.cache
def _shipped() -> ResourceTable:
    return _read(str(SHIPPED_RESOURCES))


def _read(path: str) -> ResourceTable:
    cells = read_cells(path)
    frame, lines = cells.frame, cells.lines
    for column in ("model", "also_named", "cpus_per_gpu"):
        if column not in frame.columns:
            raise TraceError(path, f"no column '{column}' (a resource profile has model, also_named, cpus_per_gpu, mem_<GB>...)")
    memory_columns = [c for c in frame.columns if c.startswith("mem_")]
    try:
        memory_grid = [float(c[4:]) for c in memory_columns]
    except ValueError:
        raise TraceError(path, "memory columns are named mem_<GB per GPU>, e.g. mem_62.5") from None
    if len(memory_grid) < 2 or sorted(memory_grid) != memory_grid or len(set(memory_grid)) < len(memory_grid):
        raise TraceError(path, "needs two or more mem_<GB> columns in increasing order")

    def number(i: int, column: str) -> float:
        text = frame[column][i]
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = np.nan
        if not np.isfinite(value) or value <= 0:
            raise TraceError(path, f"must be a finite number above 0, got {text!r}", row=int(lines[i]), column=column)
        return value

    by_model: dict[str, dict[float, list[float]]] = {}
    also: dict[str, list[str]] = {}
    for i, model in enumerate(frame["model"].to_list()):
        if not model:
            raise TraceError(path, "has no value", row=int(lines[i]), column="model")
        cpus = number(i, "cpus_per_gpu")
        by_model.setdefault(model, {})[cpus] = [number(i, c) for c in memory_columns]
        also.setdefault(model, [n.strip() for n in (frame["also_named"][i] or "").split(";") if n.strip()])
    if not by_model:
        raise TraceError(path, "lists no model")
    cpu_grid = sorted(next(iter(by_model.values())))
    for model, rows in by_model.items():
        if sorted(rows) != cpu_grid:
            raise TraceError(path, f"model {model} has rows for {sorted(rows)} CPU cores per GPU, the first model for {cpu_grid}")
    if len(cpu_grid) < 2:
        raise TraceError(path, "needs two or more cpus_per_gpu rows per model")
    speed = [[rows[c] for c in cpu_grid] for rows in by_model.values()]
    return ResourceTable(list(by_model), [also[m] for m in by_model], cpu_grid, memory_grid, speed, path)
