"""Trace preparation: a canonical trace frame becomes a `JobBatch` of job specs, with the
columns the runtime derives once per job (whether the profile knows the model, total work,
reference throughput, throughput on each GPU type, placement sensitivity)."""

from __future__ import annotations

import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.jobs import JobBatch
from roundhouse.traces.throughput import ThroughputModel, consolidated_type_rates


def prepare_jobs(
    trace: pl.DataFrame, model: ThroughputModel, reference_gpu: str, n_gpus: int, origin: str
) -> tuple[JobBatch, set[str]]:
    """Turn a canonical trace frame into a JobBatch: work, reference throughput and the
    throughput on each GPU type of the cluster. Returns the batch and the models the profile
    does not know (those jobs, which must have `duration_s`, progress at one unit per second)."""
    profile = model.profile
    gpu_types = model.cluster.gpu_types
    n = trace.height

    def get(name, dtype, fill):
        if name in trace.columns:
            return trace[name].fill_null(fill).to_numpy().astype(dtype, copy=False)
        return np.full(n, fill, dtype)

    job_id = get("job_id", np.int64, 0)
    gpus = get("gpus", np.int64, 1)
    duration = get("duration_s", np.float64, np.nan)
    iterations = get("iterations", np.float64, np.nan)
    batch = get("batch_size", np.int64, 0).copy()  # filled in below (polars may hand out a read-only view)
    raw_models = trace["model"].to_list() if "model" in trace.columns else [None] * n

    models = np.empty(n, dtype=object)
    unknown: set[str] = set()
    for i, m in enumerate(raw_models):
        if m is None:
            continue
        canonical = profile.canonical_model(m)
        if canonical is None:
            unknown.add(m)
        models[i] = canonical
    for i, m in enumerate(models):
        if m is not None and batch[i] <= 0:
            batch[i] = profile.default_batch_size(m)

    type_rates = np.ones((n, len(gpu_types)), dtype=np.float64)
    reference_rate = np.ones(n, dtype=np.float64)
    known = np.array([m is not None for m in models], dtype=bool)
    comm_rows = _communication_rows(model, raw_models, job_id, origin)
    # Under the communication model a job with a duration computes for that long, whatever its
    # model, as in Dally: its compute comes from its trace, the tiers add its communication.
    known &= ~((comm_rows >= 0) & ~np.isnan(duration))
    if known.any():
        idx = known.nonzero()[0]
        sub_models, sub_batch, sub_gpus = models[idx], batch[idx], gpus[idx]
        ref = np.zeros(len(idx))
        for g in np.unique(sub_gpus):
            sel = sub_gpus == g
            ref[sel] = model.estimate(sub_models[sel], sub_batch[sel], reference_gpu, int(g), True)
        type_rates[idx] = consolidated_type_rates(model, sub_models, sub_batch, sub_gpus, gpu_types)
        # Without a reference-type entry, the fastest type stands in as the reference.
        ref = np.where(ref > 0, ref, type_rates[idx].max(axis=1))
        reference_rate[idx] = ref
        bad = idx[ref <= 0]
        if len(bad):
            i = int(bad[0])
            raise TraceError(
                origin,
                f"job {job_id[i]}: the profile has no throughput for {models[i]} (batch size {batch[i]}) "
                f"on {gpus[i]} GPU(s) of any type in this cluster ({', '.join(gpu_types)})",
            )
    missing_duration = ~known & np.isnan(duration)
    if missing_duration.any():
        i = int(missing_duration.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]}: model {raw_models[i]!r} is not in the profile and the job has no duration_s, "
            "so its speed is unknown",
        )
    work = np.where(~np.isnan(iterations) & known, iterations, duration * reference_rate)
    too_big = gpus > n_gpus
    if too_big.any():
        i = int(too_big.nonzero()[0][0])
        raise TraceError(origin, f"job {job_id[i]} asks for {gpus[i]} GPUs but the cluster has {n_gpus}")
    for name, what, per_node in (
        ("cpus", "CPU cores", model.cluster.node_cpus),
        ("memory_gb", "GB of memory", model.cluster.node_memory_gb),
    ):
        _check_machine_resource(trace, name, what, np.asarray(per_node, dtype=np.float64), job_id, gpus, origin)
    columns = {
        "job_id": job_id,
        "arrival_s": get("arrival_s", np.float64, 0.0),
        "gpus": gpus,
        "duration_s": duration,
        "model": models,
        "has_model": known,
        "batch_size": batch,
        "user": np.array(trace["user"].to_list() if "user" in trace.columns else [None] * n, dtype=object),
        "weight": get("weight", np.float64, 1.0),
        "slo_s": get("slo_s", np.float64, np.nan),
        "work": work.astype(np.float64),
        "reference_rate": reference_rate,
    }
    extra = [c for c in trace.columns if c not in columns and c != "iterations"]
    for name in extra:
        series = trace[name]
        columns[name] = (
            series.cast(pl.Float64).fill_null(np.nan).to_numpy()
            if series.dtype.is_numeric()
            else np.array(series.to_list(), dtype=object)
        )
    columns["comm_model"] = comm_rows
    from roundhouse.traces.resources import ResourceTable

    columns["resource_model"] = ResourceTable.load().index(raw_models)
    columns.update(_placement_columns(trace, raw_models, models, known, batch, gpus, model, reference_gpu, origin))
    from roundhouse.traces.losscurves import initial_loss

    loss = initial_loss(trace, origin)
    if loss is not None:
        columns["loss"] = loss  # a live column from here on (the world updates it with progress)
    return JobBatch(columns, type_rates, origin), unknown


def _check_machine_resource(trace, name, what, per_node, job_id, gpus, origin) -> None:
    """Refuse a job whose CPU or memory demand no placement can meet. A job of g GPUs spans at
    most g machines, so it can get at most what the g best-provided machines have together;
    for a 1-GPU job that is the largest machine's."""
    if name not in trace.columns or per_node.size == 0:
        return
    demand = trace[name].cast(pl.Float64).fill_null(0.0).to_numpy()
    best = np.cumsum(np.sort(per_node)[::-1])  # best[k-1]: the k best machines together
    reach = best[np.minimum(gpus, per_node.size) - 1]
    over = demand > reach * (1 + 1e-12)
    if not over.any():
        return
    i = int(over.nonzero()[0][0])
    span = int(min(gpus[i], per_node.size))
    if span == 1:
        where = f"no machine has more than {per_node.max():g}"
    else:
        where = f"its {gpus[i]} GPUs span at most {span} machines, and no {span} machines have more than {reach[i]:g} together"
    raise TraceError(origin, f"job {job_id[i]} asks for {demand[i]:g} {what} but {where}", column=name)


def _communication_rows(model: ThroughputModel, raw_models, job_id, origin) -> np.ndarray:
    """Each job's row in the communication profile; all -1 unless the cluster has network
    tiers. On a tiered cluster a job that names a model must have a profile (a job with no
    model has no communication: it runs as on a cluster without tiers)."""
    table = model.communication
    if table is None:
        return np.full(len(raw_models), -1, dtype=np.int64)
    rows = table.index(raw_models)
    missing = (rows < 0) & np.array([m is not None for m in raw_models], dtype=bool)
    if missing.any():
        i = int(missing.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]}: model {raw_models[i]!r} has no communication profile, which a cluster with network "
            f"tiers needs (the profile {table.source} knows {', '.join(table.models)})",
        )
    return rows


def _placement_columns(trace, raw_models, models, known, batch, gpus, model, reference_gpu, origin) -> dict:
    """`tensor_skew` and `spread_slowdown` per job (traces/placement.py). For a job whose model
    is in the profile, the slowdown is what the profile implies on the reference GPU type."""
    from roundhouse.traces.placement import placement_columns

    out = placement_columns(trace, raw_models, origin)
    multi = (known & (gpus > 1)).nonzero()[0]
    for g in np.unique(gpus[multi]):
        sel = multi[gpus[multi] == g]
        together = model.estimate(models[sel], batch[sel], reference_gpu, int(g), True)
        apart = model.estimate(models[sel], batch[sel], reference_gpu, int(g), False)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["spread_slowdown"][sel] = np.where((together > 0) & (apart > 0), together / apart, np.nan)
    return out
