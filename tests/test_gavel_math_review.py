"""Gavel's policies checked against the paper's programs: what a review of their math found."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

HEADER = "model,batch_size,gpu_type,gpus,placement,iters_per_s\n"


def _graph(tmp_path, solver: str, profile: str, jobs: list[dict], cluster: str):
    (tmp_path / "profile.csv").write_text(HEADER + profile)
    pl.DataFrame(jobs).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        f'round = 6min;\ncluster = "{cluster}";\nprofile = "profile.csv";\nsrc :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> solve :: {solver} -> GavelRounds -> GavelPlacer -> run :: Launch -> m :: JobMetrics;\n"
    )
    return compile_file(tmp_path / "g.sched")


# --- PDLP writes nothing to stdout while it solves ---

# Four jobs whose makespan program makes PDLP's adaptive step search give up on its inner
# iterations (it still reaches its tolerance), which it reports on stdout.
STEP_SEARCH_PROFILE = """m0,1,V100,1,consolidated,16.64
m0,1,P100,1,consolidated,8.479
m0,1,K80,1,consolidated,11.217
m1,1,V100,1,consolidated,1.037
m1,1,P100,1,consolidated,15.194
m1,1,K80,1,consolidated,10.994
m2,1,V100,2,consolidated,6.93
m2,1,K80,2,consolidated,6.412
m3,1,V100,1,consolidated,9.343
m3,1,K80,1,consolidated,8.361
"""
STEP_SEARCH_JOBS = [dict(job_id=i, arrival_s=0.0, gpus=g, model=f"m{i}", iterations=1e5) for i, g in enumerate([1, 1, 2, 1])]


def test_pdlp_step_search_warnings_stay_off_stdout(tmp_path, capfd):
    got = {}
    for lp in ("GLOP", "PDLP"):
        (tmp_path / lp).mkdir()
        graph = _graph(
            tmp_path / lp, f'MinMakespan(lp="{lp}")', STEP_SEARCH_PROFILE, STEP_SEARCH_JOBS, "2x4:V100,1x1:P100,2x4:K80"
        )
        capfd.readouterr()
        simulate(graph, until=1.0)
        out = capfd.readouterr().out
        assert out == "", f"{lp} wrote to stdout: {out!r}"
        got[lp] = graph.elements["solve"].counters["makespan_s"]
    assert got["PDLP"] == pytest.approx(got["GLOP"], rel=1e-6)


def test_only_output_written_during_a_pdlp_solve_is_dropped(capfd):
    import os

    from roundhouse.elements.policies.gavel.lp import _stdout_silenced

    os.write(1, b"before ")
    with _stdout_silenced():
        os.write(1, b"inside\n")  # (as PDLP's C++ logger writes)
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "before after\n"


# --- consolidated columns hold only what the type's large nodes can ---

# Two 2-GPU jobs that run fast only on one node, and a 1-GPU job, on a V100 type of one
# 2-GPU node and two 1-GPU nodes: only one 2-GPU job at a time can run consolidated.
MIXED_NODES_PROFILE = """a,1,V100,2,consolidated,10.0
a,1,V100,2,spread,1.0
c,1,V100,1,consolidated,5.0
"""
MIXED_NODES_JOBS = [
    dict(job_id=i, arrival_s=0.0, gpus=g, model=m, iterations=1e7) for i, (m, g) in enumerate([("a", 2), ("a", 2), ("c", 1)])
]


@pytest.mark.parametrize("solver", ["MaxMinFairness", "MaxMinFairness(water_filling=true)", "MaxThroughput", "MinCost"])
def test_consolidated_time_fits_the_nodes_that_can_hold_it(tmp_path, solver):
    graph = _graph(tmp_path, _placement_sensitive(solver), MIXED_NODES_PROFILE, MIXED_NODES_JOBS, "1x2:V100,2x1:V100")
    simulate(graph, until=1.0)
    shares = graph.elements["solve"].allocation
    consolidated = [j for j, how in enumerate(shares.placement) if how == "consolidated"]
    X = shares.fractions
    assert X.sum(axis=1).max() <= 1 + 1e-6
    assert (X * [[2], [2], [1]]).sum() <= 4 + 1e-6  # (the type's GPUs)
    # The 2-GPU jobs' consolidated time: the 2-GPU node's, at most.
    assert X[:2, consolidated].sum() <= 1 + 1e-6


def test_max_min_with_consolidated_time_limited_by_node_sizes(tmp_path):
    # Two 2-GPU jobs: normalized throughput 2 * (10 x_consolidated + 1 x_spread) / 10. They can
    # share the 2-GPU node (half the time each) and run spread the other half: level 1.1. The
    # type's GPU count alone would let both run consolidated all the time (level 2).
    graph = _graph(
        tmp_path, "MaxMinFairness(placement_sensitive=true)", MIXED_NODES_PROFILE, MIXED_NODES_JOBS[:2], "1x2:V100,2x1:V100"
    )
    simulate(graph, until=1.0)
    assert graph.elements["solve"].counters["objective"] == pytest.approx(1.1, abs=1e-6)


def _placement_sensitive(solver: str) -> str:
    if "(" in solver:
        return solver.replace("(", "(placement_sensitive=true, ", 1)
    return f"{solver}(placement_sensitive=true)"


# --- water filling with throughputs a billion times apart ---

# Each job runs 1e9 iterations/s on one type and 1e-9 on the other (the reference type, where
# 1 iteration takes 1e9 s): the level LP's coefficients are 1e18 apart in each row.
FAR_APART_PROFILE = """fast_v100,1,V100,1,consolidated,1e9
fast_v100,1,K80,1,consolidated,1e-9
fast_k80,1,V100,1,consolidated,1e-9
fast_k80,1,K80,1,consolidated,1e9
"""
FAR_APART_JOBS = [dict(job_id=i, arrival_s=0.0, gpus=1, model=m, iterations=1.0) for i, m in enumerate(["fast_v100", "fast_k80"])]


@pytest.mark.parametrize("solver", ["MaxMinFairness(water_filling=true)", 'Hierarchical(entity_column="job_id")'])
def test_water_filling_with_throughputs_far_apart_gives_each_job_its_fast_type(tmp_path, solver):
    graph = _graph(tmp_path, solver, FAR_APART_PROFILE, FAR_APART_JOBS, "1x1:V100,1x1:K80")
    first = []
    simulate(graph, until=1.0, on_round=lambda ctx: first.append(graph.elements["solve"].allocation) if not first else None)
    shares = first[0]
    assert list(shares.rows) == [0, 1]
    assert shares.fractions == pytest.approx(np.eye(2), abs=1e-6)
