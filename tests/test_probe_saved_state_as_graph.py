"""A new user's slips with the files of a run's saved state and with pipes, where a graph goes:
`Simulation(snapshot)` for `Simulation.load(snapshot)`, a journal given as a graph, a graph
given through a pipe (`--graph <(...)` in a shell), and a results folder a failed
`Simulation.write` made. Each is said as what it is, and nothing is read twice or left behind."""

from __future__ import annotations

import os
import re

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.journal import Journal

FIFO = (
    'round = 5min;\ncluster = "1x2:V100";\n'
    "PoissonSource(rate=4/h, jobs=6, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
)
SRTF = FIFO.replace("Fifo", "Srtf")


@pytest.fixture
def snapshot(tmp_path):
    from roundhouse import Simulation

    graph = tmp_path / "fifo.sched"
    graph.write_text(FIFO)
    return Simulation(graph).run_until(3600).save(tmp_path / "hour.snap")


def _pipe_of(text: str) -> str:
    """A pipe holding `text`, by the path a shell's `<(...)` gives (its writing end closed)."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    return f"/dev/fd/{read}"


def test_whatif_reads_a_graph_given_through_a_pipe_once(snapshot, capsys):
    """`--graph <(...)`: checking whether it was a snapshot read the pipe's first bytes, and the
    compiler got the rest ("the graph has no launcher")."""
    from roundhouse.tools.cli import main

    pipe = _pipe_of(SRTF)
    fd = pipe.rsplit("/", 1)[1]
    try:
        assert main(["whatif", str(snapshot), "--graph", pipe, "--json"]) == 0, capsys.readouterr().err
    finally:
        os.close(int(fd))
    out = capsys.readouterr().out
    assert '"given": "--graph"' in out and '"preemptions"' in out, out
    # Named as given (the warning names it so), not by the kernel's name for the pipe.
    assert f'"graph": "{fd}"' in out and "pipe:[" not in out, out


def test_a_snapshot_given_to_simulation_is_said_to_be_one(snapshot):
    from roundhouse import Simulation

    with pytest.raises(UsageError) as got:
        Simulation(snapshot)
    message = str(got.value)
    assert f"graph: {snapshot} is a simulation's snapshot, not a .sched graph" in message, message
    assert "Simulation.load" in message and "UTF-8" not in message, message


def test_a_journal_given_to_simulation_is_said_to_be_one(tmp_path):
    from roundhouse import Simulation

    journal = tmp_path / "journal.sqlite"
    Journal(journal).close()
    with pytest.raises(UsageError) as got:
        Simulation(journal)
    message = str(got.value)
    assert f"graph: {journal} is a SQLite database (a live scheduler's journal?), not a .sched graph" in message, message
    assert "roundhouse whatif" in message, message


@pytest.mark.parametrize("command", ["run", "check", "render"])
def test_run_check_and_render_say_a_saved_state_is_one(snapshot, tmp_path, capsys, command):
    from tests.conftest import fails

    journal = tmp_path / "journal.sqlite"
    Journal(journal).close()
    for state, what in ((snapshot, "a simulation's snapshot"), (journal, "a SQLite database")):
        err = fails(capsys, command, state, *(["-o", tmp_path / "g.svg"] if command == "render" else []))
        assert f"{state} is {what}" in err and f"roundhouse whatif {state}" in err, err
        assert "UTF-8" not in err and "Traceback" not in err, err


def test_a_graph_given_to_simulation_through_a_pipe_is_refused_naming_it():
    """A simulation keeps its graph's text for its snapshots, and a pipe is read once: it was
    "no such file: /proc/.../fd/pipe:[...]", the pipe's path made whole."""
    from roundhouse import Simulation

    pipe = _pipe_of(FIFO)
    try:
        with pytest.raises(UsageError) as got:
            Simulation(pipe)
    finally:
        os.close(int(pipe.rsplit("/", 1)[1]))
    message = str(got.value)
    assert f"graph: {pipe} is a named pipe, not a file" in message, message
    assert "the graph's text" in message and "/proc/" not in message, message


# A sink of one's own whose `finish` does what is asked (its tick does nothing).
SINK = '''
from roundhouse.runtime.element import Element, In, element
from roundhouse.runtime.types import Events


@element
class {name}(Element):
    """{synopsis}

    Ports:
        events: what happened in the round.
    Arguments:
        none
    Counters:
        none
    See also: JobMetrics
    Paper: none.
    """

    category = "sink"
    inputs = (In("events", Events),)
    state = ()

    def tick(self, ctx, events):
        return None

    def finish(self, ctx):
        {finish}
'''


def _graph_with_sink(tmp_path, name: str, synopsis: str, finish: str):
    """FIFO's graph with the sink `name` of one's own (element `bad`) fed Launch's events."""
    (tmp_path / "sink.py").write_text(SINK.format(name=name, synopsis=synopsis, finish=finish))
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "sink.py";\n'
        + FIFO.replace("-> Launch -> JobMetrics;", f"-> run :: Launch -> JobMetrics;\nrun -> bad :: {name};")
    )
    return graph


def test_a_failed_write_leaves_no_folder_it_made(tmp_path):
    """As `roundhouse run --out`: a folder made for results that could not be written (a report
    JSON cannot hold) is removed, with the parents the write made; a folder there before stays."""
    from roundhouse import Simulation

    graph = _graph_with_sink(
        tmp_path, "NanReport", "Report a figure that has no value, as NaN.", 'return {"r": {"x": float("nan")}}'
    )
    sim = Simulation(graph)
    sim.run()
    with pytest.raises(Exception, match="cannot be written as JSON"):
        sim.write(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()
    there = tmp_path / "there"
    there.mkdir()
    with pytest.raises(Exception, match="cannot be written as JSON"):
        sim.write(there / "made")
    assert there.is_dir() and not (there / "made").exists()


def test_a_simulation_whose_end_failed_says_so_not_that_a_round_is_half_done(tmp_path):
    """An element's `finish` raising fails the run's end, not a round: what it left is said as
    such, and the failure is said once, without the `error: ` a command's line begins with."""
    from roundhouse import Simulation

    graph = _graph_with_sink(tmp_path, "BadEnd", "Fail at the end.", 'raise RuntimeError("no end for me")')
    sim = Simulation(graph)
    with pytest.raises(Exception, match="no end for me"):
        sim.run()
    with pytest.raises(UsageError) as got:
        sim.summary()
    message = str(got.value)
    assert (
        "summary: this simulation cannot go on: its end failed, and is left half done: ElementFailure: element 'bad'" in message
    ), message
    assert "round it failed in" not in message, message


def test_a_save_replaces_no_file_but_a_snapshot(tmp_path):
    """A save over the graph's own file (or an element file, a trace) was done without a word,
    and the user's work lost: only a snapshot, or an empty file, is replaced."""
    from roundhouse import Simulation
    from roundhouse.runtime.snapshot import SnapshotError

    graph = tmp_path / "fifo.sched"
    graph.write_text(FIFO)
    sim = Simulation(graph).run_until(3600)
    with pytest.raises(SnapshotError) as got:
        sim.save(graph)
    assert f"snapshot {graph}: the file there is not a snapshot" in str(got.value), got.value
    assert graph.read_text() == FIFO and sorted(p.name for p in tmp_path.iterdir()) == ["fifo.sched"]
    snap = sim.save(tmp_path / "hour.snap")
    sim.run_until(7200).save(snap)  # (a snapshot is replaced: saving again as the run goes on)
    assert Simulation.load(snap).now == 7200
    empty = tmp_path / "made.snap"
    empty.touch()  # (as a temporary file is made, before it is written)
    assert Simulation.load(sim.save(empty)).now == 7200


def test_a_policy_of_ones_own_that_ranks_a_finished_job_is_named(tmp_path, capsys):
    """Ranking every job of the job table, finished ones too, was blamed on the placer after it
    ("plan from 'FirstFree@4' ...: plan launches job 0, which has finished")."""
    from tests.conftest import fails

    (tmp_path / "everyone.py").write_text(
        '''
import numpy as np
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking


@element
class Everyone(Element):
    """Rank every job ever seen, in arrival order.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()

    def tick(self, ctx, active):
        rows = np.arange(len(ctx.jobs))
        return Ranking(rows, np.asarray(ctx.jobs.column("gpus"))[rows])
'''
    )
    graph = tmp_path / "everyone.sched"
    graph.write_text('require "everyone.py";\n' + FIFO.replace("-> Fifo ->", "-> order :: Everyone ->"))
    err = fails(capsys, "run", graph)
    assert "element 'order' (Everyone;" in err and re.search(r"that ranks job \d+ \(row \d+\), which has finished", err), err
    assert "plan from" not in err, err
