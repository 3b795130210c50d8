"""The pair table: throughput of two jobs that share the same GPUs (space sharing).

Gavel (OSDI'20, §3.1 and Fig. 15) measured, for every two of its job configurations with the
same GPU count, how fast each runs when both train on the same GPUs at once. The shipped table,
`traces/profiles/gavel-pairs.csv`, transcribes those measurements (MIT licence; its header says
where from). Columns: `model_a, batch_a, model_b, batch_b, gpu_type, gpus, iters_a, iters_b`;
each unordered pair of configurations appears once, and `iters_a` is the speed of model_a's job.
An entry of 0.0 means the two cannot share (for instance, not enough GPU memory), which is
different from "not measured" (no row; lookups give NaN so that an estimator can fill it in).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import read_cells
from roundhouse.traces.profiles import canonical_model
from roundhouse.traces.schema import typed_columns

SHIPPED_PAIRS = Path(__file__).with_name("profiles") / "gavel-pairs.csv"
PAIR_COLUMNS: dict[str, type[pl.DataType]] = {
    "model_a": pl.String,
    "batch_a": pl.Int64,
    "model_b": pl.String,
    "batch_b": pl.Int64,
    "gpu_type": pl.String,
    "gpus": pl.Int64,
    "iters_a": pl.Float64,
    "iters_b": pl.Float64,
}

# (model, batch) of one job, (model, batch) of the other, GPU type, GPU count.
_Key = tuple[str, int, str, int, str, int]


@attrs.frozen(eq=False)
class PairTable:
    """An immutable table of pair throughputs with O(1) lookups in either order."""

    frame: pl.DataFrame
    source: str
    _index: Mapping[_Key, tuple[float, float]]

    @classmethod
    def load(cls, path: str | Path | None = None) -> PairTable:
        """Read a pair-throughput CSV (`#` lines are comments); None means the shipped Gavel table."""
        if path is None:
            return _shipped()
        cells = read_cells(str(path))
        return cls.from_frame(cells.frame, cells.lines, source=str(path))

    @classmethod
    def from_frame(cls, frame: pl.DataFrame, lines=None, source: str = "<frame>") -> PairTable:
        frame = _check(frame, source, lines)
        index: dict[_Key, tuple[float, float]] = {}
        rows = np.arange(1, frame.height + 1) if lines is None else np.asarray(lines)
        for i, (ma, ba, mb, bb, gpu, gpus, ra, rb) in enumerate(frame.rows()):
            ma, mb = canonical_model(ma) or ma, canonical_model(mb) or mb
            gpu = gpu.lower()  # GPU type names compare case-insensitively, as in the profile table
            key, back = (ma, ba, mb, bb, gpu, gpus), (mb, bb, ma, ba, gpu, gpus)
            if key in index or back in index:
                raise TraceError(
                    source, f"the pair {ma} ({ba}) with {mb} ({bb}) on {gpus} {gpu} is listed twice", row=int(rows[i])
                )
            index[key] = (ra, rb)
            index[back] = (rb, ra)
        return cls(frame=frame, source=source, index=MappingProxyType(index))

    def rate(self, model_a: str, batch_a: int, model_b: str, batch_b: int, gpu_type: str, gpus: int):
        """(speed of a, speed of b) when they share `gpus` GPUs of `gpu_type`; None if not measured."""
        key = (
            canonical_model(model_a) or model_a,
            int(batch_a),
            canonical_model(model_b) or model_b,
            int(batch_b),
            gpu_type.lower(),
            int(gpus),
        )
        return self._index.get(key)

    def rates(self, models_a, batch_a, models_b, batch_b, gpu_type: str, gpus) -> tuple[np.ndarray, np.ndarray]:
        """`rate()` over arrays (GPU counts may be a scalar); NaN where the pair was not measured.

        One dictionary lookup per pair, about a microsecond each: cheap for the pairs a solver
        considers in a round."""
        models_a, models_b = list(models_a), list(models_b)
        n = len(models_a)
        counts = np.broadcast_to(np.asarray(gpus), (n,)).tolist()
        ba, bb = np.broadcast_to(np.asarray(batch_a), (n,)).tolist(), np.broadcast_to(np.asarray(batch_b), (n,)).tolist()
        names = {m: canonical_model(m) or m for m in set(models_a) | set(models_b) if m is not None}
        out_a, out_b = np.full(n, np.nan), np.full(n, np.nan)
        index, gpu = self._index, gpu_type.lower()
        for i in range(n):
            a, b = names.get(models_a[i]), names.get(models_b[i])
            if a is None or b is None:  # a job without a model
                continue
            got = index.get((a, ba[i], b, bb[i], gpu, counts[i]))
            if got is not None:
                out_a[i], out_b[i] = got
        return out_a, out_b

    def __len__(self) -> int:
        return self.frame.height

    def __repr__(self) -> str:
        return f"PairTable({self.source!r}, {self.frame.height} pairs)"


@functools.cache
def _shipped() -> PairTable:
    cells = read_cells(str(SHIPPED_PAIRS))
    return PairTable.from_frame(cells.frame, cells.lines, source=str(SHIPPED_PAIRS))


def _check(frame: pl.DataFrame, path: str, lines) -> pl.DataFrame:
    rows = np.arange(1, frame.height + 1) if lines is None else np.asarray(lines)
    frame = typed_columns(frame, PAIR_COLUMNS, path, lines)
    checks = [(c, pl.col(c).is_null(), "has no value") for c in ("model_a", "model_b", "gpu_type")]
    checks += [
        (c, pl.col(c).is_null() | (pl.col(c) < 1), "must be a whole number of 1 or more") for c in ("batch_a", "batch_b", "gpus")
    ]
    checks += [
        (
            c,
            pl.col(c).is_null() | ~pl.col(c).is_finite() | (pl.col(c) < 0),
            "must be a finite number of 0 or more (0.0 means cannot share)",
        )
        for c in ("iters_a", "iters_b")
    ]
    flags = frame.select([expr.alias(str(i)) for i, (_, expr, _) in enumerate(checks)])
    first = [(int(flags[str(i)].arg_true()[0]), i) for i in range(len(checks)) if flags[str(i)].any()]
    if first:
        index, i = min(first)
        column, _, message = checks[i]
        raise TraceError(path, f"{message}, got {frame[column][index]!r}", row=int(rows[index]), column=column)
    return frame
