"""Rounds carried out in bulk: a run of rounds carried out in passing, whose books are written once
for the whole run, leaves every job, the counters, the explanation record and the clock where
carrying the rounds out one at a time leaves them."""

import numpy as np
import pytest

from roundhouse.runtime import bulk, passing
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.test_passing import SHAPES, graph_file

# Every column a round writes, compared bit for bit (NaN equal to NaN).
COLUMNS = (
    "status", "first_start_s", "finish_s", "done", "service", "run_s", "compute_s", "cpu_s",
    "memory_gb_s", "held_since_run_s", "launches", "held", "rate", "placed_type", "batch_used",
)  # fmt: skip


def run_with_and_without(path, monkeypatch, until=None):
    """The graph run one round at a time in passing (bulk off), then with runs carried out in bulk;
    also what each run in bulk was followed by."""
    graph = compile_file(path)
    with monkeypatch.context() as m:
        m.setattr(bulk.Bulk, "may_carry", lambda self, engine: False)
        one_by_one = simulate(graph, explain=True, until=until)
    afters: list[str] = []
    book = bulk._Run.book

    def booking(self, after):
        afters.append(after)
        return book(self, after)

    monkeypatch.setattr(bulk._Run, "book", booking)
    in_bulk = simulate(compile_file(path), explain=True, until=until)
    return one_by_one, in_bulk, afters


def assert_same_runs(a, b):
    ja, jb = a.world.jobs, b.world.jobs
    assert len(ja) == len(jb) > 0
    for name in COLUMNS:
        x, y = ja.column(name), jb.column(name)
        same = (x == y) | (np.isnan(x) & np.isnan(y)) if x.dtype.kind == "f" else x == y
        assert same.all(), f"{name} differs for rows {np.flatnonzero(~same)[:5]}"
    assert np.array_equal(a.world.holder, b.world.holder)
    assert np.array_equal(a.world.running_rows, b.world.running_rows)
    assert (a.rounds, a.end_s, a.stop_reason, a.skipped_rounds, a.passed_rounds) == (
        b.rounds,
        b.end_s,
        b.stop_reason,
        b.skipped_rounds,
        b.passed_rounds,
    )
    assert a.counters == b.counters
    assert a.reports["m"]["summary"] == b.reports["m"]["summary"]
    assert a.world.explain.frame(a.world).equals(b.world.explain.frame(b.world))


@pytest.mark.parametrize(("policy", "placer"), SHAPES)
def test_runs_in_bulk_leave_every_job_where_rounds_one_by_one_leave_it(tmp_path, monkeypatch, policy, placer):
    one_by_one, in_bulk, afters = run_with_and_without(graph_file(tmp_path, policy=policy, placer=placer), monkeypatch)
    assert_same_runs(one_by_one, in_bulk)
    assert afters and in_bulk.passed_rounds > 0


def test_a_run_in_bulk_ends_at_an_arrival_that_finds_no_room(tmp_path, monkeypatch):
    # Four times the load: the cluster fills now and then; that round is ticked from the pool on.
    one_by_one, in_bulk, afters = run_with_and_without(graph_file(tmp_path, rate=8, jobs=300, seed=5), monkeypatch)
    assert_same_runs(one_by_one, in_bulk)
    assert "front" in afters and in_bulk.counters["m"]["suspended"] > 0


def test_a_run_in_bulk_ends_in_the_round_that_meets_a_tracked_window(tmp_path, monkeypatch):
    # Few arrivals: most rounds between them have completions or nothing, carried out in the same run.
    path = graph_file(tmp_path, rate=0.5, jobs=200, seed=3, track="(track=40..90)")
    one_by_one, in_bulk, afters = run_with_and_without(path, monkeypatch)
    assert_same_runs(one_by_one, in_bulk)
    assert afters[-1] == "tick" and in_bulk.stop_reason.startswith("m:")


def test_a_run_in_bulk_stops_at_the_time_limit_and_the_memory_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(passing, "MAX_PASSED", 7)
    path = graph_file(tmp_path, rate=3, jobs=300, seed=8)
    one_by_one, in_bulk, afters = run_with_and_without(path, monkeypatch, until=200 * 3600.0)
    assert_same_runs(one_by_one, in_bulk)
    assert in_bulk.stop_reason.startswith("reached the time limit")
    assert afters.count("poll") > 5  # (runs of at most seven rounds carried out in passing)


def test_no_run_in_bulk_when_launches_wait_for_a_restore(tmp_path, monkeypatch):
    # A job then starts part of the way into its first round: its books are not whole rounds.
    path = graph_file(tmp_path)
    path.write_text("restore = 7s;\n" + path.read_text())
    one_by_one, in_bulk, afters = run_with_and_without(path, monkeypatch)
    assert_same_runs(one_by_one, in_bulk)
    assert afters == [] and in_bulk.passed_rounds > 0


def test_the_rounds_jobs_finish_in_are_the_simulators():
    # Finish times on round ends, just past them and a tolerance away, far and near (past the
    # deadlines' first table, so that it grows): each job is found in the round the simulator's
    # own test puts it in, and not in the one before, whether asked for one start or one each.
    from roundhouse.runtime.backends.sim import Simulator

    rng = np.random.default_rng(11)
    b0, round_s = 3000.0, 300.0
    ends = b0 + round_s * rng.integers(1, 5000, 400)
    finish_at = np.concatenate(
        [ends, ends + 1e-9 * ends, ends + 2e-9 * ends, ends - 1e-7, b0 + rng.uniform(0, 2e6, 400), np.array([b0, b0 + 1e-12])]
    )
    start = rng.integers(0, 3, len(finish_at))
    start = np.minimum(start, np.maximum(0, np.floor((finish_at - b0) / round_s).astype(np.int64)))
    offsets = bulk.RoundDeadlines(Simulator, b0, round_s).offsets(finish_at, start)
    for f, s, k in zip(finish_at.tolist(), start.tolist(), offsets.tolist(), strict=True):
        assert f <= Simulator.finish_deadline(b0 + (k + 1) * round_s)  # it finishes in round k ...
        assert k == s or f > Simulator.finish_deadline(b0 + k * round_s)  # ... and not in the one before
    one_start = bulk.RoundDeadlines(Simulator, b0, round_s).offsets(finish_at, 2)
    assert one_start.tolist() == np.maximum(bulk.RoundDeadlines(Simulator, b0, round_s).offsets(finish_at, 0), 2).tolist()


def test_jobs_finishing_past_the_deadlines_table_get_their_round_alone():
    # Finish times past the table's largest size are worked out one by one with the same test;
    # ones so far ahead that the clock's sums would not be whole numbers finish in no run.
    from roundhouse.runtime.backends.sim import Simulator

    rng = np.random.default_rng(5)
    b0, round_s = 3000.0, 300.0
    ends = b0 + round_s * (bulk._TABLE_ROUNDS + rng.integers(0, 10**6, 50)).astype(float)
    finish_at = np.concatenate([ends, ends + 1e-9 * ends, ends + 3e-9 * ends, ends - 1e-6, b0 + rng.uniform(0, 1e5, 20)])
    offsets = bulk.RoundDeadlines(Simulator, b0, round_s).offsets(finish_at, 0)
    for f, k in zip(finish_at.tolist(), offsets.tolist(), strict=True):
        assert Simulator.finish_deadline(b0 + k * round_s) < f <= Simulator.finish_deadline(b0 + (k + 1) * round_s)
    never = bulk.RoundDeadlines(Simulator, b0, round_s).offsets(np.array([b0 + 2.0**52, 1e300]), 0)
    assert never.tolist() == [bulk._NEVER, bulk._NEVER]


def test_one_jobs_round_is_the_one_the_rounds_of_many_give():
    # A round's usual launch has its round found alone (`offset`): the same as among many, on
    # either side of a round's deadline, before the table is made, past its end (it grows) and
    # past its largest size, and never before the round it starts in.
    from roundhouse.runtime.backends.sim import Simulator

    rng = np.random.default_rng(17)
    b0, round_s = 3000.0, 300.0
    ends = b0 + round_s * np.concatenate([rng.integers(1, 3000, 40), bulk._TABLE_ROUNDS + rng.integers(0, 1000, 5)])
    finish_at = np.concatenate([ends, ends + 1e-9 * ends, ends - 1e-7, b0 + rng.uniform(0, 1e6, 40), [b0, 1e300]])
    start = rng.integers(0, 4, len(finish_at))
    many = bulk.RoundDeadlines(Simulator, b0, round_s).offsets(finish_at, start).tolist()
    alone = bulk.RoundDeadlines(Simulator, b0, round_s)
    assert [alone.offset(f, s) for f, s in zip(finish_at.tolist(), start.tolist(), strict=True)] == many


def test_a_runs_completions_are_taken_round_by_round_as_the_gpus_say():
    # Jobs running at a run's start (of one to four GPUs, on GPUs in no order) and launches of
    # the run: each round gives its jobs in row order, with their finish times and all their GPUs,
    # and the next round with any is the first not yet taken.
    rng = np.random.default_rng(23)
    gpus_of = {}
    holder = np.full(96, -1, dtype=np.int64)
    free = list(rng.permutation(96))
    for row in sorted(rng.choice(500, 20, replace=False).tolist()):
        gpus_of[row] = [free.pop() for _ in range(int(rng.integers(1, 5)))]
        holder[gpus_of[row]] = row
    running = np.array(sorted(gpus_of), dtype=np.int64)
    offset = rng.integers(0, 12, len(running))
    offset[3] = bulk._NEVER  # (a job whose finish is beyond the run)
    at = {row: float(rng.uniform(0, 1e4)) for row in range(1000)}
    due = bulk.DueRounds(holder, running, offset, np.array([at[r] for r in running.tolist()]))
    rounds = {row: int(k) for row, k in zip(running.tolist(), offset.tolist(), strict=True)}
    for row in (900, 600, 700, 800):  # (launched later, in ranking order, not row order)
        k, gpus = int(rng.integers(2, 12)), np.array([free.pop() for _ in range(2)])
        due.expect(k, np.array([row]), np.array([at[row]]), gpus)
        rounds[row], gpus_of[row] = k, gpus.tolist()
    for j in range(14):
        ahead = [k for k in rounds.values() if j <= k < bulk._NEVER]
        assert due.next_round() == (min(ahead) if ahead else bulk._NEVER)
        rows, times, gpus = due.take(j)
        expected = sorted(row for row, k in rounds.items() if k == j)
        assert rows.tolist() == expected
        assert times.tolist() == [at[r] for r in expected]
        assert sorted(gpus.tolist()) == sorted(g for r in expected for g in gpus_of[r])
