"""Decision explanations: Gandiva's reasons, moves and resizes as one line, the element that
ranked or completed a job named, runs cut short, output to a closed pipe, and graph titles with
backslashes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.explain import CANDIDATE, Reason, Recorder
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Plan
from roundhouse.tools.cli import main
from roundhouse.tools.explain_cmd import describe
from tests.conftest import REPO, fails, write_trace
from tests.test_explain import job, run_out, timeline  # noqa: F401 (run_out: a fixture)

# --- Gandiva gives the reasons the shared placers give ---

GANDIVA = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> admit :: AcceptAll -> JobPool -> order :: Fifo(backfill=BACKFILL) -> place :: Gandiva -> Launch -> m :: JobMetrics;
"""


def test_gandiva_says_why_jobs_wait(run_out, capsys):  # noqa: F811
    # One machine of 4 GPUs: job 0 holds all four until 1000 s; job 1 (2 GPUs) waits behind it,
    # and job 2 (1 GPU) waits too: behind job 1 without backfilling, behind job 0 with it.
    jobs = [job(0, 0, 4, 1000), job(1, 100, 2, 500), job(2, 100, 1, 300)]
    out = run_out(GANDIVA.replace("BACKFILL", "false"), jobs, "1x4:V100")
    by = "(Fifo 'order', placed by Gandiva 'place')"
    assert timeline(capsys, out, 1)[1] == (
        "5m",
        f"waiting: rank 2; 1 job ranked ahead hold GPUs, 0 left free, not enough for it {by}",
    )
    assert timeline(capsys, out, 2)[1] == (
        "5m",
        f"waiting: rank 3; rank 2 does not fit and no job behind it may start first (no backfill) {by}",
    )
    out = run_out(GANDIVA.replace("BACKFILL", "true"), jobs, "1x4:V100")
    assert timeline(capsys, out, 2)[1] == (
        "5m",
        f"waiting: rank 3; 1 job ranked ahead hold GPUs, 0 left free, not enough for it {by}",
    )


def test_every_job_waiting_under_gandiva_has_a_reason():
    result = simulate(compile_file(REPO / "graphs" / "gandiva.sched"), until=20 * 86400.0, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    after = frame.with_columns(next_t=pl.col("t_s").shift(-1).over("job_id")).filter(pl.col("reason") == "admitted")
    waited = after.filter(pl.col("next_t").is_null() | (pl.col("next_t") > pl.col("t_s")))
    assert after.height > 20
    assert waited.height == 0, waited.head()  # (each admitted job's next line comes at once: a reason or its launch)
    assert frame.filter(pl.col("element") == "place", pl.col("state") == "waiting").height > 20


def test_every_job_waiting_under_ones_has_a_reason(capsys):
    # ONES deploys a schedule it evolved: a job it gives no GPU, or GPUs running jobs hold
    # while its epoch gate holds changes back, waits for that, and says so.
    # (On 16 GPUs, where jobs contend: with the artifact's limit rule 64 GPUs leave little to gate.)
    result = simulate(compile_file(REPO / "graphs" / "ones.sched", ['cluster="4x4:V100"']), until=900.0, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    after = frame.with_columns(next_t=pl.col("t_s").shift(-1).over("job_id")).filter(pl.col("reason") == "admitted")
    waited = after.filter(pl.col("next_t").is_null() | (pl.col("next_t") > pl.col("t_s")))
    assert after.height > 10
    assert waited.height == 0, waited.head()
    gated = frame.filter(pl.col("reason") == "gated")
    # (a = 0: the best schedule, held back, gives the job no GPU; b and c describe the allocation
    # that stands instead.)
    assert gated.height > 0 and (gated["a"] >= 0).all() and (gated["a"] >= 1).any()
    row = gated.filter(pl.col("a") >= 1).row(0, named=True)
    assert describe(row) == (
        f"waiting: the schedule gives it {row['a']} GPU{'s' if row['a'] > 1 else ''} that running jobs still hold, "
        f"and changes to running jobs wait for their next epoch; the allocation in force stays: it runs "
        f"{row['b']} job{'s' if row['b'] != 1 else ''} and leaves {row['c']} GPU(s) idle (Ones '{row['element']}')"
    )
    assert describe({**row, "reason": "not_scheduled", "a": 3, "b": 2}) == (
        f"waiting: the schedule deployed gives it no GPU; it runs 3 jobs and leaves 2 GPU(s) idle (Ones '{row['element']}')"
    )


# --- moves and resizes: one line each, from where to where ---


def _world(machines: int, per: int):
    return SimpleNamespace(cluster=SimpleNamespace(gpu_node=np.repeat(np.arange(machines), per)))


def _launch(rows, gpus_each, suspend=(), **more) -> Plan:
    gpus = [np.asarray(g) for g in gpus_each]
    return Plan(
        launch_rows=np.asarray(rows),
        launch_gpus=np.concatenate(gpus) if gpus else np.empty(0, dtype=np.int64),
        launch_counts=np.asarray([len(g) for g in gpus], dtype=np.int64),
        suspend=np.asarray(suspend, dtype=np.int64),
        **more,
    )


def _records(record: Recorder) -> list[tuple]:
    cols = record.arrays()
    return [
        (float(t), int(r), Reason(int(c)).name.lower(), int(a), int(b), int(cc))
        for t, r, c, a, b, cc in zip(cols["t"], cols["row"], cols["code"], cols["a"], cols["b"], cols["c"])
    ]


def test_a_job_suspended_and_launched_again_in_one_plan_moved_or_was_resized():
    record = Recorder(["place", "run"], ["Consolidated", "Launch"], ["order", ""])
    record.reserve(8)
    world = _world(4, 4)  # 4 machines of 4 GPUs
    record.plan(_launch([0, 1, 2], [[0, 1], [4], [8, 9, 10, 11]]), world, 0, 1, 0.0)
    # Job 0 moves to machine 3, job 1 to other GPUs of machine 1, job 2 shrinks to 2 GPUs; job 3
    # starts; job 4 was never launched in the record (moved, from nowhere it knows).
    record.plan(_launch([0, 1, 2, 3, 4], [[12, 13], [5], [8, 9], [0], [1]], suspend=[0, 1, 2, 4]), world, 0, 1, 300.0)
    assert _records(record)[3:] == [
        (300.0, 0, "moved", 3, 2, 0),
        (300.0, 1, "moved", 1, 1, 1),
        (300.0, 2, "resized", 2, 2, 4),
        (300.0, 3, "launched", 0, 1, 1),
        (300.0, 4, "moved", 0, 1, -1),
    ]
    # A suspension with no launch is still a suspension; a job suspended and later launched
    # again is launched, not moved.
    record.plan(_launch([], [], suspend=[3]), world, 0, 1, 600.0)
    record.plan(_launch([3], [[15]]), world, 0, 1, 900.0)
    assert _records(record)[8:] == [(600.0, 3, "suspended", 0, 0, 0), (900.0, 3, "launched", 3, 1, 1)]


def test_resizes_of_running_jobs_are_recorded():
    # Elastic policies (ONES, Pollux) resize running jobs in the plan without suspending them.
    record = Recorder(["ones", "run"], ["Ones", "Launch"], ["", ""])
    record.reserve(4)
    world = _world(2, 4)
    record.plan(_launch([0, 1], [[0], [4, 5]], keep=np.empty(0)), world, 0, 1, 0.0)
    resize = Plan(
        keep=np.empty(0, dtype=np.int64),
        resize_rows=np.array([0, 1]),
        resize_gpus=np.array([0, 1, 6, 7]),
        resize_counts=np.array([2, 2]),
    )
    record.plan(resize, world, 0, 1, 300.0)
    assert _records(record)[2:] == [(300.0, 0, "resized", 0, 2, 1), (300.0, 1, "moved", 1, 2, 1)]


def test_moves_and_resizes_in_words():
    row = {
        "state": "running",
        "element": "place",
        "element_class": "Consolidated",
        "ranked_by": "o",
        "ranked_by_class": "Optimus",
    }
    by = "(Optimus 'o', placed by Consolidated 'place')"
    assert (
        describe({**row, "reason": "moved", "a": 98, "b": 1, "c": 53})
        == f"running: moved from machine 53 to machine 98 (1 GPU) {by}"
    )
    # (The record keeps the machine of a job's first GPU only: of several, that is all it says,
    # with the machines they span at least when the largest machine's size is known.)
    assert (
        describe({**row, "reason": "moved", "a": 5, "b": 1, "c": 5}) == f"running: moved to other GPUs of machine 5 (1 GPU) {by}"
    )
    assert (
        describe({**row, "reason": "moved", "a": 5, "b": 2, "c": 5})
        == f"running: moved to other GPUs, its first still on machine 5 (2 GPUs) {by}"
    )
    assert (
        describe({**row, "reason": "moved", "a": 5, "b": 2, "c": -1})
        == f"running: moved its first GPU to machine 5 (2 GPUs) {by}"
    )
    assert (
        describe({**row, "reason": "resized", "a": 5, "b": 2, "c": 4})
        == f"running: resized from 4 to 2 GPUs, its first GPU on machine 5 {by}"
    )
    assert (
        describe({**row, "reason": "resized", "a": 1, "b": 6, "c": 3}, per_machine=3)
        == f"running: resized from 3 to 6 GPUs, on at least 2 machines from machine 1 {by}"
    )
    assert (
        describe({**row, "reason": "resized", "a": 1, "b": 1, "c": 3}) == f"running: resized from 3 to 1 GPU, on machine 1 {by}"
    )


def test_reason_codes_are_added_not_renumbered():
    # (A record names its reasons, but the codes of the ones there were stay what they were.)
    assert (Reason.LAUNCHED, Reason.SUSPENDED, Reason.PROMOTED, Reason.FINISHED, Reason.REQUEUED) == (20, 21, 25, 30, 33)
    assert len({int(r) for r in Reason}) == len(Reason) and CANDIDATE not in {int(r) for r in Reason}


def test_optimus_resizes_are_not_suspensions():
    # Four days: Optimus first resizes on day 3 and has resized jobs a dozen times by day 4.
    result = simulate(compile_file(REPO / "graphs" / "optimus.sched"), until=4 * 86400.0, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    frame = frame.with_columns(
        next_reason=pl.col("reason").shift(-1).over("job_id"), next_t=pl.col("t_s").shift(-1).over("job_id")
    )
    relaunched = frame.filter(
        pl.col("reason") == "suspended", pl.col("next_reason") == "launched", pl.col("next_t") == pl.col("t_s")
    )
    assert relaunched.height == 0
    resized = frame.filter(pl.col("reason") == "resized")
    assert resized.height > 10 and (resized["b"] != resized["c"]).all()


# --- the element that ranked or completed a job ---

SWITCHED = """
round = 300s;
skip_rounds = false;
src :: TraceSource(path="trace.csv");
fifo :: Fifo;
srtf :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
src -> admit :: AcceptAll -> JobPool -> order -> place :: FirstFree -> Launch -> m :: JobMetrics;
"""


def test_a_placer_fed_by_a_switch_names_the_candidate_ranking(tmp_path):
    # One GPU: job 0 holds it until 3000 s; jobs 1 (long) and 2 (short) wait. FIFO ranks job 1
    # second; from the switch to SRTF at 1200 s, job 2 is second and job 1 third.
    write_trace(tmp_path / "trace.csv", [job(0, 0, 1, 3000), job(1, 100, 1, 5000), job(2, 200, 1, 300)])
    (tmp_path / "g.sched").write_text(textwrap.dedent(SWITCHED))
    graph = compile_file(tmp_path / "g.sched")

    def switch(ctx):
        if ctx.now >= 900:
            graph.elements["order"].select(1)

    result = simulate(graph, "1x1:V100", on_round=switch, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col(pl.Categorical).cast(pl.String))
    placed = frame.filter(pl.col("element") == "place")
    assert set(placed["ranked_by"]) == {"fifo", "srtf"}
    assert set(placed["ranked_by_class"]) == {"Fifo", "Srtf"}
    one = placed.filter(pl.col("job_id") == 1).select("t_s", "reason", "ranked_by", "a").rows()
    assert [(t, by, a) for t, _, by, a in one[:2]] == [(300.0, "fifo", 2), (1200.0, "srtf", 3)]


def test_a_job_completed_on_request_names_the_element_that_asked():
    result = simulate(compile_file(REPO / "graphs" / "loss-termination.sched"), until=86400.0, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col(pl.Categorical).cast(pl.String))
    completed = frame.filter(pl.col("reason") == "completed")
    assert completed.height > 3
    assert set(completed["element"]) == {"stop"} and set(completed["element_class"]) == {"LossTermination"}


def test_a_switch_outside_the_graph_or_out_of_range_changes_nothing():
    record = Recorder(
        ["order", "fifo", "las", "place"],
        ["ChoosePolicy", "Fifo", "Las", "FirstFree"],
        ["", "", "", "order"],
        {"order": ["fifo", "las"]},
    )
    assert record.elements[4:] == ["place", "place"] and record.ranked_by[4:] == ["fifo", "las"]
    none = np.empty(0, dtype=np.int64)
    record.note(0, CANDIDATE, none, 1)
    assert record.ids["place"] == 5
    record.note(0, CANDIDATE, none, 7)  # (no such candidate)
    record.note(3, CANDIDATE, none, 0)  # (not a switch)
    assert record.ids["place"] == 5 and record.records == 0
    fork = record.copy()
    record.note(0, CANDIDATE, none, 0)
    assert record.ids["place"] == 4 and fork.ids["place"] == 5


# --- runs cut short, empty records, ids that are not there ---

LAS = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> admit :: AcceptAll -> JobPool -> order :: Las -> place :: FirstFree -> Launch -> m :: JobMetrics;
"""


def test_a_run_cut_short_says_so(run_out, capsys):  # noqa: F811
    # Job 99 runs past the run's end (1 h); job 999 of the trace arrives after it.
    out = run_out(LAS, [job(0, 0, 1, 600), job(99, 0, 1, 90000), job(999, 7200, 1, 60)], "1x2:V100", "--until", "1h")
    text = fails(capsys, "explain", out, "999")
    assert "no job '999' in the record (2 jobs, ids such as 0, 99)" in text
    assert "the run stopped at t=1h (reached the time limit (1h))" in text and "had not arrived by then" in text
    assert "did you mean" not in text
    assert timeline(capsys, out, 99)[-1] == ("1h", "run stopped here (reached the time limit (1h)); the job had not finished")
    assert timeline(capsys, out, 0)[-1] == ("10m", "finished")  # (a finished job: nothing more)
    assert "job ids are whole numbers" in fails(capsys, "explain", out, "abc")


def test_an_empty_record_says_it_holds_no_job(run_out, capsys):  # noqa: F811
    out = run_out(LAS, [job(5, 3600, 1, 600)], "1x2:V100", "--until", "30min")
    text = fails(capsys, "explain", out, "0")
    assert "no job '0' in the record (it holds no job: none was admitted)" in text and "ids such as" not in text


# --- output to a reader that went away ---


def test_output_to_a_closed_pipe_ends_quietly(run_out, monkeypatch, capsys):  # noqa: F811
    out = run_out(LAS, [job(0, 0, 1, 600)], "1x2:V100")
    read, write = os.pipe()
    os.close(read)  # (the reader went away: `| head -1` after its line)
    stdout = io.TextIOWrapper(os.fdopen(write, "wb"), line_buffering=True)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["explain", str(out), "0"]) == 0
    monkeypatch.undo()
    assert capsys.readouterr().err == ""


def test_a_broken_pipe_of_something_else_is_still_an_error(monkeypatch, capsys):
    from roundhouse.tools import explain_cmd

    def handler(args):
        raise BrokenPipeError(32, "Broken pipe")  # (a connection the command made, say)

    monkeypatch.setattr(explain_cmd, "explain", handler)
    assert main(["explain", "somewhere", "0"]) == 2
    assert "error: Broken pipe" in capsys.readouterr().err


def test_a_command_piped_into_a_reader_that_leaves_exits_0_without_a_word(run_out):  # noqa: F811
    out = run_out(LAS, [job(i, 30 * i, 1, 600) for i in range(30)], "1x2:V100")
    command = [
        sys.executable,
        "-c",
        "import sys; from roundhouse.tools.cli import main; sys.exit(main())",
        "explain",
        str(out),
        "29",
    ]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # (before it prints: it starts in about a second)
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0 and err == ""


# --- graph titles drawn as written ---


@pytest.mark.parametrize("stem", ["back\\slash", "a\\nb", "end\\", 'q\\"x'])
def test_a_graph_title_keeps_its_backslashes(tmp_path, stem):
    from roundhouse.tools.graph_drawing import draw

    path = tmp_path / f"{stem}.sched"
    path.write_text((REPO / "graphs" / "fifo.sched").read_text().replace("../traces", str(REPO / "traces")))
    svg = draw(compile_file(path), "svg").decode()
    title = stem.replace('"', "&quot;")
    assert f">{title}</text>" in svg
