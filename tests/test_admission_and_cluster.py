"""Admission gates and cluster specs."""

import numpy as np
import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import MAX_GPUS, Cluster
from tests.conftest import jobs_of, write_trace


def gate_after(tmp_path, graph: str, jobs: list[dict], cluster: str, rounds: int) -> dict:
    """The counters of the graph's element `gate` after its first `rounds` rounds."""
    from roundhouse.runtime.simulation import Simulation

    write_trace(tmp_path / "gate.csv", jobs)
    sim = Simulation(graph.replace('"trace.csv"', f'"{tmp_path / "gate.csv"}"'), cluster=cluster)
    for _ in range(rounds):
        sim.step()
    return dict(sim.graph.elements["gate"].counters)


def test_accept_threshold_holds_jobs_back_first_in_first_out(run_graph, tmp_path):
    graph = """
    round = 100s;
    src :: TraceSource(path="trace.csv");
    src -> gate :: AcceptThreshold(factor=1.0x) -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    # 4 GPUs: jobs of 2, 2, 1, 1 GPUs at t=0. As in Blox, the queue's head is admitted while the
    # demand before it is at most 4: jobs 0 (0), 1 (2) and 2 (4, taking it to 5), not job 3 (5).
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 150.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 350.0},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 3, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
    ]
    assert gate_after(tmp_path, graph, jobs, "1x4:V100", 1) == {"admitted": 3, "queued": 1, "demand": 5}
    result = run_graph(graph, jobs, cluster="1x4:V100")
    got = jobs_of(result)
    assert got[0]["first_start_s"] == 0.0 and got[1]["first_start_s"] == 0.0
    # Job 0 finishes at 150; seen at 200 (demand 3), when job 3 is admitted. Jobs 2 and 3 start
    # there together, on job 0's GPUs.
    assert got[2]["first_start_s"] == 200.0 and got[3]["first_start_s"] == 200.0
    assert result.counters["gate"]["admitted"] == 4 and result.counters["gate"]["queued"] == 0


def test_the_last_job_admitted_may_take_the_demand_past_the_limit(run_graph, tmp_path):
    # Blox's rule tests the demand before each job. A limit of 2 GPUs (0.5x of 4): job 0 (1 GPU)
    # is admitted at demand 0, job 1 (2 GPUs) at demand 1, taking it to 3; job 2 (1 GPU) then
    # finds 3 and waits at the gate until job 1 ends at 100.
    graph = """
    round = 100s;
    src :: TraceSource(path="trace.csv");
    src -> gate :: AcceptThreshold(factor=0.5x) -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
    ]
    assert gate_after(tmp_path, graph, jobs, "1x4:V100", 1) == {"admitted": 2, "queued": 1, "demand": 3}
    got = jobs_of(run_graph(graph, jobs, cluster="1x4:V100"))
    assert got[0]["first_start_s"] == 0.0 and got[1]["first_start_s"] == 0.0
    assert got[2]["first_start_s"] == 100.0


def test_a_job_larger_than_the_limit_is_admitted_when_the_demand_is_within_it(run_graph, tmp_path):
    graph = """
    round = 100s;
    src :: TraceSource(path="trace.csv");
    src -> gate :: AcceptThreshold(factor=0.5x) -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    # A limit of 2 GPUs. Job 0 (4 GPUs) is admitted at once (demand 0); job 1 then finds 4.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 100.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
    ]
    got = jobs_of(run_graph(graph, jobs, cluster="1x4:V100"))
    assert got[0]["first_start_s"] == 0.0 and got[1]["first_start_s"] == 100.0
    # Not only when nothing else is admitted: beside a 1-GPU job (demand 1), a 4-GPU job seen at
    # 100 is admitted too, and waits in the pool for room; the 1-GPU job behind it finds 5.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0},
        {"job_id": 1, "arrival_s": 50.0, "gpus": 4, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 50.0, "gpus": 1, "duration_s": 100.0},
    ]
    assert gate_after(tmp_path, graph, jobs, "1x4:V100", 2) == {"admitted": 2, "queued": 1, "demand": 5}
    got = jobs_of(run_graph(graph, jobs, cluster="1x4:V100"))
    assert got[1]["first_start_s"] == 300.0 and got[2]["first_start_s"] == 400.0


def test_cluster_shorthands():
    c = Cluster.parse("32x4:V100")
    assert (c.n_gpus, c.n_nodes, c.gpu_types) == (128, 32, ("V100",))
    c = Cluster.parse("2x4:V100,3x8:K80")
    assert c.n_gpus == 32 and c.gpus_by_type.tolist() == [8, 24] and c.max_gpus_per_node == 8
    assert c.node_first_gpu.tolist() == [0, 4, 8, 16, 24]
    c = Cluster.parse("36:36:36")
    assert c.gpu_types == ("V100", "P100", "K80") and c.n_nodes == 108 and c.max_gpus_per_node == 1
    assert Cluster.parse("2x2").gpu_types == ("V100",)
    assert c.spread([0, 1]) == "rack" and Cluster.parse("1x2").spread([0, 1]) == "node"


@pytest.mark.parametrize("spec", ["32x4:V100", "5x1:K80", "3x2:P100", "4x8:V100", "2x4:V100,3x8:K80", "3x3:V100"])
def test_per_node_counts_match_a_plain_sum(spec):
    # Uniform clusters of 1, 2, 4 or 8 GPUs a node count by bit counts, others by sums.
    c = Cluster.parse(spec)
    rng = np.random.default_rng(7)
    for _ in range(20):
        mask = rng.random(c.n_gpus) < 0.5
        expected = [int(mask[f : f + g].sum()) for f, g in zip(c.node_first_gpu, c.node_gpus)]
        assert c.per_node(mask).tolist() == expected
        assert c.per_node(mask).dtype == np.int64
    twice = np.repeat(mask, 2)[::2]  # a strided (non-contiguous) mask
    assert c.per_node(twice).tolist() == expected


def test_cluster_spec_file(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text(
        'name = "mixed"\n[[group]]\nnodes = 4\ngpus_per_node = 4\ngpu_type = "V100"\nracks = 2\nnetwork_gbps = 10\n'
        '[[group]]\nnodes = 2\ngpus_per_node = 8\ngpu_type = "P100"\nrack = "b"\ncpus = 64\n'
    )
    c = Cluster.parse(str(spec))
    assert c.n_gpus == 32 and c.racks == ("r0-0", "r0-1", "b") and c.node_cpus.tolist() == [32, 32, 32, 32, 64, 64]
    assert c.spread([0, 4]) == "rack" and c.spread([0, 16]) == "cluster"


@pytest.mark.parametrize(
    "text, message",
    [
        ("32x:V100", "not NODESxGPUS"),
        ("0x4", "at least 1"),
        ("0:0:0", "no GPUs"),
        # Too large to hold: refused before any per-GPU table is built.
        ("1x99999999999999999999:V100", "GPUs per node is more than"),
        ("99999999999999999999x4:V100", f"more than the {MAX_GPUS:,}"),
        ("2x1000000000:V100", "GPUs per node is more than"),
        ("300000x4:V100", f"1,200,000 GPUs is more than the {MAX_GPUS:,}"),
        ("1000000:1:0", "1,000,001 GPUs"),
    ],
)
def test_bad_shorthands(text, message):
    with pytest.raises(ClusterError, match=message):
        Cluster.parse(text)


@pytest.mark.parametrize(
    "body, message",
    [
        ("[[group]]\nnodes = 2\n", "missing 'gpus_per_node'"),
        ("[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_typ = 'V100'\n", "unknown key 'gpu_typ' (did you mean 'gpu_type'?)"),
        ("[[group]]\nnodes = 'two'\ngpus_per_node = 4\n", "'nodes' must be a whole number"),
        ("[[group]\nnodes = 2\n", "not valid TOML"),
        ("name = 'x'\n", "no [[group]]"),
        ("[[group]]\nnodes = 2\ngpus_per_node = 4\nracks = 3\n", "'racks' (3) is more than 'nodes' (2)"),
        ("[[group]]\nnodes = 2\ngpus_per_node = 4\ncpus = 99999999999999999999\n", "'cpus' must be a whole number from 1 to"),
        ("[[group]]\nnodes = 9223372036854775807\ngpus_per_node = 4\n", "'nodes' must be a whole number from 1 to"),
        ("[[group]]\nnodes = 2\ngpus_per_node = 4\nmemory_gb = inf\n", "'memory_gb' must be a positive finite number"),
        ("[[group]]\nnodes = 2\ngpus_per_node = 4\nnetwork_gbps = nan\n", "'network_gbps' must be a positive finite number"),
    ],
)
def test_bad_spec_files_name_the_file_and_the_problem(tmp_path, body, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(body)
    with pytest.raises(ClusterError) as info:
        Cluster.parse(str(spec))
    assert str(spec) in str(info.value) and message in str(info.value)


def test_a_spec_file_that_is_not_utf8_text_says_so(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_bytes(b"[[group]]\nnodes = 2\nname = '\xff'\n")
    with pytest.raises(ClusterError) as info:
        Cluster.parse(str(spec))
    assert str(spec) in str(info.value) and "not UTF-8 text (byte 0xff at line 3, column 9 cannot be decoded)" in str(info.value)


def test_a_spec_files_bad_values_are_quoted_as_toml_writes_them(tmp_path):
    spec = tmp_path / "bad.toml"
    for line, shown in (("network_gbps = true", "got true"), ("memory_gb = -inf", "got -inf"), ("nodes = 'two'", 'got "two"')):
        spec.write_text(
            f"[[group]]\nnodes = 2\ngpus_per_node = 4\n{line}\n".replace("nodes = 2\n", "" if "nodes" in line else "nodes = 2\n")
        )
        with pytest.raises(ClusterError, match=shown):
            Cluster.parse(str(spec))


def test_a_shorthand_too_long_for_a_file_name_is_parsed_as_a_shorthand():
    # 81 groups: 323 characters, past the 255 a file name may have.
    c = Cluster.parse(",".join(["1x8"] * 81))
    assert (c.n_gpus, c.n_nodes) == (648, 81)
    with pytest.raises(ClusterError, match="'1y8' is not NODESxGPUS"):
        Cluster.parse(",".join(["1x8"] * 80 + ["1y8"]))


def test_gpu_types_that_differ_only_in_case_are_one_type(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text(
        '[[group]]\nnodes = 2\ngpus_per_node = 8\ngpu_type = "V100"\n'
        '[[group]]\nnodes = 2\ngpus_per_node = 8\ngpu_type = "v100"\n'
        '[[group]]\nnodes = 1\ngpus_per_node = 4\ngpu_type = "p100"\n'
    )
    c = Cluster.parse(str(spec))
    assert c.gpu_types == ("V100", "p100") and c.gpus_by_type.tolist() == [32, 4]
    assert "2x8:V100, 2x8:V100, 1x4:p100" in c.describe()
    # A spec of one spelling keeps it.
    assert Cluster.parse("2x4:v100").gpu_types == ("v100",)
