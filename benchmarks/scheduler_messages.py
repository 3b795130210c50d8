"""Scheduler message throughput with many agents on loopback: launches and reports per second.

    python benchmarks/scheduler_messages.py                 # 64 agents x 4 GPUs
    python benchmarks/scheduler_messages.py --agents 128

A real scheduler (`roundhouse serve`, 1 s rounds, Fifo + FirstFree) and protocol-level agents in
this process (they start no processes, so the scheduler is what is measured):

1. launches: jobs are submitted in bulk; agents finish each job as soon as it is launched, so
   every round launches a cluster's worth. Prints launches per second of the scheduler's own
   time carrying out plans (journal write-ahead included), and the jobs completed per second
   of wall time (bounded by the round length: one cluster's worth per round).
2. reports: every agent sends metrics reports for its running jobs as fast as this process can,
   then a round-trip lease check, which the scheduler answers once it has handled the reports
   before it; prints the reports the scheduler validated and handled per second, and whether
   its rounds stayed on time meanwhile.

A script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import above, at_least, description, exit_on_terminate, run_script  # noqa: E402
from live_common import LoadAgents, running_scheduler, submitter, wait_until  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--agents", type=at_least(1), default=64, help="agents (default 64)")
    parser.add_argument("--gpus", type=at_least(1), default=4, help="GPUs per agent (default 4)")
    parser.add_argument("--jobs", type=at_least(1), default=2000, help="jobs for the launch phase (default 2000)")
    parser.add_argument("--seconds", type=above(0.0), default=5.0, help="length of the report phase (default 5)")
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    gpus = args.agents * args.gpus
    with running_scheduler(args.agents, args.gpus) as cluster:
        agents = LoadAgents(cluster.address, args.agents, args.gpus, finish_after_s=0.0)
        try:
            with submitter(cluster.address) as client:
                wait_until(lambda: client.status()["nodes_online"] == args.agents, 120, agents.serve)
                print(f"{args.agents} agents x {args.gpus} GPUs registered ({gpus} GPUs)")

                # 1. Launches.
                before = client.status()
                started = time.time()
                client.submit([{"command": "true", "duration_s": 1.0, "gpus": 1} for _ in range(args.jobs)])
                wait_until(lambda: client.status()["finished"] >= args.jobs, 600, agents.serve)
                wall = time.time() - started
                after = client.status()
                launches = after["launches"] - before.get("launches", 0.0)
                apply_s = after["apply_s"] - before.get("apply_s", 0.0)
                print(
                    f"launch phase: {int(launches)} launches in {int(after['rounds'] - before['rounds'])} rounds; "
                    f"carrying out plans took {apply_s:.3f} s of scheduler time = {launches / apply_s:,.0f} launches/s; "
                    f"{args.jobs / wall:,.0f} jobs completed per second of wall time "
                    f"(at most {gpus} per {1:g} s round)"
                )

                # 2. Reports: keep one job running per GPU, then flood metrics.
                agents.finish_after_s = None
                client.submit([{"command": "true", "duration_s": 1e6, "gpus": 1} for _ in range(gpus)])
                wait_until(lambda: sum(len(r) for r in agents.running) >= gpus, 120, agents.serve)
                before = client.status()
                sent = 0
                started = time.time()
                while time.time() - started < args.seconds:
                    for i, running in enumerate(agents.running):
                        for job, attempt, rank in running:
                            agents.send(
                                i,
                                "metrics",
                                job=job,
                                attempt=attempt,
                                rank=rank,
                                iteration=sent,
                                values={"loss": 1.0 / (1 + sent), "iter_time_s": 0.1},
                            )
                            sent += 1
                    agents.serve(0.0)
                # Let the scheduler drain its queue: each agent's round trip, sent after its
                # reports, is answered once they are all handled.
                agents.barrier(120)
                handled_at = time.time()
                after = client.status()
                print(
                    f"report phase: sent {sent:,} metrics reports in {args.seconds:g} s ({sent / args.seconds:,.0f}/s offered); "
                    f"the scheduler validated and handled them all within {handled_at - started:.1f} s = "
                    f"{sent / (handled_at - started):,.0f} reports/s (and {int(after['messages_in'] - before['messages_in']):,} "
                    f"messages of all kinds, heartbeats and status polls included); rounds {int(after['rounds'] - before['rounds'])} "
                    f"in {handled_at - started:.1f} s (1 s rounds), bad messages {int(after.get('bad_messages', 0))}"
                )
        finally:
            agents.close()


if __name__ == "__main__":
    run_script(main)
