"""ONES with jobs the elastic profile does not know (fixed-size: their requested GPUs or none),
a trace's `local_batch` checks, the documented `Ones` settings, and what the placer's
`preempted` counter counts (moves left out; jobs a policy ends, as its docstring says)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies import ones_search as s
from roundhouse.errors import TraceError
from roundhouse.traces import ones

E = s.EMPTY
ROOT = Path(__file__).parents[1]


def _run(tmp_path: Path, cluster: str, trace: str, extra: str = ""):
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "{cluster}";\n{extra}'
        f'TraceSource(path="{trace}") -> AcceptAll -> JobPool -> o :: Ones(seed=0) -> Launch -> JobMetrics;\n'
    )
    return simulate(compile_file(graph))


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_a_job_the_profile_does_not_know_runs_on_the_gpus_it_asked_for(tmp_path):
    """Two ResNet-18 jobs (4 GPUs and 1) on an idle 2x4 cluster: each holds what it asked for
    from start to end, so each takes its duration; before, the 4-GPU job ran on one GPU."""
    trace = _write(
        tmp_path / "t.csv",
        "job_id,arrival_s,gpus,duration_s,model,batch_size\n0,0,4,7200,ResNet-18,64\n1,0,1,7200,ResNet-18,64\n",
    )
    result = _run(tmp_path, "2x4:V100", trace)
    jobs = result.world.jobs
    assert result.stop_reason == "every job finished"
    assert jobs.column("run_s") == pytest.approx([7200.0, 7200.0])
    assert jobs.column("service") == pytest.approx([4 * 7200.0, 7200.0])
    assert jobs.column("resizes").tolist() == [0, 0]


def test_fixed_size_jobs_of_models_and_of_durations_only_run_cleanly(tmp_path):
    """Jobs of profiled models (an 8-GPU LM among them), and jobs known only by their duration:
    no plan error (before: an LM job resized to 2 GPUs), no numpy warning (before: a division
    by a batch size of 0), every job held exactly its GPUs whenever it ran, none resized."""
    rows = [(0, 0, 1, 30000, "ResNet-18", 64), (1, 600, 8, 3000, "LM", 80), (2, 900, 2, 5000, "ResNet-50", 32)]
    rows += [(3, 1200, 4, 4000, "LM", 80), (4, 1500, 1, 2000, "ResNet-18", 64), (5, 1800, 8, 1500, "LM", 80)]
    with_models = "job_id,arrival_s,gpus,duration_s,model,batch_size\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)
    durations = "job_id,arrival_s,gpus,duration_s\n" + "".join(",".join(map(str, r[:4])) + "\n" for r in rows)
    for name, text in (("models", with_models), ("durations", durations)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = _run(tmp_path, "2x4:V100", _write(tmp_path / f"{name}.csv", text))
        jobs = result.world.jobs
        assert result.stop_reason == "every job finished", name
        gpus = np.array([r[2] for r in rows], dtype=float)
        assert jobs.column("service") == pytest.approx(gpus * jobs.column("run_s")), name
        assert not jobs.column("resizes").any(), name


def test_fixed_size_jobs_among_elastic_ones(tmp_path):
    """An ONES workload with jobs the ONES profile does not know (ResNet-18 on 4 GPUs, and a
    16-GPU job known by its duration), on 4x4 V100s: the elastic jobs still resize; the others
    only ever hold what they asked for."""
    trace = tmp_path / "mix.csv"
    frame = ones.generate(8, seed=0).with_columns(pl.lit(None, pl.Float64).alias("duration_s"))
    fixed = pl.DataFrame(
        {
            "job_id": [100, 101],
            "arrival_s": [20.0, 40.0],
            "gpus": [4, 16],
            "model": ["ResNet-18", None],
            "batch_size": [64, 64],
            "duration_s": [3000.0, 1200.0],
        }
    )
    pl.concat([frame, fixed], how="diagonal_relaxed").sort("arrival_s").write_csv(trace)
    result = _run(tmp_path, "4x4:V100", str(trace), 'elastic_profile = "ones";\nresize_in_place = 1s;\n')
    jobs = result.world.jobs
    assert result.stop_reason == "every job finished"
    ids = jobs.column("job_id")
    rigid = np.isin(ids, [100, 101])
    assert jobs.column("service")[rigid] == pytest.approx(jobs.column("gpus")[rigid] * jobs.column("run_s")[rigid])
    assert not jobs.column("resizes")[rigid].any() and jobs.column("resizes")[~rigid].sum() > 0


def test_whole_jobs_in_the_search_get_all_their_gpus_or_none():
    """Job 1 is whole (3 GPUs or none), jobs 0 and 2 elastic, on 4 GPUs."""
    allowed, whole = np.array([2, 3, 2]), np.array([False, True, False])
    # Trim: a candidate giving job 1 only two GPUs gives it none; elastic job 0 keeps its two.
    assert s.trim(np.array([[1, 1, 0, 0], [1, 1, 1, 0]]), allowed, whole).tolist() == [[E, E, 0, 0], [1, 1, 1, 0]]
    # Fill in order 0, 1, 2: job 1 does not fit after job 0's two, so job 2 takes the free GPUs;
    # with one GPU taken, job 1 fits first and job 0 gets what is left.
    empty = np.full((1, 4), E)
    assert s.fill(empty, np.array([0, 1, 2]), allowed, whole).tolist() == [[0, 0, 2, 2]]
    assert s.fill(empty, np.array([1, 0, 2]), allowed, whole).tolist() == [[1, 1, 1, 0]]
    assert s.fill(np.array([[2, E, E, E]]), np.array([1, 0]), allowed, whole).tolist() == [[2, 1, 1, 1]]
    # Without `whole`, the old greedy fill: job 1 takes the two GPUs left.
    assert s.fill(empty, np.array([0, 1, 2]), allowed).tolist() == [[0, 0, 1, 1]]
    # Several whole jobs, one pass each way: 3 GPUs free, whole jobs wanting 4, 2, 3 then 1.
    order, target = np.arange(4), np.array([4, 2, 3, 1])
    got = s.fill(np.array([[E, E, E, 9]]), order, np.r_[target, np.zeros(6, dtype=int)], np.ones(10, dtype=bool))
    assert got.tolist() == [[1, 1, 3, 9]]
    # A generation never gives a whole job part of its GPUs.
    rng = np.random.default_rng(0)
    pop, _ = s.generation(
        np.array([[0, 0, 1, 1], [1, 1, 1, E]]),
        rng,
        allowed=allowed,
        new_order=np.array([2]),
        fill_order=np.array([1, 0, 2]),
        immune=np.zeros(3, dtype=bool),
        processed=np.ones(3),
        factor=np.ones(3),
        speed=np.array([[0, 1, 2, 2, 2], [0, 0, 0, 5, 0], [0, 1, 2, 2, 2.0]]),
        keep=4,
        whole=whole,
    )
    assert set(s.job_counts(pop, 3)[:, 1].tolist()) <= {0, 3}


@pytest.mark.parametrize("value", ["0", "-128", "0.5"])
def test_a_local_batch_under_one_is_a_located_error(tmp_path, value):
    from roundhouse.traces.schema import validate

    frame = pl.DataFrame({"job_id": ["0", "1"], "arrival_s": ["0", "1"], "gpus": ["1", "1"], "duration_s": ["10", "10"]})
    frame = frame.with_columns(pl.Series("local_batch", ["32", value]))
    with pytest.raises(TraceError, match=rf"ob.csv:3: error: column 'local_batch': must be at least 1, got {value}"):
        validate(frame, "ob.csv", [2, 3])
    good = validate(frame.with_columns(pl.Series("local_batch", ["32", ""])), "ob.csv")
    assert good.get_column("local_batch").dtype == pl.Float64 and good.get_column("local_batch").to_list() == [32.0, None]


def test_a_bad_local_batch_stops_the_run_with_exit_status_2(tmp_path, capsys):
    from roundhouse.tools.cli import main

    frame = ones.generate(2, seed=0).with_columns(pl.Series("local_batch", [0, 16]))
    frame.write_csv(tmp_path / "ob.csv")
    graph = ROOT / "graphs" / "ones.sched"
    assert main(["run", str(graph), "--trace", str(tmp_path / "ob.csv"), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "ob.csv:2: error: column 'local_batch': must be at least 1, got 0" in err and "Traceback" not in err


def test_the_ones_settings_the_reproductions_page_names_can_be_written(tmp_path):
    """Every `name=value` the ONES section of docs/reproductions.md gives is a valid argument."""
    from roundhouse.runtime.compiler import compile_file

    text = (ROOT / "docs" / "reproductions.md").read_text()
    section = text[text.index("## ones-64gpu") :]
    section = section[: section.index("\n## ", 1)]
    settings = re.findall(r"`(\w+=[^`]+)`", section)
    assert "sigma=2/min" in settings and 'rounding="floor"' in settings
    trace = tmp_path / "t.csv"
    ones.generate(1, seed=0).write_csv(trace)
    for setting in settings:
        graph = tmp_path / "g.sched"
        graph.write_text(
            f'cluster = "1x4:V100";\nelastic_profile = "ones";\n'
            f'TraceSource(path="{trace}") -> AcceptAll -> JobPool -> Ones({setting}) -> Launch -> JobMetrics;\n'
        )
        compile_file(graph)  # raises on a value the language cannot write


def test_the_placers_preempted_and_moved_add_up_to_the_suspensions(tmp_path):
    """Optimus asks running jobs for other GPU counts; one that is suspended and not launched
    again in the same round is preempted, not a move (before, every job asking for other GPUs
    was taken off the count, moved or not: 114 + 133 against 251 here)."""
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    trace = tmp_path / "t.csv"
    lines = (ROOT / "traces" / "samples" / "philly-1000.csv").read_text().splitlines()[:201]
    trace.write_text("\n".join(lines) + "\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "4x4:V100";\narrivals :: TraceSource(path="{trace}", rate=4/h, seed=0);\n'
        "arrivals -> AcceptAll -> JobPool -> Optimus -> place :: Consolidated -> run :: Launch -> JobMetrics;\n"
    )
    counters = simulate(compile_file(graph)).counters
    place = counters["place"]
    assert place["moved"] > 0 and place["preempted"] > 0
    assert place["preempted"] + place["moved"] == counters["run"]["suspended"]


def test_the_placer_counts_a_job_a_policy_ends_as_its_docstring_says(tmp_path):
    """One GPU; job 0 converges early and LossTermination ends it; job 1, waiting, takes its
    GPU. The placer planned job 0's suspension and counts it (it cannot tell the job is ending:
    its docstring says so); Launch completes it instead, and suspends nothing."""
    from roundhouse.elements.placement.placer import Placer
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    trace = _write(
        tmp_path / "lt.csv",
        "job_id,arrival_s,gpus,duration_s,loss_start,loss_final,loss_speed\n"
        "0,0,1,100000,3.0,0.5,50000\n1,60,1,3000,3.0,0.5,3000\n",
    )
    graph = tmp_path / "lt.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x1:V100";\n'
        f'arrivals :: TraceSource(path="{trace}");\nstop :: LossTermination(threshold=0.001);\nrun :: Launch;\n'
        "arrivals -> AcceptAll -> JobPool -> stop -> Fifo -> place :: Consolidated -> run -> JobMetrics;\n"
        "stop [converged] -> [finish] run;\n"
    )
    counters = simulate(compile_file(graph)).counters
    assert counters["stop"]["terminated"] == 1 and counters["run"]["completed"] == 1
    assert counters["run"]["suspended"] == 0 and counters["place"]["preempted"] == 1
    assert "LossTermination" in (Placer.__doc__ or "")
