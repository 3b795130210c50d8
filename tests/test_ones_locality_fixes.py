"""ONES' placement and what its resizes cost: a growing job keeps its GPUs and grows on its own
machines first, a shrinking one keeps its first ranks, jobs start where they span the fewest
machines; a resize is in place only where the live backend's rule allows it (else it is charged
as a checkpoint and restart); and a job may grow past its global batch cap (its local batch
shrinks instead), to 4 times the GPUs it asked for, as the artifact lets it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roundhouse.elements.policies import ones_search as s
from roundhouse.runtime import resizing
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.traces import ones

E = s.EMPTY
NODE = np.repeat(np.arange(4), 4)  # four machines of four GPUs


def _ranks(current: np.ndarray) -> np.ndarray:
    return s.occurrence(current[None, :])[0]


def test_a_growing_job_keeps_its_gpus_and_grows_on_its_machine_first():
    # Job 0 on GPUs 1 and 2 of machine 0 (GPU 0 and 3 free), job 1 on machine 1.
    current = np.array([E, 0, 0, E, 1, 1, 1, 1, E, E, E, E, E, E, E, E])
    out = s.place(np.array([4, 4]), current, _ranks(current), NODE)
    assert np.flatnonzero(out == 0).tolist() == [0, 1, 2, 3] and np.flatnonzero(out == 1).tolist() == [4, 5, 6, 7]
    # Growing to 6: its machine holds 2 more, the other 2 on one further machine (not spread).
    out = s.place(np.array([6, 4]), current, _ranks(current), NODE)
    assert set(np.flatnonzero(current == 0)) <= set(np.flatnonzero(out == 0))
    assert len(np.unique(NODE[out == 0])) == 2


def test_a_grow_that_must_leave_its_machines_moves_whole_where_that_spans_fewer():
    # Job 0 on GPU 0 of a machine full otherwise (job 1); growing to 4 it would span 2 machines
    # if it kept GPU 0, 1 if it moves: it moves (a grow onto another machine restarts either way).
    current = np.array([0, 1, 1, 1, E, E, E, E, E, E, E, E, E, E, E, E])
    out = s.place(np.array([4, 3]), current, _ranks(current), NODE)
    assert len(np.unique(NODE[out == 0])) == 1 and np.flatnonzero(out == 1).tolist() == [1, 2, 3]


def test_a_shrinking_job_keeps_its_first_ranks():
    # Job 0 grew from GPUs 2-3 onto 0-1: its ranks 0 and 1 are GPUs 2 and 3.
    current = np.array([0, 0, 0, 0, E, E, E, E, E, E, E, E, E, E, E, E])
    rank = np.array([2, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    out = s.place(np.array([2]), current, rank, NODE)
    assert np.flatnonzero(out == 0).tolist() == [2, 3]


def test_jobs_start_on_the_fewest_machines_with_room_to_grow():
    current = np.array([0, 0, 0, E, 1, E, E, E, E, E, E, E, E, E, E, E])
    # A new 1-GPU job goes to an empty machine (room to grow in place), not beside job 0 or 1.
    out = s.place(np.array([3, 1, 1]), current, _ranks(current), NODE)
    assert NODE[out == 2].tolist() == [2]
    # A new 8-GPU job, placed first (the largest), takes the two machines left whole; the 1-GPU
    # one then goes where most GPUs are free.
    out = s.place(np.array([3, 1, 1, 8]), current, _ranks(current), NODE)
    assert NODE[out == 3].tolist() == [2] * 4 + [3] * 4 and NODE[out == 2].tolist() == [1]


def test_placement_gives_each_job_its_count_and_keeps_what_it_must_on_random_schedules():
    """Any schedule: each job gets exactly its count; one kept at its size or shrunk holds its
    first ranks; a growing one gives up GPUs only when it moves onto other machines anyway."""
    rng = np.random.default_rng(1)
    node = np.repeat(np.arange(6), [4, 4, 2, 8, 4, 2])  # machines of several sizes
    c = len(node)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        current = np.where(rng.random(c) < 0.7, rng.integers(0, n, c), E)
        rank = np.zeros(c, dtype=np.int64)
        for j in range(n):  # each job's ranks in a random order of its GPUs
            mine = np.flatnonzero(current == j)
            rank[mine] = rng.permutation(len(mine))
        counts = rng.multinomial(int(rng.integers(0, c + 1)), np.ones(n + 1) / (n + 1))[:n]
        out = s.place(counts, current, rank, node)
        assert np.bincount(out[out >= 0], minlength=n).tolist() == counts.tolist()
        for j in range(n):
            held, new = np.flatnonzero(current == j), np.flatnonzero(out == j)
            first = held[rank[held] < min(len(held), counts[j])]
            if counts[j] <= len(held):  # kept at its size or shrunk: its first ranks, no more
                assert new.tolist() == first.tolist()
            elif len(held) and not set(held) <= set(new):  # a grow leaves GPUs only to reach another machine
                assert not np.isin(node[new], node[held]).all()


def _resizes(monkeypatch, graph, trace):
    """Run `graph` on `trace`; every resize with the GPUs its job held, in the rank order the
    live backend would hold them (the plan's order at launch, then in_place_order's), and
    whether the plan asks for it in place."""
    from roundhouse import Simulation

    books, seen = {}, []
    apply = Simulator.apply

    def spy(self, plan):
        node = self.world.cluster.gpu_node
        for a in plan.launch:
            books[a.row] = np.asarray(a.gpus)
        for r in plan.resizes:
            old, new = books[r.row], np.asarray(r.gpus)
            ordered, can = resizing.in_place_order(old, new, node)
            seen.append((old, new, r.in_place, can, node))
            books[r.row] = ordered
        return apply(self, plan)

    monkeypatch.setattr(Simulator, "apply", spy)
    sim = Simulation(str(graph), trace=str(trace))
    while sim.step():
        pass
    return seen


def test_resizes_keep_the_jobs_gpus_and_are_in_place_only_as_live_would_do_them(tmp_path, monkeypatch):
    """ONES on graphs/ones.sched with 20 ONES jobs arriving every 30 s: before, 27 of 74 resizes
    kept none of the job's GPUs, and every resize was charged in place though the live backend
    would restart most. Now each resize asks for in place exactly where the live rule allows,
    a shrink keeps a subset of the job's GPUs, and a grow keeps them all unless it moves whole
    to fewer machines (a restart); most grows are in place."""
    trace = tmp_path / "t.csv"
    ones.generate(20, mean_gap_s=30.0, seed=1).write_csv(trace)
    seen = _resizes(monkeypatch, Path(__file__).parents[1] / "graphs" / "ones.sched", trace)
    assert len(seen) > 20
    grows = 0
    for old, new, asked, can, node in seen:
        assert asked == can
        if len(new) < len(old):
            assert set(new) <= set(old)
        elif len(new) > len(old):
            grows += 1
            if not set(old) <= set(new):
                assert not can and len(np.unique(node[new])) < len(np.unique(node[np.r_[old, new]]))
    assert grows and sum(can for old, new, _, can, _ in seen if len(new) > len(old)) >= grows / 3


def _one_job(tmp_path: Path, line: str, cluster: str, restart: str) -> Path:
    trace = tmp_path / "job.csv"
    trace.write_text("time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n" + line + "\n")
    graph = tmp_path / f"g{restart}.sched"
    graph.write_text(
        f'round = 10s;\ncluster = "{cluster}";\nelastic_profile = "ones";\nresize_in_place = 1s;\n'
        f"resize_restart = {restart};\n"
        f'TraceSource(path="{trace}") -> AcceptAll -> JobPool -> Ones(seed=0) -> Launch -> JobMetrics;\n'
    )
    return graph


def test_a_grow_onto_another_machine_is_charged_as_a_restart(tmp_path):
    """A CoLA job alone on 2 machines of 2 GPUs grows 1 -> 2 (on its machine: in place) -> 4
    (onto the other machine: a restart, as the live backend would do it). Its completion moves
    with `resize_restart`, one restart's worth; before, every resize cost the 1 s in place."""
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    finish = {}
    for restart in (20, 520):
        graph = _one_job(tmp_path, "0,bert,cola,8000,5,16,5.00E-06,2.00E-05,0.8,2", "2x2:V100", f"{restart}s")
        result = simulate(compile_file(graph))
        jobs = result.world.jobs
        assert result.stop_reason == "every job finished" and jobs.column("resizes")[0] == 2
        finish[restart] = float(jobs.column("finish_s")[0])
    assert finish[520] - finish[20] == pytest.approx(500, abs=10)


def test_a_job_grows_past_its_batch_cap_to_four_times_what_it_asked_for(tmp_path):
    """A ResNet-50 ImageNet job asking for 16 GPUs (local batch 32, global batch cap 512) alone on
    16 x 4 GPUs: its R doubles past 16 GPUs (before: the batch cap over the local batch, 16,
    capped its GPUs), up to 64, 4 times what it asked for; its global batch stays within 512,
    the local batch shrinking instead."""
    from roundhouse import Simulation

    graph = _one_job(tmp_path, "0,resnet50,imagenet,10000,10,32,5.00E-04,0.008,0.55,16", "16x4:V100", "20s")
    sim = Simulation(str(graph))
    most = batch = 0
    while sim.step():
        held = int((np.asarray(sim.world.holder) == 0).sum())
        most = max(most, held)
        if held:
            batch = max(batch, int(sim.world.jobs.column("batch_used")[0]))
    assert 16 < most <= 64 and batch == 512
