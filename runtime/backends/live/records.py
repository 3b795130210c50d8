"""A live round as the journal keeps it, and back: the events and progress the backend reported
(by job id, so that the record reads on its own) and the plans carried out. Replaying records
through the same graph rebuilds a run exactly (runtime/journal.py)."""

from __future__ import annotations

import numpy as np

from roundhouse.errors import UsageError
from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.types import Events, Plan


def record_of(events: Events, progress: Progress, ids: np.ndarray, submitted: list[int]) -> dict:
    """The round's events and progress, for the journal (`ids`: the job table's job_id column)."""
    return {
        "finished": [[int(ids[r]), x] for r, x in zip(events.finished.tolist(), events.finished_at.tolist())],
        "failed": [int(ids[r]) for r in events.failed.tolist()],
        "requeued": [int(ids[r]) for r in events.requeued.tolist()],
        "online": None if events.online is None else np.flatnonzero(~events.online).tolist(),
        "joined": list(events.nodes_joined),
        "lost": list(events.nodes_lost),
        "metrics": {str(int(ids[r])): v for r, v in events.metrics.items()},
        "submitted": list(submitted),
        "progress": [
            [int(x) for x in ids[progress.rows]],
            progress.done.tolist(),
            progress.service.tolist(),
            progress.run_s.tolist(),
        ],
    }


def plan_record(plan: Plan, ids: np.ndarray) -> dict:
    return {
        "launch": [int(ids[r]) for r in plan.launch_rows.tolist()],
        "gpus": plan.launch_gpus.tolist(),
        "counts": plan.launch_counts.tolist(),
        "suspend": [int(ids[r]) for r in plan.suspend.tolist()],
        "complete": [int(ids[r]) for r in getattr(plan, "complete", ())],
        **(
            {"resize": [int(ids[r]) for r in plan.resize_rows.tolist()], "resize_gpus": plan.resize_gpus.tolist()}
            if len(plan.resize_rows)
            else {}
        ),
    }


def same_plan(plan: Plan, recorded: dict | None, ids: np.ndarray) -> bool:
    if recorded is None:
        return False
    got = plan_record(plan, ids)
    same = all(got[key] == recorded[key] for key in ("launch", "gpus", "suspend"))
    return same and all(got.get(key, []) == recorded.get(key, []) for key in ("resize", "resize_gpus"))


def replayed(record: dict, now: float, jobs, n_gpus: int, submitted) -> tuple[Events, Progress]:
    """The events and progress of a journaled round. Rows are looked up by job id: the jobs
    named were registered in earlier rounds, whose rows replay has rebuilt identically. The
    journal checked the record's shape as it read it (runtime/journal.py); what only the run's
    jobs and cluster show is checked here: a UsageError names the round (its `where`)."""
    where = getattr(record, "where", f"the journal's round at t={now:g}s")

    def row(job_id: int, key: str) -> int:
        found = jobs.row_of(job_id)
        if found is None:
            raise UsageError(f"{where}: {key} names job {job_id}, which no earlier round brought (submitted or from a source)")
        return found

    p_ids, p_done, p_service, p_run = record["progress"]
    online = None
    if record["online"] is not None:
        if any(gpu >= n_gpus for gpu in record["online"]):
            raise UsageError(f"{where}: online names GPUs {record['online']}, and the cluster's are 0 to {n_gpus - 1}")
        online = np.ones(n_gpus, dtype=bool)
        online[record["online"]] = False
    events = Events(
        time=now,
        finished=[row(i, "finished") for i, _ in record["finished"]],
        finished_at=[x for _, x in record["finished"]],
        failed=[row(i, "failed") for i in record["failed"]],
        requeued=[row(i, "requeued") for i in record["requeued"]],
        online=online,
        nodes_joined=tuple(record["joined"]),
        nodes_lost=tuple(record["lost"]),
        metrics={row(int(i), "metrics"): v for i, v in record["metrics"].items()},
        submitted=submitted,
    )
    rows = np.asarray([row(i, "progress") for i in p_ids], dtype=np.int64)
    done = np.asarray(p_done, dtype=float)
    if min(p_done, default=0.0) < 0:  # (a job gone back to its checkpoint: never below 0 done)
        reached = jobs.column("done")[rows] + done
        if (reached < -1e-6).any():
            i = int(np.argmin(reached))
            raise UsageError(f"{where}: progress takes job {p_ids[i]} to {reached[i]:g} iterations, below 0")
    progress = Progress(rows, done, np.asarray(p_service, dtype=float), np.asarray(p_run, dtype=float))
    return events, progress
