"""A run whose jobs hold GPUs but never progress stops as a stall: under `Las`, two gangs that
take turns on the same GPUs with a checkpoint longer than the round each wait all round for the
other's checkpoint and are suspended at its end, so neither ever works; without a time limit
the run went on for ever (a job always ran, so no idle round was counted). A long checkpoint
that only now and then keeps a launch waiting is no stall."""

from __future__ import annotations

import subprocess
import sys

import pytest

from roundhouse.runtime.stalls import STALL_ROUNDS, StalledError
from tests.conftest import jobs_of, write_trace

SWAPPING = """
round = 5min;
checkpoint_per_gpu = 100s;
skip_rounds = {skip};
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
"""

TWO_GANGS = [{"job_id": i, "arrival_s": 0.0, "gpus": 4, "duration_s": 3000.0} for i in range(2)]


@pytest.mark.parametrize("skip", ["true", "false"])
def test_gangs_that_swap_under_a_checkpoint_longer_than_the_round_stall(run_graph, skip):
    with pytest.raises(StalledError) as stalled:
        run_graph(SWAPPING.format(skip=skip), TWO_GANGS, cluster="1x4:V100")
    message = str(stalled.value)
    # Round 0 launches job 0 at once and it works the whole round; from the next boundary on
    # every launch waits out a 400 s checkpoint on a 300 s round.
    assert message.startswith(
        f"run stalled at t={(STALL_ROUNDS + 1) * 300}s: 1 job(s) hold GPUs and 1 wait, but none has progressed "
        f"for {STALL_ROUNDS} rounds and no more jobs will arrive"
    ), message
    assert "(400 s for 4 GPUs: checkpoint 0 s and checkpoint_per_gpu 100 s a GPU, against a round of 300 s)" in message
    assert not stalled.value.certain


def test_a_time_limit_before_the_stall_ends_the_run_with_its_results(run_graph):
    result = run_graph(SWAPPING.format(skip="true"), TWO_GANGS, cluster="1x4:V100", until=100 * 3600)
    got = jobs_of(result)
    assert all(row["finish_s"] is None for row in got.values())
    assert sum(row["preemptions"] for row in got.values()) == 1200


def test_a_checkpoint_longer_than_the_round_now_and_then_is_no_stall(run_graph):
    # One gang at a time preempts the other only when it arrives; each then keeps its GPUs, so
    # a launch waits all round for the checkpoint once and the jobs finish.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 3000.0},
        {"job_id": 1, "arrival_s": 900.0, "gpus": 4, "duration_s": 600.0},
    ]
    las = SWAPPING.format(skip="true").replace("Las", "Las(service=wall_seconds)")
    got = jobs_of(run_graph(las, jobs, cluster="1x4:V100"))
    assert all(row["finish_s"] is not None for row in got.values())


def test_the_command_line_says_so_without_a_traceback(tmp_path):
    write_trace(tmp_path / "trace.csv", TWO_GANGS)
    (tmp_path / "g.sched").write_text('cluster = "1x4:V100";\n' + SWAPPING.format(skip="true"))
    done = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", "run", "g.sched"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "none has progressed for 2000 rounds" in done.stderr
    assert "Give a checkpoint that fits in a round" in done.stderr


def test_a_what_if_projection_that_gets_stuck_says_so(tmp_path):
    from roundhouse import Simulation
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.whatif import simulate_ahead

    write_trace(tmp_path / "trace.csv", TWO_GANGS)
    graph = tmp_path / "g.sched"
    graph.write_text('cluster = "1x4:V100";\n' + SWAPPING.format(skip="true"))
    sim = Simulation(graph)
    got = simulate_ahead(sim.world_now(), compile_file(graph), sim.now, 30 * 86400.0)
    assert got.stop.startswith("stalled at t=") and got.stop.endswith(
        f"1 job(s) wait and none has progressed for {STALL_ROUNDS} rounds, though jobs hold GPUs, with 4 of 4 GPUs online"
    ), got.stop
