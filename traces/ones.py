"""ONES workloads (Bian et al., SC'21): the reader of its trace format, its completion-predictor
history, a generator of ONES-like workloads, and the elastic applications they run as.

**Trace** (the artifact's `traces/trace_1.csv`): one job a row,
`time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus`, where
`batch_size` is the per-GPU batch and `num_gpus` the GPUs the user asked for. Read into the
canonical schema: `job_id` (row order), `arrival_s`, `gpus`, `model` (the application,
`<model>-<task>`, e.g. `resnet50-imagenet`), `batch_size` (global: local x requested GPUs, what
a scheduler that keeps the request runs), and `epochs`, `epoch_size`, `local_batch`, `patience`,
`lr`, `max_lr`, `target_acc`, `max_gpus`, `max_batch_size` as extra columns. The elastic
profile counts work in epochs of REFERENCE_EPOCH samples, so `epochs` holds the job's epochs
scaled by epoch_size / REFERENCE_EPOCH (its work in samples is then right); `job_epochs` holds
the epochs themselves.

**Epochs to target.** The trace says when a job stops (a target accuracy held for `patience`
epochs), not how many epochs that takes; the simulator needs a number. Ours: each application's
`epochs` below, read off the 20 completed jobs of the artifact's `job_history.csv` (their median
epoch count by task, 4-5 for BERT, 20-35 for the vision jobs), the same for every batch size
(ONES' linear scaling rule, §3.3.2).

**Throughput** (ours: the paper profiles it online and prints no model). Each application is an
elastic application in Pollux's throughput form (traces/goodput.py): compute
alpha_c + beta_c x local batch per step, and an all-reduce whose cost grows with the model's size,
slower between machines (InfiniBand) than within one (NVLink); beta_c is the inverse of a V100's
samples/s on that model, and the per-GPU rates are of the order of the artifact's history (about
100 samples/s for BERT, thousands for CIFAR). The noise scale is infinite: under linear LR scaling
every batch size makes the same progress per sample (efficiency 1), so goodput = throughput.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import number_column, read_cells
from roundhouse.traces.goodput import ElasticApp, ElasticProfile
from roundhouse.traces.schema import INT64_LIMIT, missing_hint, warn_near_misses
from roundhouse.traces.trainingsettings import SETTING_KINDS, TRAINING_SETTINGS, setting_problems

TRACE_COLUMNS = ("time", "model", "task", "epoch_size", "patience", "batch_size", "lr", "max_lr", "target_acc", "num_gpus")
HISTORY_COLUMNS = (
    "id",
    "epoch",
    "epoch_size",
    "num_samples",
    "total_workload",
    "batch_size",
    "lr",
    "initial_loss",
    "loss",
    "acc",
    "throughput",
)

# The ten model/dataset pairs of ONES' Table 2, with the artifact's trace settings (notes §4):
# requested GPUs, local batch, base and largest learning rate, target accuracy, patience, the
# dataset sizes it samples. Then ours: epochs to target, V100 samples/s, model size (MB of 10^6
# bytes, float32 parameters). The CIFAR-10 models are the artifact's too: its examples/cifar.py
# builds torchvision's ImageNet-shaped networks with their 1000 classes
# (kurisusnowdeng/ones_sc21, examples/cifar.py), so vgg16-cifar is torchvision's VGG16
# (138,357,544 parameters, 553 MB) and googlenet-cifar its GoogLeNet with the two auxiliary heads
# the artifact trains (src/training.py), 13,004,888 parameters, 52 MB.
#            name                 gpus local base_lr  max_lr  target patience sizes            epochs  rate   MB
PAIRS = (
    ("alexnet-imagenet", 16, 64, 2.5e-4, 0.004, 0.25, 20, (10000, 20000), 30, 1500.0, 240.0),
    ("resnet50-imagenet", 16, 32, 5e-4, 0.008, 0.55, 10, (10000, 20000), 20, 300.0, 100.0),
    ("vgg16-imagenet", 16, 32, 5e-4, 0.008, 0.55, 10, (10000, 20000), 20, 200.0, 550.0),
    ("inception_v3-imagenet", 16, 32, 5e-4, 0.008, 0.55, 10, (10000, 20000), 20, 250.0, 100.0),
    ("resnet18-cifar", 4, 256, 0.005, 0.08, 0.7, 10, (20000, 40000), 25, 4000.0, 45.0),
    ("googlenet-cifar", 4, 256, 0.005, 0.08, 0.7, 10, (20000, 40000), 25, 2000.0, 52.0),
    ("vgg16-cifar", 4, 128, 0.001, 0.016, 0.7, 10, (20000, 40000), 25, 3000.0, 553.0),
    ("bert-cola", 2, 16, 5e-6, 2e-5, 0.8, 5, (5000, 8000), 5, 100.0, 440.0),
    ("bert-mrpc", 2, 16, 5e-6, 2e-5, 0.8, 5, (3600,), 5, 100.0, 440.0),
    ("bert-sst2", 8, 32, 2.5e-6, 2e-5, 0.9, 5, (10000, 20000), 4, 100.0, 440.0),
)
PAIR_NAMES = tuple(p[0] for p in PAIRS)
_PAIR = {p[0]: p for p in PAIRS}
# Interconnects (ours): an all-reduce moves about twice the model; NVLink within a machine at
# ~20 GB/s, EDR InfiniBand between machines at ~10 GB/s, and a fixed start-up cost per step.
_INTRA_GBPS, _INTER_GBPS, _STEP_S = 20.0, 10.0, 0.005
REFERENCE_EPOCH = 20000.0
# Past this many samples a job's work is no longer a count held exactly in a float.
EXACT_SAMPLES = 2.0**53


def application(name: str, epoch_size: float = REFERENCE_EPOCH) -> ElasticApp:
    """One ONES application as an elastic application (module docstring)."""
    _, gpus, local, base_lr, max_lr, _, _, _, epochs, rate, mb = _PAIR[name]
    sync = 2.0 * mb / 1000.0
    params = np.array(
        [_STEP_S, 1.0 / rate, sync / _INTER_GBPS, 0.1 * sync / _INTER_GBPS, sync / _INTRA_GBPS, 0.05 * sync / _INTRA_GBPS, 1.5]
    )
    init = local * gpus
    # The artifact's cap on the global batch: base batch x max_lr / base_lr (notes §2).
    cap = int(local * max_lr / base_lr)
    return ElasticApp(
        name=name,
        params=params,
        noise_scale=1e15,  # efficiency 1 to 12 digits (an infinite one would make inf/inf)
        init_batch=local,  # a job starts on one GPU (ONES' start policy)
        max_batch=max(cap, init),
        min_local=1,
        max_local=4 * local,
        epochs=epochs,
        epoch_samples=float(epoch_size),
        work_samples=float(epochs * epoch_size),
    )


def profile() -> ElasticProfile:
    """The ten ONES applications as an elastic profile (one epoch size each: a job's own
    `epochs` x `epoch_size` sets its work)."""
    return ElasticProfile([application(n) for n in PAIR_NAMES], "ones")


# Columns only an ONES trace has (a canonical one written from it keeps the others by name).
_OWN_COLUMNS = ("time", "task", "num_gpus")


def looks_like(header: list[str]) -> bool:
    """Whether a CSV header is the ONES artifact's trace's (used by format detection): no
    canonical job_id or arrival_s, and all but a couple of its columns, at least two of them its
    own, so that a trace missing one column is read as ONES' and the reader names what is missing."""
    names = {h.strip() for h in header}
    if names & {"job_id", "arrival_s"}:
        return False
    return len(names & set(TRACE_COLUMNS)) >= len(TRACE_COLUMNS) - 2 and len(names & set(_OWN_COLUMNS)) >= 2


# What each number is (csvtext.NUMBER_KINDS): counts are whole, rates and targets need not be.
_KINDS = {"time": "time", "epoch_size": "count", "batch_size": "count", "num_gpus": "count", **SETTING_KINDS}


def read_trace(path: str | Path) -> pl.DataFrame:
    """ONES' trace format in the canonical schema (module docstring). A missing column, an
    unknown model/task pair or a number out of range is an error naming the file and line."""
    cells = read_cells(path)
    return parse_trace(cells.frame, str(path), cells.lines)


def parse_trace(raw: pl.DataFrame, origin: str, lines: np.ndarray | None = None) -> pl.DataFrame:
    """read_trace on a frame already loaded (cells as text or numbers); `lines[i]` is where row
    i is in the file (by default, the line after a header)."""
    missing = [c for c in TRACE_COLUMNS if c not in raw.columns]
    if missing:
        hint = missing_hint(missing, raw.columns, TRACE_COLUMNS)
        raise TraceError(origin, f"missing column(s) {', '.join(missing)} (an ONES trace has {', '.join(TRACE_COLUMNS)}){hint}")
    warn_near_misses(raw.columns, origin, TRACE_COLUMNS, fixed="an ONES trace")
    if lines is None:
        lines = np.arange(raw.height) + 2
    numbers = {
        col: number_column(raw, col, lines, origin, _KINDS.get(col, "amount"))
        for col in TRACE_COLUMNS
        if col not in ("model", "task")
    }
    _check_training_settings(numbers, raw, origin, lines)
    models = raw["model"].str.strip_chars().str.to_lowercase()
    names = models + "-" + raw["task"].str.strip_chars().str.to_lowercase()
    unknown = np.flatnonzero(~names.is_in(PAIR_NAMES).fill_null(False).to_numpy())
    if unknown.size:
        i = int(unknown[0])
        # (The column at fault: the model if no pair has it, else the task it was given.)
        column = "task" if any(name.startswith(f"{models[i]}-") for name in PAIR_NAMES) else "model"
        raise TraceError(
            origin, f"unknown model/task {names[i]!r} (ONES' pairs: {', '.join(PAIR_NAMES)})", row=int(lines[i]), column=column
        )
    pair = names.replace_strict({n: k for k, n in enumerate(PAIR_NAMES)}, return_dtype=pl.Int64).to_numpy()
    epochs = np.array([p[8] for p in PAIRS], dtype=np.float64)[pair]
    # The job's work in samples must be a count held exactly (below 2**53: past it the runtime's
    # progress in samples would not add up), and what becomes a 64-bit integer (four times the
    # GPUs, the artifact's cap; the global batch) must fit one: else an error on its line.
    with np.errstate(over="ignore"):
        work = epochs * numbers["epoch_size"]
        limits = (
            ("epoch_size", work, EXACT_SAMPLES, "the job's work in samples (its epochs x epoch_size) exceeds 2**53"),
            ("num_gpus", 4.0 * numbers["num_gpus"], INT64_LIMIT, "four times it (the GPUs a job may grow to) exceeds 2**63"),
            (
                "batch_size",
                numbers["batch_size"] * numbers["num_gpus"],
                INT64_LIMIT,
                "the global batch (x num_gpus) exceeds 2**63",
            ),
        )
    for column, values, limit, why in limits:
        over = np.flatnonzero(~(values < limit))
        if over.size:
            i = int(over[0])
            raise TraceError(origin, f"{raw[column][i]} is too large: {why}", row=int(lines[i]), column=column)
    gpus = numbers["num_gpus"].astype(np.int64)
    local = numbers["batch_size"].astype(np.int64)
    _check_batch_range(pair, local, gpus, origin, lines)
    # (A cap beyond 2**53 samples caps nothing; held there, it stays finite and exact. A tiny lr
    # overflows the ratio to inf, which the hold turns into that same cap: nothing to warn of.)
    with np.errstate(over="ignore"):
        cap = np.minimum(np.floor(local * numbers["max_lr"] / numbers["lr"]), EXACT_SAMPLES)
    return pl.DataFrame(
        {
            "job_id": np.arange(len(names), dtype=np.int64),
            "arrival_s": numbers["time"],
            "gpus": gpus,
            "model": names,
            "batch_size": local * gpus,
            "epochs": work / REFERENCE_EPOCH,
            "job_epochs": epochs,
            "local_batch": local,
            "epoch_size": numbers["epoch_size"],
            "patience": numbers["patience"],
            "lr": numbers["lr"],
            "max_lr": numbers["max_lr"],
            "target_acc": numbers["target_acc"],
            # The artifact's caps: at most 4x the requested GPUs, and base batch x max_lr/base_lr.
            "max_gpus": (4 * gpus).astype(np.float64),
            "max_batch_size": np.maximum(cap, local),
        }
    )


def _check_training_settings(numbers: dict[str, np.ndarray], raw: pl.DataFrame, origin: str, lines: np.ndarray) -> None:
    """What no job can mean (traces/trainingsettings.py, the check canonical traces share): a
    target accuracy above 1, a largest learning rate below the base one. An error names the
    line and column."""
    values = {c: pl.Series(c, numbers[c]) for c in TRAINING_SETTINGS}
    found = setting_problems(values, {c: raw.get_column(c) for c in TRAINING_SETTINGS})
    if found:
        i, column, message = found[0]
        raise TraceError(origin, message, row=int(lines[i]), column=column)


def _check_batch_range(pair: np.ndarray, local: np.ndarray, gpus: np.ndarray, origin: str, lines: np.ndarray) -> None:
    """Each row's batches against what its application covers (its smallest batch M0 to its
    largest): the batch per GPU (`batch_size`), which a job starts with on one GPU (ONES' start),
    at most the largest; the global batch (x num_gpus), what it asks for on all its GPUs, at
    least the smallest. The global batch may be past the largest (ONES keeps its plans within
    the job's cap), and the batch per GPU below the smallest, as long as the global one is not.
    An error names the file, line and column. `pair` is each row's index in PAIRS."""
    apps = [application(name) for name in PAIR_NAMES]
    low = np.array([app.init_batch for app in apps], dtype=np.int64)[pair]
    high = np.array([app.max_batch for app in apps], dtype=np.int64)[pair]
    checks = (
        (local > high, lambda i: f"{int(local[i])} (the batch per GPU a job starts with on one GPU) is above the largest batch"),
        (
            local * gpus < low,
            lambda i: (
                f"{int(local[i])} x num_gpus {int(gpus[i])} = {int(local[i] * gpus[i])} (the job's global batch) is below the smallest batch"
            ),
        ),
    )
    for bad, what in checks:
        hits = np.flatnonzero(bad)
        if hits.size:
            i = int(hits[0])
            raise TraceError(
                origin,
                f"{what(i)} the elastic profile covers for model/task {PAIR_NAMES[pair[i]]} ({int(low[i])} to {int(high[i])})",
                row=int(lines[i]),
                column="batch_size",
            )


def generate(jobs: int = 400, mean_gap_s: float = 30.0, seed: int = 0) -> pl.DataFrame:
    """An ONES-like workload: `jobs` jobs drawn evenly over the ten pairs of Table 2 (each pair
    one of its dataset sizes at random), Poisson arrivals with mean gap `mean_gap_s` from 0, in
    the same columns as read_trace."""
    if jobs < 1 or mean_gap_s <= 0:
        raise ValueError(f"need jobs >= 1 and mean_gap_s > 0, got {jobs} and {mean_gap_s}")
    rng = np.random.default_rng(seed)
    pick = rng.permutation(np.arange(jobs) % len(PAIRS))
    arrival = np.concatenate(([0.0], np.cumsum(rng.exponential(mean_gap_s, jobs - 1))))
    # Each job's dataset size, one of its pair's: `integers(0, n)` is what `choice` of n sizes
    # draws (nothing for one size), so one call with each row's n draws the rows' in turn.
    counts = np.array([len(p[7]) for p in PAIRS], dtype=np.int64)
    which = rng.integers(0, counts[pick])
    widest = int(counts.max())
    sizes = np.array([p[7] + (p[7][-1],) * (widest - len(p[7])) for p in PAIRS], dtype=np.int64)
    table = {
        "model": pl.Series([p[0].split("-")[0] for p in PAIRS], dtype=pl.String),
        "task": pl.Series([p[0].split("-")[1] for p in PAIRS], dtype=pl.String),
    }
    taken = lambda k, dtype: np.array([p[k] for p in PAIRS], dtype=dtype)[pick]  # noqa: E731
    frame = pl.DataFrame(
        {
            "time": np.floor(arrival),
            "model": table["model"].gather(pick),
            "task": table["task"].gather(pick),
            "epoch_size": sizes[pick, which],
            "patience": taken(6, np.int64),
            "batch_size": taken(2, np.int64),
            "lr": taken(3, np.float64),
            "max_lr": taken(4, np.float64),
            "target_acc": taken(5, np.float64),
            "num_gpus": taken(1, np.int64),
        }
    )
    return parse_trace(frame, "generated")


def read_history(path: str | Path) -> pl.DataFrame:
    """The artifact's `job_history.csv`: per-epoch logs of completed jobs (HISTORY_COLUMNS), the
    numbers as floats. A bad cell is an error naming the file, line and column."""
    origin = str(path)
    cells = read_cells(path)
    raw, lines = cells.frame, cells.lines
    missing = [c for c in HISTORY_COLUMNS if c not in raw.columns]
    if missing:
        raise TraceError(origin, f"missing column(s) {', '.join(missing)}")
    # A label is num_samples / total_workload: both must be positive, the first no larger.
    kinds = {"epoch": "count", "epoch_size": "count", "num_samples": "amount", "total_workload": "amount"}
    kinds |= {"batch_size": "count", "lr": "amount", "throughput": "amount"}
    numbers = {c: number_column(raw, c, lines, origin, kinds.get(c, "time")) for c in HISTORY_COLUMNS if c != "id"}
    over = np.flatnonzero(numbers["num_samples"] > numbers["total_workload"])
    if over.size:
        i = int(over[0])
        raise TraceError(
            origin,
            f"{numbers['num_samples'][i]:g} is more than total_workload {numbers['total_workload'][i]:g}",
            row=int(lines[i]),
            column="num_samples",
        )
    return pl.DataFrame({"id": raw["id"], **numbers})
