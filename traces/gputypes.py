"""A job's requested GPU type: the trace's optional `gpu_type` column (Alibaba PAI's task
table gives one per job, traces/pai.py; a canonical trace may too).

A job that names a GPU type runs only on GPUs of that type: every other type's throughput for
it is set to 0, which is how the whole job vocabulary says "cannot run there" (the placers'
step 1 and their preemption, Gavel's allocation and placement, Optimus' packing: all read the
job's `type_rates`, 0 on a type meaning none for it). So nothing is paid per round for it, and a job with no type named (an empty
cell, or a trace without the column) may run on any type, as before.

Names match the cluster's GPU types case aside. A name the cluster lacks is an error at the
start of the run naming the job and the type: PAI's `MISC` included, which Alibaba's own
simulator (clusterdata, `cluster-trace-gpu-v2020/simulator`) also models as nodes of a type of
their own. To run such a trace, give the cluster GPUs of each type it names: a cluster may hold
a type its trace's jobs name (`named_types`) though the throughput profile lacks it, as PAI's T4
and MISC. PAI's jobs, known only by their durations, run there for their durations; a job known
by its model has no throughput there (0, as on any type its profile lacks). Or drop the column
(`trace convert` to canonical, then delete it) so that any job may run anywhere.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from roundhouse.errors import TraceError

COLUMN = "gpu_type"


def named_types(trace: pl.DataFrame) -> list[str]:
    """The GPU types the trace's jobs name, each once (case aside), as first written; none for
    a trace without the column, or whose column holds no names (what `requested_types` refuses
    is refused there, when the run prepares the trace)."""
    if COLUMN not in trace.columns or trace[COLUMN].dtype != pl.String:
        return []
    names = trace[COLUMN].str.strip_chars().drop_nulls().unique(maintain_order=True).to_list()
    first: dict[str, str] = {}
    for name in names:
        if name:
            first.setdefault(name.lower(), name)
    return list(first.values())


def requested_types(trace: pl.DataFrame, gpu_types: tuple[str, ...], job_id: np.ndarray, origin: str) -> np.ndarray | None:
    """Each job's requested GPU type as a code of `gpu_types` (-1: none named), or None when no
    job names one. A name the cluster lacks is an error naming the first job that gives it."""
    if COLUMN not in trace.columns:
        return None
    series = trace[COLUMN]
    if series.dtype == pl.Null or series.null_count() == len(series):
        return None
    if series.dtype != pl.String:
        i = int(series.is_not_null().arg_true()[0])
        raise TraceError(
            origin, f"job {_job(trace, job_id, i)}: {series[i]!r} is not a GPU type name (such as V100 or T4)", column=COLUMN
        )
    lower = series.str.strip_chars().str.to_lowercase().fill_null("")
    named = (lower.str.len_bytes() > 0).to_numpy()
    if not named.any():
        return None
    by_name = lower.replace_strict({t.lower(): k for k, t in enumerate(gpu_types)}, default=-2, return_dtype=pl.Int64)
    codes = np.where(named, by_name.to_numpy(), -1).astype(np.int64, copy=False)
    lacking = codes == -2
    if lacking.any():
        i = int(lacking.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {_job(trace, job_id, i)} asks for GPU type {series[i].strip()!r}, which the cluster lacks "
            f"(its types: {', '.join(gpu_types)}); give the cluster GPUs of that type, or drop the trace's "
            f"{COLUMN} column to let every job run on any type",
            column=COLUMN,
        )
    return codes


def restrict(
    type_rates: np.ndarray,
    requested: np.ndarray,
    gpus: np.ndarray,
    by_type: np.ndarray,
    gpu_types: tuple[str, ...],
    trace: pl.DataFrame,
    job_id: np.ndarray,
    origin: str,
    profile_types: tuple[str, ...] = (),
) -> None:
    """Zero, in place, every type's throughput but the requested one for the jobs that name a
    type. A job its type cannot hold (fewer GPUs of it than it asks for, or no throughput on it
    in the profile, whose types are `profile_types`) would wait forever: an error naming the job."""
    asked = (requested >= 0).nonzero()[0]
    types = requested[asked]
    small = asked[gpus[asked] > by_type[types]]
    if len(small):
        i = int(small[0])
        t = int(requested[i])
        raise TraceError(
            origin,
            f"job {_job(trace, job_id, i)} asks for {gpus[i]:,} GPUs of type {gpu_types[t]} (its {COLUMN}), "
            f"and the cluster has {by_type[t]:,} of them",
            column=COLUMN,
        )
    slow = asked[~(type_rates[asked, types] > 0)]
    if len(slow):
        i = int(slow[0])
        model = trace["model"][i] if "model" in trace.columns else None
        raise TraceError(
            origin,
            f"job {_job(trace, job_id, i)} asks for GPU type {gpu_types[int(requested[i])]} (its {COLUMN}), "
            f"and the profile has no throughput for {model} on {gpus[i]} GPU(s) of it"
            + unprofiled_note([gpu_types[int(requested[i])]], profile_types),
            column=COLUMN,
        )
    keep = type_rates[asked, types]
    type_rates[asked] = 0.0
    type_rates[asked, types] = keep


def unprofiled_note(types, profile_types: tuple[str, ...]) -> str:
    """What an error about a job with no throughput on `types` adds when the profile lacks some
    of them altogether ("" when it has them all): there only jobs known by duration run."""
    have = {t.lower() for t in profile_types}
    lacking = [t for t in types if t.lower() not in have]
    if not lacking:
        return ""
    what = f"{lacking[0]} is a type" if len(lacking) == 1 else f"{', '.join(lacking)} are types"
    return (
        f"; {what} the throughput profile lacks, where only jobs known by their duration run "
        "(a job known by its model needs the profile's rows there)"
    )


def _job(trace: pl.DataFrame, job_id: np.ndarray, i: int) -> str:
    """A job as an error names it: its id, and the name its trace gave it (PAI's job_name)."""
    name = trace["name"][i] if "name" in trace.columns and trace["name"].dtype == pl.String else None
    return f"{job_id[i]}" if name is None else f"{job_id[i]} ({name!r})"
