"""FIFO's results on scale.py's Alibaba-shape jobs moved (35.84 h to 35.98 h average JCT) when
FIFO became a strict queue also when fragmentation, not capacity, holds its head up: no job
starts ahead of an earlier arrival, and FIFO preempts no one. These runs check that property
end to end on a small cluster whose multi-node jobs fragment it, as that case's do."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from roundhouse.tools.cli import main


def _run(tmp_path: Path, policy: str) -> list[dict]:
    graph = tmp_path / f"{policy.split('(')[0]}.sched"
    graph.write_text(
        'round = 5min;\ncluster = "16x4:V100";\n'
        "arrivals :: PoissonSource(rate=40/h, jobs=400, gpus=philly, seed=0);\n"
        f"arrivals -> AcceptAll -> JobPool -> {policy} -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    out = tmp_path / f"out-{len(policy)}"
    assert main(["run", str(graph), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "summary.json").read_text())["jobs_finished"] == 400
    with open(out / "jobs.csv", newline="") as f:
        return list(csv.DictReader(f))


def _started_ahead_of_an_earlier_arrival(jobs: list[dict]) -> int:
    """How many jobs first started before some job that arrived earlier did."""
    latest, count = float("-inf"), 0
    for job in sorted(jobs, key=lambda j: (float(j["arrival_s"]), int(j["job_id"]))):
        start = float(job["first_start_s"])
        count += start < latest
        latest = max(latest, start)
    return count


def test_strict_fifo_starts_jobs_in_arrival_order_and_preempts_no_one(tmp_path):
    jobs = _run(tmp_path, "Fifo")
    assert {int(j["gpus"]) for j in jobs} >= {1, 2, 4, 8}  # jobs of one node and of two
    assert _started_ahead_of_an_earlier_arrival(jobs) == 0
    assert sum(int(j["preemptions"]) for j in jobs) == 0


def test_fifo_with_backfilling_lets_later_jobs_past_on_the_same_jobs(tmp_path):
    # The same jobs with backfilling allowed: later arrivals do start first, so the check above
    # is one that these jobs can fail.
    assert _started_ahead_of_an_earlier_arrival(_run(tmp_path, "Fifo(backfill=true)")) > 0
