"""Rounds carried out in bulk for jobs of profiled models, whose progress over a round is a fixed
float (throughput times the round's seconds) that k rounds add with k roundings: every job ends
with the same books, to the bit, as carrying the rounds out one at a time, and the round each
job finishes in is the one the simulator's own test finds."""

import math

import numpy as np
import pytest

from roundhouse.runtime import bulk_profiled
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.binade_sums import Segments, add_repeatedly_exact
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.repeated_sums import add_repeatedly_each
from roundhouse.runtime.simulate import simulate
from tests.test_bulk import assert_same_runs, run_with_and_without

# Throughputs whose running sums round (none of them a sum of few powers of two).
AWKWARD = (0.1, 1 / 3, 7.3e-5, 2.9, 1e-3 / 7, 123.456)
MODELS = ("M0", "M1", "M2", "M3")


def profiled_graph(tmp_path, seed: int, round_s: int, jobs: int = 160, rate_per_h: float = 6.0, skip: bool = True):
    """A graph of `Las` and `Consolidated` over jobs of profiled models, with a profile of
    awkward and random throughputs and a trace of jobs given by their iterations."""
    rng = np.random.default_rng(seed)
    lines = ["model,batch_size,gpu_type,gpus,placement,iters_per_s"]
    speed = {}
    for model in MODELS:
        for gpus in (1, 2, 4, 8):
            value = float(rng.choice(AWKWARD)) if rng.random() < 0.6 else float(rng.uniform(1e-4, 50.0))
            speed[model, gpus] = value
            for placement in ("consolidated", "spread"):
                lines.append(f"{model},1,V100,{gpus},{placement},{value!r}")
    (tmp_path / "profile.csv").write_text("\n".join(lines) + "\n")
    rows = ["job_id,arrival_s,gpus,model,batch_size,iterations"]
    arrival = 0.0
    for job in range(jobs):
        arrival += float(rng.exponential(3600.0 / rate_per_h))
        gpus = int(rng.choice([1, 1, 2, 4, 8]))
        model = str(rng.choice(MODELS))
        seconds = float(rng.choice([rng.uniform(1, 3 * round_s), rng.exponential(20 * round_s), rng.exponential(3 * 3600)]))
        rows.append(f"{job},{arrival!r},{gpus},{model},1,{speed[model, gpus] * seconds!r}")
    (tmp_path / "jobs.csv").write_text("\n".join(rows) + "\n")
    path = tmp_path / "g.sched"
    path.write_text(
        f'round = {round_s}s;\ncluster = "8x8:V100";\nprofile = "profile.csv";\nskip_rounds = {"true" if skip else "false"};\n'
        'src :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    return path


@pytest.mark.parametrize(("seed", "round_s"), [(1, 300), (2, 97), (3, 7), (4, 360), (5, 1)])
def test_profiled_jobs_carried_in_bulk_end_with_the_books_of_rounds_one_by_one(tmp_path, monkeypatch, seed, round_s):
    one_by_one, in_bulk, afters = run_with_and_without(profiled_graph(tmp_path, seed, round_s), monkeypatch)
    assert in_bulk.world._any_model  # (profiled jobs: not the whole-rounds case)
    assert_same_runs(one_by_one, in_bulk)
    assert afters and in_bulk.passed_rounds > 0


def test_profiled_runs_in_bulk_are_those_of_event_skipping_off(tmp_path):
    on = simulate(compile_file(profiled_graph(tmp_path, 6, 300)), explain=True)
    off = simulate(compile_file(profiled_graph(tmp_path, 6, 300, skip=False)), explain=True)
    for name in ("status", "finish_s", "done", "service", "run_s", "compute_s", "first_start_s"):
        x, y = on.world.jobs.column(name), off.world.jobs.column(name)
        assert ((x == y) | (np.isnan(x) & np.isnan(y))).all(), name
    assert on.reports["m"]["summary"] == off.reports["m"]["summary"]
    assert on.passed_rounds > 0 and off.passed_rounds == 0


def simulator_finish_round(done: float, work: float, rate: float, now: float, round_s: float, most: int) -> tuple[int, float]:
    """The simulator's test, round by round, with its own additions: the round a job finishes in
    (by offset) and its finish time; (`most`, inf) when not within `most` rounds."""
    step = rate * round_s
    for k in range(most):
        finish = now + (work - done) / rate
        if finish <= Simulator.finish_deadline(now + round_s):
            return k, finish
        done += step
        now += round_s
    return most, float("inf")


def test_the_rounds_profiled_jobs_finish_in_are_the_simulators():
    # Awkward and random rates, work on and near whole multiples of a round's step (where one
    # rounding decides the round), from boundaries far into a run.
    rng = np.random.default_rng(7)
    n = 300
    rate = np.concatenate([np.array(AWKWARD).repeat(30), rng.uniform(1e-5, 100.0, n - 30 * len(AWKWARD))])
    round_s = float(rng.choice([1, 7, 97, 300, 360]))
    rounds = rng.integers(0, 400, n).astype(float)
    work = rate * round_s * rounds * (1 + rng.choice([0.0, 1e-12, -1e-12, 1e-9, -1e-9, 2e-9], n))
    work = np.maximum(work, 1e-6)
    done = np.where(rng.random(n) < 0.5, 0.0, work * rng.uniform(0, 0.5, n))
    now = 3000.0 * round_s
    offset, at = bulk_profiled.finish_rounds(done, work, rate, now, round_s, Simulator.finish_deadline, horizon=600)
    for i in range(n):
        assert (int(offset[i]), float(at[i])) == simulator_finish_round(done[i], work[i], rate[i], now, round_s, 600)
    far, at = bulk_profiled.finish_rounds(
        np.zeros(2), np.array([1e9, 3.0]), np.array([0.1, 1.0]), 0.0, 1.0, Simulator.finish_deadline, 50
    )
    assert far.tolist() == [50, 2] and at[0] == np.inf


def test_adding_each_its_own_number_of_times_is_the_loop():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, c = int(rng.integers(1, 30)), int(rng.integers(1, 5))
        total = rng.random((c, n)) * rng.choice([1.0, 1e3, 1e9])
        step = rng.random((c, n)) * rng.choice(np.array(AWKWARD))
        times = rng.integers(0, int(rng.choice([3, 40, 3000])), n)
        expected = total.copy()
        for i in range(n):
            for _ in range(times[i]):
                expected[:, i] += step[:, i]
        add_repeatedly_each(total, step, times)
        assert total.tobytes() == expected.tobytes()


def _loop_sums(x: float, s: float, k: int) -> list[float]:
    """x, x + s, ... k additions, one at a time: the reference."""
    sums = [x]
    for _ in range(k):
        x += s
        sums.append(x)
    return sums


def _binade_cases(rng: np.random.Generator, count: int):
    """(x0, s, k): steps that round (0.1, 1/3, 7.3e-5), tiny and huge ones, random ones over
    forty decades, ties (s exactly 1.5 units of x0's last place, or half a unit), from 0, from
    below the step and from far above it, over a few to thousands of additions (crossing many
    binades where s is near x0)."""
    for _ in range(count):
        s = float(rng.choice([0.1, 1 / 3, 7.3e-5, 1e-300, 5e-324, 1e300, 2.9, 123.456, 10 ** rng.uniform(-20, 20)]))
        x0 = float(rng.choice([0.0, s, s * rng.uniform(0, 4), rng.uniform(0, 1e6), 10 ** rng.uniform(-30, 30)]))
        if rng.random() < 0.25 and x0 > 0:  # (ties: half-integers of x0's unit, both parities of x0)
            unit = math.ldexp(1.0, math.frexp(x0)[1] - 53)
            s = unit * float(rng.choice([0.5, 1.5, 2.5, 3.5, 4096.5]))
            x0 = x0 + unit if rng.random() < 0.5 else x0
        yield x0, s, int(rng.choice([1, 2, 7, 100, 3000]))


def test_running_sums_binade_by_binade_are_the_loop():
    rng = np.random.default_rng(11)
    cases = list(_binade_cases(rng, 1500))
    for x0, s, k in cases:
        expected = _loop_sums(x0, s, k)
        sums = Segments(x0, s, k)
        assert len(sums.K) <= 3 * (k.bit_length() + 2), (x0, s, k)  # (pieces by binade, not by addition)
        for j in (*range(min(k, 40) + 1), *rng.integers(0, k + 1, 40).tolist(), k):
            assert sums.at(j) == expected[j], (x0, s, k, j)
    x0, s, k = (np.array(c) for c in zip(*cases, strict=True))
    total = x0.copy()
    add_repeatedly_exact(total, s, k)
    assert total.tobytes() == np.array([_loop_sums(*c)[-1] for c in cases]).tobytes()


def test_the_rounds_found_binade_by_binade_are_the_simulators_for_awkward_sums():
    # Steps at and below half a unit of the work done (the sums stall), ties, work from 0 and
    # from far along, finishes on both sides of a multiple of the step, and none in the horizon.
    rng = np.random.default_rng(12)
    round_s, now = 97.0, 97.0 * 4000
    done, work, rate = [], [], []
    for x0, s, k in _binade_cases(rng, 400):
        if s == 0.0 or not 1e-200 < s < 1e200:
            continue
        sums = _loop_sums(x0, s, min(k, 600))
        target = sums[int(rng.integers(0, len(sums)))] + s * float(rng.choice([0.0, 0.5, 1.0, 1 + 1e-12, 1 - 1e-12, 1e9]))
        done.append(x0), work.append(max(target, x0)), rate.append(s / round_s)
    done, work, rate = np.array(done), np.array(work), np.array(rate)
    offset, at = bulk_profiled.finish_rounds(done, work, rate, now, round_s, Simulator.finish_deadline, horizon=700)
    for i in range(len(done)):
        assert (int(offset[i]), float(at[i])) == simulator_finish_round(done[i], work[i], rate[i], now, round_s, 700), i
    assert (offset == 700).any() and (offset == 0).any() and (offset > 100).any()
