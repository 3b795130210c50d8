"""The profile table: measured training throughput per model, batch size, GPU type, GPU count and
placement, which the simulator uses to turn a job's iterations into time on any GPU.

The shipped table, `traces/profiles/gavel.csv`, is Gavel's isolated throughputs transcribed
from `simulation_throughputs.json` (MIT licence; the file's header says where from). Columns:
`model, batch_size, gpu_type, gpus, placement, iters_per_s`, with `placement` either
`consolidated` (all GPUs on one machine) or `spread` (Gavel's `*_unconsolidated` types). An
`iters_per_s` of 0.0 is kept: it means the job cannot run that way (e.g. ResNet-50 with batch
size 128 on four K80s), which is different from "not measured" (no row, `rate()` gives None).

Model names are Gavel's (`ResNet-18`, `ResNet-50`, `Transformer`, `LM`, `Recommendation`, `A3C`,
`CycleGAN`); the names other projects use (Blox's LSTM and Recoder, `resnet18`, `CycleGan`, ...)
are accepted case-insensitively wherever a model is named.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import read_cells
from roundhouse.traces.schema import typed_columns

SHIPPED_PROFILE = Path(__file__).with_name("profiles") / "gavel.csv"
GAVEL_MODELS: tuple[str, ...] = ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation", "A3C", "CycleGAN")
PLACEMENTS: tuple[str, ...] = ("consolidated", "spread")
REFERENCE_GPU_TYPE = "V100"
PROFILE_COLUMNS: dict[str, type[pl.DataType]] = {
    "model": pl.String,
    "batch_size": pl.Int64,
    "gpu_type": pl.String,
    "gpus": pl.Int64,
    "placement": pl.String,
    "iters_per_s": pl.Float64,
}

# Other names for Gavel's models, compared after `_key` (lower case, letters and digits only).
_ALIASES: dict[str, str] = {
    "lstm": "LM",
    "languagemodel": "LM",
    "languagemodeling": "LM",
    "recoder": "Recommendation",
    "recommender": "Recommendation",
    "ncf": "Recommendation",
    "resnet": "ResNet-50",
    "translation": "Transformer",
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_KNOWN = {_key(m): m for m in GAVEL_MODELS} | _ALIASES


def canonical_model(name: str | None) -> str | None:
    """Gavel's name for a model given under any accepted spelling, or None if it is not one of them."""
    if name is None:
        return None
    return _KNOWN.get(_key(name))


@attrs.frozen(eq=False)
class ProfileTable:
    """An immutable throughput table: a polars frame for bulk work, a dict for O(1) lookups."""

    frame: pl.DataFrame
    source: str
    _index: Mapping[tuple[str, int, str, int, str], float]
    _defaults: Mapping[str, int]
    _model_keys: Mapping[str, str]
    _gpu_keys: Mapping[str, str]

    # --- building ---------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path | None = None) -> ProfileTable:
        """Read a profile CSV (`#` lines are comments); None means the shipped Gavel table."""
        if path is None:
            return _shipped()
        return cls.from_frame(*_read(str(path)), source=str(path))

    @classmethod
    def from_frame(
        cls, frame: pl.DataFrame, lines: Sequence[int] | np.ndarray | None = None, source: str = "<frame>"
    ) -> ProfileTable:
        """Build a table from a frame with the profile columns (checked; errors name `source`)."""
        frame = _check(frame, source, lines)
        keys = frame.select(PROFILE_COLUMNS.keys()).rows()
        index = {row[:5]: row[5] for row in keys}
        defaults = frame.group_by("model", maintain_order=True).agg(pl.col("batch_size").min())
        models = frame.get_column("model").unique(maintain_order=True).to_list()
        gpu_types = frame.get_column("gpu_type").unique(maintain_order=True).to_list()
        model_keys = {_key(m): m for m in models}
        for alias, target in _KNOWN.items():
            if target in models:
                model_keys.setdefault(alias, target)
        return cls(
            frame=frame,
            source=source,
            index=MappingProxyType(index),
            defaults=MappingProxyType(dict(defaults.rows())),
            model_keys=MappingProxyType(model_keys),
            gpu_keys=MappingProxyType({g.lower(): g for g in gpu_types}),
        )

    # --- names ------------------------------------------------------------------------------

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self._defaults)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(self._gpu_keys.values())

    def canonical_model(self, name: str | None) -> str | None:
        """This table's name for `name` (any accepted spelling), or None if the table lacks it."""
        return None if name is None else self._model_keys.get(_key(name))

    def canonical_gpu_type(self, name: str | None) -> str | None:
        return None if name is None else self._gpu_keys.get(name.lower())

    def default_batch_size(self, model: str) -> int | None:
        """The smallest batch size listed for `model` (what a job that names no batch size runs)."""
        canonical = self.canonical_model(model)
        return None if canonical is None else self._defaults[canonical]

    # --- lookups ----------------------------------------------------------------------------

    def rate(self, model: str, batch_size: int | None, gpu_type: str, gpus: int, consolidated: bool = True) -> float | None:
        """Iterations per second, or None when the table has no such entry. A spread lookup with
        no spread entry falls back to the consolidated one (Gavel measured spread only for some)."""
        canonical = self.canonical_model(model)
        gpu = self.canonical_gpu_type(gpu_type)
        if canonical is None or gpu is None:
            return None
        bs = self._defaults[canonical] if batch_size is None else int(batch_size)
        key = (canonical, bs, gpu, int(gpus))
        if not consolidated:
            value = self._index.get(key + ("spread",))
            if value is not None:
                return value
        return self._index.get(key + ("consolidated",))

    def rates(self, models, batch_sizes, gpu_type: str, gpus, consolidated: bool = True) -> np.ndarray:
        """`rate()` over arrays (gpus and batch sizes may be scalars); 0.0 where there is no entry.

        Dictionary lookups, one per job: about a microsecond each, cheap for the few launches of
        a round. A whole trace is prepared by asking once per distinct (model, batch size) pair
        (traces/prepare.py)."""
        models = list(models)
        n = len(models)
        batch = np.broadcast_to(np.asarray(batch_sizes if batch_sizes is not None else 0), (n,))
        counts = np.broadcast_to(np.asarray(gpus), (n,))
        names = {m: self.canonical_model(m) for m in set(models) if m is not None}
        gpu = self.canonical_gpu_type(gpu_type)
        index, defaults = self._index, self._defaults
        out = np.zeros(n)
        if gpu is None:
            return out
        placements = ("consolidated",) if consolidated else ("spread", "consolidated")
        for i, (m, b, g) in enumerate(zip(models, batch.tolist(), counts.tolist())):
            name = names.get(m)
            if name is None:
                continue
            key = (name, int(b) if b is not None and b > 0 else defaults[name], gpu, int(g))
            for placement in placements:
                value = index.get(key + (placement,))
                if value is not None:
                    out[i] = value
                    break
        return out

    def configs(self, gpus: int, gpu_type: str = REFERENCE_GPU_TYPE) -> list[tuple[str, int]]:
        """(model, batch size) pairs that run at a positive rate on `gpus` consolidated GPUs."""
        gpu = self.canonical_gpu_type(gpu_type)
        hits = self.frame.filter(
            (pl.col("gpu_type") == gpu)
            & (pl.col("gpus") == gpus)
            & (pl.col("placement") == "consolidated")
            & (pl.col("iters_per_s") > 0)
        )
        return [(m, int(b)) for m, b in hits.select("model", "batch_size").rows()]

    def __repr__(self) -> str:
        return f"ProfileTable({self.source!r}, {self.frame.height} entries, models={list(self.models)})"


@functools.cache
def _shipped() -> ProfileTable:
    return ProfileTable.from_frame(*_read(str(SHIPPED_PROFILE)), source=str(SHIPPED_PROFILE))


def _read(path: str) -> tuple[pl.DataFrame, np.ndarray]:
    cells = read_cells(path)
    return cells.frame, cells.lines


def _check(frame: pl.DataFrame, path: str, lines: Sequence[int] | np.ndarray | None) -> pl.DataFrame:
    rows = np.arange(1, frame.height + 1) if lines is None else np.asarray(lines)
    frame = typed_columns(frame, PROFILE_COLUMNS, path, lines)
    checks = [
        ("model", pl.col("model").is_null(), "has no value"),
        ("batch_size", pl.col("batch_size").is_null() | (pl.col("batch_size") < 1), "must be a whole number of 1 or more"),
        ("gpu_type", pl.col("gpu_type").is_null(), "has no value"),
        ("gpus", pl.col("gpus").is_null() | (pl.col("gpus") < 1), "must be a whole number of 1 or more"),
        ("placement", ~pl.col("placement").is_in(PLACEMENTS).fill_null(False), "must be 'consolidated' or 'spread'"),
        (
            "iters_per_s",
            pl.col("iters_per_s").is_null() | ~pl.col("iters_per_s").is_finite() | (pl.col("iters_per_s") < 0),
            "must be a finite number of 0 or more (0.0 means cannot run)",
        ),
    ]
    flags = frame.select([expr.alias(str(i)) for i, (_, expr, _) in enumerate(checks)])
    first = [(int(flags[str(i)].arg_true()[0]), i) for i in range(len(checks)) if flags[str(i)].any()]
    if first:
        index, i = min(first)
        column, _, message = checks[i]
        value = frame[column][index]
        raise TraceError(path, f"{message}, got {value!r}", row=int(rows[index]), column=column)
    keys = ["model", "batch_size", "gpu_type", "gpus", "placement"]
    duplicated = frame.select(pl.struct(keys).is_duplicated() & ~pl.struct(keys).is_first_distinct()).to_series()
    if duplicated.any():
        second = int(duplicated.arg_true()[0])
        entry = frame.row(second)
        first_row = int(
            frame.select(pl.all_horizontal(pl.col(k) == entry[i] for i, k in enumerate(keys))).to_series().arg_true()[0]
        )
        raise TraceError(
            path,
            f"entry {entry[:5]} is listed twice: here and at {path}:{int(rows[first_row])}",
            row=int(rows[second]),
        )
    return frame
