"""A cluster may hold a GPU type its throughput profile lacks when the graph's traces ask for it
(their `gpu_type` column, as Alibaba PAI's task table gives: T4, MISC): jobs known only by
duration run there for their durations, a job known by its model is never placed there (and one
with no profiled type to run on is refused at the start, naming it); a type neither in the
profile, nor the reference_gpu, nor asked for by a job is still refused, listing the known ones."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import SchedError, TraceError, UsageError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster, simulate
from roundhouse.tools.cli import main
from roundhouse.traces.gputypes import named_types
from tests.conftest import fails

PAI_CLUSTER = "1x8:V100,1x8:P100,1x2:T4,1x8:MISC"
# PAI's task table (job_name, task_name, inst_num, status, start_time, end_time, plan_cpu,
# plan_mem, plan_gpu, gpu_type): a job on each of its four types, and one naming none.
PAI_ROWS = (
    "j1,worker,1,Terminated,1000,5000,600,29.3,100,T4\n"
    "j2,worker,2,Terminated,1100,5000,600,29.3,100,misc\n"  # (case aside)
    "j3,worker,1,Terminated,1200,5000,600,29.3,100,V100\n"
    "j4,worker,4,Terminated,1300,9000,600,29.3,100,P100\n"
    "j5,worker,1,Terminated,1400,9000,600,29.3,100,\n"
)
CHAIN = "Fifo -> Consolidated"


def _graph(tmp_path, trace: str, text: str, cluster: str | None = None, chain: str = CHAIN, head: str = ""):
    (tmp_path / trace).write_text(text)
    setting = f'cluster = "{cluster}";\n' if cluster else ""
    path = tmp_path / "g.sched"
    path.write_text(
        f"round = 5min;\nskip_rounds = false;\n{setting}{head}"
        f'src :: TraceSource(path="{trace}");\nsrc -> AcceptAll -> JobPool -> {chain} -> Launch -> JobMetrics;\n'
    )
    return path


def _run(graph, cluster: str | None = None):
    """Each job's GPU types (by id), watched round by round, and the finished world's jobs."""
    seen: dict[int, set[str]] = {}

    def watch(ctx):
        rows = ctx.running_rows
        for job, t in zip(ctx.jobs.column("job_id")[rows].tolist(), ctx.jobs.column("placed_type")[rows].tolist()):
            seen.setdefault(job, set()).add(ctx.cluster.gpu_types[t])

    result = simulate(compile_file(graph), cluster, on_round=watch)
    return seen, result.world.jobs


@pytest.mark.parametrize("chain", ["Fifo -> Consolidated", "Las -> FirstFree", "MaxMinFairness -> GavelRounds -> GavelPlacer"])
def test_a_pai_trace_runs_on_a_cluster_of_its_types_for_its_durations(tmp_path, chain):
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS, PAI_CLUSTER, chain)
    seen, jobs = _run(graph)
    assert {k: seen[k] for k in range(4)} == {0: {"T4"}, 1: {"MISC"}, 2: {"V100"}, 3: {"P100"}}
    # Each ran for its duration wherever it ran, T4 and MISC included (under Fifo and Las none
    # waits once started: each has GPUs of its type to itself; Gavel's rounds may pause one).
    run = jobs.column("finish_s") - jobs.column("first_start_s")
    if chain.startswith("MaxMin"):
        assert (run >= jobs.column("duration_s")).all() and (run < jobs.column("duration_s") + 3600).all()
    else:
        assert run.tolist() == jobs.column("duration_s").tolist()


def test_the_command_line_runs_the_cluster_a_pai_user_gives(tmp_path, capsys):
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS)
    out = tmp_path / "out"
    assert main(["run", str(graph), "--cluster", PAI_CLUSTER, "--quiet", "--out", str(out)]) == 0
    assert pl.read_csv(out / "jobs.csv")["status"].to_list() == ["finished"] * 5
    assert main(["check", str(graph), "--cluster", PAI_CLUSTER]) == 0


def test_a_spec_file_may_hold_a_type_the_trace_asks_for(tmp_path):
    (tmp_path / "c.toml").write_text(
        '[[group]]\nnodes = 1\ngpus_per_node = 8\ngpu_type = "V100"\n\n[[group]]\nnodes = 1\ngpus_per_node = 2\ngpu_type = "T4"\n'
    )
    rows = PAI_ROWS.splitlines(keepends=True)
    graph = _graph(tmp_path, "pai_task_table.csv", rows[0] + rows[2], "c.toml")
    seen, _ = _run(graph)
    assert seen == {0: {"T4"}, 1: {"V100"}}


def test_a_misspelt_type_is_still_refused_listing_the_known_ones(tmp_path, capsys):
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS)
    err = fails(capsys, "run", graph, "--cluster", "1x8:V1OO,1x2:T4,1x8:MISC,1x8:P100")
    assert err.startswith("error: --cluster: bad cluster '1x8:V1OO,1x2:T4,1x8:MISC,1x8:P100': unknown GPU type 'V1OO'")
    # The known types: the profile's, then those the trace asks for, as first written.
    assert "known: V100, P100, K80, T4, misc (" in err and "in gpu_type" in err
    # The same where the graph gives it, and with `check`.
    text = graph.read_text().replace("skip_rounds", 'cluster = "1x8:V1OO";\nskip_rounds')
    graph.write_text(text)
    err = fails(capsys, "check", graph)
    assert f"{graph}:2:11: error: setting 'cluster': bad cluster '1x8:V1OO': unknown GPU type 'V1OO'" in err


def test_a_type_no_job_asks_for_is_refused_saying_what_a_cluster_may_hold(tmp_path, capsys):
    # A duration trace naming no type: T4 is neither the profile's nor the reference type.
    graph = _graph(tmp_path, "t.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    err = fails(capsys, "run", graph, "--cluster", "2x4:T4")
    assert "unknown GPU type 'T4'; known: V100, P100, K80 (a cluster may hold the throughput profile's GPU types, " in err
    assert "the reference_gpu" in err
    assert main(["run", str(graph), "--cluster", "2x4:T4", "--set", "reference_gpu=T4", "--quiet"]) == 0
    # A type only jobs past the source's `jobs` ask for is not asked for.
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS, chain=CHAIN)
    graph.write_text(graph.read_text().replace('path="pai_task_table.csv"', 'path="pai_task_table.csv", jobs=1'))
    with pytest.raises(UsageError, match="unknown GPU type 'MISC'"):
        load_cluster(compile_file(graph), "1x2:T4,1x2:MISC")
    assert load_cluster(compile_file(graph), "1x2:T4,1x2:V100").gpu_types == ("T4", "V100")


def test_a_job_known_by_its_model_is_never_placed_on_a_type_without_throughput(tmp_path):
    # Two ResNet-18 jobs and one V100: the second waits for the first, four T4s free all along
    # (the third job, known by its duration, asks for them and runs there at once).
    trace = (
        "job_id,arrival_s,gpus,model,iterations,duration_s,gpu_type\n"
        "0,0,1,ResNet-18,20000,,\n"
        "1,0,1,ResNet-18,20000,,\n"
        "2,0,1,,,600,T4\n"
    )
    graph = _graph(tmp_path, "t.csv", trace, "1x1:V100,1x4:T4", "Fifo(backfill=true) -> FirstFree")
    seen, jobs = _run(graph)
    assert seen == {0: {"V100"}, 1: {"V100"}, 2: {"T4"}}
    start = dict(zip(jobs.column("job_id").tolist(), jobs.column("first_start_s").tolist()))
    finish = dict(zip(jobs.column("job_id").tolist(), jobs.column("finish_s").tolist()))
    assert start[1] >= finish[0] > 0


def test_a_job_known_by_its_model_with_no_profiled_type_is_refused_at_the_start(tmp_path):
    trace = "job_id,arrival_s,gpus,model,iterations,duration_s,gpu_type\n0,9000,1,ResNet-18,1000,,\n1,0,1,,,600,T4\n"
    graph = _graph(tmp_path, "t.csv", trace, "1x4:T4")
    rounds = []
    with pytest.raises(TraceError) as err:
        simulate(compile_file(graph), on_round=rounds.append)
    assert not rounds
    message = str(err.value)
    assert "job 0: the profile has no throughput for ResNet-18" in message
    assert "T4 is a type the throughput profile lacks, where only jobs known by their duration run" in message


def test_a_job_known_by_its_model_asking_for_an_unprofiled_type_is_refused(tmp_path):
    trace = "job_id,arrival_s,gpus,model,iterations,duration_s,gpu_type\n0,0,1,,,600,V100\n1,9000,1,ResNet-18,1000,,T4\n"
    graph = _graph(tmp_path, "t.csv", trace, "1x4:V100,1x4:T4")
    with pytest.raises(TraceError) as err:
        simulate(compile_file(graph))
    assert err.value.column == "gpu_type"
    assert "job 1 asks for GPU type T4 (its gpu_type), and the profile has no throughput for ResNet-18" in str(err.value)
    assert "T4 is a type the throughput profile lacks" in str(err.value)


def test_a_type_the_profile_has_keeps_the_message_it_had(tmp_path):
    # (P100 is the profile's: no word about types it lacks)
    trace = "job_id,arrival_s,gpus,model,iterations,duration_s,gpu_type\n0,0,1,ResNet-18,1000,,P100\n"
    (tmp_path / "profile.csv").write_text(
        "model,batch_size,gpu_type,gpus,placement,iters_per_s\nResNet-18,16,V100,1,consolidated,4.0\nx,1,P100,1,consolidated,1.0\n"
    )
    graph = _graph(tmp_path, "t.csv", trace, "1x4:V100,1x4:P100", head='profile = "profile.csv";\n')
    # (the source's line after it, as for any job its start refuses)
    said = r"no throughput for ResNet-18 on 1 GPU\(s\) of it \(a job of element 'src' \(TraceSource\), declared at [^)]*\)$"
    with pytest.raises(TraceError, match=said):
        simulate(compile_file(graph))


def test_a_trace_that_cannot_be_read_is_reported_as_its_source_would(tmp_path, capsys):
    # The spec holds a type beyond the profile, so the trace is read for the types it asks for:
    # its own problem is what is said, not an unknown type.
    graph = _graph(tmp_path, "t.csv", "job_id,arrival_s,gpus,duration_s,gpu_type\n0,0,-1,100,T4\n")
    err = fails(capsys, "run", graph, "--cluster", "1x4:T4")
    assert "t.csv" in err and "gpus" in err and "unknown GPU type" not in err


def test_named_types_are_each_type_once_as_first_written():
    frame = pl.DataFrame({"gpu_type": ["T4", " t4", "MISC", None, "", "V100", "misc"]})
    assert named_types(frame) == ["T4", "MISC", "V100"]
    assert named_types(pl.DataFrame({"gpu_type": [None, None]})) == []
    assert named_types(pl.DataFrame({"gpus": [1]})) == []


def test_a_graph_setting_the_cluster_reports_a_refused_type_at_the_setting(tmp_path):
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS, "1x2:T4,1x2:A100")
    with pytest.raises(SchedError, match="setting 'cluster': bad cluster '1x2:T4,1x2:A100': unknown GPU type 'A100'"):
        load_cluster(compile_file(graph), None)


# A type beyond the profile's, the reference_gpu and the trace's gpu_type is refused though every
# job is known only by its duration (and would run for it there): a name written only in the
# cluster cannot be told from a misspelling. The refusal says where to name a type of its own;
# each test below then does what it says, and the run goes.
DURATIONS = "job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,0,4,900\n2,60,2,300\n"


def _refusal(capsys, graph, cluster: str, *more: str) -> str:
    err = fails(capsys, "run", graph, "--cluster", cluster, *more)
    assert err.startswith(f"error: --cluster: bad cluster '{cluster}': unknown GPU type ")
    return err


def test_one_type_for_jobs_known_by_duration_is_named_by_gpu_types(tmp_path, capsys):
    graph = _graph(tmp_path, "t.csv", DURATIONS)
    err = _refusal(capsys, graph, "1x4:V100,1x4:T4")
    advice = err.split("T4 is none of these; a type of its own (not a misspelling) is named outside the cluster too: ")[1]
    assert advice.startswith(
        'set gpu_types = "T4" (--set gpu_types=T4), as jobs known only by their durations run for them on any type'
    )
    assert "or name T4 in the gpu_type column" in advice and "reference_gpu" not in advice
    seen, jobs = _run(_with(graph, 'gpu_types = "T4";\n'), "1x4:V100,1x4:T4")
    assert set().union(*seen.values()) == {"V100", "T4"}  # (the 4-GPU job fills a node: both types used)
    assert (jobs.column("finish_s") - jobs.column("first_start_s")).tolist() == jobs.column("duration_s").tolist()
    # reference_gpu, the one type durations were measured on, admits it too.
    seen, _ = _run(_graph(tmp_path, "t.csv", DURATIONS, head='reference_gpu = "T4";\n'), "1x4:V100,1x4:T4")
    assert set().union(*seen.values()) == {"V100", "T4"}


def test_a_misspelt_type_is_refused_naming_it_though_every_job_is_known_by_duration(tmp_path, capsys):
    graph = _graph(tmp_path, "t.csv", DURATIONS)
    err = _refusal(capsys, graph, "1x4:V1OO")
    assert "unknown GPU type 'V1OO'; known: V100, P100, K80 (" in err and "V1OO is none of these" in err


def test_several_types_are_named_in_gpu_types_or_the_gpu_type_column(tmp_path, capsys):
    graph = _graph(tmp_path, "t.csv", DURATIONS)
    err = _refusal(capsys, graph, "1x4:V100,1x4:T4,1x2:A100")
    assert "T4 and A100 are none of these; types of their own (not misspellings) are named outside the cluster too: " in err
    assert 'set gpu_types = "T4,A100" (--set \'gpu_types="T4,A100"\')' in err
    assert "or name T4 and A100 in the gpu_type column of the jobs known only by their durations that are to run on them" in err
    # A type the graph names already (by reference_gpu, or gpu_types) is not said again; the
    # suggested gpu_types keeps those it names.
    err = _refusal(capsys, graph, "1x4:V100,1x4:T4,1x2:A100", "--set", "reference_gpu=T4")
    assert "unknown GPU type 'A100'" in err and "A100 is none of these" in err
    assert 'set gpu_types = "A100" (--set gpu_types=A100)' in err and "name A100 in the gpu_type column" in err
    err = _refusal(capsys, graph, "1x4:V100,1x4:T4,1x2:A100", "--set", "gpu_types=T4")
    assert "A100 is none of these" in err and 'set gpu_types = "T4,A100"' in err
    # Done: job 2 asks for A100 and runs there; the others anywhere else.
    named = DURATIONS.replace("duration_s\n", "duration_s,gpu_type\n").replace("600\n", "600,\n").replace("900\n", "900,\n")
    graph = _graph(tmp_path, "t.csv", named.replace("300\n", "300,A100\n"), head='gpu_types = "T4";\n')
    seen, _ = _run(graph, "1x4:V100,1x4:T4,1x2:A100")
    assert seen[2] == {"A100"} and "A100" not in seen[0] | seen[1]


def test_jobs_known_by_model_are_told_of_profile_rows_not_reference_gpu(tmp_path, capsys):
    trace = "job_id,arrival_s,gpus,model,iterations,duration_s\n0,0,1,ResNet-18,1000,\n1,0,1,,,600\n"
    graph = _graph(tmp_path, "t.csv", trace)
    err = _refusal(capsys, graph, "1x4:V100,1x4:T4")
    advice = err.split("T4 is none of these")[1]
    assert "give the profile rows on it (a job known by its model runs only where the profile gives its speed)" in advice
    assert "or name T4 in the gpu_type column" in advice and "reference_gpu" not in advice
    # Done: a profile with rows on T4 makes it a type the cluster may hold.
    (tmp_path / "profile.csv").write_text(
        "model,batch_size,gpu_type,gpus,placement,iters_per_s\n"
        "ResNet-18,16,V100,1,consolidated,4.0\nResNet-18,16,T4,1,consolidated,1.0\n"
    )
    seen, _ = _run(_with(graph, 'profile = "profile.csv";\n'), "1x1:V100,1x1:T4")
    assert set().union(*seen.values()) <= {"V100", "T4"} and seen.keys() == {0, 1}
    # A source replaying by durations alone (timing=duration) has no job known by its model.
    trace = "job_id,arrival_s,gpus,model,duration_s\n0,0,1,ResNet-18,600\n"
    graph = _graph(tmp_path, "d.csv", trace)
    assert "give the profile rows" in _refusal(capsys, graph, "1x4:V100,1x4:T4")
    graph.write_text(graph.read_text().replace('path="d.csv"', 'path="d.csv", timing=duration'))
    assert (
        'T4 is none of these; a type of its own (not a misspelling) is named outside the cluster too: set gpu_types = "T4"'
        in (_refusal(capsys, graph, "1x4:V100,1x4:T4"))
    )


def _with(graph, setting: str):
    """The graph with a setting added at its top."""
    graph.write_text(setting + graph.read_text())
    return graph


@pytest.mark.parametrize("cluster", ["1x4:V100,1x4:RTX-3090", "1x4:V100,1x4:true"])
def test_the_suggested_flag_for_one_type_is_taken_as_written(tmp_path, capsys, cluster):
    # A type name a cluster spec takes (hyphens, or a word the command line reads as a boolean)
    # need not be a bare word of the command line: the flag the refusal suggests is used as is.
    graph = _graph(tmp_path, "t.csv", DURATIONS)
    err = _refusal(capsys, graph, cluster)
    flag = err.split(" (--set ", 1)[1].split("), as jobs", 1)[0]
    value = flag.removeprefix("'").removesuffix("'")  # (as a shell passes it)
    assert value.startswith("gpu_types=")
    assert main(["run", str(graph), "--cluster", cluster, "--set", value, "--quiet"]) == 0, capsys.readouterr().err
