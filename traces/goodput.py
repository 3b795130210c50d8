"""Elastic jobs: throughput as a function of GPU count, placement and batch size, statistical
efficiency of a batch size, and goodput = throughput x efficiency (Pollux, Qiao et al., OSDI 2021,
§3.1-3.2; the model forms of its public simulator, petuum/adaptdl branch osdi21-artifact,
`simulator/goodput.py`, Apache-2.0, re-expressed here over arrays).

**Throughput.** One optimizer step of a job on `replicas` GPUs spread over `nodes` machines, with
per-GPU (atomic) batch `m` and `s` gradient-accumulation steps, takes

    T_compute = alpha_c + beta_c * m                               (forward and backward pass)
    T_network = alpha_n + beta_n * max(replicas - 2, 0)   if nodes > 1 (the slowest link: between machines)
              = alpha_r + beta_r * max(replicas - 2, 0)   if nodes = 1 and replicas > 1
              = 0                                         on one GPU
    T_step    = s * T_compute + (T_compute^gamma + T_network^gamma)^(1/gamma)

(gamma in [1, 10] says how far the gradient sync overlaps the backward pass), and processes
`replicas * m * (s + 1)` samples. The seven parameters are fitted per application, as Pollux's
agent does, to the measured step and sync times in `placements.csv` and `scalability.csv`
(minimising the RMS log error of compute and step time, with Pollux's small regularisers).

**Efficiency.** With the gradient noise scale phi (Pollux's PGNS) and the application's initial
batch size M0, a step at batch M makes the progress of (phi + M0)/(phi + M) * M/M0 steps at M0;
per sample, the efficiency is

    E(M) = (phi + M0) / (phi + M)

(goodput.py's `efficiency`: gain / scale with gain = (var + sqr)/(var/scale + sqr), scale = M/M0,
phi = var/sqr * M0). We fit one phi per application on the `validation-<M>.csv` curves: at the
last epoch of training, a curve's progress (in steps at M0) over its iterations times M/M0 is its
cumulative efficiency at M, which sets how long training at M takes; phi minimises the squared
log error over the curves (within about 2% of every curve for Pollux's six applications).
Pollux's simulator reads a per-epoch noise scale instead (it grows as training goes on, so early
epochs are less efficient at large batches than this average says).

**Work.** An elastic job's work is counted in samples at M0 (progress that does not depend on
the batch size it trains with): `max_epochs` epochs of the application's progress curve times M0.
Its rate in the job table is its goodput, samples/s x E(M).

Locating a batch on a placement: local batch ceil(M / replicas); accumulation steps so that the
atomic batch stays within the application's largest measured one (and at least one on a single
GPU above M0, as Pollux does); atomic batch ceil(local / (steps + 1)).
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import numpy as np

from roundhouse.errors import TraceError

PARAM_NAMES = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")

# Epochs each application trains for, transcribed from Pollux's simulator (adaptdl
# osdi21-artifact, simulator/applications.py, APPLICATIONS), with yolov3's largest atomic batch.
POLLUX_EPOCHS = {"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50}
POLLUX_MAX_LOCAL = {"yolov3": 8}


def step_time(params: np.ndarray, nodes, replicas, atomic, accum) -> np.ndarray:
    """Seconds per optimizer step (see the module docstring); `params` is (..., 7) in
    PARAM_NAMES order, broadcast against the other arguments."""
    p = np.asarray(params, dtype=np.float64)
    nodes, replicas = np.asarray(nodes), np.asarray(replicas)
    compute = p[..., 0] + p[..., 1] * atomic
    retro = np.maximum(replicas - 2, 1e-8)
    network = np.where(nodes > 1, p[..., 2] + p[..., 3] * retro, np.where(replicas > 1, p[..., 4] + p[..., 5] * retro, 1e-8))
    gamma = p[..., 6]
    optim = np.exp(np.log(compute**gamma + network**gamma) / gamma)
    return accum * compute + optim


def split_batch(batch, replicas, max_local, init_batch) -> tuple[np.ndarray, np.ndarray]:
    """(atomic batch, accumulation steps) of a global batch on `replicas` GPUs."""
    batch, replicas = np.asarray(batch, dtype=np.float64), np.asarray(replicas, dtype=np.float64)
    eps = 1e-8
    local = np.ceil(batch / replicas - eps)
    accum = np.ceil(local / max_local - eps) - 1
    accum = np.where((replicas == 1) & (batch > init_batch + eps), np.maximum(accum, 1), accum)
    atomic = np.ceil(local / (accum + 1) - eps)
    return atomic, accum


def efficiency(phi, init_batch, batch) -> np.ndarray:
    """Statistical efficiency of global batch `batch`: progress per sample relative to a sample
    at the initial batch size, (phi + M0) / (phi + M); 1 where phi is infinite."""
    phi = np.asarray(phi, dtype=np.float64)
    batch = np.asarray(batch, dtype=np.float64)
    # An infinite phi (one validation curve: nothing measures what a larger batch costs) is
    # efficiency 1, not inf/inf.
    finite = np.isfinite(phi)
    safe = np.where(finite, phi, 0.0)
    return np.where(finite, (safe + init_batch) / (safe + batch), 1.0)


def perf_fit_error(params: np.ndarray, nodes, replicas, atomic, compute_time, step_s) -> float:
    """How far throughput parameters are from measured (compute, step) times: the objective
    `fit_perf_params` minimizes (log errors, with Pollux's regularization)."""
    nodes, replicas, atomic = (np.asarray(a, dtype=np.float64) for a in (nodes, replicas, atomic))
    log_compute, log_step = np.log(np.asarray(compute_time, dtype=np.float64)), np.log(np.asarray(step_s, dtype=np.float64))
    return _perf_fit_error(np.asarray(params, dtype=np.float64), nodes, replicas, atomic, log_compute, log_step)


def _perf_fit_error(p: np.ndarray, nodes, replicas, atomic, log_compute, log_step) -> float:
    pred_compute = p[0] + p[1] * atomic
    retro = np.maximum(replicas - 2, 1e-8)
    network = np.where(nodes > 1, p[2] + p[3] * retro, np.where(replicas > 1, p[4] + p[5] * retro, 1e-8))
    log_optim = np.log(pred_compute ** p[6] + network ** p[6]) / p[6]
    err = np.sqrt(((np.log(pred_compute) - log_compute) ** 2).mean()) + np.sqrt(((log_optim - log_step) ** 2).mean())
    reg = 1e-3 * (p[6] - 1) ** 2 + 1e-2 * ((p[3] / p[2]) ** 2 + (p[5] / p[4]) ** 2)
    return float(err + reg)


def fit_perf_params(nodes, replicas, atomic, compute_time, step_s) -> np.ndarray:
    """Pollux's throughput parameters fitted to measured (compute, step) times; returns the
    seven parameters (PARAM_NAMES). Same objective and bounds as Pollux's `fit_perf_params`."""
    from scipy.optimize import minimize

    nodes, replicas, atomic = (np.asarray(a, dtype=np.float64) for a in (nodes, replicas, atomic))
    compute_time, step_s = np.asarray(compute_time, dtype=np.float64), np.asarray(step_s, dtype=np.float64)
    start = np.array([1e-1, 1e-2] * 3 + [1.0 + 1e-3])
    lower = np.array([1e-8, 1e-8] * 3 + [1.0])
    upper = np.array([np.inf, np.inf] * 3 + [10.0])
    fixed = np.zeros(7, dtype=bool)
    if len(np.unique(atomic)) == 1:
        start[0] = lower[0] = upper[0] = compute_time.mean() / 2
        fixed[0] = True
    if not (nodes > 1).any():
        fixed[2:4] = True
    if not ((nodes == 1) & (replicas > 1)).any():
        fixed[4:6] = True
    if not (replicas > 2).any():
        fixed[[3, 5]] = True
    start[fixed & (np.arange(7) != 0)] = lower[fixed & (np.arange(7) != 0)]
    free = ~fixed
    log_compute, log_step = np.log(compute_time), np.log(step_s)

    def objective(x: np.ndarray) -> float:
        p = start.copy()
        p[free] = x
        return _perf_fit_error(p, nodes, replicas, atomic, log_compute, log_step)

    result = minimize(objective, start[free], method="L-BFGS-B", bounds=list(zip(lower[free], upper[free])))
    params = start.copy()
    params[free] = result.x
    if not (nodes > 1).any():  # Pollux's prior: crossing machines is no faster than staying on one
        params[2] = max(params[2], params[4] * 1.1)
        params[3] = max(params[3], params[5] * 1.1)
    return params


def fit_noise_scale(init_batch: float, curves: dict[int, tuple[np.ndarray, np.ndarray]], epochs: int) -> float:
    """One gradient noise scale phi for an application, from its validation curves: `curves[M]`
    holds (progress in steps at M0, iterations at M) per epoch. Each curve above M0 gives its
    cumulative efficiency at epoch `epochs` (what sets the time to the end of training at that
    batch size); phi is the least-squares fit in log efficiency, on a fine log grid."""
    measured, batch = [], []
    for m, (progress, iterations) in curves.items():
        if m <= init_batch:
            continue
        k = min(epochs, len(progress)) - 1
        measured.append(progress[k] / (iterations[k] * m / init_batch))
        batch.append(float(m))
    if not measured:
        return math.inf  # one curve only: no batch size says what efficiency costs (E = 1)
    eff, sizes = np.array(measured), np.array(batch)
    grid = np.logspace(-2, 9, 2201)  # 0.01 .. 1e9 samples, 200 points a decade
    err = ((np.log(efficiency(grid[:, None], init_batch, sizes[None, :])) - np.log(eff)[None, :]) ** 2).sum(axis=1)
    return float(grid[err.argmin()])


@attrs.frozen
class ElasticApp:
    """One application's fitted models and limits."""

    name: str
    params: np.ndarray  # PARAM_NAMES
    noise_scale: float  # phi, samples
    init_batch: int  # M0: the smallest validated batch size
    max_batch: int  # the largest validated batch size
    min_local: int
    max_local: int
    epochs: int
    epoch_samples: float  # samples at M0 in one epoch
    work_samples: float  # samples at M0 to the end of training

    def rate(self, nodes, replicas, batch) -> np.ndarray:
        """Goodput: samples/s x efficiency, of global batch `batch` on a placement."""
        return self.throughput(nodes, replicas, batch) * efficiency(self.noise_scale, self.init_batch, batch)

    def throughput(self, nodes, replicas, batch) -> np.ndarray:
        """Samples per second of global batch `batch` on `replicas` GPUs over `nodes` machines."""
        atomic, accum = split_batch(batch, replicas, self.max_local, self.init_batch)
        return np.asarray(replicas) * atomic * (accum + 1) / step_time(self.params, nodes, replicas, atomic, accum)


class ElasticProfile:
    """Elastic applications by name (a profile kind beside the throughput tables): throughput
    from GPU count, placement and batch size, and statistical efficiency."""

    def __init__(self, apps: list[ElasticApp], origin: str = ""):
        self.apps = tuple(apps)
        self.origin = origin
        self._index = {a.name.lower(): i for i, a in enumerate(self.apps)}
        # Traces spell models Gavel's way once read (Pollux's "ncf" becomes "Recommendation"):
        # an application is found under that name too, unless another application has it.
        from roundhouse.traces.profiles import canonical_model

        for i, a in enumerate(self.apps):
            self._index.setdefault(str(canonical_model(a.name) or a.name).lower(), i)
        self._params = np.stack([a.params for a in self.apps]) if apps else np.zeros((0, 7))
        self._phi = np.array([a.noise_scale for a in self.apps])
        self._init = np.array([a.init_batch for a in self.apps], dtype=np.float64)
        self._max_local = np.array([a.max_local for a in self.apps], dtype=np.float64)
        self._min_local = np.array([a.min_local for a in self.apps], dtype=np.float64)
        self._max_batch = np.array([a.max_batch for a in self.apps], dtype=np.float64)

    @classmethod
    def load_pollux(cls, directory: str | Path, epochs: dict[str, int] | None = None) -> ElasticProfile:
        """Pollux's per-application measurements (one folder per application, each with
        placements.csv, scalability.csv and validation-<batch>.csv), fitted."""
        root = Path(directory)
        key = (str(root.resolve()), tuple(sorted((epochs or {}).items())))
        if key in _LOADED:  # fitting takes about half a second per application: once per process
            return _LOADED[key]
        if not root.is_dir():
            raise TraceError(str(root), "no such folder (an elastic profile is a folder of application folders)")
        epochs = {**POLLUX_EPOCHS, **(epochs or {})}
        apps = [_load_app(sub, epochs) for sub in sorted(root.iterdir()) if (sub / "placements.csv").is_file()]
        if not apps:
            raise TraceError(str(root), "no application folder with a placements.csv in it")
        loaded = _LOADED[key] = cls(apps, str(root))
        return loaded

    def row(self, name: str | None) -> int:
        """The application's index, -1 if unknown."""
        return -1 if name is None else self._index.get(str(name).lower(), -1)

    def rates(self, app: np.ndarray, nodes, replicas, batch, phi=None) -> np.ndarray:
        """Goodput of each (application index, placement, global batch); `phi`, if given, is
        each one's measured gradient noise scale (NaN: the application's fitted one)."""
        return self.throughput(app, nodes, replicas, batch) * self.efficiency(app, batch, phi)

    def throughput(self, app: np.ndarray, nodes, replicas, batch) -> np.ndarray:
        app = np.asarray(app, dtype=np.int64)
        replicas = np.asarray(replicas, dtype=np.float64)
        atomic, accum = split_batch(batch, replicas, self._max_local[app], self._init[app])
        return replicas * atomic * (accum + 1) / step_time(self._params[app], nodes, replicas, atomic, accum)

    def efficiency(self, app: np.ndarray, batch, phi=None) -> np.ndarray:
        app = np.asarray(app, dtype=np.int64)
        return efficiency(self.noise_scale(app, phi), self._init[app], batch)

    def noise_scale(self, app: np.ndarray, phi=None) -> np.ndarray:
        """Each job's gradient noise scale: the one it measured (a live job reports it: the
        job-table column `grad_noise_scale`) where given, positive and finite, else its
        application's fitted one."""
        fitted = self._phi[np.asarray(app, dtype=np.int64)]
        if phi is None:
            return fitted
        phi = np.broadcast_to(np.asarray(phi, dtype=np.float64), fitted.shape)
        return np.where(np.isfinite(phi) & (phi > 0), phi, fitted)

    def best_batch(self, app: np.ndarray, nodes, replicas, candidates: int = 50, phi=None) -> tuple[np.ndarray, np.ndarray]:
        """(global batch size, goodput) that maximise each job's goodput on a placement of
        `replicas` GPUs over `nodes` machines, as Pollux's agent picks it: `candidates` sizes
        spaced geometrically from max(M0, smallest per-GPU batch x replicas) to the largest
        validated batch (whole samples; more GPUs than that range allows: the smallest, goodput 0
        where even it is too large)."""
        app = np.asarray(app, dtype=np.int64)
        nodes = np.broadcast_to(np.asarray(nodes, dtype=np.float64), app.shape)
        replicas = np.broadcast_to(np.asarray(replicas, dtype=np.float64), app.shape)
        low = np.maximum(self._init[app], self._min_local[app] * replicas)
        high = np.maximum(self._max_batch[app], low)
        steps = np.linspace(0.0, 1.0, candidates)
        spaced = np.exp(np.log(low)[:, None] + (np.log(high) - np.log(low))[:, None] * steps[None, :])
        # exp(log(M)) can fall a hair below M: floored, the smallest candidate would be M - 1,
        # under the smallest validated batch. Whole samples within [low, high].
        batch = np.clip(np.floor(spaced * (1 + 1e-9)), np.ceil(low)[:, None], np.floor(high)[:, None])
        shape = batch.shape
        a = np.repeat(app, candidates)
        phi = None if phi is None else np.repeat(np.broadcast_to(np.asarray(phi, dtype=np.float64), app.shape), candidates)
        good = self.rates(a, np.repeat(nodes, candidates), np.repeat(replicas, candidates), batch.ravel(), phi).reshape(shape)
        good = np.where(batch <= self._max_batch[app][:, None], good, 0.0)
        best = good.argmax(axis=1)
        pick = np.arange(len(app))
        return batch[pick, best].astype(np.int64), good[pick, best]


_LOADED: dict[tuple, ElasticProfile] = {}


def _read_csv(path: Path, kinds: dict[str, str], cumulative: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """A measurement file's columns as numbers of their kinds (csvtext.NUMBER_KINDS: a count is
    whole and at least 1, a time 0 or more, an amount more than 0), the `cumulative` ones never
    decreasing from a row to the next; a TraceError names the file, line and column of the
    first bad cell, or the file if it holds no rows."""
    from roundhouse.traces.csvtext import number_column, read_cells

    cells = read_cells(path)
    missing = [c for c in kinds if c not in cells.frame.columns]
    if missing:
        raise TraceError(str(path), f"missing column(s) {', '.join(missing)}")
    if not cells.frame.height:
        raise TraceError(str(path), "has no measurements (only a header)")
    out = {c: number_column(cells.frame, c, cells.lines, str(path), kind) for c, kind in kinds.items()}
    for column in cumulative:
        # A validation curve counts progress and iterations from the start of training: a drop
        # is a damaged file, and would skew the noise-scale fit without a word.
        drop = np.flatnonzero(np.diff(out[column]) < 0)
        if drop.size:
            i = int(drop[0]) + 1
            raise TraceError(
                str(path),
                f"{out[column][i]:g} is less than {out[column][i - 1]:g} at line {int(cells.lines[i - 1])} "
                "(a validation curve counts from the start of training)",
                row=int(cells.lines[i]),
                column=column,
            )
    if "sync_time" in out:
        # Compute time is step time less sync time: the throughput fit takes its logarithm.
        bad = np.flatnonzero(out["sync_time"] >= out["step_time"])
        if bad.size:
            i = int(bad[0])
            raise TraceError(
                str(path),
                f"{out['sync_time'][i]:g} is not less than step_time {out['step_time'][i]:g}",
                row=int(cells.lines[i]),
                column="sync_time",
            )
    if "placement" in out:
        # Each digit is one machine's GPUs: a 0 would count a machine that holds none.
        bad = np.flatnonzero(["0" in str(int(p)) for p in out["placement"]])
        if bad.size:
            i = int(bad[0])
            raise TraceError(
                str(path),
                f"{int(out['placement'][i])} has a 0 digit (each digit is one machine's GPUs, 1 to 9)",
                row=int(cells.lines[i]),
                column="placement",
            )
    return out


_PLACEMENT_COLUMNS = {"placement": "count", "local_bsz": "count", "step_time": "amount", "sync_time": "time"}
_SCALABILITY_COLUMNS = {
    "num_nodes": "count",
    "num_replicas": "count",
    "local_bsz": "count",
    "step_time": "amount",
    "sync_time": "time",
}
_VALIDATION_COLUMNS = {"progress": "amount", "iteration": "amount"}


def perf_measurements(folder: Path, placements: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """An application folder's measured step times (placements.csv, and scalability.csv if
    there): nodes, replicas, local batch, compute seconds and step seconds per measurement.
    `placements`: placements.csv's columns, if already read."""
    if placements is None:
        placements = _read_csv(folder / "placements.csv", _PLACEMENT_COLUMNS)
    digits = [str(int(p)) for p in placements["placement"]]
    nodes = np.array([len(d) for d in digits], dtype=np.float64)
    replicas = np.array([sum(map(int, d)) for d in digits], dtype=np.float64)
    atomic, step_s, sync = placements["local_bsz"], placements["step_time"], placements["sync_time"]
    scale_path = folder / "scalability.csv"
    if scale_path.is_file():
        s = _read_csv(scale_path, _SCALABILITY_COLUMNS)
        nodes, replicas = np.r_[nodes, s["num_nodes"]], np.r_[replicas, s["num_replicas"]]
        atomic, step_s, sync = np.r_[atomic, s["local_bsz"]], np.r_[step_s, s["step_time"]], np.r_[sync, s["sync_time"]]
    return nodes, replicas, atomic, step_s - sync, step_s


def _epochs_of(folder: Path, name: str, epochs: dict[str, int], curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> int:
    """How many epochs the application trains for: its own (`epochs`, Pollux's for its six
    applications), which every validation curve must reach (a row an epoch); an application
    without a number of its own trains for as many epochs as its shortest curve has."""
    own = epochs.get(name)
    if own is None:
        return min(len(c[0]) for c in curves.values())
    short = [batch for batch, c in sorted(curves.items()) if len(c[0]) < own]
    if short:
        batch = short[0]
        raise TraceError(
            str(folder / f"validation-{batch}.csv"),
            f"has {len(curves[batch][0])} epoch(s) of measurements (a row each), but {name} trains for {own} epochs: "
            f"a validation curve needs a row for each of them",
        )
    return own


def _load_app(folder: Path, epochs: dict[str, int]) -> ElasticApp:
    name = folder.name
    placements = _read_csv(folder / "placements.csv", _PLACEMENT_COLUMNS)
    params = fit_perf_params(*perf_measurements(folder, placements))
    curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for path in sorted(folder.glob("validation-*.csv")):
        digits = path.stem.removeprefix("validation-")
        # A batch of 0 would be the smallest, so the initial batch: every job would need no work.
        if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
            raise TraceError(str(path), "a validation file's name must end in its batch size, at least 1: validation-<batch>.csv")
        batch = int(digits)
        v = _read_csv(path, _VALIDATION_COLUMNS, cumulative=tuple(_VALIDATION_COLUMNS))
        curves[batch] = (v["progress"], v["iteration"])
    if not curves:
        raise TraceError(str(folder), "no validation-<batch>.csv file (the efficiency model needs one)")
    init_batch = min(curves)
    n_epochs = _epochs_of(folder, name, epochs, curves)
    phi = fit_noise_scale(init_batch, curves, n_epochs)
    # Pollux's get_progress: the least progress any curve shows at that epoch.
    work_steps = min(float(c[0][n_epochs - 1]) for c in curves.values())
    first_epoch = min(float(c[0][0]) for c in curves.values())
    min_local = int(placements["local_bsz"].min())
    max_local = POLLUX_MAX_LOCAL.get(name, int(placements["local_bsz"].max()))
    return ElasticApp(
        name=name,
        params=params,
        noise_scale=phi,
        init_batch=init_batch,
        max_batch=max(curves),
        min_local=min_local,
        max_local=max_local,
        epochs=n_epochs,
        epoch_samples=first_epoch * init_batch,
        work_samples=work_steps * init_batch,
    )
