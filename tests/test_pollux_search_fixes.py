"""Pollux: growth chances normalised over jobs as Pollux's simulator has them, an exponent so
near zero that every candidate ties refused, and a reason recorded for each job that waits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies import pollux_search as s
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.traces import pollux
from tests.conftest import REPO, fails

GRAPH = REPO / "graphs" / "pollux.sched"


# --- mutation: the growth chance ---


class Draws:
    """A random source for `mutate` with no reset and no job picked for zeroing: growth draws
    as given, and every new count drawn at the top of its range (the machine's size)."""

    def __init__(self, growth: np.ndarray):
        self.calls = [lambda shape: np.full(shape, 0.5), lambda shape: np.full(shape, 0.5), lambda shape: growth]

    def random(self, shape=None, dtype=None):
        draw = self.calls.pop(0) if self.calls else (lambda shape: np.full(shape, 0.999))
        return np.asarray(draw(shape), dtype=np.float64).reshape(shape)


def _pollux_chance(states: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """The growth chance of Pollux's simulator (`Problem._mutation`, one GPU a replica), written
    as it is there on (P, J, K) states: both terms normalised over axis 1, the jobs."""
    job_res = np.ones((states.shape[1], 1), np.int64)
    node_res = capacity[:, None]
    used = (np.expand_dims(job_res, 1) * np.expand_dims(states, -1)).sum(axis=1)
    free = node_res - used
    mask1 = np.all(np.expand_dims(job_res, 1) <= np.expand_dims(free, 1), axis=-1)
    prob1 = 1.0 * mask1 / np.maximum(mask1.sum(axis=1, keepdims=True), 1.0)
    mask2 = np.logical_and(states, mask1)
    prob2 = 1.0 * mask2 / np.maximum(mask2.sum(axis=1, keepdims=True), 1.0)
    return prob1 + prob2 - prob1 * prob2


def test_growth_chances_are_those_of_pollux_by_hand():
    """Two jobs, four machines, the last full. Pollux: 1/2 (one over the jobs) on each machine
    with room, 3/4 on machine 0 where both are (1/2 + 1/2 - 1/4), none on the full machine.
    (Before: 1/3, one over the machines with room, and 1 on machine 0, the only one each job is
    on.) Draws just under the chance grow an entry, just over it do not."""
    capacity = np.array([4, 4, 4, 4])
    state = np.array([[[1, 0, 0, 0], [1, 0, 0, 4]]], dtype=np.int8)
    chance = _pollux_chance(state, capacity)
    assert chance[0].tolist() == [[0.75, 0.5, 0.5, 0.0], [0.75, 0.5, 0.5, 0.0]]
    even = (np.arange(2)[:, None] + np.arange(4)[None, :]) % 2 == 0
    draws = np.where(even, chance - 0.01, np.minimum(chance + 0.01, 0.999))[None]
    out = s.mutate(state.copy(), Draws(draws), state[0], capacity)
    grown = even & (chance[0] > 0)
    assert out[0].tolist() == np.where(grown, 4, state[0]).tolist()


def test_growth_chances_match_pollux_on_a_random_population():
    rng = np.random.default_rng(5)
    capacity = np.array([4, 4, 2, 8, 4, 4])
    states = rng.integers(0, 3, (60, 5, 6)).astype(np.int8) * (rng.random((60, 5, 6)) < 0.4)
    draws = rng.random(states.shape).astype(np.float32)
    out = s.mutate(states.copy(), Draws(draws), states[0], capacity)
    # An entry grows when its draw is under the chance (to the machine's size: seen where below it).
    below = states < capacity
    expected = (draws < _pollux_chance(states, capacity)) & below
    assert np.array_equal((out != states) & below, expected)
    assert expected.sum() > 100 and ((out != states) == (out == capacity) & (out != states)).all()


# --- the exponent p ---


def _graph(tmp_path: Path, args: str, trace: Path | None = None) -> Path:
    text = GRAPH.read_text().replace("Pollux(seed=0)", f"Pollux({args})")
    text = text.replace("../traces/", f"{REPO / 'traces'}/")
    if trace is not None:
        text = text.replace(str(REPO / "traces" / "samples" / "pollux-40.csv"), str(trace))
    path = tmp_path / "pollux.sched"
    path.write_text(text)
    return path


@pytest.mark.parametrize("p", ["1e-17", "-1e-17", "-5e-07"])
def test_an_exponent_that_rounds_every_term_to_one_is_refused_at_check(tmp_path, capsys, p):
    err = fails(capsys, "check", _graph(tmp_path, f"seed=0, p={p}"))
    assert f"argument 'p' of Pollux must be 0 (the geometric mean) or at least 1e-06 in size, got {p}" in err
    assert "pollux.sched:" in err and "every allocation ties" in err


def test_small_exponents_from_the_bound_on_run_as_the_geometric_mean(tmp_path):
    """p = 0 is the geometric mean; the power means at 1e-6 and -1e-6 are close to it and
    still tell allocations apart: the same run. (At 1e-17 every allocation tied: a run stalled,
    or its jobs took 4.5 times longer on average.)"""
    trace = tmp_path / "pollux-7.csv"
    pollux.generate(7, 120.0, seed=3).write_csv(trace)

    def run(p: str):
        result = simulate(
            compile_file(_graph(tmp_path, f"seed=0, population=20, generations=10, p={p}", trace), ['cluster="2x4:V100"'])
        )
        assert result.stop_reason == "every job finished"
        return result.world.jobs.column("finish_s").tolist()

    geometric = run("0")
    assert run("1e-6") == geometric and run("-1e-6") == geometric


# --- explain: why a job waits ---


def _record(tmp_path: Path, settings: list[str], on_round=None, jobs: int = 20) -> pl.DataFrame:
    trace = tmp_path / f"pollux-{jobs}.csv"
    pollux.generate(jobs, 80.0, seed=0).write_csv(trace)
    graph = compile_file(_graph(tmp_path, "seed=0, population=20, generations=10", trace), ['cluster="2x4:V100"', *settings])
    result = simulate(graph, explain=True, on_round=on_round)
    assert result.stop_reason == "every job finished"
    return result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))


def _silent_waits(frame: pl.DataFrame) -> pl.DataFrame:
    """Admissions followed by a wait with no other reason recorded at that time."""
    after = frame.with_columns(next_t=pl.col("t_s").shift(-1).over("job_id")).filter(pl.col("reason") == "admitted")
    return after.filter(pl.col("next_t").is_null() | (pl.col("next_t") > pl.col("t_s")))


def test_a_job_the_searched_allocation_leaves_waiting_says_so(tmp_path):
    """Each waiting job the deployed allocation gives no GPU is `not_scheduled`, with the jobs
    the allocation runs and the GPUs it leaves idle after the round's plan."""
    world: dict[float, tuple[int, int]] = {}

    def look(ctx) -> None:
        holder = np.asarray(ctx.holder)
        world[ctx.now] = (len(np.unique(holder[holder >= 0])), int((holder < 0).sum()))

    # Ten jobs wait six times in under 200 rounds (twenty run for almost 1500: a long job alone).
    frame = _record(tmp_path, [], look, jobs=10)
    assert frame.filter(pl.col("reason") == "admitted").height == 10
    assert _silent_waits(frame).height == 0, _silent_waits(frame)
    waits = frame.filter(pl.col("reason") == "not_scheduled")
    assert waits.height > 3 and (waits["element_class"] == "Pollux").all()
    for row in waits.iter_rows(named=True):
        assert (row["a"], row["b"]) == world[row["t_s"]], row
    # The same record with event skipping off.
    assert frame.equals(_record(tmp_path, ["skip_rounds = false"], jobs=10))


def test_a_job_admitted_between_searches_waits_for_the_next(tmp_path):
    frame = _record(tmp_path, ["sched.interval = 5min"])
    assert _silent_waits(frame).height == 0, _silent_waits(frame)
    later = frame.filter(pl.col("reason") == "no_allocation")
    assert later.height > 3 and (later["element_class"] == "Pollux").all()
    # The search in force was made on a 5-minute step, before the job's admission; the next
    # comes 5 minutes after it.
    assert ((later["a"] % 300 == 0) & (later["a"] <= later["t_s"]) & (later["b"] == later["a"] + 300)).all()
