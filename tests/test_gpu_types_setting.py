"""The `gpu_types` graph setting names GPU types a cluster may hold beyond the throughput
profile's: a trace of jobs known only by duration runs on a cluster of several such types (as
reference_gpu lets it on one), a type named nowhere but the cluster is still refused as a
possible misspelling, a bad value is said at the setting, and a job known by its model is never
placed on such a type (it has no throughput there)."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from roundhouse.errors import SchedError, TraceError
from roundhouse.runtime.cluster_types import gpu_types
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster, simulate
from roundhouse.runtime.whatif import WORLD_SETTINGS
from roundhouse.tools.cli import main
from tests.conftest import fails
from tests.test_cluster_types_beyond_profile import _run

CLUSTER = "2x4:A100,2x4:T4"
DURATIONS = "job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,0,4,900\n2,60,2,300\n3,60,4,1200\n4,120,8,600\n"


def _graph(tmp_path, trace: str = DURATIONS, head: str = "", chain: str = "Fifo -> Consolidated"):
    (tmp_path / "t.csv").write_text(trace)
    path = tmp_path / "g.sched"
    path.write_text(
        f"round = 5min;\nskip_rounds = false;\n{head}"
        f'src :: TraceSource(path="t.csv");\nsrc -> AcceptAll -> JobPool -> {chain} -> Launch -> JobMetrics;\n'
    )
    return path


def _cli(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", *map(str, argv)], capture_output=True, text=True, timeout=300
    )


def test_a_duration_trace_runs_on_two_types_the_profile_lacks_once_gpu_types_names_them(tmp_path):
    graph = _graph(tmp_path)
    refused = _cli("run", graph, "--cluster", CLUSTER, "--quiet")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"error: --cluster: bad cluster '{CLUSTER}': unknown GPU type 'A100'")
    assert "A100 and T4 are none of these" in refused.stderr
    # The refusal's first remedy is the setting, with both types, as it can be given.
    advice = refused.stderr.split("named outside the cluster too: ")[1]
    assert advice.startswith('set gpu_types = "A100,T4" (--set \'gpu_types="A100,T4"\')')

    out = tmp_path / "out"
    ran = _cli("run", graph, "--cluster", CLUSTER, "--set", 'gpu_types="A100,T4"', "--quiet", "--out", out)
    assert ran.returncode == 0, ran.stderr
    jobs = pl.read_csv(out / "jobs.csv")
    assert jobs["status"].to_list() == ["finished"] * 5
    # Each ran for its duration: jobs known by duration do one unit of work a second on any type.
    assert jobs["run_s"].to_list() == jobs["duration_s"].to_list()

    # Written in the graph, the same; `check` takes the cluster too; a single type needs no quotes.
    graph.write_text(f'gpu_types = "A100, T4";\ncluster = "{CLUSTER}";\n' + graph.read_text())
    assert _cli("check", graph).returncode == 0
    seen, _ = _run(graph)
    assert set().union(*seen.values()) == {"A100", "T4"}  # (the 8-GPU job alone fills a type: both are used)
    assert _cli("run", graph, "--cluster", "2x4:T4", "--set", "gpu_types=T4", "--quiet").returncode == 0


def test_the_types_it_names_join_the_known_ones_each_once(tmp_path):
    graph = _graph(tmp_path, head='gpu_types = "A100,t4,v100,T4";\nreference_gpu = "H100";\n')
    assert gpu_types(compile_file(graph)) == ("V100", "P100", "K80", "H100", "A100", "t4")


def test_a_misspelt_type_is_still_refused_with_gpu_types_set(tmp_path, capsys):
    graph = _graph(tmp_path, head='gpu_types = "A100,T4";\n')
    err = fails(capsys, "run", graph, "--cluster", "2x4:A100,2x4:V1OO")
    assert err.startswith("error: --cluster: bad cluster '2x4:A100,2x4:V1OO': unknown GPU type 'V1OO'")
    assert "known: V100, P100, K80, A100, T4 (" in err and "those named in gpu_types" in err
    # The advice keeps the types the setting names.
    assert "V1OO is none of these" in err and 'set gpu_types = "A100,T4,V1OO"' in err
    err = fails(capsys, "run", graph, "--cluster", "2x4:A10O")
    assert "unknown GPU type 'A10O' (did you mean 'A100'?)" in err


@pytest.mark.parametrize(
    "value, problem",
    [
        ('"A100,,T4"', 'has an empty item in "A100,,T4"'),
        ('"A100,"', 'has an empty item in "A100,"'),
        ('" , T4"', 'has an empty item in " , T4"'),
        ('"4x8:A100"', "item '4x8:A100' is not a GPU type name"),
        ('"A100;T4"', "item 'A100;T4' is not a GPU type name"),
        ('"RTX 3090"', "item 'RTX 3090' is not a GPU type name"),
        ('"_T4"', "item '_T4' is not a GPU type name"),
        ('"A100@80"', "item 'A100@80' is not a GPU type name"),
    ],
)
def test_a_bad_value_is_said_at_the_setting(tmp_path, capsys, value, problem):
    graph = _graph(tmp_path, head=f"gpu_types = {value};\n")
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:3:13: error: setting 'gpu_types' {problem}"), err
    with pytest.raises(SchedError, match="setting 'gpu_types' "):
        compile_file(graph)
    # Given on the command line, it names the option.
    plain = _graph(tmp_path)
    err = fails(capsys, "run", plain, "--cluster", "1x4:V100", "--set", f"gpu_types={value}")
    assert err.startswith(f"error: --set gpu_types={value}: setting 'gpu_types' {problem}"), err


def test_names_and_none_are_accepted(tmp_path):
    for value, known in (('""', ()), ('"H100-SXM_80"', ("H100-SXM_80",)), ("T4", ("T4",))):
        graph = _graph(tmp_path, head=f"gpu_types = {value};\n")
        assert gpu_types(compile_file(graph))[3:] == known


@pytest.mark.parametrize(
    "chain", ["Fifo(backfill=true) -> FirstFree", "Las -> Consolidated", "MaxMinFairness -> GavelRounds -> GavelPlacer"]
)
def test_a_job_known_by_its_model_is_never_placed_on_a_type_it_names(tmp_path, chain):
    # Two ResNet-18 jobs and one V100: they run there alone though four T4s are free most of the
    # time (under Fifo the second waits for the first); the jobs known by their duration may run on either.
    trace = (
        "job_id,arrival_s,gpus,model,iterations,duration_s\n"
        "0,0,1,ResNet-18,20000,\n"
        "1,0,1,ResNet-18,20000,\n"
        "2,0,4,,,600\n"
        "3,0,1,,,600\n"
    )
    graph = _graph(tmp_path, trace, 'gpu_types = "T4";\ncluster = "1x1:V100,1x4:T4";\n', chain)
    seen, jobs = _run(graph)
    assert seen[0] == {"V100"} and seen[1] == {"V100"} and seen[2] == {"T4"} and seen.keys() == {0, 1, 2, 3}
    finish = dict(zip(jobs.column("job_id").tolist(), jobs.column("finish_s").tolist()))
    assert all(f > 0 for f in finish.values())
    if chain.startswith("Fifo"):  # (the others may share the V100 between the two in turn)
        start = dict(zip(jobs.column("job_id").tolist(), jobs.column("first_start_s").tolist()))
        assert start[1] >= finish[0]


def test_a_job_known_by_its_model_with_only_named_types_to_run_on_is_refused(tmp_path):
    trace = "job_id,arrival_s,gpus,model,iterations,duration_s\n0,0,1,,,600\n1,9000,1,ResNet-18,1000,\n"
    graph = _graph(tmp_path, trace, 'gpu_types = "T4";\ncluster = "1x4:T4";\n')
    rounds = []
    with pytest.raises(TraceError) as err:
        simulate(compile_file(graph), on_round=rounds.append)
    assert not rounds
    assert "job 1: the profile has no throughput for ResNet-18" in str(err.value)
    assert "T4 is a type the throughput profile lacks, where only jobs known by their duration run" in str(err.value)


def test_jobs_known_by_model_are_told_of_profile_rows_first(tmp_path, capsys):
    trace = "job_id,arrival_s,gpus,model,iterations,duration_s\n0,0,1,ResNet-18,1000,\n1,0,1,,,600\n"
    graph = _graph(tmp_path, trace)
    err = fails(capsys, "run", graph, "--cluster", "1x4:V100,1x4:T4")
    advice = err.split("named outside the cluster too: ")[1]
    assert advice.startswith("give the profile rows on it (a job known by its model runs only where the profile gives its speed)")
    assert 'or set gpu_types = "T4" (--set gpu_types=T4) for the jobs known only by their durations' in advice
    # Done: the model job runs on the V100, the other anywhere.
    graph.write_text('gpu_types = "T4";\n' + graph.read_text())
    seen, _ = _run(graph, "1x1:V100,1x4:T4")
    assert seen[0] == {"V100"} and seen.keys() == {0, 1}


def test_it_is_a_setting_of_the_world_and_listed_with_the_others(tmp_path):
    from roundhouse.runtime.settings import SETTING_DOCS

    assert "gpu_types" in WORLD_SETTINGS and "gpu_types" in SETTING_DOCS
    # A graph's cluster given as a setting is checked against it as the flag is.
    graph = _graph(tmp_path, head=f'gpu_types = "A100";\ncluster = "{CLUSTER}";\n')
    with pytest.raises(SchedError, match="setting 'cluster': bad cluster '2x4:A100,2x4:T4': unknown GPU type 'T4'"):
        load_cluster(compile_file(graph), None)


def test_a_simulation_keeps_it_and_whatif_refuses_another(tmp_path, capsys):
    from roundhouse import Simulation

    graph = _graph(tmp_path)
    sim = Simulation(graph, cluster=CLUSTER, gpu_types="A100,T4")
    path = sim.run_until(600).save(tmp_path / "s.snap")
    loaded = Simulation.load(path)
    loaded.run()
    assert loaded.jobs()["finish_s"].is_not_null().sum() == 5
    # The world was built with it: the other graph of a what-if goes on from that world.
    assert "--set gpu_types=T4: the snapshot's gpu_types is its own" in fails(capsys, "whatif", path, "--set", "gpu_types=T4")


KEYED = """round = 5min;
cluster = "4x8:V100";
src :: PoissonSource(rate=8/h, jobs=10, seed=0);
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""


def test_a_graph_leaving_it_unset_keeps_the_key_its_journals_and_snapshots_were_made_with():
    # (this graph's key as the code gave it before the setting existed: a live run's journal or a
    # snapshot made then names it, and must still be matched with the graph)
    assert compile_file("k.sched", text=KEYED).key() == "2c2028fabed5cc47"
    named = compile_file("k.sched", text='gpu_types = "A100";\n' + KEYED).key()
    assert named != "2c2028fabed5cc47"


def test_text_settings_take_a_list_written_without_quotes_on_the_command_line(tmp_path, capsys):
    """A setting whose value is text takes what the language cannot read otherwise as written
    (a list of types, a cluster spec with commas); other settings and element arguments do not."""
    graph = _graph(tmp_path)
    out = tmp_path / "out"
    assert main(["run", str(graph), "--cluster", CLUSTER, "--set", "gpu_types=A100,T4", "--quiet", "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["settings"]["gpu_types"] == "A100,T4"
    args = ["run", str(graph), "--set", f"cluster={CLUSTER}", "--set", "gpu_types=A100,T4", "--quiet"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["run", str(graph), "--set", "round=5min,6min", "--quiet"]) == 2
    assert "error: --set round=5min,6min: bad value" in capsys.readouterr().err
    assert main(["run", str(graph), "--cluster", CLUSTER, "--set", "gpu_types=A100,T4", "--set", "src.path=a,b"]) == 2
    assert "error: --set src.path=a,b: bad value" in capsys.readouterr().err


def test_a_type_a_spec_file_may_name_may_be_named_in_gpu_types(tmp_path, capsys):
    """A spec file's `gpu_type` is any name an agent may register (`3090`, `A100.80GB`): the
    refusal of a cluster holding one advises naming it in gpu_types, which must then take it."""
    (tmp_path / "mine.toml").write_text('[[group]]\nnodes = 1\ngpus_per_node = 4\ngpu_type = "3090"\n')
    (tmp_path / "jobs.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n1,0,2,60\n")
    (tmp_path / "g.sched").write_text(
        'cluster = "mine.toml";\ngpu_types = "3090,A100.80GB";\nsrc :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    from roundhouse.tools.cli import main

    assert main(["run", str(tmp_path / "g.sched"), "--quiet", "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "jobs.csv").read_text().count("\n") == 3
