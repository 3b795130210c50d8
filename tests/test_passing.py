"""Rounds carried out in passing: while every job runs, a round whose arrivals all find room goes
on without ticking the pool, the policy and the sinks, and every job's times, the counters and
the explanation record are those of ticking every round."""

import numpy as np
import pytest

from roundhouse.runtime import passing
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.test_event_skipping import assert_same, rounds_with, run_both

# Philly-distribution jobs average about 32 GPU-hours: 2/h offers about half of 128 GPUs.
LOADED = """skip_rounds = true;
round = 5min;
cluster = "16x8:V100";
src :: PoissonSource(rate={rate}/h, jobs={jobs}, seed={seed});
src -> AcceptAll -> JobPool -> {policy} -> {placer} -> Launch -> m :: JobMetrics{track};
"""


def graph_file(tmp_path, rate=2, jobs=250, seed=4, policy="Las", placer="Consolidated", track=""):
    path = tmp_path / "g.sched"
    path.write_text(LOADED.format(rate=rate, jobs=jobs, seed=seed, policy=policy, placer=placer, track=track))
    return path


# Policies and placers of the graph shapes that pass.
SHAPES = [
    ("Las", "Consolidated"),
    ("Las(service=wall_seconds)", "FirstFree"),
    ("Fifo", "Consolidated(strict=false)"),
    ("Srtf", "FirstFree"),
    ("Srsf", "Consolidated"),
]


@pytest.mark.parametrize(("policy", "placer"), SHAPES)
def test_arrival_rounds_pass_and_every_job_is_where_it_would_be(tmp_path, policy, placer):
    off, on = run_both(graph_file(tmp_path, policy=policy, placer=placer))
    assert_same(off, on)
    arrivals = rounds_with(off.world.jobs.column("arrival_s"), 300.0)
    assert on.passed_rounds > arrivals // 2  # most rounds with arrivals were carried out in passing
    assert on.rounds - on.skipped_rounds < arrivals // 2
    assert off.passed_rounds == 0


def test_a_round_whose_arrivals_find_no_room_is_ticked_from_the_pool_on(tmp_path, monkeypatch):
    # Four times the load: the cluster fills now and then, and an arrival round that cannot pass is
    # ticked with the sources' and admission's values of its attempt (they do not tick again).
    declined = []
    take_front = passing.Passing.take_front

    def counting(self):
        front = take_front(self)
        declined.append(front is not None)
        return front

    monkeypatch.setattr(passing.Passing, "take_front", counting)
    off, on = run_both(graph_file(tmp_path, rate=8, jobs=300, seed=5))
    assert_same(off, on)
    assert any(declined) and on.passed_rounds > 0
    assert on.counters["m"]["suspended"] > 0  # preemptions happened in the ticked rounds


def test_a_tracked_window_stops_the_run_in_the_same_round(tmp_path):
    off, on = run_both(graph_file(tmp_path, jobs=200, track="(track=60..120)"))
    assert_same(off, on)
    assert on.stop_reason.startswith("m:") and on.passed_rounds > 0


def test_the_explanation_record_is_the_same(tmp_path):
    path = graph_file(tmp_path, rate=3, jobs=200, seed=6)
    results = []
    for skip in ("false", "true"):
        path.write_text(f"skip_rounds = {skip};\n" + path.read_text().split("\n", 1)[1])
        results.append(simulate(compile_file(path), explain=True))
    off, on = results
    assert off.passed_rounds == 0 and on.passed_rounds > 0
    frame = off.world.explain.frame(off.world)
    assert frame.height > 0 and frame.equals(on.world.explain.frame(on.world))


def test_many_rounds_in_passing_are_ticked_now_and_then(tmp_path, monkeypatch):
    # What the rounds carried out in passing hand on waits in memory until a tick: a bound.
    monkeypatch.setattr(passing, "MAX_PASSED", 5)
    off, on = run_both(graph_file(tmp_path, jobs=150))
    assert_same(off, on)
    assert on.passed_rounds > 0 and on.rounds - on.skipped_rounds >= on.passed_rounds // 5


def test_a_graph_of_another_shape_ticks_its_arrival_rounds(tmp_path):
    # Two sources: which source's arrivals join the pool first would change with passing.
    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "16x8:V100";\n'
        "a :: PoissonSource(rate=1/h, jobs=80, seed=1);\nb :: PoissonSource(rate=1/h, jobs=80, seed=2, start_id=1000);\n"
        "admit :: AcceptAll;\na -> admit;\nb -> admit;\n"
        "admit -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    off, on = run_both(path)
    assert_same(off, on)
    assert on.passed_rounds == 0 and on.skipped_rounds > 0
    assert np.isfinite(on.world.jobs.column("finish_s")).all()


def test_an_element_that_fails_to_answer_is_named(tmp_path, monkeypatch):
    from roundhouse.elements.launch import Launch
    from roundhouse.elements.sinks import JobMetrics
    from roundhouse.runtime.engine import ElementFailure

    def broken(self, ctx):
        raise ZeroDivisionError("no answer")

    monkeypatch.setattr(JobMetrics, "arrivals_wait", broken)
    with pytest.raises(ElementFailure, match=r"element 'm' \(JobMetrics.*its arrivals_wait raised ZeroDivisionError: no answer"):
        simulate(compile_file(graph_file(tmp_path, jobs=20)))
    monkeypatch.undo()
    monkeypatch.setattr(Launch, "completions_wait", broken)  # (asked after every element's arrivals_wait)
    with pytest.raises(ElementFailure, match=r"element 'Launch@\d+' \(Launch.*its completions_wait raised ZeroDivisionError"):
        simulate(compile_file(graph_file(tmp_path, jobs=20)))
