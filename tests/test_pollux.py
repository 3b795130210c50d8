"""Pollux: its workload reader and generator, the fitted profile, the allocation search's
operators (hand-made inputs, a seeded or scripted random source), the batch-size agent, and
the graph in the simulator."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from roundhouse.elements.policies import pollux_search as s
from roundhouse.errors import TraceError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import LR_ADASCALE, Plan
from roundhouse.traces import pollux
from tests.conftest import SHARED
from tests.test_elastic import _app_folder

DATA = SHARED / "data" / "pollux"
GRAPH = Path(__file__).parents[1] / "graphs" / "pollux.sched"


# --- the reader, the generator and the fitted profile ---


def _workload(tmp_path, rows: list[str]) -> Path:
    path = tmp_path / "workload.csv"
    path.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows) + "\n")
    return path


def test_reader_maps_rows_and_pollux_limits(tmp_path):
    from roundhouse.traces.formats import detect_format, read_trace

    path = _workload(tmp_path, ["cifar10-0,53,cifar10,6,2048", "ncf-1,60,ncf,1,32768", "bert-2,61,bert,4,96"])
    assert detect_format(path) == "pollux"
    frame = read_trace(path)
    assert frame["job_id"].to_list() == [0, 1, 2] and frame["arrival_s"].to_list() == [53.0, 60.0, 61.0]
    assert frame["gpus"].to_list() == [6, 1, 4] and frame["batch_size"].to_list() == [2048, 32768, 96]
    assert frame["epochs"].to_list() == [100.0, 10.0, 2.0]  # the applications' own (Pollux's simulator)
    # At most min(64, largest batch / smallest per-GPU batch): CIFAR-10 4096/32 = 128 -> 64,
    # BERT 384/4 = 96 -> 64; NCF one GPU at a fixed batch.
    assert frame["max_gpus"].to_list() == [64.0, 1.0, 64.0]
    assert frame["batch_fixed"].to_list() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,5,gpt3,1,32", r"workload.csv:3: error: column 'application': unknown application 'gpt3'"),
        ("x,5,cifar10,1,8192", r"workload.csv:3: error: column 'batch_size': 8192 is outside .* cifar10 \(128 to 4096\)"),
        ("x,5,bert,1,6", r"workload.csv:3: error: column 'batch_size': 6 is outside .* bert \(12 to 384\)"),
        ("x,-5,bert,1,12", r"workload.csv:3: error: column 'time': '-5' is not a number, 0 or more"),
        ("x,5,bert,1.5,12", r"workload.csv:3: error: column 'num_replicas': '1.5' is not a whole number"),
    ],
)
def test_reader_errors_are_located(tmp_path, row, message):
    path = _workload(tmp_path, ["ok-0,0,cifar10,1,128", row])
    with pytest.raises(TraceError, match=message):
        pollux.read_workload(path)
    # Blank lines are skipped and counted: the bad row is named by its own line.
    path.write_text(path.read_text().replace("\n", "\n\n", 2) + "\n")
    message = message.replace(":3:", ":5:")
    with pytest.raises(TraceError, match=message):
        pollux.read_workload(path)


def test_generator_is_seeded_and_reads_back(tmp_path):
    a, b = pollux.generate(50, 180.0, seed=4), pollux.generate(50, 180.0, seed=4)
    assert a.equals(b) and not a.equals(pollux.generate(50, 180.0, seed=5))
    assert set(a["model"]) <= set(pollux.MIX) and a["arrival_s"].is_sorted()
    for name, gpus, batch in zip(a["model"], a["gpus"], a["batch_size"], strict=True):
        assert (gpus, batch) in pollux.CONFIGS[name]


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/pollux not present")
def test_built_in_profile_is_the_fit_of_pollux_measurements():
    # The built-in table holds the fit of Pollux's measurements. The fit (L-BFGS-B on numerical
    # gradients) does not land on the same parameters on every machine: with other BLAS kernels
    # it stops at slightly different points, and for NCF at a much worse one. So the table is
    # checked by what it is for: its parameters fit the measurements at least as well as the fit
    # made here, and everything not found by the optimizer is the same.
    from roundhouse.traces.goodput import ElasticProfile, perf_fit_error, perf_measurements

    fitted = ElasticProfile.load_pollux(DATA / "traces")
    built = pollux.profile()
    for a, b in zip(fitted.apps, built.apps, strict=True):
        assert a.name == b.name and (a.init_batch, a.max_batch, a.min_local, a.max_local, a.epochs) == (
            b.init_batch,
            b.max_batch,
            b.min_local,
            b.max_local,
            b.epochs,
        )
        measured = perf_measurements(DATA / "traces" / a.name)
        assert perf_fit_error(b.params, *measured) <= perf_fit_error(a.params, *measured) + 1e-4, a.name
        assert b.noise_scale == pytest.approx(a.noise_scale, rel=1e-4)
        assert b.work_samples == pytest.approx(a.work_samples, rel=1e-6)


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/pollux not present")
def test_reads_pollux_workload_six():
    frame = pollux.read_workload(DATA / "workloads" / "workload-6.csv")
    assert frame.height == 160 and frame["model"].value_counts().height == 6


def test_goodput_of_cifar10_at_two_batch_sizes_from_its_efficiency_curve():
    """CIFAR-10 on one GPU: a step of batch 128 takes alpha_c + beta_c x 128 (no sync, no
    accumulation); batch 1024 on one GPU, above M0, accumulates once: two atomic steps of 512.
    Efficiency (phi + 128) / (phi + M)."""
    prof = pollux.profile()
    app = prof.apps[prof.row("cifar10")]
    ac, bc = app.params[:2]
    phi = app.noise_scale
    eff = (phi + 128) / (phi + 1024)
    t128 = ac + bc * 128
    t1024 = 2 * (ac + bc * 512)  # one accumulation step plus the optimizer step, no sync
    got = prof.rates(np.array([prof.row("cifar10")] * 2), [1, 1], [1, 1], [128, 1024])
    assert got == pytest.approx([128 / t128, 1024 / t1024 * eff], rel=1e-6)
    assert eff == pytest.approx(6084.62 / 6980.62, rel=1e-5)  # phi = 5956.62 samples


# --- the search's operators ---


class Scripted:
    """A random source that hands out given arrays (each call takes the next one)."""

    def __init__(self, *draws):
        self.draws = list(draws)

    def random(self, shape=None, dtype=None):
        return np.asarray(self.draws.pop(0), dtype=np.float64).reshape(shape)

    def integers(self, low, high=None, size=None):
        return np.asarray(self.draws.pop(0), dtype=np.int64).reshape(size)


def test_power_mean_and_restart_penalty_by_hand():
    v = np.array([[1.0, 2.0]])
    assert s.power_mean(v, -1)[0] == pytest.approx(2 / (1 / 1.001 + 1 / 2.001))
    assert s.power_mean(v, 1)[0] == pytest.approx(1.501)
    assert s.power_mean(v, 0)[0] == pytest.approx(np.sqrt(1.001 * 2.001))
    # age 90 s, one restart, delay 30: (90 - 30) / 120; a young job can lose everything.
    assert s.restart_factor(np.array([90.0, 10.0]), np.array([1, 1])).tolist() == [0.5, 0.0]


def test_scorer_matches_the_power_mean_of_looked_up_speedups_exactly():
    # The scorer computes each table entry's term once per round; its fitness must be the
    # power mean of the looked-up (and penalised) speedups to the last bit, or runs change.
    rng = np.random.default_rng(3)
    table, factor = rng.random((6, 5, 9)) * 2, rng.random(6)
    states = rng.integers(0, 3, (40, 6, 4)).astype(np.int8)
    base = states[0]
    k, r = np.count_nonzero(states, axis=-1), states.sum(axis=-1)
    assert np.array_equal(s.counts(states)[0], k) and np.array_equal(s.counts(states)[1], r)
    speed = table[np.arange(6)[None, :], k, r] * 0.25
    moved = (states != base[None]).any(axis=-1)
    for p in (-1.0, 0, 1.0, -2.0):
        want = s.power_mean(np.where(moved, speed * factor[None, :], speed), p)
        assert np.array_equal(s.scorer(table, base, factor, 0.25, p)(states), want)


def test_fitness_penalises_only_jobs_that_move():
    # Two jobs, two machines; table[j, k, r]: speedup of job j on r GPUs over k machines.
    table = np.zeros((2, 3, 5))
    table[:, 1, 1], table[:, 1, 2], table[:, 2, 2] = 1.0, 1.8, 1.5
    base = np.array([[1, 0], [0, 1]])
    same = base[None]
    grown = np.array([[[2, 0], [0, 1]]])  # job 0 grows to two GPUs of machine 0
    factor = np.array([0.5, 0.5])
    f_same = s.fitness(same, table, base, factor, 1.0, -1)[0]
    f_grown = s.fitness(grown, table, base, factor, 1.0, -1)[0]
    assert f_same == pytest.approx(2 / (2 / 1.001))
    assert f_grown == pytest.approx(2 / (1 / (1.8 * 0.5 + 0.001) + 1 / 1.001))


def test_crossover_is_single_point_over_jobs():
    a = np.array([[[1, 0], [1, 0], [1, 0]]])
    b = np.array([[[0, 2], [0, 2], [0, 2]]])
    kids = s.crossover(a, b, Scripted([1]))  # point 1: job 0 from the first parent
    assert kids[0].tolist() == [[1, 0], [0, 2], [0, 2]]
    assert kids[1].tolist() == [[0, 2], [1, 0], [1, 0]]


def test_mutation_resets_zeroes_and_grows():
    capacity = np.array([4, 4])
    base = np.array([[1, 0], [0, 2]])
    state = np.array([[[3, 0], [0, 1]]])
    rng = Scripted(
        [[0.05, 0.5]],  # job 0 (< 0.1) is reset to its current allocation [1, 0]
        [[0.5, 0.05]],  # job 1 is picked for zeroing, entries with a draw < 0.1 become 0
        [[0.5, 0.01]],  # ...one draw per entry of job 1: its second entry
        # Grow: job 0 on machine 0 (chance 1: 1/2 for a machine with room, 1 for its only
        # machine with room), job 1 on machine 0 (chance 1/2: both machines have room).
        [[[0.99, 0.99], [0.2, 0.99]]],
        [0.0, 0.5],  # to now + floor(u x (4 - now + 1)): job 0 stays at 1, job 1 gets 2
    )
    out = s.mutate(state, rng, base, capacity)
    assert out[0].tolist() == [[1, 0], [2, 0]]


def test_repair_interference_limits_and_capacity():
    rng = np.random.default_rng(0)
    capacity = np.array([4, 4])
    # Jobs 0 and 1 are both distributed over machines 0 and 1: job 1 (later) loses them; job 2
    # asks for 4 GPUs of machine 0 but 1 is taken by job 0, and its limit is 2.
    state = np.array([[[1, 1], [2, 2], [4, 0]]])
    out = s.repair(state, rng, np.array([4, 4, 2]), capacity)
    assert out[0].tolist() == [[1, 1], [0, 0], [2, 0]]
    # Without interference avoidance job 1 keeps 2 + 2 (within its limit of 4), and job 2
    # gets what machine 0 has left (4 - 1 - 2 = 1).
    out = s.repair(state, rng, np.array([4, 4, 2]), capacity, interference=False)
    assert out[0].tolist() == [[1, 1], [2, 2], [1, 0]]


def test_one_generation_keeps_the_best_and_is_seeded():
    capacity = np.array([2, 2])
    table = np.zeros((2, 3, 5))
    table[:, 1, 1], table[:, 1, 2], table[:, 2, 2], table[:, 2, 3], table[:, 2, 4] = 1.0, 1.9, 1.6, 2.0, 2.2
    base = np.zeros((2, 2), dtype=np.int64)
    limit = np.array([4, 4])

    def evaluate(states):
        return s.fitness(states, table, base, np.ones(2), 1.0, -1)

    def run(seed):
        pop = base[None].copy()
        score = evaluate(pop)
        rng = np.random.default_rng(seed)
        history = []
        for _ in range(5):
            pop, score = s.generation(
                pop, score, rng, base=base, capacity=capacity, max_replicas=limit, evaluate=evaluate, keep=8
            )
            history.append(score[0])
        return pop, score, history

    pop, score, history = run(3)
    assert np.all(np.diff(history) >= 0)  # elitist: the best never gets worse
    assert np.all(np.diff(score) <= 0) and len(pop) <= 8  # best first
    assert (pop.sum(axis=1) <= capacity).all()  # every candidate feasible
    assert score[0] == pytest.approx(evaluate(pop[:1])[0])
    # The best of 2 x 2 GPUs for two identical jobs: one machine each (1.9 each).
    assert pop[0].tolist() in ([[2, 0], [0, 2]], [[0, 2], [2, 0]])
    again = run(3)
    assert np.array_equal(again[0], pop) and again[2] == history


# --- the agent ---


def _ctx(profile, rows_app, fixed=None, cluster="2x2:V100"):
    columns = {"elastic_model": np.asarray(rows_app, dtype=np.float64)}
    if fixed is not None:
        columns["batch_fixed"] = np.asarray(fixed, dtype=np.float64)
    jobs = SimpleNamespace(has_column=lambda n: n in columns, column=lambda n: columns[n])
    return SimpleNamespace(throughput=SimpleNamespace(elastic=profile), jobs=jobs, cluster=Cluster.parse(cluster))


def test_agent_picks_the_goodput_best_batch_for_each_allocation(tmp_path):
    from roundhouse.elements.policies.pollux import PolluxAgent
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(_app_folder(tmp_path), epochs={"toy": 3})
    agent = PolluxAgent()
    ctx = _ctx(profile, [0, 0, 0, -1], fixed=[0, 0, 1, 0])
    agent.start(ctx)
    # Row 0 on one GPU: goodput falls from M0 on (accumulation), so 100. Row 1 resized to two
    # GPUs of one machine: M / (0.1 + 0.0005 M) x 400 / (300 + M) peaks near 245. Row 2 has a
    # fixed batch and row 3 is not elastic: theirs stay as given.
    plan = Plan(
        launch_rows=[0, 2, 3],
        launch_gpus=[0, 2, 3],
        launch_counts=[1, 1, 1],
        launch_batch=np.array([0, 300, 64]),
        resize_rows=[1],
        resize_gpus=[1, 0],
        resize_counts=[2],
    )
    out = agent.tick(ctx, plan)
    assert out.launch_batch.tolist()[0] == 100 and out.launch_batch.tolist()[1:] == [300, 64]
    assert 230 <= out.resize_batch[0] <= 260 and out.resize_lr.tolist() == [LR_ADASCALE]
    assert agent.counters["tuned"] == 2


# --- the graph ---


def test_graph_checks_and_runs_small_workload_in_the_simulator(tmp_path):
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    trace = tmp_path / "pollux-8.csv"
    pollux.generate(8, 120.0, seed=1).write_csv(trace)
    text = GRAPH.read_text().replace("../traces/samples/pollux-40.csv", str(trace))
    text = text.replace("Pollux(seed=0)", "Pollux(seed=0, population=20, generations=10)")
    graph_file = tmp_path / "pollux.sched"
    graph_file.write_text(text)
    result = simulate(compile_file(graph_file))
    jobs = result.world.jobs
    assert (jobs.column("status") == 2).all()  # every job finished
    assert np.isfinite(jobs.column("finish_s")).all()
    assert jobs.column("resizes").sum() > 0  # jobs grew (explore doubles their cap) or shrank
    assert (jobs.column("held") == 0).all()


def test_search_stops_once_the_best_stops_improving():
    capacity, base, limit = np.array([2]), np.zeros((1, 1), dtype=np.int8), np.array([2])
    table = np.zeros((1, 2, 3))
    table[0, 1, 1], table[0, 1, 2] = 1.0, 2.0
    calls = []

    def evaluate(states):
        calls.append(len(states))
        return s.fitness(states, table, base, np.ones(1), 1.0, -1)

    pop, score = s.search(
        base[None], np.random.default_rng(0), base=base, capacity=capacity, max_replicas=limit, evaluate=evaluate, keep=4,
        generations=50, patience=3,
    )  # fmt: skip
    # The best (both GPUs) is found within a few generations; three more without gain, then stop.
    assert pop[0].tolist() == [[2]] and score[0] == pytest.approx(2.001)
    assert len(calls) < 20
    calls.clear()
    s.search(
        base[None],
        np.random.default_rng(0),
        base=base,
        capacity=capacity,
        max_replicas=limit,
        evaluate=evaluate,
        keep=4,
        generations=50,
    )
    assert len(calls) == 51  # without patience: every generation


def test_the_scheduling_interval_spaces_searches(run_graph):
    graph = """
    round = 60s;
    cluster = "2x4:V100";
    elastic_profile = "pollux";
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> sched :: Pollux(seed=0, population=10, generations=3, interval=3min) -> PolluxAgent -> Launch -> JobMetrics;
    """
    # Long jobs (ten ImageNet epochs: 12.8 M samples), so that every round has jobs running.
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="imagenet", batch_size=200, epochs=10.0) for i in range(3)]
    result = run_graph(graph, jobs, until=15 * 60.0)
    # Rounds at 0, 60, ..., 900 s: searches at 0, 180, 360, 540, 720 and 900 s only.
    assert result.counters["sched"]["searches"] == 6
    every = run_graph(graph.replace(", interval=3min", ""), jobs, until=15 * 60.0)
    assert every.counters["sched"]["searches"] == 16


def test_a_measured_noise_scale_replaces_the_fitted_one(tmp_path):
    """A live job reports the gradient noise scale it measures (job-table column
    `grad_noise_scale`); the agent and the search use it instead of the application's fitted
    one, and a job that reported none (NaN) keeps the fitted one."""
    from roundhouse.elements.policies.pollux import PolluxAgent, goodput_table
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(_app_folder(tmp_path), epochs={"toy": 3})
    # The toy's goodput on two GPUs of one machine is M / (0.1 + 0.0005 M) x (phi + 100) / (phi + M):
    # its best batch is sqrt(phi / 0.0005), 245 at the fitted phi = 300, 775 at phi = 3,000 (where
    # the largest validated batch, 400, caps it).
    assert profile.noise_scale(np.array([0, 0]), np.array([np.nan, 3000.0])).tolist() == pytest.approx([300.0, 3000.0], rel=0.02)
    fitted, _ = profile.best_batch(np.array([0]), 1, 2)
    measured, _ = profile.best_batch(np.array([0]), 1, 2, phi=np.array([3000.0]))
    assert 230 <= fitted[0] <= 260 and 380 <= measured[0] <= 400

    ctx = _ctx(profile, [0, 0])
    columns = {"elastic_model": np.array([0.0, 0.0]), "grad_noise_scale": np.array([np.nan, 3000.0])}
    ctx.jobs = SimpleNamespace(has_column=lambda n: n in columns, column=lambda n: columns[n])
    agent = PolluxAgent()
    agent.start(ctx)
    plan = Plan(resize_rows=[0, 1], resize_gpus=[0, 1, 2, 3], resize_counts=[2, 2])
    out = agent.tick(ctx, plan)
    assert out.resize_batch.tolist() == [fitted[0], measured[0]]

    table = goodput_table(profile, np.array([0, 0]), np.array([0, 0]), 1, 2, np.array([np.nan, 3000.0]))
    assert table[0, 1, 2] == pytest.approx(profile.rates(np.array([0]), 1, 2, fitted)[0])
    assert table[1, 1, 2] == pytest.approx(profile.rates(np.array([0]), 1, 2, measured, np.array([3000.0]))[0])


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("p=-500", "argument 'p' of Pollux must be at least -10, got -500"),
        ("p=11", "argument 'p' of Pollux must be at most 10, got 11"),
        ("interval=-1min", "argument 'interval' of Pollux must be 0 or more, got -1min"),
        ("seed=-1", "argument 'seed' of Pollux must be 0 or more, got -1"),
    ],
)
def test_bad_arguments_are_located_errors(capsys, argument, message):
    from tests.conftest import fails

    graph = Path(__file__).parents[1] / "graphs" / "pollux.sched"
    err = fails(capsys, "run", graph, "--set", f"sched.{argument}", "--until", "1min")
    assert f"--set sched.{argument}: {message}" in err


def test_only_the_bare_names_mean_the_built_in_profiles(run_graph, tmp_path, monkeypatch):
    """ "pollux" alone is Pollux's six built in; a path ending in pollux that names no folder is
    an error, not the built-in profile. A folder of that name, where there is one, is read."""
    graph = """
    round = 60s;
    cluster = "1x4:V100";
    elastic_profile = "pollux";
    TraceSource(path="trace.csv") -> AcceptAll -> JobPool -> Pollux(seed=0, population=4, generations=2) -> PolluxAgent -> Launch -> JobMetrics;
    """
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="cifar10", batch_size=128, epochs=1.0)]
    assert run_graph(graph, jobs).stop_reason == "every job finished"
    monkeypatch.chdir(tmp_path)
    for given in ("/no/such/dir/pollux", "elsewhere/pollux"):
        with pytest.raises(TraceError, match=r"pollux: error: no such folder \(the built-in profile is named \"pollux\" alone"):
            run_graph(graph, jobs, overrides=[f'elastic_profile="{given}"'])
    assert run_graph(graph, jobs, overrides=['elastic_profile="pollux"']).stop_reason == "every job finished"
    # The bare name written in an imported file in another folder is the built-in profile too.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "common.sched").write_text('elastic_profile = "pollux";\n')
    imported = 'import "lib/common.sched";\n' + graph.replace('elastic_profile = "pollux";', "")
    assert run_graph(imported, jobs).stop_reason == "every job finished"
    # A folder named pollux beside the graph is that folder's applications (here: only "toy").
    _app_folder(tmp_path / "pollux")
    with pytest.raises(TraceError, match="cifar10"):
        run_graph(graph, jobs)
