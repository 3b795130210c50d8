"""Pollux workloads (Qiao et al., OSDI 2021): the reader of its workload CSVs and a generator of
Pollux-like workloads.

**Workload** (Pollux's simulator, petuum/adaptdl branch osdi21-artifact, `simulator/workloads*/`):
one job a row, `name,time,application,num_replicas,batch_size`, where `time` is the arrival in
seconds, `application` names one of the application folders beside the workloads
(`traces/<application>/`, Pollux's measurements, turned into an elastic profile by
traces/goodput.py), and `num_replicas`/`batch_size` the tuned GPU count and global batch size
that Pollux's baselines run with. Read into the canonical schema: `job_id` (row order, as the
names' suffixes count), `arrival_s`, `model` (the application), `gpus`, `batch_size`, with
`epochs` (the application's, as Pollux's simulator trains it), and `name`, `max_gpus` and
`batch_fixed` as extra columns.

**Limits, as Pollux's simulator sets them** (`simulator.py`, `get_pollux_job_info`): a job may
hold at most min(64, largest validated batch / smallest per-GPU batch) GPUs (`max_gpus`); NCF
jobs run on one GPU at their trace batch size, 32,768, which the agent does not change
(`batch_fixed` = 1; the simulator sets `target_batch_size` for them).

A row whose application the profile does not know, or whose batch size lies outside the
application's validated range, is an error naming the file, the line and the column. The
profile is the run's elastic profile (the graph's `elastic_profile`, which
`traces.formats.load_trace` is given), else Pollux's six applications as fitted here
(`profile()`, FITTED), or a folder of measurements given to `read_workload`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import number_column, read_cells
from roundhouse.traces.goodput import ElasticApp, ElasticProfile
from roundhouse.traces.schema import INT64_LIMIT, missing_hint, warn_near_misses

WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
# Pollux's simulator caps a job at 64 replicas ("simulator can't handle more") and runs NCF on
# one GPU at a fixed batch size.
MAX_REPLICAS = 64
FIXED_BATCH_APPS = ("ncf",)

# Ours, for the generator: (GPUs, global batch) configurations per application, each a
# validated batch size with a per-GPU batch inside the measured range.
CONFIGS = {
    "cifar10": ((1, 128), (2, 256), (4, 512), (8, 1024)),
    "ncf": ((1, 32768),),
    "deepspeech2": ((1, 20), (2, 40), (4, 80), (8, 160)),
    "bert": ((1, 12), (2, 24), (4, 48), (8, 96)),
    "yolov3": ((1, 8), (2, 16), (4, 32), (8, 64)),
    "imagenet": ((4, 800), (8, 1600), (16, 3200), (32, 6400)),
}
# The share of each application among the jobs of Pollux's workload 6 (counted from its 160 rows).
MIX = {"cifar10": 67, "ncf": 54, "deepspeech2": 16, "bert": 15, "yolov3": 5, "imagenet": 3}


# Pollux's six applications as traces/goodput.py fits them from Pollux's measurements
# (`simulator/traces/<application>/` of petuum/adaptdl osdi21-artifact, Apache-2.0), transcribed
# so that a graph can run them without the data (`elastic_profile = "pollux";`), and the same on
# every machine: the fit (L-BFGS-B on numerical gradients) stops at slightly different points
# with different BLAS kernels, and for NCF at a much worse one on some. A test refits them from
# ../shared/data/pollux/traces and checks that these fit the measurements at least as well. Columns: the seven throughput parameters (PARAM_NAMES),
# noise scale phi, M0, largest validated batch, smallest and largest per-GPU batch, epochs,
# samples at M0 in the first epoch and to the end of training.
FITTED = (
    ("bert", (0.171941, 0.05861, 1.38572, 0.00943149, 0.284176, 0.00964167, 1.9022), 9015.71, 12, 384, 4, 12, 2, 88644.0, 177288.0),
    ("cifar10", (0.0174183, 0.000700725, 0.122056, 0.00264181, 0.0316082, 0.00279674, 2.06935), 5956.62, 128, 4096, 32, 1024, 100, 50011.441, 5000052.2),
    ("deepspeech2", (0.311104, 0.0238438, 0.487111, 0.00981888, 0.0840068, 0.00136567, 1.41305), 1035.14, 20, 640, 10, 80, 80, 7134.5473, 570720.0),
    ("imagenet", (0.0641618, 0.00448009, 0.299279, 0.00663444, 0.0572989, 0.00206451, 2.46504), 19724.2, 200, 12800, 20, 200, 90, 1281185.4, 115305120.0),
    ("ncf", (0.00690817, 6.41644e-07, 0.0170994, 0.000566384, 0.0221973, 6.91078e-06, 1.24866), 1531090.0, 256, 32768, 32, 32768, 10, 4970904.1, 49708544.0),
    ("yolov3", (0.187088, 0.0253875, 0.749225, 0.0107151, 0.128345, 0.0174386, 1.10795), 512.861, 8, 512, 4, 8, 50, 16551.783, 827551.82),
)  # fmt: skip


def profile() -> ElasticProfile:
    """Pollux's six applications, fitted (FITTED), as an elastic profile."""
    apps = [
        ElasticApp(name, np.array(params), phi, m0, top, low, high, epochs, first, work)
        for name, params, phi, m0, top, low, high, epochs, first, work in FITTED
    ]
    return ElasticProfile(apps, "pollux")


# Columns only a Pollux workload has.
_OWN_COLUMNS = ("application", "num_replicas")


def looks_like(header: list[str]) -> bool:
    """Whether a CSV header is a Pollux workload's (used by format detection): no canonical
    job_id or arrival_s, and all but one of its columns, one of them its own, so that a workload
    missing a column is read as Pollux's and the reader names what is missing."""
    names = {h.strip() for h in header}
    if names & {"job_id", "arrival_s"}:
        return False
    return len(names & set(WORKLOAD_COLUMNS)) >= len(WORKLOAD_COLUMNS) - 1 and bool(names & set(_OWN_COLUMNS))


def read_workload(path: str | Path, apps: ElasticProfile | str | Path | None = None) -> pl.DataFrame:
    """A Pollux workload CSV in the canonical schema (module docstring). `apps` is the elastic
    profile (or its folder) that names the applications; by default Pollux's six (FITTED)."""
    cells = read_cells(path)
    if apps is not None and not isinstance(apps, ElasticProfile):
        apps = ElasticProfile.load_pollux(apps)
    return parse_workload(cells.frame, str(path), apps, cells.lines)


def parse_workload(
    raw: pl.DataFrame, origin: str, apps: ElasticProfile | None = None, lines: np.ndarray | None = None
) -> pl.DataFrame:
    """read_workload on a frame already loaded (cells as text or numbers); `lines[i]` is where
    row i is in the file (by default, the line after a header)."""
    known = apps or profile()
    missing = [c for c in WORKLOAD_COLUMNS if c not in raw.columns]
    if missing:
        hint = missing_hint(missing, raw.columns, WORKLOAD_COLUMNS)
        raise TraceError(
            origin, f"missing column(s) {', '.join(missing)} (a Pollux workload has {', '.join(WORKLOAD_COLUMNS)}){hint}"
        )
    warn_near_misses(raw.columns, origin, WORKLOAD_COLUMNS, fixed="a Pollux workload")
    if lines is None:
        lines = np.arange(raw.height) + 2
    numbers = {
        "time": number_column(raw, "time", lines, origin, "time"),
        "num_replicas": number_column(raw, "num_replicas", lines, origin, "count"),
        "batch_size": number_column(raw, "batch_size", lines, origin, "count"),
    }
    # A GPU count becomes a 64-bit integer: one past that would wrap around to a negative count.
    over = np.flatnonzero(~(numbers["num_replicas"] < INT64_LIMIT))
    if over.size:
        i = int(over[0])
        raise TraceError(
            origin, f"{raw['num_replicas'][i]} is too large (at most 2^63 - 1 GPUs)", row=int(lines[i]), column="num_replicas"
        )
    # Each distinct application looked up once; the checks are per row, in bulk, and the first
    # row that fails either (its application first) is the one named.
    given = raw.get_column("application").cast(pl.String)
    lowered = given.str.strip_chars().str.to_lowercase().fill_null("")
    distinct = lowered.unique(maintain_order=True).to_list()
    found = {name: known.row(name) for name in distinct}
    # (Found only by the name it has once read, such as "recommendation" for ncf, is unknown here.)
    index = {name: a if a >= 0 and name == known.apps[a].name.lower() else -1 for name, a in found.items()}
    app = np.asarray(lowered.replace_strict(index, return_dtype=pl.Int64).to_numpy(), dtype=np.int64)
    n = len(app)
    unknown = app < 0
    safe = np.where(unknown, 0, app).astype(np.intp)
    low = np.array([a.init_batch for a in known.apps] or [0], dtype=np.float64)[safe]
    high = np.array([a.max_batch for a in known.apps] or [0], dtype=np.float64)[safe]
    batch = numbers["batch_size"]
    outside = ~unknown & ~((low <= batch) & (batch <= high))
    bad = np.flatnonzero(unknown | outside)
    if bad.size:
        i = int(bad[0])
        if unknown[i]:
            choices = ", ".join(a.name for a in known.apps)
            raise TraceError(
                origin,
                f"unknown application {raw['application'][i]!r} (known: {choices})",
                row=int(lines[i]),
                column="application",
            )
        a = known.apps[int(app[i])]
        raise TraceError(
            origin,
            f"{str(raw['batch_size'][i]).strip()} is outside what the elastic profile covers for {a.name} ({a.init_batch} to {a.max_batch})",
            row=int(lines[i]),
            column="batch_size",
        )
    _refuse_empty_or_repeated_names(raw, origin, lines)
    caps = np.array([min(MAX_REPLICAS, a.max_batch // max(a.min_local, 1)) for a in known.apps] or [0], dtype=np.float64)
    max_gpus = caps[safe]
    epochs = np.array([a.epochs for a in known.apps] or [0], dtype=np.float64)[safe]
    fixed = lowered.is_in(list(FIXED_BATCH_APPS)).to_numpy()
    max_gpus[fixed] = 1.0
    return pl.DataFrame(
        {
            "job_id": np.arange(n, dtype=np.int64),
            "arrival_s": numbers["time"],
            "gpus": numbers["num_replicas"].astype(np.int64),
            "model": lowered,
            "batch_size": numbers["batch_size"].astype(np.int64),
            "epochs": epochs,
            "name": raw.get_column("name").cast(pl.String).fill_null("None"),
            "max_gpus": max_gpus,
            "batch_fixed": fixed.astype(np.float64),
        }
    )


def _refuse_empty_or_repeated_names(raw: pl.DataFrame, origin: str, lines: np.ndarray) -> None:
    """A TraceError at the first job (in file order) whose name is empty, else naming both lines
    of the first job whose name an earlier job has: Pollux's simulator tells jobs apart by name,
    as every reader refuses a job id used twice."""
    names = raw.get_column("name").cast(pl.String).str.strip_chars()
    empty = (names.str.len_bytes() == 0).fill_null(False)
    if empty.any():
        i = int(empty.arg_true()[0])
        raise TraceError(origin, "the job's name is empty (Pollux tells jobs apart by name)", row=int(lines[i]), column="name")
    repeated = names.is_not_null() & ~names.is_first_distinct()
    if not repeated.any():
        return
    second = int(repeated.arg_true()[0])
    first = int((names == names[second]).arg_true()[0])
    raise TraceError(
        origin, f"job name {names[second]!r} is used twice", row=int(lines[second]), column="name", also=int(lines[first])
    )


def generate(jobs: int = 160, mean_gap_s: float = 180.0, seed: int = 0) -> pl.DataFrame:
    """A Pollux-like workload (ours, seeded): Poisson arrivals with mean gap `mean_gap_s` from 0
    (Pollux's workloads: 160 jobs over 8 hours, one every 3 minutes), applications drawn with
    the shares of Pollux's workload 6 (MIX), and a (GPUs, batch) configuration of the
    application at random (CONFIGS). Same columns as read_workload."""
    if jobs < 1 or not mean_gap_s > 0:
        raise ValueError(f"need jobs >= 1 and mean_gap_s > 0, got {jobs} and {mean_gap_s}")
    rng = np.random.default_rng(seed)
    arrival = np.floor(np.concatenate(([0.0], np.cumsum(rng.exponential(mean_gap_s, jobs - 1)))))
    weights = np.array(list(MIX.values()), dtype=np.float64)
    names = np.array(list(MIX), dtype=object)[rng.choice(len(MIX), size=jobs, p=weights / weights.sum())]
    pick = rng.random(jobs)
    rows = []
    for i, (name, u) in enumerate(zip(names.tolist(), pick.tolist(), strict=True)):
        replicas, batch = CONFIGS[name][int(u * len(CONFIGS[name]))]
        rows.append((f"{name}-{i}", arrival[i], name, replicas, batch))
    return parse_workload(pl.DataFrame(rows, schema=list(WORKLOAD_COLUMNS), orient="row"), "generated")
