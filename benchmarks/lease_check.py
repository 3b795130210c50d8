"""Lease checks per iteration: optimistic (a local byte) against a round trip to the scheduler,
as the number of jobs grows (Blox §7, Fig. 19).

    python benchmarks/lease_check.py             # 1 to 64 jobs
    python benchmarks/lease_check.py --max 128

A real scheduler (`roundhouse serve`, loopback) runs N real attempts on protocol-level agents.
Each job is a process that "trains" (sleeps for an iteration, as if the GPU worked) and checks
its lease before every iteration, either optimistically (agents/client.Lease: the byte its agent
would set) or centrally (agents/client.CentralLease: ask the scheduler, wait for the answer).
Prints the mean and 95th-percentile time a check costs a job, and how many round-trip checks
were made and answered. Note that on a small machine the job processes share the CPUs with the
scheduler: part of the round trip's growth is that contention (which the optimistic check does
not feel). A script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import above, at_least, description, exit_on_terminate, plural, run_script  # noqa: E402
from live_common import LoadAgents, running_scheduler, submitter, wait_until  # noqa: E402


def job(mode: str, target: str, job_id: int, iteration_s: float, seconds: float, out) -> None:
    # Ctrl-C reaches the whole process group: the script stops its job processes itself, which
    # their own KeyboardInterrupt would cut into with a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from roundhouse.agents.client import CentralLease, Lease

    lease = Lease(target) if mode == "optimistic" else CentralLease(target, job_id, 1)
    times = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(iteration_s)  # the iteration itself, on the GPU
        t = time.perf_counter()
        revoked = lease.revoked()
        times.append(time.perf_counter() - t)
        if revoked:
            raise RuntimeError(f"job {job_id}: lease unexpectedly revoked (a lost agent?)")
    lease.close()
    out.put(times)


def measure(mode: str, n: int, address: str, folder: Path, iteration_s: float, seconds: float) -> np.ndarray:
    from roundhouse.agents.client import Lease

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = []
    for j in range(n):
        if mode == "optimistic":
            target = str(folder / f"lease-{j}")
            Lease.create(target)
        else:
            target = address
        p = ctx.Process(target=job, args=(mode, target, j, iteration_s, seconds, out))
        p.start()
        procs.append(p)
    try:
        got = collect(out, procs, seconds + 120)
    finally:  # (on an error or Ctrl-C too: no job process is left running)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=30)
    return np.concatenate([np.asarray(t) for t in got])


def collect(out, procs: list, timeout: float) -> list:
    """Each job process's check times from `out`; a job process that ended without them (it
    raised: its error is printed above) or a wait past `timeout` seconds is an error."""
    got: list[list[float]] = []
    deadline = time.time() + timeout
    while len(got) < len(procs):
        try:
            got.append(out.get(timeout=0.5))
            continue
        except queue.Empty:
            pass
        failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
        if failed:
            raise SystemExit(
                f"error: {len(failed)} job process(es) ended with an error (exit status {', '.join(map(str, failed))}; "
                "the error is printed above)"
            )
        if time.time() > deadline:
            raise SystemExit(f"error: {len(procs) - len(got)} job process(es) did not report within {timeout:g} s")
    return got


def job_counts(most: int) -> list[int]:
    """The numbers of jobs measured, up to `most`, which is measured too (`--max 2` measures 1
    and 2 jobs, not 1 alone, and `--max 1000` measures 1,000, not at most 256)."""
    return [n for n in (1, 4, 16, 32, 64, 128, 256) if n < most] + [most]


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--max", type=at_least(1), default=64, help="most jobs (default 64)")
    parser.add_argument("--iteration", type=above(0.0), default=0.01, help="seconds per training iteration (default 0.01)")
    parser.add_argument("--seconds", type=above(0.0), default=3.0, help="how long each job runs (default 3)")
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    counts = job_counts(args.max)
    nodes = max(1, (max(counts) + 3) // 4)
    with running_scheduler(nodes, 4) as cluster:
        folder = cluster.folder  # (for the optimistic leases' files)
        agents = LoadAgents(cluster.address, nodes, 4)
        try:
            with submitter(cluster.address) as client:
                wait_until(lambda: client.status()["nodes_online"] == nodes, 60, agents.serve)
                client.submit([{"command": "true", "duration_s": 1e6, "gpus": 1} for _ in range(max(counts))])
                wait_until(lambda: agents.launches >= max(counts), 60, agents.serve)
                agents.serve_in_background()
                print(
                    f"{plural(max(counts), 'job')} running on {plural(nodes, 'agent')}; each checks its lease before every "
                    f"{1000 * args.iteration:g} ms iteration for {args.seconds:g} s"
                )
                print(
                    f"{'jobs':>6}  {'optimistic mean':>16}  {'p95':>8}  {'round trip mean':>16}  {'p95':>10}  {'checks made/answered':>21}"
                )
                for n in counts:
                    local = measure("optimistic", n, cluster.address, folder, args.iteration, args.seconds)
                    before = client.status().get("lease_checks", 0.0)
                    central = measure("central", n, cluster.address, folder, args.iteration, args.seconds)
                    answered = int(client.status().get("lease_checks", 0.0) - before)
                    print(
                        f"{n:>6}  {1e6 * local.mean():>13.2f} us  {1e6 * np.percentile(local, 95):>5.2f} us  "
                        f"{1e6 * central.mean():>13.1f} us  {1e6 * np.percentile(central, 95):>7.1f} us  "
                        f"{len(central):>10}/{answered:<10}"
                    )
        finally:
            agents.close()


if __name__ == "__main__":
    run_script(main)
