"""Trace preparation: a canonical trace frame becomes a `JobBatch` of job specs, with the
columns the runtime derives once per job (whether the profile knows the model, total work,
reference throughput, throughput on each GPU type, placement sensitivity)."""

from __future__ import annotations

import numpy as np
import polars as pl

from roundhouse.errors import Location, SchedError, TraceError, did_you_mean
from roundhouse.traces.distinct import DistinctNames
from roundhouse.traces.gputypes import requested_types, restrict, unprofiled_note
from roundhouse.traces.jobs import JobBatch
from roundhouse.traces.schema import MAX_SECONDS
from roundhouse.traces.throughput import ThroughputModel


def prepare_jobs(
    trace: pl.DataFrame,
    model: ThroughputModel,
    reference_gpu: str,
    n_gpus: int,
    origin: str,
    reference_at: Location | str | None = None,
) -> tuple[JobBatch, set[str]]:
    """Turn a canonical trace frame into a JobBatch: work, reference throughput and the
    throughput on each GPU type of the cluster. Returns the batch and the models the profile
    does not know (those jobs, which must have `duration_s`, progress at one unit per second).

    A job whose model the profile knows is measured on `reference_gpu`, which must then be one
    of the profile's GPU types (case aside), else a SchedError says so where the setting was
    given (`reference_at`: its place in the graph, or the option that gave it; None: the
    default). Jobs known only by their duration do not read it."""
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
    names = DistinctNames.of(trace["model"] if "model" in trace.columns else None, n)

    # Per distinct name: its application in the elastic profile, else its name in the profile.
    apps = [_elastic_row(model, m) for m in names.names]
    elastic_rows = names.per_row(apps, -1, np.int64)
    canonical = [profile.canonical_model(m) for m in names.names]
    unknown = {m for m, c, a in zip(names.names, canonical, apps) if c is None and a < 0}
    elastic = elastic_rows >= 0
    known = names.per_row([c is not None for c in canonical], False, bool) & ~elastic
    models = names.per_row(canonical, None)
    models[elastic] = None  # (named below, from their application)
    unset = known & (batch <= 0)
    if unset.any():
        defaults = [profile.default_batch_size(c) if c is not None else 0 for c in canonical]
        batch[unset] = names.per_row(defaults, 0, np.int64)[unset]
    requested = gpus
    if elastic.any():
        local = get("local_batch", np.float64, np.nan)
        known_elastic = _prepare_elastic(model, elastic_rows, batch, local, models, job_id, origin)
        # An elastic job's GPUs are where its scheduler starts it, not what it must have (Pollux
        # and ONES give each job GPUs of their own choosing): more than the cluster's, it starts
        # on all of them.
        gpus = np.where(elastic, np.minimum(gpus, n_gpus), gpus)

    too_big = gpus > n_gpus  # (first: no profile has a rate for more GPUs than there are)
    if too_big.any():
        i = int(too_big.nonzero()[0][0])
        raise TraceError(origin, f"job {job_id[i]} asks for {gpus[i]:,} GPUs but the cluster has {n_gpus:,}")
    _check_largest_type(model, gpus, job_id, origin)
    type_rates = np.ones((n, len(gpu_types)), dtype=np.float64)
    reference_rate = np.ones(n, dtype=np.float64)
    comm_rows = _communication_rows(model, names, job_id, origin)
    comm_rows[elastic] = -1
    # Under the communication model a job with a duration computes for that long, whatever its
    # model: its compute comes from its trace, the tiers add its communication. (Dally's own
    # simulator divides it by the job's GPUs; docs/reproductions.md says why we do not.)
    known &= ~((comm_rows >= 0) & ~np.isnan(duration))
    if known.any():
        idx = known.nonzero()[0]
        _check_reference(profile, reference_gpu, reference_at, int(idx[0]), job_id, names, duration, origin)
        configs = _Configs(names, canonical, batch, idx)
        sub_gpus = gpus[idx]
        ref = np.zeros(len(idx))
        for g in np.unique(sub_gpus):
            sel = sub_gpus == g
            ref[sel] = configs.estimate(model, sel, reference_gpu, int(g), True)
            for t, name in enumerate(gpu_types):  # on one node
                type_rates[idx[sel], t] = configs.estimate(model, sel, name, int(g), True)
        # Without an entry for the job's configuration on the reference type (which the profile
        # has: checked above), the fastest of the cluster's types stands in as the reference.
        fastest = type_rates[idx].max(axis=1)
        reference_rate[idx] = np.where(ref > 0, ref, fastest)
        # A job runs only on the cluster's types: with no rate on any, it would wait forever,
        # whatever the reference type (which the cluster may lack) says.
        bad = idx[~(fastest > 0)]
        if len(bad):
            i = int(bad[0])
            raise TraceError(
                origin,
                f"job {job_id[i]}: the profile has no throughput for {models[i]} (batch size {batch[i]}) "
                f"on {gpus[i]} GPU(s) of any type in this cluster ({', '.join(gpu_types)})"
                + unprofiled_note(gpu_types, profile.gpu_types)
                + _untiered_duration_note(model, duration[i])
                + _built_in_elastic_note(model, models[i]),
            )
        _check_type_with_room(model, idx, type_rates, gpus, models, batch, job_id, origin)
    given_iterations = iterations
    from_duration = np.zeros(n, dtype=bool)  # (elastic jobs whose work their duration sets)
    if elastic.any():
        idx = elastic.nonzero()[0]
        type_rates[idx], reference_rate[idx] = known_elastic.rates(model, gpus[idx], batch[idx])
        epochs = get("epochs", np.float64, np.nan)[idx]
        asked = reference_rate[idx]
        if (requested[idx] != gpus[idx]).any():  # (a duration was taken on the GPUs the trace gives)
            asked = known_elastic.rates(model, requested[idx], batch[idx])[1]
        iterations = iterations.copy()
        iterations[idx], from_duration[idx] = known_elastic.work_of(iterations[idx], epochs, duration[idx], asked)
        known |= elastic
    # A GPU type the trace asks for (traces/gputypes.py): the job's rates on the others are 0.
    wanted_type = requested_types(trace, gpu_types, job_id, origin)
    if wanted_type is not None:
        _check_elastic_request(model, wanted_type, elastic, job_id, origin)
        by_type = np.bincount(model.cluster.gpu_type, minlength=len(gpu_types))
        restrict(type_rates, wanted_type, gpus, by_type, gpu_types, trace, job_id, origin, profile.gpu_types)
    missing_duration = ~known & np.isnan(duration)
    if missing_duration.any():
        i = int(missing_duration.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]}: model {names.name_of(i)!r} is not in the profile and the job has no duration_s, "
            "so its speed is unknown" + _built_in_elastic_note(model, names.name_of(i)),
        )
    work = np.where(~np.isnan(iterations) & known, iterations, duration * reference_rate)
    no_work = np.isnan(work)
    if no_work.any():  # a profiled, non-elastic job given epochs only
        i = int(no_work.nonzero()[0][0])
        raise TraceError(
            origin, f"job {job_id[i]}: {names.name_of(i)!r} is not an elastic application, so it needs duration_s or iterations"
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = work / reference_rate  # (a job's time at its reference speed: a run counts rounds toward it)
    # (Work set by a duration takes that duration, checked already, unless the job asked for
    # more GPUs than it got: then longer, and checked here too.)
    too_long = known & ~np.isnan(iterations) & (~from_duration | (requested != gpus)) & ~(alone <= MAX_SECONDS)
    if too_long.any():
        i = int(too_long.nonzero()[0][0])
        column = _work_column(trace, i, given_iterations[i], bool(elastic[i]))
        message = _too_long(column, iterations[i], alone[i], trace, i, names.name_of(i), requested[i], gpus[i])
        raise TraceError(origin, f"job {job_id[i]}: {message}", column=column)
    # A job's `cpus` and `memory_gb` are not checked against the machines: they are what it
    # would like, not what it must have. Most graphs never read them, and the only elements that
    # do (SynergyTune, SynergyOpt) cap each job's demand at what its machines have, so no demand
    # that passed the schema (0 or more, finite) can break a run; refusing one would only refuse
    # traces written for bigger machines.
    columns = {
        "job_id": job_id,
        "arrival_s": get("arrival_s", np.float64, 0.0),
        "gpus": gpus,
        "duration_s": duration,
        "model": models,
        "has_model": known,
        "batch_size": batch,
        "user": _texts(trace["user"] if "user" in trace.columns else None, n),
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
            else _texts(series, n)
            if series.dtype == pl.String
            else np.array(series.to_list(), dtype=object)
        )
    # An elastic job started on fewer GPUs than it asked for (all of the cluster's) asks for as
    # many cores and as much memory per GPU as its trace says: its `cpus` and `memory_gb` go
    # with its `gpus` (what the allocators divide them by), so they shrink with it.
    capped = requested != gpus
    if capped.any():
        share = gpus / np.maximum(requested, 1)
        for name in ("cpus", "memory_gb"):
            if name in columns and columns[name].dtype.kind == "f":
                columns[name] = np.where(capped, columns[name] * share, columns[name])
    columns["comm_model"] = comm_rows
    from roundhouse.traces.resources import ResourceTable

    columns["resource_model"] = names.per_row(ResourceTable.load().index(names.names), -1, np.int64)
    columns["elastic_model"] = elastic_rows
    if elastic.any():
        limit = columns.get("max_batch_size", np.full(n, np.nan))
        columns["max_batch_size"] = np.where(elastic & np.isnan(limit), known_elastic.max_batch_full(n, elastic), limit)
        size = columns.get("epoch_size", np.full(n, np.nan)).copy()
        size[known_elastic.idx] = np.where(
            np.isnan(size[known_elastic.idx]), known_elastic.epoch_samples, size[known_elastic.idx]
        )
        columns["epoch_size"] = size
    # (Elastic jobs are named after their applications by now.)
    models_by_name = [model.elastic.apps[a].name if a >= 0 and model.elastic is not None else c for a, c in zip(apps, canonical)]
    columns.update(_placement_columns(trace, names, models_by_name, known, batch, gpus, model, reference_gpu, origin))
    from roundhouse.traces.losscurves import initial_loss

    loss = initial_loss(trace, origin)
    if loss is not None:
        columns["loss"] = loss  # a live column from here on (the world updates it with progress)
    increasing = n < 2 or bool(np.count_nonzero(job_id[1:] > job_id[:-1]) == n - 1)
    columns = {name: _one_value(values) for name, values in columns.items()}
    return JobBatch(columns, _one_value(type_rates), origin, increasing), unknown


def _one_value(values: np.ndarray) -> np.ndarray:
    """A column whose jobs all have the same value, as that value repeated without memory (a
    read-only broadcast view); other columns as they are. A source keeps its whole trace
    prepared for the run, and most of a large generated trace's columns are defaults (no
    model, no user, weight 1, ...): a million jobs' copies of them took some 100 MB."""
    if len(values) < 2:
        return values
    first = values[0]
    if values.dtype.kind == "f" and np.isnan(first).all():
        same = bool(np.isnan(values).all())
    elif values.dtype == object:
        same = first is None and not np.not_equal(values, np.array(None, dtype=object)).any()
    else:
        same = bool((values == first).all())
    return np.broadcast_to(values[:1].copy(), values.shape) if same else values


def _work_column(trace: pl.DataFrame, i: int, iterations: float, elastic: bool) -> str | None:
    """The column that set job i's work (None: its elastic application's own), in the order
    `_ElasticJobs.work_of` takes them."""
    if not np.isnan(iterations) or not elastic:
        return "iterations"
    for column in ("epochs", "duration_s"):
        if column in trace.columns and trace[column][i] is not None and not np.isnan(trace[column][i]):
            return column
    return None


def _too_long(column: str | None, work: float, alone: float, trace: pl.DataFrame, i: int, name, asked: int, gpus: int) -> str:
    """Why a job's work takes more than a century, in the words of the column that set it."""
    century = f"more than a century ({MAX_SECONDS:g} s)"
    if column == "duration_s":
        return (
            f"{trace['duration_s'][i]:g} s of {name!r} on the {asked} GPUs it asks for take {alone:.4g} s on the "
            f"cluster's {gpus}, {century}"
        )
    if column == "epochs":
        what = f"{trace['epochs'][i]:g} epochs ({work:g} samples)"
    elif column is None:
        what = f"the {work:g} samples of its application's own training"
    else:
        what = f"{work:g} iterations"
    return f"{what} of {name!r} take {alone:.4g} s at its throughput, {century}"


def _built_in_elastic_note(model: ThroughputModel, name: object) -> str:
    """For a job the graph cannot run, of a graph with no elastic profile: that its model is an
    application of a built-in elastic profile (a trace of `trace generate --workload ones` or
    `pollux`, run under a graph that does not set one), and how to set it; else ""."""
    if model.elastic is not None or not isinstance(name, str):
        return ""
    from roundhouse.traces import ones, pollux

    for profile_name, built_in in (("ones", ones), ("pollux", pollux)):
        if built_in.profile().row(name) >= 0:
            return (
                f"; {name!r} is an application of the built-in elastic profile {profile_name!r}, which this graph does "
                f'not set: to run its jobs as elastic jobs, set elastic_profile = "{profile_name}" (as '
                f"graphs/{profile_name}.sched does)"
            )
    return ""


def _elastic_row(model: ThroughputModel, name: str) -> int:
    """A model's application in the elastic profile, -1 for none (or no elastic profile)."""
    return -1 if model.elastic is None else model.elastic.row(name)


class _ElasticJobs:
    """The elastic jobs of a trace: their applications, batch sizes and work."""

    def __init__(self, model: ThroughputModel, apps: np.ndarray, batch: np.ndarray, idx: np.ndarray):
        assert model.elastic is not None
        self.profile, self.apps, self.idx = model.elastic, apps, idx
        self.work = _per_app(self.profile, "work_samples", float)[apps]
        self.epoch_samples = _per_app(self.profile, "epoch_samples", float)[apps]

    def rates(self, model: ThroughputModel, gpus: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(jobs, GPU types) and reference goodput at the requested GPU count, consolidated
        (as few machines as hold them). The elastic profile knows no GPU types: the same on each."""
        nodes = -(-gpus // max(1, model.cluster.max_gpus_per_node))
        rate = self.profile.rates(self.apps, nodes, gpus, batch)
        return np.repeat(rate[:, None], len(model.cluster.gpu_types), axis=1), rate

    def work_of(self, iterations, epochs, duration, rate) -> tuple[np.ndarray, np.ndarray]:
        """Each job's work in samples at its initial batch size, and whether its duration set it:
        its `iterations`, else its `epochs` of the application's epoch size, else what it does in
        its `duration_s` at `rate` (its goodput on the GPUs and batch size its trace gives), as a
        job of the throughput profile would; else (Pollux's and ONES' traces give no duration)
        its application's own work."""
        from_duration = np.isnan(iterations) & np.isnan(epochs) & ~np.isnan(duration)
        work = np.where(from_duration, duration * rate, self.work)
        work = np.where(np.isnan(epochs), work, epochs * self.epoch_samples)
        return np.where(np.isnan(iterations), work, iterations), from_duration

    def max_batch_full(self, n: int, elastic: np.ndarray) -> np.ndarray:
        out = np.full(n, np.nan)
        out[elastic] = _per_app(self.profile, "max_batch", float)[self.apps]
        return out


def _per_app(profile, field: str, dtype) -> np.ndarray:
    """One field of every application of the elastic profile, by application index."""
    return np.array([getattr(app, field) for app in profile.apps], dtype=dtype)


def _prepare_elastic(model: ThroughputModel, elastic_rows, batch, local, models, job_id, origin) -> _ElasticJobs:
    """Elastic jobs get their application's name and initial batch size (unless the trace gives
    one); a batch size outside the validated range is an error naming the job. Of a job with a
    `local_batch` (ONES' traces), that batch per GPU, which it starts with on one GPU, is what
    must not be past the largest: its `batch_size` (local x GPUs) is what it asks for on all its
    GPUs, and may be (ONES keeps its plans within the job's `max_batch_size`)."""
    assert model.elastic is not None
    profile = model.elastic
    idx = (elastic_rows >= 0).nonzero()[0]
    apps = elastic_rows[idx]
    models[idx] = _per_app(profile, "name", object)[apps]
    init, largest = _per_app(profile, "init_batch", np.int64)[apps], _per_app(profile, "max_batch", np.int64)[apps]
    given = batch[idx]
    per_gpu = local[idx]
    has_local = per_gpu >= 1  # (NaN: none given)
    top = np.where(has_local, per_gpu, given)  # (what the job starts with, on one GPU, if it has a local batch)
    outside = (given > 0) & ((given < init) | (top > largest))
    if outside.any():
        k = int(outside.nonzero()[0][0])
        i, app = int(idx[k]), profile.apps[int(apps[k])]
        what = f"local_batch {per_gpu[k]:g}" if has_local[k] and given[k] >= init[k] else f"batch size {batch[i]}"
        raise TraceError(
            origin,
            f"job {job_id[i]}: {what} is outside what the elastic profile covers for "
            f"{app.name} ({app.init_batch} to {app.max_batch})",
        )
    batch[idx] = np.where(given > 0, given, init)
    return _ElasticJobs(model, apps, batch[idx], idx)


def _check_type_with_room(model: ThroughputModel, idx, type_rates, gpus, models, batch, job_id, origin: str) -> None:
    """Refuse a job whose only GPU types with a throughput for it have fewer GPUs than it asks
    for: a placer puts it on GPUs of one type, so it would wait forever. Not in a run with an
    elastic profile (_check_largest_type says why)."""
    cluster = model.cluster
    if len(cluster.gpu_types) < 2 or model.elastic is not None:
        return
    by_type = np.bincount(cluster.gpu_type, minlength=len(cluster.gpu_types))
    room = by_type[None, :] >= gpus[idx][:, None]
    stuck = idx[~((type_rates[idx] > 0) & room).any(axis=1)]
    if len(stuck):
        i = int(stuck[0])
        kinds = ", ".join(
            f"{name} has {by_type[t]:,}{'' if type_rates[i, t] > 0 else ' but no throughput for it'}"
            for t, name in enumerate(cluster.gpu_types)
        )
        raise TraceError(
            origin,
            f"job {job_id[i]} asks for {gpus[i]:,} GPUs of one type, and no GPU type of this cluster has that many "
            f"with a throughput for {models[i]} at batch size {batch[i]}: {kinds}",
        )


def _texts(column: pl.Series | None, n: int) -> np.ndarray:
    """A text column as Python strings, one object per distinct text (None where a row has
    none): a million jobs of a few dozen commands hold a pointer a row, not a string a row
    (some 100 bytes each, hundreds of MB for a Gavel trace's three text columns)."""
    names = DistinctNames.of(column, n)
    return names.per_row(names.names, None)


def _check_reference(
    profile, reference_gpu: str, at: Location | str | None, i: int, job_id, names, duration, origin: str
) -> None:
    """A job whose model the profile knows (row `i`) needs its speed on the reference GPU type:
    the type must be one of the profile's, as cluster GPU types are, case aside."""
    types = tuple(profile.gpu_types)
    if reference_gpu.lower() in {t.lower() for t in types}:
        return
    why = "to turn its duration_s into work" if not np.isnan(duration[i]) else "for its reference speed"
    message = (
        f"{reference_gpu!r} is not a GPU type of the throughput profile (its types: {', '.join(types)}); "
        f"job {job_id[i]} (model {names.name_of(i)}) of {origin} needs its speed on the reference type {why}"
    )
    hint = did_you_mean(reference_gpu, types) or "set reference_gpu to the type the trace's durations were measured on"
    if isinstance(at, Location):
        raise SchedError(f"setting 'reference_gpu': {message}", at, hint=hint)
    where = at if at is not None else f"setting 'reference_gpu' (by default {reference_gpu!r})"
    raise SchedError(f"{where}: {message}", hint=hint)


def _check_elastic_request(model: ThroughputModel, wanted_type: np.ndarray, elastic: np.ndarray, job_id, origin: str) -> None:
    """Refuse a GPU type asked for by an elastic job on a cluster of several types: Pollux and
    Ones choose its GPUs themselves, from the whole cluster, and would not keep to it."""
    if len(model.cluster.gpu_types) < 2:
        return
    bad = elastic & (wanted_type >= 0)
    if bad.any():
        i = int(bad.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]} is elastic and asks for GPU type {model.cluster.gpu_types[int(wanted_type[i])]}: an elastic "
            "scheduler picks its GPUs from the whole cluster, whatever their type (leave its gpu_type empty)",
            column="gpu_type",
        )


def _check_largest_type(model: ThroughputModel, gpus: np.ndarray, job_id: np.ndarray, origin: str) -> None:
    """Refuse a job asking for more GPUs than the cluster's largest GPU type has: the placers
    put a job on GPUs of one type, so it would wait forever (and, in a strict queue, every job
    behind it too). Not in a run with an elastic profile: there Pollux and Ones choose each
    job's GPUs themselves, from the whole cluster, and may mix types."""
    cluster = model.cluster
    if len(cluster.gpu_types) < 2 or model.elastic is not None:
        return  # (one type: the cluster's size, checked already)
    by_type = np.bincount(cluster.gpu_type, minlength=len(cluster.gpu_types))
    largest = int(by_type.argmax())  # (the first of equals, in the spec's order)
    over = gpus > by_type[largest]
    if over.any():
        i = int(over.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]} asks for {gpus[i]:,} GPUs but the largest GPU type of the cluster, "
            f"{cluster.gpu_types[largest]}, has {by_type[largest]:,} (a job runs on GPUs of one type)",
        )


def _untiered_duration_note(model: ThroughputModel, duration: float) -> str:
    """What the error about a job of the profile with no throughput adds when the job has a
    duration: it is the job's compute time only on a cluster with network tiers (Dally's traces);
    elsewhere a job of the profile runs at its profile's speed, and the duration is unused."""
    if model.communication is not None or np.isnan(duration):
        return ""
    return (
        "; its duration_s stands for its compute time only on a cluster with network tiers (dally:N, or a spec "
        "file's [tiers] table): elsewhere a job whose model the profile knows runs at the profile's speed"
    )


def _communication_rows(model: ThroughputModel, names: DistinctNames, job_id, origin) -> np.ndarray:
    """Each job's row in the communication profile; all -1 unless the cluster has network
    tiers. On a tiered cluster a job that names a model must have a profile (a job with no
    model has no communication: it runs as on a cluster without tiers)."""
    table = model.communication
    if table is None:
        return np.full(len(names.codes), -1, dtype=np.int64)
    rows = names.per_row(table.index(names.names), -1, np.int64)
    missing = (rows < 0) & (names.codes >= 0)
    if missing.any():
        i = int(missing.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]}: model {names.name_of(i)!r} has no communication profile, which a cluster with network "
            f"tiers needs (the profile {table.source} knows {', '.join(table.models)})",
        )
    return rows


def _placement_columns(trace, names: DistinctNames, models_by_name, known, batch, gpus, model, reference_gpu, origin) -> dict:
    """`tensor_skew` and `spread_slowdown` per job (traces/placement.py). For a job whose model
    is in the profile, the slowdown is what the profile implies on the reference GPU type."""
    from roundhouse.traces.placement import placement_columns

    out = placement_columns(trace, names, origin)
    multi = (known & (gpus > 1)).nonzero()[0]
    if not len(multi):
        return out
    configs = _Configs(names, models_by_name, batch, multi)
    for g in np.unique(gpus[multi]):
        sel = gpus[multi] == g
        together = configs.estimate(model, sel, reference_gpu, int(g), True)
        apart = configs.estimate(model, sel, reference_gpu, int(g), False)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["spread_slowdown"][multi[sel]] = np.where((together > 0) & (apart > 0), together / apart, np.nan)
    return out


class _Configs:
    """The (model, batch size) pairs of the jobs at `rows`, as the distinct pairs and each job's
    index into them: a trace of a million jobs holds a few dozen, so the profile is asked once
    per distinct pair (and GPU count, GPU type, placement), and the answers gathered.
    `models_by_name[k]`: the model of the jobs naming `names.names[k]`."""

    def __init__(self, names: DistinctNames, models_by_name: list, batch: np.ndarray, rows: np.ndarray):
        codes, sizes = names.codes[rows], batch[rows]
        low, span = int(sizes.min()), int(sizes.max()) - int(sizes.min()) + 1
        if span * (len(names.names) + 1) < 2**62:  # (one integer per pair: numpy sorts those fastest)
            _, first, self.of = np.unique(codes * span + (sizes - low), return_index=True, return_inverse=True)
        else:
            _, first, self.of = np.unique(np.stack([codes, sizes], axis=1), axis=0, return_index=True, return_inverse=True)
        self.of = self.of.ravel()
        self.models = np.array([models_by_name[c] for c in codes[first].tolist()], dtype=object)
        self.batch = sizes[first]

    def estimate(self, model: ThroughputModel, sel: np.ndarray, gpu_type: str, gpus: int, consolidated: bool) -> np.ndarray:
        """`model.estimate` for the jobs `rows[sel]`, all on `gpus` GPUs."""
        return model.estimate(self.models, self.batch, gpu_type, gpus, consolidated)[self.of[sel]]
