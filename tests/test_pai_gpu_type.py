"""A trace's requested GPU type (Alibaba PAI's `gpu_type`, or a canonical trace's column): the
job runs only on GPUs of that type, under every placer and Gavel's mechanism; a type the cluster
lacks, or one too small for the job, is an error at the start of the run naming the job and the
type; and a trace whose jobs name no type runs exactly as one without the column."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.test_gavel_solvers import EXAMPLE_PROFILE

# Three PAI jobs: two ask for T4s (one GPU, then two), one for a V100 (the task table's
# columns: job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem,
# plan_gpu, gpu_type).
PAI_ROWS = (
    "j1,worker,1,Terminated,1000,5000,600,29.3,100,T4\n"
    "j2,worker,2,Terminated,1100,5000,600,29.3,100,t4\n"  # (case aside)
    "j3,worker,1,Terminated,1200,5000,600,29.3,100,V100\n"
)


def _pai_graph(tmp_path, rows: str, cluster: str, chain: str = "Fifo -> FirstFree", reference: str = "T4"):
    (tmp_path / "pai_task_table.csv").write_text(rows)
    (tmp_path / "g.sched").write_text(
        # (T4 is not in the shipped profile: a cluster may have it as the reference type of
        # jobs known by their duration, as PAI's are)
        f'round = 5min;\ncluster = "{cluster}";\nreference_gpu = "{reference}";\nskip_rounds = false;\n'
        'src :: TraceSource(path="pai_task_table.csv");\n'
        f"src -> AcceptAll -> JobPool -> {chain} -> Launch -> JobMetrics;\n"
    )
    return compile_file(tmp_path / "g.sched")


def _types_run_on(graph, until: float) -> dict[int, set[str]]:
    """The GPU types each job (by id) ran on, watched round by round."""
    seen: dict[int, set[str]] = {}

    def watch(ctx):
        rows = ctx.running_rows
        ids = ctx.jobs.column("job_id")[rows].tolist()
        for job, t in zip(ids, ctx.jobs.column("placed_type")[rows].tolist()):
            seen.setdefault(job, set()).add(ctx.cluster.gpu_types[t])

    simulate(graph, until=until, on_round=watch)
    return seen


@pytest.mark.parametrize(
    "chain",
    [
        "Fifo -> FirstFree",
        "Fifo -> Consolidated",
        "Las -> Consolidated",
        "Srtf -> FirstFree",
        "Fifo(backfill=true) -> Consolidated",
    ],
)
def test_a_pai_job_asking_for_t4_runs_only_on_t4(tmp_path, chain):
    # V100 comes first in the cluster, so without the request every job would start there.
    graph = _pai_graph(tmp_path, PAI_ROWS, "1x4:V100,1x4:T4", chain)
    seen = _types_run_on(graph, 3 * 3600.0)
    assert seen == {0: {"T4"}, 1: {"T4"}, 2: {"V100"}}


def test_a_job_whose_type_is_full_waits_though_other_gpus_are_free(tmp_path):
    # Three jobs of two T4s each on four T4s: the third waits for the first two, though four
    # V100s stay free all along.
    rows = "".join(f"j{k},worker,2,Terminated,{1000 + k},{5000 + k},600,29.3,100,T4\n" for k in range(3))
    graph = _pai_graph(tmp_path, rows, "1x4:V100,1x4:T4", "Fifo(backfill=true) -> Consolidated")
    assert _types_run_on(graph, 3000.0) == {0: {"T4"}, 1: {"T4"}}  # (each runs 4000 s)
    jobs = simulate(graph).world.jobs
    start = dict(zip(jobs.column("job_id").tolist(), jobs.column("first_start_s").tolist()))
    assert start[2] >= 4000.0  # started once two T4s were free again


def test_gavel_keeps_a_job_on_the_type_it_asks_for(tmp_path):
    # ja runs 4x faster on a V100 than on a K80; asking for K80 it gets only K80 time.
    (tmp_path / "profile.csv").write_text(EXAMPLE_PROFILE)
    pl.DataFrame(
        {
            "job_id": [0, 1, 2],
            "arrival_s": [0.0, 0.0, 0.0],
            "gpus": [1, 1, 1],
            "model": ["ja", "jb", "jc"],
            "iterations": [1e9, 1e9, 1e9],
            "gpu_type": ["K80", None, ""],
        }
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 6min;\ncluster = "1x1:V100,1x1:K80";\nprofile = "profile.csv";\nskip_rounds = false;\n'
        'src :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> MaxMinFairness -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;\n"
    )
    seen = _types_run_on(compile_file(tmp_path / "g.sched"), 40 * 360.0)
    assert seen[0] == {"K80"}
    assert "V100" in seen[1] | seen[2]  # the others may take the V100


def test_a_type_the_cluster_lacks_is_an_error_at_the_start_naming_the_job_and_type(tmp_path):
    # The job asking for MISC arrives last (a day later): the run refuses it before any round.
    rows = PAI_ROWS + "j4,worker,1,Terminated,90000,95000,600,29.3,100,MISC\n"
    graph = _pai_graph(tmp_path, rows, "1x4:V100,1x4:T4")
    rounds = []
    with pytest.raises(TraceError) as err:
        simulate(graph, on_round=rounds.append)
    assert not rounds
    assert err.value.column == "gpu_type"
    assert "job 3 ('j4') asks for GPU type 'MISC', which the cluster lacks (its types: V100, T4)" in str(err.value)


def test_a_single_type_cluster_refuses_another_type_too(tmp_path, capsys):
    from roundhouse.tools.cli import main

    _pai_graph(tmp_path, PAI_ROWS, "2x4:V100", reference="V100")
    assert main(["run", str(tmp_path / "g.sched"), "--quiet"]) == 2
    assert "job 0 ('j1') asks for GPU type 'T4', which the cluster lacks (its types: V100)" in capsys.readouterr().err


def test_a_type_with_too_few_gpus_for_the_job_is_an_error(tmp_path):
    rows = "j1,worker,4,Terminated,1000,5000,600,29.3,100,T4\n"
    graph = _pai_graph(tmp_path, rows, "1x8:V100,1x2:T4")
    with pytest.raises(TraceError, match=r"job 0 \('j1'\) asks for 4 GPUs of type T4 \(its gpu_type\), and the cluster has 2"):
        simulate(graph)


def test_a_type_without_throughput_for_the_model_is_an_error(tmp_path):
    # (jb gives the profile its K80s; ja has no K80 throughput)
    (tmp_path / "profile.csv").write_text(
        "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,4.0\njb,1,K80,1,consolidated,1.0\n"
    )
    pl.DataFrame(
        {"job_id": [0], "arrival_s": [0.0], "gpus": [1], "model": ["ja"], "iterations": [100.0], "gpu_type": ["K80"]}
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 6min;\ncluster = "1x1:V100,1x1:K80";\nprofile = "profile.csv";\n'
        'src :: TraceSource(path="trace.csv");\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
    )
    with pytest.raises(TraceError, match="job 0 asks for GPU type K80 .* no throughput for ja on 1 GPU"):
        simulate(compile_file(tmp_path / "g.sched"))


@pytest.mark.parametrize("column", ["all V100", "empty"])
def test_jobs_naming_no_other_type_run_as_without_the_column(tmp_path, column):
    """On a cluster of V100s, a trace whose jobs all ask for V100 (or name no type) gives the same
    jobs.csv as the trace without its gpu_type column."""
    from roundhouse.tools.cli import main

    rows = [f"j{k},worker,{1 + k % 3},Terminated,{1000 + 700 * k},{9000 + 1300 * k},600,29.3,100,V100" for k in range(12)]
    given = rows if column == "all V100" else [r.rsplit(",", 1)[0] + "," for r in rows]
    outs = []
    for name, text in (("with", given), ("without", None)):
        folder = tmp_path / name
        folder.mkdir()
        if text is None:  # the same jobs as a canonical trace without the column
            from roundhouse.traces import pai

            (folder / "pai_task_table.csv").write_text("\n".join(rows) + "\n")
            pai.read(folder / "pai_task_table.csv").drop("gpu_type").write_csv(folder / "jobs.csv")
            trace = "jobs.csv"
        else:
            (folder / "pai_task_table.csv").write_text("\n".join(text) + "\n")
            trace = "pai_task_table.csv"
        (folder / "g.sched").write_text(
            f'round = 5min;\ncluster = "2x4:V100";\nsrc :: TraceSource(path="{trace}");\n'
            "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n"
        )
        assert main(["run", str(folder / "g.sched"), "--quiet", "--no-explain", "--out", str(folder / "out")]) == 0
        outs.append((folder / "out" / "jobs.csv").read_bytes())
    assert outs[0] == outs[1]


def test_an_elastic_job_asking_for_a_type_on_a_mixed_cluster_is_refused():
    # Pollux and Ones pick an elastic job's GPUs from the whole cluster: a type it asks for
    # would not be kept to, so it is refused rather than ignored.
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.traces import pollux
    from roundhouse.traces.prepare import prepare_jobs
    from roundhouse.traces.profiles import ProfileTable
    from roundhouse.traces.schema import validate
    from roundhouse.traces.throughput import ThroughputModel

    elastic, profile = pollux.profile(), ProfileTable.load()
    model = ThroughputModel(profile, Cluster.parse("1x4:V100,1x4:P100", profile.gpu_types), elastic=elastic)
    row = dict(job_id=0, arrival_s=0.0, gpus=1, duration_s=100.0, model="cifar10", batch_size=128, gpu_type="P100")
    trace = validate(pl.DataFrame([row]), "t.csv", elastic=elastic)
    with pytest.raises(TraceError, match="job 0 is elastic and asks for GPU type P100"):
        prepare_jobs(trace, model, "V100", model.cluster.n_gpus, "t.csv")


def test_a_misspelt_gpu_type_column_is_named_in_a_warning(tmp_path, capsys):
    # A column that only looks like gpu_type asks for nothing: the reader says so.
    from roundhouse.traces.formats import load_trace

    path = tmp_path / "jobs.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s,GPU_Type\n0,0,1,100,T4\n")
    load_trace(path)
    err = capsys.readouterr().err
    assert "GPU_Type" in err and "gpu_type" in err


def test_a_gpu_type_column_of_numbers_is_an_error_naming_the_job(tmp_path):
    pl.DataFrame(
        {"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1, 1], "duration_s": [60.0, 60.0], "gpu_type": [None, 2]}
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x4:V100,1x4:P100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    with pytest.raises(TraceError, match=r"column 'gpu_type': job 1: 2\.0 is not a GPU type name"):
        simulate(compile_file(tmp_path / "g.sched"))
