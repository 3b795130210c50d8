"""Wall time of one Pollux allocation search (100 candidates, 100 generations: tournaments,
crossover, mutation, repair, fitness, selection) on 16 machines of 4 GPUs, for 20 active jobs
(about what Pollux's workload 6 keeps active) and 100 (ONES-like load), all 100 generations and
with `patience=10` (a search from scratch; in a run the population carries over from the last
round and stops sooner). The target: under 1 s.

Beside it, if pymoo 0.4 can be imported (put it on PYTHONPATH) and petuum/adaptdl's
osdi21-artifact `simulator/` is given, Pollux's own `PolluxPolicy.optimize` on the same jobs
(its speedups from the same goodput tables; pymoo 0.4.2.2 and autograd installed with
`pip install --no-deps --target DIR`, its pure-Python build). Medians of wall and CPU time
(the machine is shared: CPU time is the steadier figure). A script that prints figures, not a
timed test.

    python benchmarks/pollux_search.py [--pollux /path/to/adaptdl/simulator]
    PYTHONPATH=/tmp/pymoo04 python benchmarks/pollux_search.py --pollux /tmp/adaptdl_sim
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import at_least, description, path_option, run_script  # noqa: E402

from roundhouse.elements.policies import pollux_search as search  # noqa: E402
from roundhouse.elements.policies.pollux import goodput_table  # noqa: E402
from roundhouse.traces import pollux  # noqa: E402

MACHINES, PER_MACHINE = 16, 4
TARGET_S = 1.0  # the target: a search of all 100 generations under 1 s (the median's wall time)


def jobs(n: int, rng: np.random.Generator):
    """n jobs of Pollux's applications in workload 6's mix, a random current allocation (one
    machine each, as long as GPUs last), ages and restarts; their goodput tables."""
    profile = pollux.profile()
    weights = np.array(list(pollux.MIX.values()), dtype=np.float64)
    names = np.array(list(pollux.MIX))[rng.choice(len(pollux.MIX), n, p=weights / weights.sum())]
    app = np.array([profile.row(a) for a in names])
    fixed = np.where(names == "ncf", 32768, 0)
    keys = sorted(set(zip(app.tolist(), fixed.tolist(), strict=True)))
    tables = dict(
        zip(
            keys,
            goodput_table(
                profile, np.array([k[0] for k in keys]), np.array([k[1] for k in keys]), MACHINES, MACHINES * PER_MACHINE
            ),
        )
    )
    goodput = np.stack([tables[k] for k in zip(app.tolist(), fixed.tolist(), strict=True)])
    base = np.zeros((n, MACHINES), dtype=np.int8)
    for j in range(min(n, MACHINES * 2)):
        base[j, j % MACHINES] += 1 + (j < MACHINES)
    limit = np.where(names == "ncf", 1, 16)
    return names, goodput, base, limit, rng.uniform(60, 3600, n), rng.integers(0, 3, n)


def ours(goodput, base, limit, age, restarts, rng, patience=None) -> tuple[float, float]:
    n, c = len(base), MACHINES * PER_MACHINE
    fair_r = np.minimum(np.ceil(c / n), limit).astype(np.int64)
    table = goodput / np.maximum(goodput[np.arange(n), 1, fair_r], 1e-12)[:, None, None]
    factor = search.restart_factor(age, restarts)
    capacity = np.full(MACHINES, PER_MACHINE)

    evaluate = search.scorer(table, base, factor, MACHINES / c, -1.0)
    started, cpu = time.perf_counter(), time.process_time()
    search.search(
        base[None],
        rng,
        base=base,
        capacity=capacity,
        max_replicas=limit,
        evaluate=evaluate,
        keep=100,
        generations=100,
        patience=patience,
    )
    return time.perf_counter() - started, time.process_time() - cpu


# What benchmarks/pollux_search.py imports from the folder `simulator/` of Pollux's artifact (its
# pollux.py imports nothing else from there).
POLLUX_FILES = ("pollux.py", "utils.py")


class PolluxUnavailable(Exception):
    """Pollux's own search cannot run here (a module it needs is missing); said on each line."""


class PolluxFailed(Exception):
    """Pollux's own code raised while searching; the message says what and where."""


def pollux_problem(folder: Path) -> str | None:
    """What is wrong with `folder` as Pollux's `simulator/` folder, or None."""
    if not folder.is_dir():
        return "no such folder"
    missing = [name for name in POLLUX_FILES if not (folder / name).is_file()]
    if missing:
        return f"no {' or '.join(missing)} there (give the folder simulator/ of petuum/adaptdl's osdi21-artifact)"
    return None


def load_pollux(simulator: Path):
    """Pollux's PolluxPolicy, JobInfo and NodeInfo, imported from `simulator` (checked by
    `pollux_problem`). Raises PolluxUnavailable when a module they import is missing (pymoo 0.4,
    say), PolluxFailed when importing them fails otherwise."""
    for alias, kind in (("int", int), ("float", float), ("bool", bool)):  # NumPy 2 dropped what Pollux's code uses
        if alias not in np.__dict__:
            setattr(np, alias, kind)
    if str(simulator) not in sys.path:
        sys.path.insert(0, str(simulator))
    try:
        import pollux as their_pollux
        import utils as their_utils
    except ImportError as err:
        raise PolluxUnavailable(str(err)) from None
    except Exception as err:  # its code, at import
        raise PolluxFailed(_where(err, "importing its pollux.py")) from None
    for module in (their_pollux, their_utils):  # (a module of that name imported earlier would be another's)
        if Path(module.__file__ or "").resolve().parent != simulator.resolve():
            raise PolluxFailed(f"the module {module.__name__} imported is {module.__file__}, not the one in {simulator}")
    try:
        return their_pollux.PolluxPolicy, their_utils.JobInfo, their_utils.NodeInfo
    except AttributeError as err:
        raise PolluxFailed(f"{simulator}: {err}") from None


def _where(err: BaseException, doing: str) -> str:
    """What `err` was and where it was raised: the innermost line of the traceback."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)
    at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{doing} raised {type(err).__name__}: {err}{at}"


def theirs(simulator: Path, names, goodput, base, limit, age, restarts) -> tuple[float, float]:
    """Pollux's PolluxPolicy.optimize on the same jobs (speedup functions from our tables).
    Raises PolluxUnavailable or PolluxFailed (see `load_pollux`), and PolluxFailed when its
    search raises."""
    PolluxPolicy, JobInfo, NodeInfo = load_pollux(simulator)
    n = len(base)
    try:
        infos = {}
        for j in range(n):
            table = goodput[j] / max(goodput[j, 1, 1], 1e-12)
            info = JobInfo(
                resources={"nvidia.com/gpu": 1},
                speedup_fn=lambda k, r, t=table: t[np.asarray(k), np.asarray(r)],
                creation_timestamp=-age[j],
                attained_service=0,
                min_replicas=0,
                max_replicas=int(limit[j]),
                preemptible=True,
            )
            info.num_restarts, info.age = int(restarts[j]), float(age[j])
            infos[f"job-{j}"] = info
        nodes = {m: NodeInfo({"nvidia.com/gpu": PER_MACHINE}, preemptible=False) for m in range(MACHINES)}
        current = {f"job-{j}": [m for m in range(MACHINES) for _ in range(base[j, m])] for j in range(n)}
        started, cpu = time.perf_counter(), time.process_time()
        PolluxPolicy().optimize(infos, nodes, current, nodes[0])
    except Exception as err:  # its code, on our jobs
        raise PolluxFailed(_where(err, "PolluxPolicy.optimize")) from None
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--pollux",
        type=path_option,
        help="the folder simulator/ of petuum/adaptdl's osdi21-artifact: time Pollux's own search too (needs pymoo 0.4)",
    )
    parser.add_argument(
        "--repeat", type=at_least(1), default=5, help="searches timed per case; the median is printed (default 5)"
    )
    args = parser.parse_args()
    if args.pollux is not None:
        wrong = pollux_problem(args.pollux)
        if wrong:
            parser.error(f"--pollux {args.pollux}: {wrong}")
    for n in (20, 100):
        rng = np.random.default_rng(n)
        names, goodput, base, limit, age, restarts = jobs(n, rng)
        wall, cpu = np.median([ours(goodput, base, limit, age, restarts, rng) for _ in range(args.repeat)], axis=0)
        met = "met" if wall < TARGET_S else "MISSED"
        line = (
            f"{n:3d} jobs on {MACHINES * PER_MACHINE} GPUs: ours {1000 * wall:.0f} ms wall, {1000 * cpu:.0f} ms CPU "
            f"(target: under {1000 * TARGET_S:g} ms wall: {met})"
        )
        wall, cpu = np.median([ours(goodput, base, limit, age, restarts, rng, 10) for _ in range(args.repeat)], axis=0)
        line += f"; with patience 10 {1000 * wall:.0f} ms wall, {1000 * cpu:.0f} ms CPU"
        if args.pollux is not None:
            try:
                runs = [theirs(args.pollux, names, goodput, base, limit, age, restarts) for _ in range(max(args.repeat // 2, 1))]
            except PolluxUnavailable as err:
                line += f"; Pollux's own search cannot run here ({err})"
            except PolluxFailed as err:
                print(line)
                sys.exit(f"error: Pollux's own search failed: {err}")
            else:
                wall, cpu = np.median(runs, axis=0)
                line += f"; Pollux's PolluxPolicy.optimize {1000 * wall:.0f} ms wall, {1000 * cpu:.0f} ms CPU"
        else:  # (said on each line, as when it cannot run: no line reads as having left it out silently)
            line += "; Pollux's own search: not run (--pollux runs it on the same jobs)"
        print(line)


if __name__ == "__main__":
    run_script(main)
