"""The communication model: how much a data-parallel job's iteration grows with the network
tiers its GPUs span (machine, rack, network), as Dally (Sharma et al., IEEE BigData 2025)
models it.

A job's iteration time on a placement is `compute × (1 + share)`, where `share` is its
communication time as a fraction of compute. The share is an alpha-beta hierarchical ring over
the job's gradient all-reduce, one ring per tier:

    share = Σ_t scale_t · [2(n_t − 1)·layers·α_t + 2(n_t − 1)/n_t · gradient_bytes / B_t]

with `n_t` the ring size at tier t (GPUs per machine, machines per rack, racks), `α_t` the
tier's link latency and `B_t` its bandwidth, and `scale_t` a per-model, per-tier factor fitted
so that 8 GPUs placed as Table I's three placements give Table I's shares exactly. The profile,
`traces/profiles/communication.csv`, holds each model's layer count, gradient bytes, Table I
shares and fitted scales; `benchmarks/derive_communication.py` derives it from the per-layer
ASTRA-sim workloads of Dally's simulator.
"""

from __future__ import annotations

import functools
from pathlib import Path

import attrs
import numpy as np

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import read_cells
from roundhouse.traces.placement import model_key

SHIPPED_COMMUNICATION = Path(__file__).with_name("profiles") / "communication.csv"
TIER_NAMES: tuple[str, ...] = ("machine", "rack", "network")

# The 8-GPU placements behind Table I, as ring sizes (GPUs per machine, machines per rack,
# racks). The paper places 8 GPUs "within the same machine, within the same rack, and
# distributed across racks" without saying how; its Fig. 2 shows a rack placement as 2 machines
# of 4 GPUs, and the network placement is taken by analogy as 2 racks of one 4-GPU machine.
TABLE_I_PLACEMENTS: dict[str, tuple[int, int, int]] = {"machine": (8, 1, 1), "rack": (4, 2, 1), "network": (4, 1, 2)}


@attrs.frozen
class Tier:
    """One tier's links: latency in nanoseconds, bandwidth in gigabytes (10^9 bytes) per second
    (ASTRA-sim's units)."""

    latency_ns: float
    bandwidth_gb_per_s: float


@attrs.frozen
class Tiers:
    """The links of the three tiers a job's GPUs can span."""

    machine: Tier
    rack: Tier
    network: Tier

    @property
    def alpha_s(self) -> np.ndarray:
        """Each tier's latency in seconds, in TIER_NAMES order."""
        return np.array([t.latency_ns for t in self.all()]) * 1e-9

    @property
    def bandwidth_bytes_s(self) -> np.ndarray:
        return np.array([t.bandwidth_gb_per_s for t in self.all()]) * 1e9

    def all(self) -> tuple[Tier, Tier, Tier]:
        return (self.machine, self.rack, self.network)


# Dally's simulator's ASTRA-sim network (aakash-sharma/cluster-sim): NVSwitch inside a machine
# (a FullyConnected 4-GPU dimension at 0 ns times a 2-GPU ring at 500 ns, both 600 GB/s, folded
# here into one tier at the larger latency), InfiniBand rings between a rack's machines
# (5,000 ns, 200 GB/s), an Ethernet switch between racks (50,000 ns, 400 GB/s).
DALLY_TIERS = Tiers(machine=Tier(500.0, 600.0), rack=Tier(5_000.0, 200.0), network=Tier(50_000.0, 400.0))


def ring_seconds(layers, gradient_bytes, sizes, tiers: Tiers) -> np.ndarray:
    """(jobs, 3): the alpha-beta all-reduce time at each tier, in seconds, of jobs with these
    layer counts and gradient bytes on rings of `sizes` (jobs, 3) GPUs, machines, racks."""
    n = np.asarray(sizes, dtype=np.float64)
    layers = np.asarray(layers, dtype=np.float64)[..., None]
    volume = np.asarray(gradient_bytes, dtype=np.float64)[..., None]
    return 2.0 * (n - 1.0) * layers * tiers.alpha_s + 2.0 * (n - 1.0) / n * volume / tiers.bandwidth_bytes_s


def fit_scales(layers: int, gradient_bytes: float, shares, tiers: Tiers = DALLY_TIERS) -> np.ndarray:
    """The per-tier scales that make Table I's placements give `shares` (machine, rack,
    network; fractions of compute). The machine placement fixes the machine scale; the rack and
    network placements each add their own tier's ring to a 4-GPU machine ring."""
    for name, value in (("layers", layers), ("gradient_bytes", gradient_bytes)):
        if not (isinstance(value, (int, float, np.integer, np.floating)) and np.isfinite(value) and value > 0):
            raise ValueError(f"fit_scales: {name} must be a finite number above 0, got {value!r}")
    shares = [float(s) for s in shares]
    if len(shares) != 3 or not all(np.isfinite(s) and s >= 0 for s in shares):
        raise ValueError(
            f"fit_scales: shares must be three finite fractions of 0 or more (machine, rack, network), got {shares!r}"
        )
    machine, rack, network = (np.asarray(TABLE_I_PLACEMENTS[t], dtype=np.float64) for t in TIER_NAMES)
    seconds = ring_seconds(np.full(3, layers), np.full(3, gradient_bytes), np.stack([machine, rack, network]), tiers)
    scale_machine = shares[0] / seconds[0, 0]
    scale_rack = (shares[1] - scale_machine * seconds[1, 0]) / seconds[1, 1]
    scale_network = (shares[2] - scale_machine * seconds[2, 0]) / seconds[2, 2]
    scales = np.array([scale_machine, scale_rack, scale_network])
    for tier, scale, share in zip(TIER_NAMES[1:], scales[1:], shares[1:]):
        if scale < 0:
            # (the placement adds the tier's ring to a 4-GPU machine ring, which alone costs more)
            least = scale_machine * seconds[TIER_NAMES.index(tier), 0]
            raise ValueError(
                f"fit_scales: a {tier} share of {share:g} is less than the {least:.4g} its placement's 4-GPU machine "
                f"ring alone costs at the machine share {shares[0]:g}; no scale of 0 or more fits it"
            )
    return scales


class CommunicationTable:
    """Per-model communication profiles, looked up by any spelling of the model's name."""

    COLUMNS = ("model", "also_named", "layers", "gradient_bytes") + tuple(
        f"{t}_{what}" for what in ("share", "scale") for t in TIER_NAMES
    )

    def __init__(self, models, also_named, layers, gradient_bytes, shares, scales, source: str):
        self.models: tuple[str, ...] = tuple(models)
        self.source = source
        self.layers = np.asarray(layers, dtype=np.float64)
        self.gradient_bytes = np.asarray(gradient_bytes, dtype=np.float64)
        self.shares = np.asarray(shares, dtype=np.float64).reshape(-1, 3)
        self.scales = np.asarray(scales, dtype=np.float64).reshape(-1, 3)
        keys: dict[str, int] = {}
        for i, (model, others) in enumerate(zip(self.models, also_named)):
            for name in [model, *others]:
                keys.setdefault(model_key(name), i)
        self._keys = keys

    @classmethod
    def load(cls, path: str | Path | None = None) -> CommunicationTable:
        return _shipped() if path is None else _read(str(path))

    def index(self, names) -> np.ndarray:
        """Each name's row in the table; -1 for None or a model the table lacks."""
        names = list(names)
        found = {m: self._keys.get(model_key(m), -1) for m in set(names) if m is not None}
        return np.array([found.get(m, -1) if m is not None else -1 for m in names], dtype=np.int64)

    def share(self, rows: np.ndarray, sizes, tiers: Tiers) -> np.ndarray:
        """Communication time as a fraction of compute of models `rows` on rings of `sizes`
        (jobs, 3); 0 for a job on one GPU."""
        seconds = ring_seconds(self.layers[rows], self.gradient_bytes[rows], sizes, tiers)
        return (self.scales[rows] * seconds).sum(axis=1)

    def __repr__(self) -> str:
        return f"CommunicationTable({self.source!r}, models={list(self.models)})"


@functools.cache
def _shipped() -> CommunicationTable:
    return _read(str(SHIPPED_COMMUNICATION))


def _read(path: str) -> CommunicationTable:
    cells = read_cells(path)
    frame, lines = cells.frame, cells.lines
    missing = [c for c in CommunicationTable.COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(path, f"no column '{missing[0]}' (a communication profile has {', '.join(CommunicationTable.COLUMNS)})")
    numbers = {}
    for column in CommunicationTable.COLUMNS[2:]:
        values = []
        for i, text in enumerate(frame[column].to_list()):
            try:
                value = float(text)
            except (TypeError, ValueError):
                value = np.nan
            positive = column in ("layers", "gradient_bytes")  # (a share or a scale may be 0)
            if not np.isfinite(value) or value < 0 or (positive and value <= 0):
                rule = "above 0" if positive else "0 or more"
                raise TraceError(path, f"must be a finite number {rule}, got {text!r}", row=int(lines[i]), column=column)
            if positive and value != int(value):  # (a count of layers, a count of bytes)
                raise TraceError(path, f"must be a whole number, got {text!r}", row=int(lines[i]), column=column)
            values.append(value)
        numbers[column] = values
    models = frame["model"].to_list()
    for i, model in enumerate(models):
        if not model:
            raise TraceError(path, "has no value", row=int(lines[i]), column="model")
    also = [[n.strip() for n in (text or "").split(";") if n.strip()] for text in frame["also_named"].to_list()]
    # Every name, and every spelling of it, finds one row: a second row a name already finds
    # could never be looked up.
    named: dict[str, int] = {}
    for i, (model, others) in enumerate(zip(models, also)):
        for column, name in [("model", model)] + [("also_named", n) for n in others]:
            first = named.setdefault(model_key(name), i)
            if first != i:
                raise TraceError(
                    path,
                    f"'{name}' also names {models[first]} (row {int(lines[first])}); a name, however spelt, "
                    "may name one model only",
                    row=int(lines[i]),
                    column=column,
                )

    def per_tier(what: str) -> np.ndarray:
        return np.stack([numbers[f"{t}_{what}"] for t in TIER_NAMES], axis=1) if models else np.zeros((0, 3))

    return CommunicationTable(
        models, also, numbers["layers"], numbers["gradient_bytes"], per_tier("share"), per_tier("scale"), path
    )
