"""One live scheduler driving a production-sized cluster of emulated GPUs, on this machine.

    python benchmarks/live_scale.py                    # 100 GPUs (25 x 4) and 1,000 GPUs (125 x 8)
    python benchmarks/live_scale.py --sizes 8x8        # one size (NODESxGPUS)
    python benchmarks/live_scale.py --rounds 40        # rounds measured per size (default 25)

Each size runs a real scheduler (`roundhouse serve`, 2-second rounds, Las with Consolidated
placement, as graphs/live-loopback.sched but on NODESxGPUS:V100) and ONE agent process
emulating every node (`roundhouse agent --nodes NODES --fake-gpus GPUS:V100 --emulate`: each
node its own connection and name; jobs run as timers at the profile's speed, no processes).
Jobs come from `roundhouse submit` (ResNet-18, 1 to 8 GPUs, twice what the cluster holds, so
that Las rotates jobs through the GPUs every round and each round both revokes and launches).

Printed per size, over the measured rounds:
- send lag: from a round's boundary on the wall clock to the last of its launch and revoke
  messages handed to the socket (the graph's tick, the journal's write-ahead and the sends
  included), median and largest over the rounds that sent any; target: median under 100 ms
  at 1,000 GPUs;
- the scheduler's CPU per round (its process's user + system time over the rounds, serving
  heartbeats and exit reports included);
- messages and bytes it sent and received per round, journal rows written per round;
- launches and revocations per round.
Then the sustained rate at which `roundhouse submit --count N` (a fresh process each time,
connecting included) feeds jobs to the 1,000-GPU scheduler.

Timing depends on the machine and on what else runs on it; the figures in docs/live.md ("At
scale") say which. A script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from bench_common import at_least, description, exit_on_terminate, run_script  # noqa: E402
from live_common import live_cluster  # noqa: E402

from roundhouse.agents.submitter import SchedulerError, Submitter  # noqa: E402
from roundhouse.tools.loopback import Loopback  # noqa: E402
from roundhouse.wire.security import ClientSecurity  # noqa: E402

GRAPH = """round = {round};
cluster = "{nodes}x{gpus}:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""
TARGET_S = 0.100
TARGET_GPUS = 1000
SIZES = ("25x4", "125x8")


def node_size(text: str) -> tuple[int, int]:
    """An argparse type: NODESxGPUS, both at least 1."""
    nodes, x, gpus = text.partition("x")
    if not (x and nodes.isdigit() and gpus.isdigit() and int(nodes) >= 1 and int(gpus) >= 1):
        raise argparse.ArgumentTypeError(f"expected NODESxGPUS, both whole numbers of at least 1 (such as 25x4), got {text!r}")
    return int(nodes), int(gpus)


class LiveFailed(Exception):
    """A process of the measured cluster ended, or a command it was given failed."""


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "roundhouse.tools.cli", *args],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise LiveFailed(f"`roundhouse {args[0]}` did not finish within {timeout:g} s") from None
    if done.returncode:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:]) or "(it printed nothing)"
        raise LiveFailed(f"`roundhouse {args[0]}` exited with status {done.returncode}:\n{tail}")
    return done


def check_running(cluster: Loopback) -> None:
    """Raise LiveFailed, naming the process and its log, if a process of `cluster` has ended."""
    for name, proc in cluster.processes.items():
        code = proc.poll()
        if code is not None:
            raise LiveFailed(f"the {name} process exited with status {code}; see {cluster.folder / f'{name}.log'}")


def status(client: Submitter, cluster: Loopback, wait_s: float = 60.0) -> dict:
    """The scheduler's status, asked again while it does not answer (for at most `wait_s`),
    as long as the cluster's processes run: one that has ended is said at once."""
    deadline = time.time() + wait_s
    while True:
        check_running(cluster)
        try:
            return client.status()
        except SchedulerError:
            if time.time() > deadline:
                raise


def submit(address: str, count: int, gpus: int, iterations: int) -> float:
    """`roundhouse submit` of `count` jobs in a fresh process; returns its wall seconds."""
    started = time.perf_counter()
    _cli(
        "submit",
        address,
        "--insecure",
        "--model",
        "ResNet-18",
        "--iterations",
        str(iterations),
        "--gpus",
        str(gpus),
        "--count",
        str(count),
    )
    return time.perf_counter() - started


def run_size(cluster: Loopback, nodes: int, gpus: int, rounds: int) -> dict:
    """The scheduler and one agent process emulating every node started on `cluster`, jobs
    submitted, then `rounds` rounds measured."""
    cluster.start_scheduler()
    cluster.start_agent("emu", f"{gpus}:V100", extra=("--insecure", "--log-level", "warning"), nodes=nodes)
    total = nodes * gpus
    # (10 s a request: `status` asks again while the processes run, so that a scheduler that
    # has ended is said within seconds)
    with Submitter(cluster.address, ClientSecurity(None), timeout_s=10) as client:
        deadline = time.time() + 120
        while status(client, cluster)["nodes_online"] < nodes:
            if time.time() > deadline:
                raise TimeoutError("the emulated nodes did not all register (see emu.log)")
            time.sleep(0.5)
        # Twice what the cluster holds, in GPUs: a quarter each of 1-, 2-, 4- and 8-GPU jobs
        # (8-GPU ones only where a node has 8). ResNet-18 runs about 10 iterations a second
        # on a V100 in the profile: jobs need a few minutes, longer than the measurement.
        sizes = [g for g in (1, 2, 4, 8) if g <= gpus]
        for g in sizes:
            submit(cluster.address, max(1, 2 * total // len(sizes) // g), g, 3000)
        # Let the first rounds (every GPU filled at once) pass, then measure.
        start_round = status(client, cluster)["rounds"] + 2
        while status(client, cluster)["rounds"] < start_round:
            time.sleep(0.2)
        before = status(client, cluster)
        lags: dict[int, float] = {}  # the send lag of each round that sent, by its number
        now = before
        while now["rounds"] < before["rounds"] + rounds:
            time.sleep(0.1)
            now = status(client, cluster)
            if now["send_rounds"] > before["send_rounds"]:
                lags[int(now["send_rounds"])] = now["send_lag_last_s"]
        after = now
        lags_seen = list(lags.values())
    n = after["rounds"] - before["rounds"]
    delta = lambda key: (after.get(key, 0.0) - before.get(key, 0.0)) / n  # noqa: E731
    return dict(
        size=f"{nodes}x{gpus}",
        gpus=total,
        rounds=int(n),
        lag_median_ms=1e3 * statistics.median(lags_seen) if lags_seen else float("nan"),
        lag_max_ms=1e3 * max(lags_seen) if lags_seen else float("nan"),
        lag_rounds=len(lags_seen),
        cpu_ms=1e3 * delta("cpu_s"),
        messages_out=delta("messages_out"),
        bytes_out=delta("bytes_out"),
        messages_in=delta("messages_in"),
        bytes_in=delta("bytes_in"),
        journal_writes=delta("journal_writes"),
        start_lag_ms=1e3 * delta("start_lag_s"),
        tick_ms=1e3 * delta("tick_s"),
        apply_ms=1e3 * delta("apply_s"),
        launches=delta("launches"),
        revocations=delta("revocations"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=node_size,
        default=[node_size(s) for s in SIZES],
        metavar="NODESxGPUS",
        help="nodes and GPUs per node of each size (default: 25x4 125x8)",
    )
    parser.add_argument("--rounds", type=at_least(1), default=25, help="rounds measured per size (default 25)")
    parser.add_argument("--submissions", type=at_least(1), default=3, help="`roundhouse submit` runs for the rate (default 3)")
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    print(
        f"{'cluster':>8s} {'GPUs':>5s} {'rounds':>6s} {'lag med ms':>10s} {'lag max ms':>10s} {'CPU ms':>7s} "
        f"{'msgs out':>8s} {'KB out':>7s} {'msgs in':>7s} {'KB in':>6s} {'journal':>7s} {'launch':>6s} {'revoke':>6s}  (per round)"
    )
    measured = []
    for i, (nodes, gpus) in enumerate(args.sizes):
        graph = GRAPH.format(round="2s", nodes=nodes, gpus=gpus)
        serve_args = ("--wait-for-agents", "120s", "--log-level", "warning")
        with live_cluster(
            f"rh-live-scale-{nodes}x{gpus}-", graph, heartbeat="2s", timeout="30s", serve_args=serve_args
        ) as cluster:
            try:
                row = run_size(cluster, nodes, gpus, args.rounds)
            except (LiveFailed, SchedulerError, TimeoutError) as err:
                raise SystemExit(f"error: {nodes}x{gpus}: {err}") from None
            measured.append(row)
            print(
                f"{row['size']:>8s} {row['gpus']:5d} {row['rounds']:6d} {row['lag_median_ms']:10.1f} {row['lag_max_ms']:10.1f} "
                f"{row['cpu_ms']:7.1f} {row['messages_out']:8.1f} {row['bytes_out'] / 1e3:7.1f} {row['messages_in']:7.1f} "
                f"{row['bytes_in'] / 1e3:6.1f} {row['journal_writes']:7.1f} {row['launches']:6.1f} {row['revocations']:6.1f}"
            )
            print(
                f"{'':>8s} where the lag goes, per round: {row['start_lag_ms']:.1f} ms from the boundary to the round's start, "
                f"{row['tick_ms']:.1f} ms ticking the graph, {row['apply_ms']:.1f} ms carrying out the plan (journal and sends)"
            )
            if i == len(args.sizes) - 1:  # (its scheduler, still running, takes the submissions)
                try:
                    print_target_and_rate(measured, cluster.address, args.submissions)
                except LiveFailed as err:
                    raise SystemExit(f"error: the submission rate: {err}") from None


def target_verdict(measured: list[dict]) -> str:
    """Whether the sizes of `measured` of at least TARGET_GPUS GPUs met the target: "met", "not
    met", or why it was not measured."""
    large = [r for r in measured if r["gpus"] >= TARGET_GPUS]
    if not large:
        return f"not measured (no size of {TARGET_GPUS:,} GPUs or more was run)"
    if any(r["lag_rounds"] == 0 for r in large):  # (its median is NaN, which is under nothing)
        return "not measured (a size's measured rounds sent no launch or revoke)"
    return "met" if all(r["lag_median_ms"] < TARGET_S * 1e3 for r in large) else "not met"


def print_target_and_rate(measured: list[dict], address: str, submissions: int) -> None:
    """The verdict on the target, then the rate at which `roundhouse submit` feeds the scheduler
    at `address` (the last size's)."""
    print(f"target: at {TARGET_GPUS:,} GPUs, median send lag under {TARGET_S * 1e3:.0f} ms: {target_verdict(measured)}")
    count = 2000
    times = [submit(address, count, 1, 3000) for _ in range(submissions)]
    print(
        f"roundhouse submit --count {count} into the {measured[-1]['gpus']}-GPU scheduler (a fresh process each, while it runs): "
        f"{count / min(times):,.0f} jobs/s at best, {count / max(times):,.0f} at worst "
        f"({', '.join(f'{t:.2f}' for t in times)} s)"
    )


if __name__ == "__main__":
    run_script(main)
