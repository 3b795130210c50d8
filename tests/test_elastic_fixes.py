"""Elastic jobs under ONES and Pollux: ONES' batch limit by the artifact's rules (the paper's
with sigma), its explanations while the epoch gate holds a schedule back, no moves that gain no
locality, a history checked when the graph is; the explain command's moves and resizes; format
detection of an ONES or Pollux trace missing a column; ports of one name in and out described
apart."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse import Simulation
from roundhouse.elements.policies import ones_search as s
from roundhouse.errors import SchedError, TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.explain_cmd import describe, largest_machine
from roundhouse.traces import formats, ones
from tests.conftest import REPO, SHARED

ONES_GRAPH = REPO / "graphs" / "ones.sched"
HEADER = 'round = 10s;\ncluster = "{cluster}";\nelastic_profile = "ones";\nresize_in_place = 1s;\n'


def _ones_graph(tmp_path: Path, trace: Path, args: str = "seed=0", cluster: str = "16x4:V100") -> Path:
    graph = tmp_path / "g.sched"
    graph.write_text(
        HEADER.format(cluster=cluster)
        + f'TraceSource(path="{trace}") -> AcceptAll -> JobPool -> Ones({args}) -> Launch -> JobMetrics;\n'
    )
    return graph


def _lone_job(tmp_path: Path) -> Path:
    trace = tmp_path / "one.csv"
    trace.write_text("\n".join((REPO / "traces" / "samples" / "ones-60.csv").read_text().splitlines()[:2]) + "\n")
    return trace


def _sizes(result) -> list[int]:
    """The GPUs job 0 was launched on and resized to, in order."""
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    return frame.filter(pl.col("job_id") == 0, pl.col("reason").is_in(["launched", "resized"]))["b"].to_list()


def _finished(result) -> float:
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    return float(frame.filter(pl.col("job_id") == 0, pl.col("reason") == "finished")["t_s"][0])


# --- the batch limit R ---


def test_a_lone_job_grows_by_the_artifacts_rule(tmp_path):
    """Alone on 64 GPUs, a job asking for 4 doubles every 2 epochs up to 4 x 4 (before, the
    default rule held it at 1 GPU all its life)."""
    result = simulate(compile_file(_ones_graph(tmp_path, _lone_job(tmp_path))), explain=True)
    assert _sizes(result) == [1, 2, 4, 8, 16]


def test_sigma_given_is_the_papers_rule(tmp_path):
    """With sigma = 0 the paper's rule doubles after every epoch, with no scale-down: the job
    reaches its cap sooner than under the artifact's 2 epochs."""
    graph = _ones_graph(tmp_path, _lone_job(tmp_path), "seed=0, sigma=0/s")
    result = simulate(compile_file(graph), explain=True)
    assert _sizes(result) == [1, 2, 4, 8, 16]
    artifact = simulate(compile_file(_ones_graph(tmp_path, _lone_job(tmp_path))), explain=True)
    assert _finished(result) < _finished(artifact)


def test_rounding_without_sigma_is_refused(tmp_path):
    graph = _ones_graph(tmp_path, _lone_job(tmp_path), 'rounding="ceil"')
    with pytest.raises(SchedError, match=r"g\.sched:5:\d+: error: .*rounding=\"ceil\" reads the paper's rule, which needs sigma"):
        compile_file(graph)
    compile_file(_ones_graph(tmp_path, _lone_job(tmp_path), 'sigma=2/min, rounding="ceil"'))


def test_the_artifacts_limits_by_hand():
    running = np.array([True, True, True, True, False])
    held = np.array([32, 4, 2, 1, 0])
    limit = np.array([32, 4, 4, 1, 8])
    since = np.array([2.0, 2.0, 3.0, 1.5, 9.0])
    cap = np.array([64, 6, 64, 64, 64])
    run_s = np.array([300.0, 50.0, 50.0, 50.0, 0.0])
    asked: list[int] = []

    def median() -> float:
        asked.append(1)
        return 100.0

    got = s.artifact_limits(limit, since, running, held, run_s, cap, 64, median)
    # Job 0 is at its limit and eligible: doubled to 64, then, the largest eligible job, holding
    # half the cluster and past the median, shrunk: int(2 x 32 / (300/100 + 1)) = 16. Job 1
    # doubles to its cap of 6; job 2 is not at its limit; job 3 has trained 1.5 epochs since its
    # last change; job 4 waits.
    assert got.tolist() == [16, 6, 4, 1, 8] and asked == [1]
    # Under half the cluster, or not past the median: no scale-down, and the median not asked for.
    asked.clear()
    assert s.artifact_limits(limit, since, running, held, run_s, cap, 66, median).tolist() == [64, 6, 4, 1, 8] and not asked
    assert s.artifact_limits(limit, since, running, held, np.full(5, 90.0), cap, 64, median).tolist() == [64, 6, 4, 1, 8]
    # The new size is rounded up to even, never past the size held.
    assert [s.shrink(5, 110.0, 100.0), s.shrink(3, 101.0, 100.0), s.shrink(1, 1000.0, 100.0), s.shrink(8, 1e9, 1.0)] == [
        6 if int(10 / 2.1) % 2 else 4,
        2,
        1,
        2,
    ]


def test_the_median_counts_every_job_started_finished_ones_included():
    from types import SimpleNamespace

    from roundhouse.elements.policies.ones import _median_run_s

    run = np.array([0.0, 10.0, 20.0, 400.0, 0.0])  # job 3 has finished; jobs 0 and 4 have not run
    ctx = SimpleNamespace(jobs=SimpleNamespace(column=lambda name: run))
    assert _median_run_s(ctx, np.array([0])) == 15.0  # (0, 10, 20, 400): job 0 runs, 0 s so far
    assert _median_run_s(ctx, np.array([], dtype=np.int64)) == 20.0


# --- the epoch gate's explanations ---


def test_waits_while_the_gate_holds_the_schedule_back_say_what_stands():
    """A job the held-back best schedule gives no GPU is explained as such (gated, 0 GPUs), with
    the jobs and idle GPUs of the allocation that stands (before: the held-back schedule's, as if
    it had been deployed)."""
    graph = compile_file(ONES_GRAPH, ['cluster="4x4:V100"'])
    element = next(x for x in graph.elements.values() if type(x).__name__ == "Ones")
    rounds: dict[float, tuple[bool, tuple[int, int]]] = {}
    held_before = [0]

    def look(ctx) -> None:
        holder = np.asarray(ctx.holder)
        held = element.counters["held_back"] > held_before[0]
        held_before[0] = element.counters["held_back"]
        rounds[ctx.now] = (held, (len(np.unique(holder[holder >= 0])), int((holder < 0).sum())))

    result = simulate(graph, until=600.0, explain=True, on_round=look)
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    waits = frame.filter(pl.col("reason").is_in(["gated", "not_scheduled"]))
    for row in waits.iter_rows(named=True):
        held, world = rounds[row["t_s"]]
        if row["reason"] == "gated":
            assert held and (row["b"], row["c"]) == world, row
        else:
            assert not held and (row["a"], row["b"]) == world, row
    assert waits.height > 10 and waits.filter(pl.col("reason") == "gated", pl.col("a") == 0).height > 0


def test_a_held_back_wait_in_words():
    row = {"state": "waiting", "reason": "gated", "element": "o", "element_class": "Ones", "ranked_by": "", "ranked_by_class": ""}
    assert describe({**row, "a": 0, "b": 7, "c": 0}) == (
        "waiting: the best schedule found gives it no GPU, and it is held back until the running jobs it changes "
        "have trained their epoch; the allocation in force stays: it runs 7 jobs and leaves 0 GPU(s) idle (Ones 'o')"
    )


# --- moves ---


def test_no_job_is_moved_at_its_size():
    """graphs/ones.sched: before, job 32 stayed on 1 GPU and was moved 13 times, each with a
    resize pause; a job the schedule keeps at its size now keeps its GPUs. (Ten minutes are
    enough: placed as the search left them, jobs are moved at their size from the fourth on.)"""
    sim = Simulation(str(ONES_GRAPH))
    before = np.asarray(sim.world.holder).copy()
    kept = 0
    while sim.now < 600 and not sim.done:
        sim.step()
        now = np.asarray(sim.world.holder).copy()
        for j in set(before[before >= 0].tolist()) & set(now[now >= 0].tolist()):
            old, new = np.flatnonzero(before == j), np.flatnonzero(now == j)
            assert len(old) != len(new) or np.array_equal(old, new), (sim.now, j, old, new)
            kept += len(old) == len(new)
        before = now
    assert kept > 0  # (jobs did run on at their size)


# --- explain: moved and resized jobs' machines ---


def test_resized_and_moved_jobs_name_the_machines_they_span_at_least(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"cluster": "9 GPUs on 3 nodes (3x3:V100)"}))
    assert largest_machine(str(tmp_path)) == 3
    (tmp_path / "run.json").write_text(json.dumps({"cluster": "24 GPUs on 4 nodes (2x4:V100, 2x8:K80@nvlink) in 1 rack"}))
    assert largest_machine(str(tmp_path)) == 8
    assert largest_machine(str(tmp_path / "nowhere")) == 0
    row = {"state": "running", "element": "p", "element_class": "Pollux", "ranked_by": "", "ranked_by_class": ""}
    by = "(Pollux 'p')"
    resized = {**row, "reason": "resized", "a": 1, "b": 6, "c": 3}
    assert describe(resized, 3) == f"running: resized from 3 to 6 GPUs, on at least 2 machines from machine 1 {by}"
    assert describe(resized) == f"running: resized from 3 to 6 GPUs, its first GPU on machine 1 {by}"
    moved = {**row, "reason": "moved", "a": 2, "b": 6, "c": 0}
    assert describe(moved, 3) == f"running: moved its first GPU from machine 0 to machine 2 (6 GPUs on at least 2 machines) {by}"


# --- format detection ---


def _drop(source: Path, column: str, out: Path) -> Path:
    pl.read_csv(source, infer_schema_length=0).head(10).drop(column).write_csv(out)
    return out


@pytest.mark.parametrize(
    ("source", "column", "message"),
    [
        (SHARED / "data" / "ones" / "trace_1.csv", "max_lr", "missing column(s) max_lr (an ONES trace has"),
        (SHARED / "data" / "ones" / "trace_1.csv", "task", "missing column(s) task (an ONES trace has"),
        (SHARED / "data" / "pollux" / "workloads" / "workload-6.csv", "num_replicas", "missing column(s) num_replicas (a Pollux"),
        (SHARED / "data" / "pollux" / "workloads" / "workload-6.csv", "application", "missing column(s) application (a Pollux"),
    ],
)
def test_a_trace_missing_a_column_is_told_by_its_own_reader(tmp_path, source, column, message):
    trace = _drop(source, column, tmp_path / "t.csv")
    with pytest.raises(TraceError) as caught:
        formats.read_trace(trace)
    assert message in str(caught.value) and "job_id" not in str(caught.value)


def test_a_canonical_trace_with_onesish_columns_stays_canonical(tmp_path):
    """A canonical trace written from an ONES one keeps its columns by name (epoch_size, lr,
    max_lr, ...): it is canonical, not ONES'."""
    trace = tmp_path / "c.csv"
    ones.generate(3, seed=0).write_csv(trace)
    assert formats.detect_format(trace) == "canonical"
    assert formats.read_trace(trace).height == 3


# --- ONES' history, checked with the graph ---


def test_a_missing_or_bad_history_is_said_at_the_argument(tmp_path):
    trace = _lone_job(tmp_path)
    graph = _ones_graph(tmp_path, trace, 'history="nope.csv"')
    with pytest.raises(SchedError, match=r"g\.sched:5:\d+: error: argument 'history' of Ones names no file"):
        compile_file(graph)
    (tmp_path / "h.csv").write_text("id,epoch\n1,2\n")
    graph = _ones_graph(tmp_path, trace, 'history="h.csv"')
    with pytest.raises(SchedError, match=r"g\.sched:5:\d+: error: argument 'history' of Ones is no history .*missing column"):
        compile_file(graph)
    good = str(SHARED / "data" / "ones" / "job_history.csv")
    compile_file(_ones_graph(tmp_path, trace, f'history="{good}"'))


# --- element reference: ports of one name in and out ---


def test_an_input_and_an_output_of_one_name_each_get_their_text():
    from roundhouse.runtime import registry
    from roundhouse.tools.elements_cmd import reference_markdown

    agent = registry.get("PolluxAgent")
    assert agent.doc.port("in", "plan") == "the allocation's plan."
    assert agent.doc.port("out", "plan") == "the same plan, with batch sizes."
    text = reference_markdown([agent])
    assert "| `plan` | 0 | in | Plan | the allocation's plan. |" in text
    assert "| `plan` | 0 | out | Plan | the same plan, with batch sizes. |" in text


def test_a_name_documented_twice_that_is_not_in_and_out_is_refused():
    import attrs

    from roundhouse.runtime.element import Element, In, Out, parse_doc
    from roundhouse.runtime.types import Plan

    @attrs.define
    class Twice(Element):
        """Twice.

        Ports:
            plan: one.
            plan: two.
        Arguments:
            none
        Counters:
            none
        See also: none
        Paper: none.
        """

        inputs = (In("plan", Plan),)
        outputs = (Out("out", Plan),)

    with pytest.raises(TypeError, match="'plan' is documented twice in section 'Ports:'"):
        parse_doc(Twice)
