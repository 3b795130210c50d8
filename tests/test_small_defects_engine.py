"""Small defects of the engine and its neighbours: jobs a plan completed in the last round reach
the sinks' counters; an empty graph path is said to be empty; cluster descriptions in the
singular; TraceSource's seed without a rate and EffectiveThroughput's `by` on a live column
refused at the argument."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.element import Element, In, element
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.simulation import Simulation
from roundhouse.runtime.types import Events
from roundhouse.tools.cli import main
from roundhouse.traces.jobs import FINISHED
from tests.conftest import fails

ROOT = Path(__file__).resolve().parents[1]
LOSS_TRACE = ROOT / "traces" / "samples" / "philly-single-loss-1000.csv"

# graphs/loss-termination.sched on a small cluster: LossTermination ends jobs through Launch's
# `finish` port, and the last of them in the run's last round.
LOSS_GRAPH = f"""round = 5min;
cluster = "1x2:V100";
arrivals :: TraceSource(path="{LOSS_TRACE}", jobs=30, rate=20/h, seed=0);
pool     :: JobPool;
stop     :: LossTermination(threshold=0.05);
run      :: Launch;
arrivals -> AcceptAll -> pool -> stop -> Fifo -> Consolidated -> run -> metrics :: JobMetrics;
stop [converged] -> [finish] run;
"""


@pytest.fixture
def loss_graph(tmp_path) -> Path:
    path = tmp_path / "loss.sched"
    path.write_text(LOSS_GRAPH)
    return path


def _finished_in_books(result) -> int:
    return int(np.count_nonzero(result.world.jobs.column("status") == FINISHED))


# --- jobs completed through Launch's `finish` port in the last round ---


def test_jobs_completed_in_the_last_round_reach_the_counters(loss_graph):
    result = simulate(compile_file(loss_graph))
    assert result.stop_reason == "every job finished"
    counters = result.counters
    assert counters["run"]["completed"] == 30  # (every job ended by LossTermination, the last in the last round)
    assert counters["metrics"]["finished"] == counters["metrics"]["tracked_finished"] == 30
    assert counters["pool"]["active"] == 0 and counters["pool"]["running"] == 0
    # The run still ends in the round of its last completion, and the job table is as before.
    finish = result.reports["metrics"]["jobs"]["finish_s"]
    assert result.end_s == finish.max()
    assert finish.null_count() == 0 and len(finish) == 30


def test_the_command_line_writes_the_same_tables_with_the_counters_right(loss_graph, tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(loss_graph), "--out", str(out), "--quiet"]) == 0
    import json

    run = json.loads((out / "run.json").read_text())
    assert run["counters"]["metrics"]["finished"] == run["counters"]["run"]["completed"] == 30
    assert run["counters"]["pool"]["active"] == 0
    jobs = pl.read_csv(out / "jobs.csv")
    assert jobs.height == 30 and run["end_s"] == jobs["finish_s"].max()


def test_a_run_stopped_at_its_limit_counts_the_jobs_its_last_plan_completed(loss_graph):
    # Each time a job was ended: a run given that time as its limit stops in that round, after
    # its plan completed the job; the counters say every job the books show finished.
    whole = simulate(compile_file(loss_graph))
    ends = sorted(set(whole.reports["metrics"]["jobs"]["finish_s"].to_list()))
    for until in (ends[0], ends[len(ends) // 2]):
        result = simulate(compile_file(loss_graph), until=until)
        assert result.end_s == until
        assert result.counters["metrics"]["finished"] == _finished_in_books(result) > 0
        # (AcceptAll admits each job in the round it arrives: every unfinished job is in the pool)
        assert result.counters["pool"]["active"] == result.world.unfinished


def test_a_completion_is_counted_once_across_a_result_taken_midway(loss_graph):
    # A result before the end is that of a fork ended now; the simulation goes on and counts
    # each completion once, in its own next round or at its own end.
    sim = Simulation(loss_graph)
    sim.run_until(4 * 3600)
    midway = sim.result()
    assert midway.counters["metrics"]["finished"] == _finished_in_books(midway)
    final = sim.run()
    assert final.counters["metrics"]["finished"] == final.counters["run"]["completed"] == 30
    assert final.counters["pool"]["active"] == 0


def test_an_engine_ended_twice_delivers_its_completions_once(loss_graph):
    from roundhouse.runtime.simulate import new_engine

    graph = compile_file(loss_graph)
    engine = new_engine(graph, None)
    engine.begin()
    while not engine.step():
        pass
    first = engine.end()
    again = engine.end()
    assert first.counters["metrics"]["finished"] == again.counters["metrics"]["finished"] == 30


@element
class CountsCompletions(Element):
    """Counts the completions in its events, and its ticks; says that completions may wait.

    Ports:
        events: the round's events.
    Arguments:
        none
    Counters:
        finished: completions seen.
        ticks: ticks.
    See also: JobMetrics
    Paper: none (a test element).
    """

    category = "sink"
    inputs = (In("events", Events),)

    def start(self, ctx) -> None:
        self.counters.update(finished=0, ticks=0)

    def tick(self, ctx, events: Events) -> None:
        self.counters["finished"] += len(events.finished)
        self.counters["ticks"] += 1

    def completions_wait(self, ctx) -> bool:
        return True


@element
class RecordsRounds(CountsCompletions):
    """Counts its ticks as rounds (as ResourceUsage records one row a round); says nothing of completions.

    Ports:
        events: the round's events.
    Arguments:
        none
    Counters:
        finished: completions seen.
        ticks: ticks.
    See also: ResourceUsage
    Paper: none (a test element).
    """

    def completions_wait(self, ctx) -> bool:
        return False


def test_a_user_sink_that_says_completions_wait_counts_the_last_rounds_completions(tmp_path):
    # As docs/writing-elements.md says: the jobs the last round's plan completed reach a sink that
    # says `completions_wait` in one more tick; a sink that does not is ticked once a round only.
    path = tmp_path / "g.sched"
    path.write_text(LOSS_GRAPH + "run -> counts :: CountsCompletions;\nrun -> rounds :: RecordsRounds;\n")
    result = simulate(compile_file(path))
    counts, rounds = result.counters["counts"], result.counters["rounds"]
    assert counts["finished"] == result.counters["run"]["completed"] == 30
    assert counts["ticks"] == result.rounds + 1
    assert rounds["ticks"] == result.rounds and rounds["finished"] < 30


# --- an empty graph path ---


@pytest.mark.parametrize("command", ["run", "check"])
def test_an_empty_graph_path_is_said_to_be_empty(capsys, command):
    assert main([command, ""]) == 2
    err = capsys.readouterr().err
    assert "the graph path is empty" in err and "directory" not in err and "Traceback" not in err


def test_compile_file_refuses_an_empty_path():
    with pytest.raises(UsageError, match="the graph path is empty"):
        compile_file("  ")


# --- cluster descriptions ---


@pytest.mark.parametrize(
    "spec, text",
    [
        ("1x2:V100", "2 GPUs on 1 node (1x2:V100)"),
        ("1x1:V100", "1 GPU on 1 node (1x1:V100)"),
        ("2x4:V100", "8 GPUs on 2 nodes (2x4:V100)"),
    ],
)
def test_a_cluster_description_says_node_and_gpu_in_the_singular_for_one(spec, text):
    assert Cluster.parse(spec).describe() == text


# --- TraceSource's seed without a rate ---

SEEDED = f"""round = 5min;
cluster = "1x2:V100";
arrivals :: TraceSource(path="{LOSS_TRACE}", jobs=5{{args}});
arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""


def test_a_trace_sources_seed_without_a_rate_is_refused_at_the_argument(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(SEEDED.format(args=", seed=3"))
    assert main(["check", str(graph)]) != 0
    err = capsys.readouterr().err
    assert f"{graph}:3:" in err and "argument 'seed' of TraceSource needs `rate`" in err and "Traceback" not in err
    # Given with --set on a graph without a rate: refused too, naming the option.
    graph.write_text(SEEDED.format(args=""))
    assert main(["run", str(graph), "--set", "arrivals.seed=3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--set arrivals.seed=3" in err and "needs `rate`" in err


def test_a_trace_sources_seed_with_a_rate_still_draws_the_arrivals(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(SEEDED.format(args=", rate=6/h, seed=3"))
    one = simulate(compile_file(graph)).reports
    graph.write_text(SEEDED.format(args=", rate=6/h, seed=4"))
    other = simulate(compile_file(graph)).reports
    first, second = (next(iter(r.values()))["jobs"]["arrival_s"].to_list() for r in (one, other))
    assert first != second
    graph.write_text(SEEDED.format(args=", rate=6/h"))
    assert main(["check", str(graph)]) == 0


# --- EffectiveThroughput's `by` ---

BY = f"""round = 5min;
cluster = "1x2:V100";
arrivals :: TraceSource(path="{LOSS_TRACE}", jobs=5);
arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run :: Launch -> JobMetrics;
run -> EffectiveThroughput(by="{{by}}");
"""


@pytest.mark.parametrize("column", ["finish_s", "status", "placed_type", "loss"])
def test_effective_throughput_refuses_a_column_that_changes_as_jobs_run(tmp_path, capsys, column):
    graph = tmp_path / "g.sched"
    graph.write_text(BY.format(by=column))
    assert main(["check", str(graph)]) != 0
    err = capsys.readouterr().err
    assert f"{graph}:5:" in err and f"names '{column}', a column that changes as the job runs" in err
    assert "job_id, arrival_s, gpus" in err and "user" in err and "Traceback" not in err


def test_effective_throughput_still_groups_by_a_trace_column(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(BY.format(by="model"))
    result = simulate(compile_file(graph))
    series = next(r for r in result.reports.values() if "throughput_series" in r)["throughput_series"]
    assert series.height > 0 and len(series.columns) > 2


@pytest.mark.parametrize(
    "argv", [["sweep", "", "--vary", "seed=1"], ["serve", "", "--bind", "tcp://127.0.0.1:5999", "--insecure"]]
)
def test_an_empty_graph_path_is_said_to_be_empty_by_every_command(capsys, argv):
    assert "the graph path is empty: give a .sched file" in fails(capsys, *argv)


def test_a_journal_that_says_1_nodes_is_the_same_cluster_as_one_that_says_1_node():
    from roundhouse.runtime.cluster import described_alike

    assert described_alike("1 GPUs on 1 nodes (1x1:V100)", Cluster.parse("1x1:V100").describe())
    assert described_alike("32 GPUs on 8 nodes (8x4:V100)", Cluster.parse("8x4:V100").describe())
    assert not described_alike("1 GPUs on 1 nodes (1x1:V100)", Cluster.parse("1x1:P100").describe())


def test_plots_read_the_gpu_count_of_a_one_gpu_cluster(tmp_path):
    from roundhouse.tools.outputs.run_folder import RunFolder

    folder = RunFolder(tmp_path, {"cluster": Cluster.parse("1x1:V100").describe()}, pl.DataFrame(), {}, None)
    assert folder.cluster_gpus == 1
