"""Racks of several node groups, the job-by-job placers (DelayPlacer, Gandiva) under a ranking
that does not backfill, DelayPlacer's timeline argument, bounds on a spec's node facts and tier
links, and explain's clock."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.dally import DelayPlacer
from roundhouse.errors import ClusterError, RoundhouseError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events, Plan, Ranking
from roundhouse.runtime.world import World
from roundhouse.tools.explain_cmd import clock
from tests.conftest import fails, jobs_of

REPO = Path(__file__).resolve().parents[1]


def spec(tmp_path, body: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def group(nodes: int, extra: str = "") -> str:
    return f"[[group]]\nnodes = {nodes}\ngpus_per_node = 8\n{extra}"


# --- racks ---


def test_groups_split_into_racks_without_a_name_get_racks_of_their_own(tmp_path):
    one = Cluster.parse(str(spec(tmp_path, group(32, "machines_per_rack = 8\n"), "one.toml")))
    two = Cluster.parse(str(spec(tmp_path, group(16, "machines_per_rack = 8\n") * 2, "two.toml")))
    # 32 nodes in racks of 8 are 4 racks, however the nodes are written
    assert one.n_racks == two.n_racks == 4
    assert one.node_rack.tolist() == two.node_rack.tolist() == np.repeat(np.arange(4), 8).tolist()
    assert two.racks == ("r0-0", "r0-1", "r1-0", "r1-1")
    # an unsplit group without a name still shares "r0" with the others, and named racks are shared
    mixed = Cluster.parse(str(spec(tmp_path, group(2) + group(2, "racks = 2\n") + group(2), "mixed.toml")))
    assert mixed.racks == ("r0", "r1-0", "r1-1") and mixed.node_rack.tolist() == [0, 0, 1, 2, 0, 0]
    named = Cluster.parse(str(spec(tmp_path, group(2, 'rack = "x"\n') * 2, "named.toml")))
    assert named.racks == ("x",)


@pytest.mark.parametrize(
    "body, message",
    [
        (
            group(4, 'rack = "a"\nracks = 2\n') + group(2, 'rack = "a-1"\n'),
            "[[group]] #2: rack 'a-1' is also a rack of [[group]] #1",
        ),
        (
            group(2, 'rack = "a-1"\n') + group(4, 'rack = "a"\nracks = 2\n'),
            "[[group]] #2: rack 'a-1' is also a rack of [[group]] #1",
        ),
        (group(4, 'rack = "a"\nracks = 2\n') * 2, "[[group]] #2: rack 'a-0' is also a rack of [[group]] #1"),
        (group(4, "machines_per_rack = 2\n") + group(2, 'rack = "r0-1"\n'), "rack 'r0-1' is also a rack of [[group]] #1"),
        (
            group(4, 'rack = "r1"\nracks = 2\n') + group(4, "racks = 2\n"),
            "[[group]] #2: rack 'r1-0' is also a rack of [[group]] #1",
        ),
    ],
    ids=["split-then-named", "named-then-split", "both-split", "unnamed-split-then-named", "named-r1-then-unnamed"],
)
def test_a_rack_name_that_would_merge_a_split_groups_rack_is_refused(tmp_path, body, message):
    path = spec(tmp_path, body)
    with pytest.raises(ClusterError) as caught:
        Cluster.parse(str(path))
    assert str(path) in str(caught.value) and message in str(caught.value)
    assert "give the groups different 'rack' names" in str(caught.value)


def test_shipped_clusters_keep_their_racks():
    racks = {p.name: Cluster.parse(str(p)).racks for p in sorted((REPO / "clusters").glob("*.toml"))}
    assert racks == {
        "gavel-physical.toml": ("v100", "p100", "k80"),
        "gavel-simulated.toml": ("v100", "p100", "k80"),
        "synergy-128.toml": ("r0",),
    }
    assert Cluster.parse("dally:3").racks == ("r0-0", "r0-1", "r0-2")
    assert Cluster.parse("16x4:V100,16x4:P100").racks == ("r0",)


# --- bounds ---


@pytest.mark.parametrize(
    "body, message",
    [
        (
            group(2, "memory_gb = 1e308\n"),
            "[[group]] #1: 'memory_gb' must be a positive finite number up to 1,000,000, got 1e+308",
        ),
        (group(2, "memory_gb = 1e200\n"), "'memory_gb' must be a positive finite number up to 1,000,000"),
        (group(2, "gpu_memory_gb = 2e6\n"), "'gpu_memory_gb' must be a positive finite number up to 1,000,000"),
        (group(2, "network_gbps = 1e12\n"), "'network_gbps' must be a positive finite number up to 1,000,000"),
        (group(2, "memory_gb = 1" + "0" * 400 + "\n"), "got a number of 401 digits"),
        (
            group(2) + "[tiers.rack]\nlatency_ns = 1e300\n",
            "[tiers.rack]: 'latency_ns' must be a number from 0 to 1,000,000,000,000",
        ),
        (group(2) + "[tiers.rack]\nlatency_ns = 1" + "0" * 400 + "\n", "'latency_ns' must be a number from 0 to"),
        (
            group(2) + "[tiers.network]\nbandwidth_gb_per_s = 1e300\n",
            "'bandwidth_gb_per_s' must be a number from 1e-06 to 1,000,000",
        ),
        (group(2) + "[tiers.network]\nbandwidth_gb_per_s = 1e-300\n", "'bandwidth_gb_per_s' must be a number from 1e-06"),
        (group(2, "cpus = 1" + "0" * 5000 + "\n"), "not valid TOML"),
    ],
    ids=["memory", "memory-1e200", "gpu-memory", "network", "memory-long-int", "latency", "latency-long-int"]
    + ["bandwidth", "bandwidth-tiny", "int-too-long-to-read"],
)
def test_huge_node_facts_and_links_are_refused(tmp_path, body, message):
    path = spec(tmp_path, body)
    with pytest.raises(ClusterError) as caught:
        Cluster.parse(str(path))
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_the_largest_amounts_allowed_are_accepted(tmp_path):
    body = group(2, "memory_gb = 1e6\ngpu_memory_gb = 1e6\nnetwork_gbps = 1e6\n")
    body += "[tiers.rack]\nlatency_ns = 1e12\nbandwidth_gb_per_s = 1e6\n[tiers.network]\nbandwidth_gb_per_s = 1e-6\n"
    cluster = Cluster.parse(str(spec(tmp_path, body)))
    assert cluster.node_memory_gb.tolist() == [1e6, 1e6] and cluster.tiers is not None


def test_a_huge_memory_is_an_error_at_the_command_line(tmp_path, capsys):
    path = spec(tmp_path, group(2, "memory_gb = 1e308\n"))
    out = fails(capsys, "run", REPO / "graphs" / "synergy-opt.sched", "--cluster", path, "--until", "1h")
    assert "'memory_gb' must be a positive finite number up to 1,000,000" in out


# --- backfill ---

GRAPH = """
round = 5min;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo(backfill={backfill}) -> {placer} -> Launch -> JobMetrics;
"""
# On 2 nodes of 4 GPUs: job 0 takes 6, job 1 (4) cannot fit until it ends, job 2 (1) could.
BLOCKING = [
    {"job_id": 0, "arrival_s": 0.0, "gpus": 6, "duration_s": 36000.0},
    {"job_id": 1, "arrival_s": 0.0, "gpus": 4, "duration_s": 36000.0},
    {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "duration_s": 3600.0},
]


@pytest.mark.parametrize("placer", ["DelayPlacer(mode=no_wait)", "DelayPlacer(mode=no_wait, release=true)", "Gandiva"])
def test_job_by_job_placers_start_no_job_below_one_that_waits_without_backfill(run_graph, placer):
    strict = jobs_of(run_graph(GRAPH.format(backfill="false", placer=placer), BLOCKING, cluster="2x4:V100"))
    assert strict[0]["first_start_s"] == 0.0
    assert strict[2]["first_start_s"] >= strict[1]["first_start_s"] > 0.0
    backfilled = jobs_of(run_graph(GRAPH.format(backfill="true", placer=placer), BLOCKING, cluster="2x4:V100"))
    assert backfilled[2]["first_start_s"] == 0.0 and backfilled[1]["first_start_s"] > 0.0


def test_a_job_that_declines_an_offer_holds_up_nobody(run_graph):
    # Jobs 0 and 1 leave one GPU on each machine: job 2 (2 GPUs) would have to span machines
    # and declines to wait; job 3 (1 GPU) below it starts at once, backfill or not.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 3, "duration_s": 36000.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 3, "duration_s": 36000.0},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 2, "duration_s": 3600.0},
        {"job_id": 3, "arrival_s": 0.0, "gpus": 1, "duration_s": 3600.0},
    ]
    graph = GRAPH.format(backfill="false", placer="place :: DelayPlacer(machine_wait=10h, rack_wait=20h)")
    result = run_graph(graph, jobs, cluster="2x4:V100")
    got = jobs_of(result)
    assert got[3]["first_start_s"] == 0.0 and got[2]["first_start_s"] > 0.0
    assert result.counters["place"]["declined"] > 0


def test_running_jobs_below_a_blocked_job_renew_their_leases(tmp_path):
    cluster = Cluster.parse(str(spec(tmp_path, 'name = "tiny"\n[[group]]\nnodes = 4\ngpus_per_node = 4\nracks = 2\n')))
    world = World(cluster, profile=None)
    # jobs 100 and 101 run; job 1 wants more than the 12 GPUs job 100 leaves; job 2 wants one.
    ids, gpus = [100, 101, 1, 2], [4, 2, 13, 1]
    frame = pl.DataFrame({"job_id": ids, "arrival_s": [0.0] * 4, "gpus": gpus, "duration_s": [1e6] * 4})
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    rows = [world.jobs.row_of(j) for j in (100, 101)]
    world.apply_plan(Plan(launch_rows=rows, launch_gpus=np.array([0, 1, 2, 3, 4, 5]), launch_counts=[4, 2]), 0.0)
    order = np.array([world.jobs.row_of(j) for j in (100, 1, 101, 2)])
    for backfill, launched in ((False, []), (True, [2])):
        placer = DelayPlacer(mode="no_wait", release=True)
        ctx = Round(world, GraphSettings(), 3600.0, 1, Events(time=3600.0))
        placer.start(ctx)
        plan = placer.tick(ctx, Ranking(order, world.jobs.column("gpus")[order], backfill=backfill))
        world.check_plan(plan)
        column = world.jobs.column("job_id")
        assert sorted(int(column[a.row]) for a in plan.launch) == launched
        assert sorted(int(column[r]) for r in plan.keep) == [100, 101] and len(plan.suspend) == 0


# --- DelayPlacer's timeline ---


def test_a_timeline_without_the_tuner_is_refused(run_graph):
    graph = (
        'round = 1min;\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> NetworkSensitive -> place :: DelayPlacer({}) -> Launch -> JobMetrics;\n"
    )
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 60.0}]
    for args in ("timeline=true", "machine_wait=1h, rack_wait=2h, timeline=true", "mode=no_wait, timeline=true"):
        with pytest.raises(RoundhouseError) as caught:
            run_graph(graph.format(args), jobs, cluster="2x4:V100")
        assert "timeline reports the auto-tuner's timers and has no effect without tuned=true" in str(caught.value)
    # with the tuner, or given as false, it is accepted
    result = run_graph(graph.format("tuned=true, timeline=true"), jobs, cluster="2x4:V100")
    assert result.reports["place"]["timers"].columns == ["time_s", "gpus", "machine_timer_s", "rack_timer_s"]
    run_graph(graph.format("timeline=false"), jobs, cluster="2x4:V100")


# --- explain's clock ---


@pytest.mark.parametrize(
    "seconds, text",
    [
        (78720.00000000007, "21h52m"),
        (78719.99999999993, "21h52m"),
        (3912.5, "1h05m12.5s"),
        (176525.25, "2d01h02m5.25s"),
        (1.1, "1.1s"),
        (59.9996, "1m"),
        (0.0, "0s"),
        (300.0, "5m"),
    ],
)
def test_the_clock_rounds_float_noise_to_the_millisecond(seconds, text):
    assert clock(seconds) == text
