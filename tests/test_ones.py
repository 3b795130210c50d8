"""ONES: the search's operators on a tiny cluster, the batch-limit rules and the Beta predictor,
hand-computed; the trace reader's checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies import ones_search as s
from roundhouse.elements.policies.ones_predictor import BetaPredictor, history_points
from roundhouse.errors import SchedError, TraceError
from roundhouse.traces import ones
from tests.conftest import SHARED

E = s.EMPTY
HISTORY = str(SHARED / "data" / "ones" / "job_history.csv")


def test_counts_and_score_by_hand():
    pop = np.array([[0, 0, 1, E], [1, 1, 1, 0]])
    assert s.job_counts(pop, 2).tolist() == [[2, 1], [1, 3]]
    speed = np.array([[0, 10, 16, 20, 22], [0, 5, 10, 15, 20.0]])
    processed, factor = np.array([100.0, 50.0]), np.array([1.0, 3.0])
    # candidate 0: 100*2/16*1 + 50*1/5*3 = 12.5 + 30; candidate 1: 100*1/10*1 + 50*3/15*3 = 10 + 30
    assert s.score(pop, processed, factor, speed).tolist() == pytest.approx([42.5, 40.0])


def test_one_generation_on_a_tiny_cluster():
    """Four GPUs, three jobs; seed 0; each operator checked against what it must do."""
    rng = np.random.default_rng(0)
    pop = np.array([[0, 0, 1, 1], [2, 0, 0, E], [1, 2, 2, 2]])
    allowed = np.array([2, 1, 2])  # job 1 limited to one GPU, job 2 to two
    refreshed = s.refresh(pop, allowed)
    assert refreshed.tolist() == [[0, 0, 1, E], [2, 0, 0, E], [1, 2, 2, E]]
    # Crossover: children take, per GPU, one parent's gene or the other's, then are trimmed.
    children = s.crossover(refreshed, np.random.default_rng(0), 2, 0.5, allowed)
    r = np.random.default_rng(0)
    a, b = r.integers(0, 3, 2), r.integers(0, 3, 2)
    mask = r.random((2, 4)) < 0.5
    expect = s.trim(
        np.concatenate([np.where(mask, refreshed[b], refreshed[a]), np.where(mask, refreshed[a], refreshed[b])]), allowed
    )
    assert children.tolist() == expect.tolist()
    assert (s.job_counts(children, 3) <= allowed).all()
    # Mutation: theta = 1 drops every job not immune; theta = 0 nothing.
    immune = np.array([False, True, False])
    assert s.mutate(refreshed, rng, 1.0, immune).tolist() == [[E, E, 1, E], [E, E, E, E], [1, E, E, E]]
    assert s.mutate(refreshed, rng, 0.0, immune).tolist() == refreshed.tolist()
    # Fill: job 2 then job 0, each up to two GPUs, into the free GPUs in order.
    filled = s.fill(refreshed, np.array([2, 0]), np.array([2, 0, 2]))
    # (candidate 2: job 2 already has two, so job 0 takes the free GPU)
    assert filled.tolist() == [[0, 0, 1, 2], [2, 0, 0, 2], [1, 2, 2, 0]]
    # Reorder: each job's GPUs next to each other, in order of first appearance, free last.
    assert s.reorder(np.array([[1, 0, 1, E, 0, 2]]), 3).tolist() == [[1, 1, 0, 0, 2, E]]
    # Selection: elitist, the lowest scores kept.
    kept, scores = s.select(filled, np.array([3.0, 1.0, 2.0]), 2)
    assert kept.tolist() == [filled[1].tolist(), filled[2].tolist()] and scores.tolist() == [1.0, 2.0]


def test_batch_limit_transitions():
    r = np.array([1, 2, 4, 4, 8])
    t = np.array([0.0, 0.0, 20.0, 45.0, 100.0])
    # ceil(2R / ceil(T/30 + 1)): doubling at T = 0, held for T in (0, 30], 2R/3 up to 60 s, ...
    assert s.scale_down(r, t, 1 / 30).tolist() == [2, 4, 4, 3, 4]
    # The floor reading: doubling until 30 s, hold until 60 s, then shrinking.
    assert s.scale_down(r, t, 1 / 30, "floor").tolist() == [2, 4, 8, 4, 4]
    assert s.resume_limit(np.array([8, 1, 5]), np.array([True, True, False])).tolist() == [4, 1, 5]


def test_beta_predictor_likelihood_goes_down():
    p = BetaPredictor(seed=0, steps=60)
    p.add(*history_points(ones.read_history(HISTORY)))
    before = p.nll()
    losses = p.fit()
    assert p.nll() < before and losses[-1] < losses[0]
    factor = p.factor(p.x[:5], sample=False, rng=np.random.default_rng(0))
    assert (factor >= 0).all() and np.isfinite(factor).all()


def test_trace_reader_and_generator(tmp_path):
    trace = ones.read_trace(str(SHARED / "data" / "ones" / "trace_1.csv"))
    assert trace.height == 400 and set(trace["model"].unique()) == set(ones.PAIR_NAMES)
    g = ones.generate(200, seed=3)
    assert g.height == 200 and g["arrival_s"].is_sorted()
    assert abs(g["arrival_s"].diff().mean() - 30.0) < 6.0
    assert g.equals(ones.generate(200, seed=3))
    bad = tmp_path / "bad.csv"
    bad.write_text(
        ",".join(ones.TRACE_COLUMNS) + "\n0,resnet50,imagenet,10000,10,32,5e-4,0.008,0.55,16\n5,gpt,wiki,1,1,1,1,1,1,1\n"
    )
    with pytest.raises(TraceError, match=r"bad.csv:3.*unknown model/task 'gpt-wiki'"):
        ones.read_trace(bad)
    bad.write_text(bad.read_text().replace("wiki,1,1,1,1,1,1,1", "wiki,1,1,1,1,1,1,0.5"))  # half a GPU
    with pytest.raises(TraceError, match=r"bad.csv:3: error: column 'num_gpus': '0.5' is not a whole number of at least 1"):
        ones.read_trace(bad)


def test_graph_checks_runs_and_renders(tmp_path):
    """graphs/ones.sched on a ten-job ONES-like trace: every job finishes, jobs are resized."""
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    trace = tmp_path / "ones-10.csv"
    ones.generate(10, seed=0).write_csv(trace)
    text = (Path(__file__).parents[1] / "graphs" / "ones.sched").read_text()
    graph_file = tmp_path / "ones.sched"
    graph_file.write_text(text.replace("../traces/samples/ones-60.csv", str(trace)))
    result = simulate(compile_file(graph_file))
    assert result.stop_reason == "every job finished"
    jobs = result.world.jobs
    assert np.isfinite(jobs.column("finish_s")).all() and len(jobs.column("finish_s")) == 10
    assert jobs.column("resizes").sum() > 0
    assert any(c.get("generations", 0) > 0 for c in result.counters.values())


def test_a_batch_size_no_application_covers_is_a_located_error(tmp_path, capsys):
    """A row of ONES' trace whose batch per GPU is past what its application runs is refused
    as the trace is read, naming the file, line and column; the same job in a canonical trace
    stops the run before it starts, naming the job and the range; nothing is written."""
    from roundhouse.tools.cli import main

    raw = tmp_path / "ones.csv"
    raw.write_text(
        ",".join(ones.TRACE_COLUMNS) + "\n0,resnet18,cifar,2000,10,256,0.005,0.08,0.7,4\n"
        "30,resnet18,cifar,2000,10,100000,0.005,0.08,0.7,4\n"
    )
    with pytest.raises(TraceError) as refused:
        ones.read_trace(raw)
    assert (refused.value.path, refused.value.row, refused.value.column) == (str(raw), 3, "batch_size")
    raw.write_text(",".join(ones.TRACE_COLUMNS) + "\n0,resnet18,cifar,2000,10,256,0.005,0.08,0.7,4\n")
    good = ones.read_trace(raw)
    past = good.with_columns(
        job_id=pl.lit(1, good["job_id"].dtype),
        local_batch=pl.lit(100000, good["local_batch"].dtype),
        max_batch_size=pl.lit(10**6, good["max_batch_size"].dtype),
    )
    past = past.with_columns(batch_size=(pl.col("local_batch") * pl.col("gpus")).cast(good["batch_size"].dtype))
    trace = tmp_path / "jobs.csv"
    pl.concat([good, past]).write_csv(trace)
    graph = Path(__file__).parents[1] / "graphs" / "ones.sched"
    assert main(["run", str(graph), "--trace", str(trace), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{trace}: error: job 1: local_batch 100000 is outside what the elastic profile covers for resnet18-cifar (256 to 4096)"
        in err
    ), err
    assert "Traceback" not in err and not (tmp_path / "out" / "jobs.csv").exists()


def test_the_elements_batch_limit_through_a_jobs_life():
    """Ones' R, round by round (sigma = 2/min, one job in 30 s, the floor reading): 1 at the start; doubled after
    an epoch at the limit while the job has run under 30 s; held once it is past 30 s; left
    alone while the job waits (only a deployed schedule that leaves it out halves it); never
    past the job's own cap."""
    from roundhouse.elements.policies.ones import Ones
    from roundhouse.runtime.values import Rate

    o = Ones(sigma=Rate(1 / 30), rounding="floor")
    o._limit, o._seen, o._scaled_at = np.ones(3, dtype=np.int64), np.zeros(3, dtype=bool), np.zeros(3)
    rows, cap = np.arange(3), np.array([8, 8, 2])

    def update(epochs, running, held, run_s):
        return o._update_limits(rows, np.array(epochs), np.array(running), np.array(held), np.array(run_s), cap).tolist()

    # Job 0 has trained an epoch at its limit in 10 s: 2 / floor(10/30 + 1) x 2 = 2. Job 1 is half
    # way through its first epoch; job 2 has not run.
    assert update([1.0, 0.5, 0.0], [True, True, False], [1, 1, 0], [10.0, 10.0, 0.0]) == [2, 1, 1]
    # Job 0 is not at its new limit yet, or not an epoch past its last change: held. Job 1 doubles.
    assert update([1.5, 1.0, 0.0], [True, True, False], [1, 1, 0], [20.0, 20.0, 0.0]) == [2, 2, 1]
    # An epoch later at 2 GPUs: job 0 has run 40 s (2R / floor(40/30 + 1) = 4/2 = 2, held), job 1
    # 70 s (4 / floor(70/30 + 1) = 4/3, up to 2).
    assert update([2.0, 2.0, 0.0], [True, True, False], [2, 2, 0], [40.0, 70.0, 0.0]) == [2, 2, 1]
    # Job 0 is suspended: waiting after having run, its limit stays what it was round after
    # round; job 2 runs an epoch fast and doubles, up to its cap of 2 GPUs and no further.
    assert update([2.0, 3.0, 1.0], [False, True, True], [0, 2, 1], [40.0, 80.0, 5.0]) == [2, 2, 2]
    assert update([2.0, 3.0, 2.0], [False, True, True], [0, 2, 2], [40.0, 80.0, 10.0]) == [2, 2, 2]


class _Active:
    """The parts of a round's Active that Ones._deploy reads."""

    def __init__(self, run_s, batch):
        self.rows = np.arange(len(run_s))
        self.run_s = np.asarray(run_s, dtype=np.float64)
        self._batch = np.asarray(batch, dtype=np.float64)

    def __len__(self):
        return len(self.rows)

    def column(self, name):
        assert name == "batch_size"
        return self._batch


def test_a_preempted_jobs_limit_is_set_once_and_halved_only_when_left_out():
    """ONES §3.3.2, Resume: a preempted job may ask again for what it held (R is set to that,
    once); each deployed schedule that still leaves it waiting halves R. Waiting rounds in
    between change nothing."""
    from types import SimpleNamespace

    from roundhouse.elements.policies.ones import Ones

    o = Ones(gate_epochs=1.0)
    o.counters.update(deployed=0, held_back=0)
    o._limit, o._seen = np.array([8, 8, 8]), np.ones(3, dtype=bool)
    o._epoch_mark, o._scaled_at = np.zeros(3), np.zeros(3)
    ctx = SimpleNamespace(jobs=SimpleNamespace(has_column=lambda name: False), explaining=False)
    epochs, cap = np.array([5.0, 5.0, 5.0]), np.array([8, 8, 8])
    active = _Active([100.0, 50.0, 100.0], [32, 32, 32])
    # Job 0 holds GPUs 0-1 with R = 8, job 2 GPUs 2-3; job 1 waits, having run. The schedule
    # deployed gives every GPU to job 2: job 0 is suspended (R: what it held, 2) and job 1 is
    # left out (R: 8 halved, 4).
    current, best = np.array([0, 0, 2, 2]), np.array([2, 2, 2, 2])
    plan = o._deploy(ctx, active, best, current, epochs, np.array([2, 0, 2]), o._limit.copy())
    assert plan.suspend.tolist() == [0] and o._limit.tolist() == [2, 4, 8]
    # Three rounds of waiting: the limits of the waiting jobs are left alone.
    for _ in range(3):
        got = o._update_limits(np.arange(3), epochs, np.array([False, False, True]), np.array([0, 0, 4]), active.run_s, cap)
        assert got.tolist() == [2, 4, 8]
    # The next schedule deployed leaves both out again: each halves once.
    o._deploy(ctx, active, np.array([2, 2, 2, 2]), np.array([2, 2, 2, 2]), epochs + 1, np.array([0, 0, 4]), o._limit.copy())
    assert o._limit.tolist() == [1, 2, 8]


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("mutate_rate=-0.5", "argument 'mutate_rate' of Ones must be 0 or more, got -0.5"),
        ("mutate_rate=1.5", "argument 'mutate_rate' of Ones must be at most 1, got 1.5"),
        ("swap=-1", "argument 'swap' of Ones must be 0 or more, got -1"),
        ("gate_epochs=-3", "argument 'gate_epochs' of Ones must be 0 or more, got -3"),
        ("sigma=-1/min", "argument 'sigma' of Ones must be 0 or more, got -60/h"),
        ("sigma=0.0333", "argument 'sigma' of Ones expects a rate such as 8/h, got 0.0333 (a number)"),
        ("rounding=round", "argument 'rounding' of Ones must be one of 'ceil', 'floor', got \"round\""),
        ("seed=-2", "argument 'seed' of Ones must be 0 or more, got -2"),
    ],
)
def test_bad_arguments_are_located_errors(capsys, argument, message):
    from tests.conftest import fails

    graph = Path(__file__).parents[1] / "graphs" / "ones.sched"
    err = fails(capsys, "run", graph, "--set", f"Ones@2.{argument}", "--until", "1min")
    assert f"--set Ones@2.{argument}: {message}" in err and "attrs" not in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("5", ",512,", ",abc,"), r"h.csv:5: error: column 'batch_size': 'abc' is not a whole number of at least 1"),
        (("7", "879686", "0"), r"h.csv:7: error: column 'total_workload': '0' is not a number more than 0"),
        (("3", ",80000,", ",1800000,"), r"h.csv:3: error: column 'num_samples': 1.8e\+06 is more than total_workload 879686"),
        (("4", ",0.01,", ",,"), r"h.csv:4: error: column 'lr': has no value \(it must be a number more than 0\)"),
    ],
)
def test_history_errors_name_file_line_and_column(tmp_path, edit, message):
    """A bad cell of the history that seeds the predictor is said when the graph is compiled,
    at the argument that names the file, with where in the file it is."""
    from roundhouse.runtime.compiler import compile_file

    line, old, new = edit
    lines = Path(HISTORY).read_text().split("\n")
    assert old in lines[int(line) - 1]
    lines[int(line) - 1] = lines[int(line) - 1].replace(old, new, 1)
    bad = tmp_path / "h.csv"
    bad.write_text("\n".join(lines))
    with pytest.raises(TraceError, match=message):
        ones.read_history(bad)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 10s;\ncluster = "16x4:V100";\nelastic_profile = "ones";\n'
        f'TraceSource(path="{tmp_path / "t.csv"}") -> AcceptAll -> JobPool -> Ones(history="h.csv", seed=0) -> Launch -> JobMetrics;\n'
    )
    ones.generate(1, seed=0).write_csv(tmp_path / "t.csv")
    with pytest.raises(SchedError, match=message) as caught:  # (checked before the run, not when it starts)
        compile_file(graph)
    assert f"{graph}:4:" in str(caught.value) and "argument 'history' of Ones" in str(caught.value)


def test_learning_from_jobs_of_tiny_or_unknown_epoch_sizes():
    """Epoch sizes the trace checks let through (a tiny one; an empty cell) give the predictor
    a bounded number of points per finished job instead of one per epoch (10^15 here)."""
    from types import SimpleNamespace

    from roundhouse.elements.policies.ones import Ones

    o = Ones(refit_steps=1)
    o._predictor = BetaPredictor(seed=0, steps=1)
    o.counters.update(refits=0)
    table = {"epoch_size": np.array([1e-6, np.nan, 100.0]), "work": np.array([1e9, 500.0, 1000.0])}
    ctx = SimpleNamespace(
        events=SimpleNamespace(finished=np.arange(3)),
        jobs=SimpleNamespace(has_column=table.__contains__, column=table.__getitem__),
    )
    o._learn(ctx)
    # Job 0: 1000 points spread over its 10^9 (capped) epochs; job 1 (no size: one sample an
    # epoch): 500; job 2: its 10 epochs.
    assert len(o._predictor.y) == 1000 + 500 + 10 and o.counters["refits"] == 1
    assert np.isfinite(o._predictor.x).all() and (o._predictor.y > 0).all() and (o._predictor.y < 1).all()
