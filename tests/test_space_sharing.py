"""Space sharing: the pair table, two jobs on the same GPUs in the world and simulator, pair rows
in Gavel's policies, and the pair-throughput estimator."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies.gavel.estimator import complete
from roundhouse.errors import TraceError
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import PlanError, World
from roundhouse.traces.pairs import PairTable
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import SHARED, play_round

A3C_SOLO, CYCLEGAN_SOLO = 7.175767179667988, 4.426088263367452  # V100, iterations/s
A3C_WITH_CYCLEGAN, CYCLEGAN_WITH_A3C = 4.562135656281291, 3.1632656249608218


def test_pair_table_lookups_in_either_order():
    table = PairTable.load()
    assert table.rate("A3C", 4, "CycleGAN", 1, "V100", 1) == (A3C_WITH_CYCLEGAN, CYCLEGAN_WITH_A3C)
    assert table.rate("CycleGAN", 1, "A3C", 4, "v100", 1) == (CYCLEGAN_WITH_A3C, A3C_WITH_CYCLEGAN)
    assert table.rate("A3C", 4, "CycleGAN", 1, "V100", 2) is None  # not measured
    ra, rb = table.rates(["A3C", "lstm", "nope"], [4, 5, 1], ["CycleGAN", "A3C", "A3C"], [1, 4, 4], "K80", 1)
    assert ra[0] > 0 and ra[1] > 0 and np.isnan(ra[2]) and np.isnan(rb[2])


def test_pair_table_errors_name_the_row(tmp_path):
    bad = tmp_path / "pairs.csv"
    bad.write_text(
        "model_a,batch_a,model_b,batch_b,gpu_type,gpus,iters_a,iters_b\nA3C,4,A3C,4,V100,1,1.0,1.0\nA3C,4,LM,5,V100,1,-2,1\n"
    )
    with pytest.raises(TraceError, match=r"pairs.csv:3: error: column 'iters_a'"):
        PairTable.load(bad)
    bad.write_text(
        "model_a,batch_a,model_b,batch_b,gpu_type,gpus,iters_a,iters_b\nA3C,4,LM,5,V100,1,1,1\nLM,5,A3C,4,V100,1,1,1\n"
    )
    with pytest.raises(TraceError, match="listed twice"):
        PairTable.load(bad)


@pytest.mark.skipif(
    not (SHARED / "data" / "gavel" / "simulation_throughputs.json").exists(), reason="../shared/data/gavel not present"
)
def test_shipped_pairs_are_gavels_measurements():
    data = json.loads((SHARED / "data" / "gavel" / "simulation_throughputs.json").read_text())
    table = PairTable.load()
    checked = 0
    for worker, gpu in (("v100", "V100"), ("p100", "P100"), ("k80", "K80")):
        for key_a, inner in data[worker].items():
            name_a, sf = eval(key_a)  # noqa: S307 (keys are Python tuple literals)
            for key_b, value in inner.items():
                if key_b == "null":
                    continue
                name_b, _ = eval(key_b)  # noqa: S307
                got = table.rate(*_config(name_a), *_config(name_b), gpu, sf)
                assert got == pytest.approx(tuple(value), rel=1e-12), (worker, key_a, key_b)
                checked += 1
    assert checked == len(table) * 2 - len(
        table.frame.filter((pl.col("model_a") == pl.col("model_b")) & (pl.col("batch_a") == pl.col("batch_b")))
    )


def _config(job_type: str):
    import re

    m = re.match(r"^(.*?) \(batch size (\d+)\)$", job_type)
    return (m.group(1), int(m.group(2))) if m else (job_type, {"A3C": 4, "CycleGAN": 1}[job_type])


def _world(jobs: list[dict], cluster: str = "2x1:V100"):
    world = World(Cluster.parse(cluster), ProfileTable.load())
    batch, _ = world.prepare(pl.DataFrame(jobs), "test")
    world.add_jobs(batch)
    return world, Simulator(world, 360.0)


def _pair_plan(gpus=(0,), keep=(), suspend=()):
    return Plan(
        launch_rows=[0, 1],
        launch_gpus=list(gpus) * 2,
        launch_counts=[len(gpus)] * 2,
        launch_partner=[1, 0],
        keep=keep,
        suspend=suspend,
    )


JOBS = [
    dict(job_id=0, arrival_s=0.0, gpus=1, model="A3C", iterations=1e6),
    dict(job_id=1, arrival_s=0.0, gpus=1, model="CycleGAN", iterations=1e6),
]


def test_two_jobs_share_a_gpu_at_pair_throughput():
    world, sim = _world(JOBS)
    assert world.co_holder is None
    play_round(world, sim, _pair_plan())
    rate = world.jobs.column("rate")
    assert rate.tolist() == [A3C_WITH_CYCLEGAN, CYCLEGAN_WITH_A3C]
    assert world.jobs.column("done").tolist() == pytest.approx([A3C_WITH_CYCLEGAN * 360, CYCLEGAN_WITH_A3C * 360])
    assert world.holder.tolist() == [0, -1] and world.co_holder.tolist() == [1, -1]
    assert world.gpus_of(1).tolist() == [0] and world.jobs.column("partner").tolist() == [1, 0]
    # Each holds its GPU: service counts both (the cost sink halves a shared GPU).
    assert world.jobs.column("service").tolist() == [360.0, 360.0]


def test_a_partner_leaving_gives_the_survivor_its_own_speed():
    jobs = [dict(JOBS[0]), dict(JOBS[1], iterations=CYCLEGAN_WITH_A3C * 100)]  # job 1 finishes 100 s in
    world, sim = _world(jobs)
    play_round(world, sim, _pair_plan())
    assert world.jobs.column("finish_s")[1] == pytest.approx(100.0)
    assert world.jobs.column("rate")[0] == A3C_SOLO and world.jobs.column("partner")[0] == -1
    assert world.holder.tolist() == [0, -1] and world.co_holder.tolist() == [-1, -1]
    # The survivor ran the rest of that round at the pair speed (as in Gavel's simulator).
    assert world.jobs.column("done")[0] == pytest.approx(A3C_WITH_CYCLEGAN * 360)
    # Suspending one partner: the one kept runs alone, at its own speed.
    world, sim = _world(JOBS)
    play_round(world, sim, _pair_plan())
    play_round(world, sim, Plan(keep=[1], suspend=[0]))
    assert world.jobs.column("rate").tolist() == [0.0, CYCLEGAN_SOLO]
    assert world.holder.tolist() == [1, -1] and world.co_holder.tolist() == [-1, -1]


def test_bad_pair_plans_are_refused_before_anything_changes():
    world, _ = _world(JOBS + [dict(job_id=2, arrival_s=0.0, gpus=1, model="ResNet-50", batch_size=128, iterations=1e6)])
    with pytest.raises(PlanError, match="not launched in the same plan"):
        world.check_plan(Plan(launch_rows=[0], launch_gpus=[0], launch_counts=[1], launch_partner=[1]))
    with pytest.raises(PlanError, match="as partners on different GPUs"):
        world.check_plan(Plan(launch_rows=[0, 1], launch_gpus=[0, 1], launch_counts=[1, 1], launch_partner=[1, 0]))
    with pytest.raises(PlanError, match="two jobs"):
        world.check_plan(Plan(launch_rows=[0, 1], launch_gpus=[0, 0], launch_counts=[1, 1]))
    no_share = Plan(launch_rows=[0, 2], launch_gpus=[0, 0], launch_counts=[1, 1], launch_partner=[2, 0])
    world.check_plan(no_share)
    with pytest.raises(PlanError, match="cannot share"):
        world.apply_plan(no_share, 0.0)
    assert world.holder.tolist() == [-1, -1] and world.co_holder is None


def _ss_graph(tmp_path, solver: str, jobs: int = 24, extra: str = "", cluster: str = "2:2:2"):
    (tmp_path / "g.sched").write_text(
        f'round = 6min;\ncluster = "{cluster}";\n'
        f"src :: PoissonSource(rate=12/h, jobs={jobs}, gpus=single, models=blox, seed=3);\n{extra}"
        f"src -> AcceptAll -> pool :: JobPool -> solve :: {solver} -> mech :: GavelRounds -> GavelPlacer -> Launch -> m :: JobMetrics;\n"
    )
    return compile_file(tmp_path / "g.sched")


def test_space_sharing_policy_runs_pairs_end_to_end(tmp_path):
    graph = _ss_graph(tmp_path, "MaxMinFairness(space_sharing=true, interval=0)")
    pairs = []
    result = simulate(graph, on_round=lambda ctx: pairs.append(graph.elements["mech"].counters["pairs"]))
    assert sum(pairs) > 0  # pairs ran
    assert result.reports["m"]["jobs"]["status"].to_list() == ["finished"] * 24
    assert result.world.co_holder is not None


def test_colocation_is_never_worse_for_max_min(tmp_path):
    """§4.4: the allocation with pair rows is at least as good as without them."""
    objective = {}
    for ss in ("false", "true"):
        graph = _ss_graph(tmp_path, f"MaxMinFairness(space_sharing={ss})", jobs=40, cluster="1:1:1")
        simulate(graph, until=2600.0)  # the allocation of 2,520 s has 10 jobs
        objective[ss] = graph.elements["solve"].counters["objective"]
        if ss == "true":
            shares = graph.elements["solve"].allocation
            assert shares.pairs is not None and len(shares.pairs)
    assert objective["true"] >= objective["false"] - 1e-9
    assert objective["true"] > objective["false"]  # 40 jobs on 3 GPUs: pairing helps here


def test_matrix_completion_recovers_a_low_rank_matrix():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0.2, 1.0, (30, 2)) @ rng.uniform(0.2, 1.0, (2, 24)) / 2
    observed = truth.copy()
    observed[rng.random(truth.shape) < 0.3] = np.nan
    filled = complete(observed, rank=2, mu=1e-4)
    missing = np.isnan(observed)
    assert np.abs(filled[missing] - truth[missing]).max() < 0.05
    assert np.array_equal(filled[~missing], truth[~missing])


def test_estimator_matches_each_configuration_to_itself_with_full_profiles(tmp_path):
    """With all 26 configurations as references and every entry profiled, a job's fingerprint is
    a reference's, so estimates equal the measurements; pairs that ran are then measured."""
    graph = _ss_graph(
        tmp_path,
        "MaxMinFairness(space_sharing=true, interval=0)",
        extra="est :: PairEstimator(seed=1);\npool -> est -> [pairs] solve;\n",
    )
    seen = {}

    def check(ctx):
        est = graph.elements["est"]
        rows = ctx.running_rows
        if len(rows) >= 2 and not seen:
            a, b = rows[:1], rows[1:2]
            got = est.estimates.pair_rates(a, b, "V100", 1)
            table = ctx.pairs.rates(
                ctx.jobs.column("model")[a],
                ctx.jobs.column("batch_size")[a],
                ctx.jobs.column("model")[b],
                ctx.jobs.column("batch_size")[b],
                "V100",
                1,
            )
            seen["got"], seen["table"] = got, table

    simulate(graph, on_round=check)
    assert np.allclose(np.nan_to_num(seen["got"]), np.nan_to_num(seen["table"]))
    counters = graph.elements["est"].counters
    assert counters["fingerprinted"] >= 24 and counters["measured"] > 0


def test_estimator_with_partial_profiles_still_schedules(tmp_path):
    graph = _ss_graph(
        tmp_path,
        "MaxMinFairness(space_sharing=true, interval=0)",
        extra="est :: PairEstimator(references=8, profiled=0.5, seed=2);\npool -> est -> [pairs] solve;\n",
    )
    result = simulate(graph)
    assert result.reports["m"]["jobs"]["status"].to_list() == ["finished"] * 24
