"""The simulator against a plain reference written from docs/semantics.md alone, on small seeded
traces: a strict FIFO queue on one node, and LAS on one GPU with checkpoint, per-GPU checkpoint
(past the round, too), and restore costs. Every job's first start, finish, time held,
preemptions and launches, and the run's end, must be the same to the bit, with event skipping
off and on."""

from __future__ import annotations

import math
import random

import attrs
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.stalls import StalledError


def reference(jobs: list[dict], round_s: float, gpus: int, policy: str, checkpoint: float, restore: float):
    """Round by round, as the doc has it: arrivals inside a round seen at the next boundary,
    completions at their exact time folded in at the boundary after (or on) them, a suspended
    job's checkpoint holding its GPU, a launch restoring (its first too), a launch's wait ending
    with its round, ties to the job admitted first. Jobs do one unit of work a second. Returns
    ({job id: (first start, finish, time held, preemptions, launches)}, end), or None for a run
    that can go no further."""
    order = sorted(jobs, key=lambda j: (j["arrival"], j["id"]))
    for k, j in enumerate(order):
        j.update(admitted=k, done=0.0, service=0.0, held=0.0, first=None, finish=None, preemptions=0, launches=0)
    running: list[dict] = []
    free_at, t, rounds = 0.0, 0.0, 0
    while any(j["finish"] is None for j in order):
        rounds += 1
        if rounds > 3000:
            return None
        waiting = [j for j in order if j["arrival"] <= t and j["finish"] is None]
        if not waiting:  # (the clock jumps to the next arrival's boundary)
            t = math.ceil(min(j["arrival"] for j in order if j["finish"] is None) / round_s) * round_s
            continue
        starts = {}
        if policy == "fifo":
            free = gpus - sum(j["gpus"] for j in running)
            for j in waiting:
                if j in running:
                    starts[j["id"]] = t
                elif j["gpus"] <= free:
                    free -= j["gpus"]
                    j["launches"] += 1
                    j["first"] = t if j["first"] is None else j["first"]
                    running.append(j)
                    starts[j["id"]] = t + restore
                else:
                    break  # a strict queue
        else:  # LAS on one GPU
            pick = min(waiting, key=lambda j: (j["service"], j["admitted"]))
            if running and running[0] is pick:
                starts[pick["id"]] = t
            else:
                if running:
                    running[0]["preemptions"] += 1
                    free_at = t + checkpoint
                pick["launches"] += 1
                pick["first"] = t if pick["first"] is None else pick["first"]
                running = [pick]
                starts[pick["id"]] = max(free_at, t) + restore
        end = t + round_s
        for j in list(running):
            start = starts[j["id"]]
            if start < end:
                finish = start + (j["duration"] - j["done"])
                if finish <= end:
                    j.update(finish=finish, done=j["duration"])
                    j["held"] += finish - t
                    j["service"] += (finish - t) * j["gpus"]
                    running.remove(j)
                    continue
                j["done"] += end - start
            j["held"] += round_s
            j["service"] += round_s * j["gpus"]
        t = end
    return {j["id"]: (j["first"], j["finish"], j["held"], j["preemptions"], j["launches"]) for j in order}, t


def _case(seed: int) -> tuple[str, float, int, float, float, float, list[dict]]:
    r = random.Random(seed)
    policy = r.choice(["fifo", "las"])
    round_s = float(r.choice([60, 100, 300]))
    gpus = 1 if policy == "las" else r.choice([1, 2, 4, 8])
    jobs, ids = [], r.sample(range(100), r.randint(2, 8))
    for i in ids:
        size = min(r.choice([1, 1, 2, 4]), gpus) if policy == "fifo" else 1
        arrival = float(r.choice([0, round_s, r.randrange(0, 6 * int(round_s))]))
        jobs.append(dict(id=i, arrival=arrival, gpus=size, duration=float(r.choice([round_s, r.randrange(1, 5 * int(round_s))]))))
    restore = float(r.choice([0, 0, 3, 10]))
    checkpoint = float(r.choice([0, 0, 5, 20])) if policy == "las" else 0.0
    per_gpu = float(r.choice([0, 0, round_s // 2, round_s - 1, round_s + 7])) if policy == "las" else 0.0
    return policy, round_s, gpus, checkpoint, per_gpu, restore, jobs


@pytest.mark.parametrize("seed", range(40))
def test_small_runs_match_the_reference(tmp_path, seed):
    policy, round_s, gpus, checkpoint, per_gpu, restore, jobs = _case(seed)
    rows = random.Random(-seed).sample(jobs, len(jobs))  # (rows in any order)
    (tmp_path / "trace.csv").write_text(
        "job_id,arrival_s,gpus,duration_s\n" + "".join(f"{j['id']},{j['arrival']},{j['gpus']},{j['duration']}\n" for j in rows)
    )
    chain = "Fifo -> FirstFree" if policy == "fifo" else "Las -> Consolidated"
    (tmp_path / "g.sched").write_text(
        f'round = {round_s:g}s;\ncluster = "1x{gpus}:V100";\ncheckpoint = {checkpoint:g}s;\n'
        f"checkpoint_per_gpu = {per_gpu:g}s;\nrestore = {restore:g}s;\n"
        f'src :: TraceSource(path="trace.csv");\nsrc -> AcceptAll -> JobPool -> {chain} -> Launch -> m :: JobMetrics;\n'
    )
    # (One-GPU jobs: a checkpoint costs `checkpoint` + `checkpoint_per_gpu`.)
    want = reference([dict(j) for j in jobs], round_s, gpus, policy, checkpoint + per_gpu, restore)
    for skip in (False, True):
        graph = compile_file(tmp_path / "g.sched")
        graph = attrs.evolve(graph, settings=attrs.evolve(graph.settings, skip_rounds=skip))
        if want is None:  # two jobs that take turns and never progress: stalled
            with pytest.raises(StalledError, match="none has progressed for 2000 rounds"):
                simulate(graph)
            continue
        result = simulate(graph)
        table = result.reports["m"]["jobs"]
        got = {
            row["job_id"]: (row["first_start_s"], row["finish_s"], row["run_s"], row["preemptions"], row["launches"])
            for row in table.iter_rows(named=True)
        }
        assert (got, result.end_s) == want, f"skip_rounds={skip}"
