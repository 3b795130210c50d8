"""Bad input a review found passing or said unclearly: a pair profile read only days into a run,
an unknown reference GPU type taken silently, byte offsets for undecodable bytes, and a Boolean
column read as a number."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import ClusterError, SchedError, TraceError
from roundhouse.runtime.cluster import ClusterSpec
from roundhouse.runtime.compiler import Override, compile_file, compile_graph
from roundhouse.runtime.dsl.loader import load
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace
from tests.conftest import REPO, fails

# --- a pair profile is read, and refused, when the run is set up ---

# Gavel's makespan policy with space sharing over a batch that arrives within days: the pair
# profile is first read when the solver first pairs two jobs.
SPACE_SHARING = """pair_profile = "{pairs}";
round = 6min;
cluster = "{cluster}";
arrivals :: PoissonSource(rate=1/d, jobs=4, gpus=philly, models=blox, seed=0);
arrivals -> AcceptAll -> JobPool -> MinMakespan(space_sharing=true) -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;
"""


def _space_sharing(tmp_path: Path, pairs: str) -> Path:
    graph = tmp_path / "g.sched"
    graph.write_text(SPACE_SHARING.format(pairs=pairs, cluster=REPO / "clusters" / "gavel-simulated.toml"))
    return graph


@pytest.mark.parametrize(
    "contents, message",
    [
        (b"\xffA", "is not UTF-8 text (byte 0xff at line 1, column 1 cannot be decoded)"),
        # (a throughput profile given as the pair profile)
        ((REPO / "traces" / "profiles" / "gavel.csv").read_bytes(), "missing column 'model_a'"),
        (b"model_a,batch_a,model_b,batch_b,gpu_type,gpus,iters_a,iters_b\nResNet-18,16,LM,5,V100,1,-1,2\n", "column 'iters_a'"),
    ],
    ids=["not-utf8", "throughput-profile", "negative-rate"],
)
def test_a_bad_pair_profile_is_refused_by_check_at_the_setting(tmp_path, capsys, contents, message):
    (tmp_path / "pairs.csv").write_bytes(contents)
    graph = _space_sharing(tmp_path, "pairs.csv")
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:1:16: error: setting 'pair_profile': ") and message in err
    assert 'pair_profile = "pairs.csv";' in err  # (the setting's line, quoted)


def test_a_bad_pair_profile_stops_a_run_before_it_starts(tmp_path, capsys):
    (tmp_path / "pairs.csv").write_bytes(b"\xd0")
    graph = _space_sharing(tmp_path, "pairs.csv")
    err = fails(capsys, "run", graph, "--out", tmp_path / "out", "--quiet")
    assert err.startswith(f"{graph}:1:16: error: setting 'pair_profile': ")
    assert not (tmp_path / "out" / "jobs.csv").exists()


def test_a_bad_pair_profile_given_on_the_command_line_names_the_option(tmp_path, capsys):
    (tmp_path / "pairs.csv").write_bytes(b"\xd0")
    graph = _space_sharing(tmp_path, str(REPO / "traces" / "profiles" / "gavel-pairs.csv"))
    err = fails(
        capsys, "sweep", graph, "--vary", f"pair_profile={json.dumps(str(tmp_path / 'pairs.csv'))}", "--out", tmp_path / "sw"
    )
    assert "--vary pair_profile: " in err and "is not UTF-8 text (byte 0xd0 at line 1, column 1" in err
    assert not (tmp_path / "sw").exists()


def test_a_good_pair_profile_is_read_when_the_world_is_made(tmp_path):
    from roundhouse.traces.pairs import PairTable

    shipped = REPO / "traces" / "profiles" / "gavel-pairs.csv"
    (tmp_path / "pairs.csv").write_bytes(shipped.read_bytes())
    graph = compile_file(str(_space_sharing(tmp_path, "pairs.csv")))
    result = simulate(graph, until=0)
    assert isinstance(result.world.throughput._pairs, PairTable)  # (read already, not a path)
    # Without the setting nothing is read until two jobs share GPUs.
    plain = tmp_path / "plain.sched"
    plain.write_text("\n".join(_space_sharing(tmp_path, "pairs.csv").read_text().splitlines()[1:]) + "\n")
    assert simulate(compile_file(str(plain)), until=0).world.throughput._pairs is None


# --- reference_gpu ---

TRACE_GRAPH = """round = 5min;
cluster = "2x4:{cluster}";
{setting}arrivals :: TraceSource(path="t.csv");
arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""


def _trace_graph(tmp_path: Path, rows: str, reference: str | None, cluster: str = "K80") -> Path:
    (tmp_path / "t.csv").write_text(rows)
    setting = f'reference_gpu = "{reference}";\n' if reference is not None else ""
    graph = tmp_path / "g.sched"
    graph.write_text(TRACE_GRAPH.format(cluster=cluster, setting=setting))
    return graph


MODEL_AND_DURATION = "job_id,arrival_s,gpus,duration_s,model,batch_size\n0,0,1,1000,ResNet-18,16\n"


@pytest.mark.parametrize("reference", ["V-100", "nonsense", ""])
def test_an_unknown_reference_gpu_is_refused_at_the_setting(tmp_path, capsys, reference):
    graph = _trace_graph(tmp_path, MODEL_AND_DURATION, reference)
    err = fails(capsys, "check", graph)
    assert err.startswith(
        f"{graph}:3:17: error: setting 'reference_gpu': {reference!r} is not a GPU type of the throughput profile"
    )
    assert "(its types: V100, P100, K80)" in err and "job 0 (model ResNet-18)" in err
    assert "error" in fails(capsys, "run", graph, "--out", tmp_path / "out", "--quiet")


def test_an_unknown_reference_gpu_given_with_set_names_the_option(tmp_path, capsys):
    graph = _trace_graph(tmp_path, MODEL_AND_DURATION, None)
    err = fails(capsys, "run", graph, "--set", "reference_gpu=nonsense", "--out", tmp_path / "out", "--quiet")
    assert "--set reference_gpu: 'nonsense' is not a GPU type of the throughput profile" in err


def test_a_jobs_model_with_iterations_also_needs_the_reference_type(tmp_path):
    graph = _trace_graph(tmp_path, "job_id,arrival_s,gpus,iterations,model\n0,0,1,1000,ResNet-18\n", "H100")
    with pytest.raises(SchedError, match="for its reference speed"):
        simulate(compile_file(str(graph)), until=0)


def test_a_known_reference_gpu_in_any_case_gives_the_same_run(tmp_path):
    runs = []
    for reference in ("V100", "v100"):
        folder = tmp_path / reference
        folder.mkdir()
        graph = _trace_graph(folder, MODEL_AND_DURATION, reference)
        runs.append(simulate(compile_file(str(graph))).world.jobs.column("work").copy())
    assert np.array_equal(runs[0], runs[1])


def test_jobs_known_only_by_duration_accept_any_reference_gpu(tmp_path):
    graph = _trace_graph(tmp_path, "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n", "A100", cluster="A100")
    result = simulate(compile_file(str(graph)))
    assert result.world.jobs.column("work")[0] == 100


# --- undecodable bytes said by their value and place ---


def test_an_undecodable_byte_in_a_trace_is_said_by_value_line_and_column(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_bytes(b"job_id,arrival_s,gpus,duration_s,model\n0,0,1,100,ResNet\xd0\n")
    with pytest.raises(TraceError) as got:
        read_trace(trace)
    assert str(got.value) == f"{trace}:2: error: is not UTF-8 text (byte 0xd0 at line 2, column 17 cannot be decoded)"


def test_an_undecodable_byte_in_a_json_trace_is_said_by_value_line_and_column(tmp_path):
    from roundhouse.traces.csvtext import read_json_list

    path = tmp_path / "t.json"
    path.write_bytes(b'[\n {"a": "\xe9"}]\n')
    with pytest.raises(TraceError, match=r"byte 0xe9 at line 2, column 9 cannot be decoded"):
        read_json_list(str(path), "a job list")


def test_an_undecodable_byte_in_a_cluster_spec_is_said_by_value_line_and_column(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes('\ufeffname = "x"\n# é\xd0\n'.encode("utf-8").replace(b"\xc3\x90", b"\xd0"))
    with pytest.raises(ClusterError, match=r"byte 0xd0 at line 2, column 4 cannot be decoded"):
        ClusterSpec.from_toml(path)


# --- a jobs.csv that holds nan ---


def test_a_jobs_csv_holding_nan_says_so(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,10,1,100\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "1x4:V100";\nTraceSource(path="{trace}") -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n'
    )
    out = tmp_path / "out"
    assert main(["run", str(graph), "--out", str(out), "--quiet"]) == 0
    jobs = pl.read_csv(out / "jobs.csv").with_columns(pl.col("arrival_s").cast(pl.Float64))
    jobs.with_columns(
        pl.when(pl.col("job_id") == 1).then(float("nan")).otherwise(pl.col("arrival_s")).alias("arrival_s")
    ).write_csv(out / "jobs.csv")
    err = fails(capsys, "report", out, "--output", tmp_path / "r.html")
    assert "jobs.csv:3: column 'arrival_s' holds nan (not a number)" in err and "cut short" not in err


# --- a cluster spec with [group] for [[group]] ---


def test_a_single_group_table_gets_a_hint(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[group]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "V100"\n')
    with pytest.raises(ClusterError, match=r"\[group\] is a single table; groups are written \[\[group\]\]"):
        ClusterSpec.from_toml(path)
    path.write_text('name = "x"\n')  # (no group at all: no such hint)
    with pytest.raises(ClusterError) as got:
        ClusterSpec.from_toml(path)
    assert "single table" not in str(got.value)


# --- submit names the option that is wrong ---


@pytest.mark.parametrize(
    "extra, message, other",
    [
        (["--gpus", "0"], "--gpus 0: must be at least 1", "--count"),
        (["--count", "0"], "--count 0: must be 1 to 100,000", "--gpus"),
    ],
)
def test_submit_names_only_the_option_that_is_wrong(capsys, extra, message, other):
    err = fails(capsys, "submit", "tcp://127.0.0.1:1", "--insecure", "--model", "LM", "--iterations", "5", *extra)
    assert message in err and other not in err


# --- TiresiasGittins(history=...) at the argument ---


def test_a_bad_gittins_history_is_said_at_the_argument(tmp_path):
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    (tmp_path / "h.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,abc\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x4:V100";\n'
        'TraceSource(path="t.csv") -> JobPool -> TiresiasGittins(history="h.csv") -> Consolidated -> Launch -> JobMetrics;\n'
    )
    with pytest.raises(SchedError) as got:
        compile_file(str(graph))
    text = str(got.value)
    assert text.startswith(f"{graph}:3:65: error: argument 'history' of TiresiasGittins") and "h.csv:2" in text
    assert "'abc' is not a number" in text
    (tmp_path / "h.csv").write_text("job_id,arrival_s,gpus,duration_s\n")  # (no jobs)
    with pytest.raises(SchedError, match="argument 'history' of TiresiasGittins .*needs at least one job"):
        compile_file(str(graph))


def test_a_bad_gittins_history_given_with_set_names_the_option(tmp_path):
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    (tmp_path / "h.csv").write_text("x\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x4:V100";\n'
        'TraceSource(path="t.csv") -> JobPool -> g :: TiresiasGittins -> Consolidated -> Launch -> JobMetrics;\n'
    )
    with pytest.raises(SchedError) as got:
        compile_graph(load(str(graph)), [Override(f"g.history={json.dumps(str(tmp_path / 'h.csv'))}")])
    assert str(got.value).startswith("error: --set g.history=") and "argument 'history' of TiresiasGittins" in str(got.value)


# --- a Boolean column where a number is expected ---


@pytest.mark.parametrize("column", ["gpus", "duration_s", "arrival_s", "job_id"])
def test_a_boolean_column_in_a_parquet_trace_is_refused(tmp_path, column):
    frame = {"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1, 2], "duration_s": [100.0, 200.0]}
    frame[column] = [True, False]
    path = tmp_path / "t.parquet"
    pl.DataFrame(frame).write_parquet(path)
    with pytest.raises(TraceError) as got:
        read_trace(path)
    assert str(got.value) == f"{path}: error: column '{column}': holds true/false (Boolean) values, expected numbers"


# --- an empty path ---------------------------------------------------------------------------
@pytest.mark.parametrize("setting", ["profile", "pair_profile", "elastic_profile"])
def test_an_empty_path_is_refused_at_the_setting(tmp_path, capsys, setting):
    """An empty path is not the graph's own folder (before: `elastic_profile = "";` read the
    folder and failed later with a message naming only "."; `profile = "";` said it names a folder)."""
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 60s;\ncluster = "2x4:V100";\n{setting} = "";\n'
        "PoissonSource(rate=4/h, jobs=4, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    err = fails(capsys, "check", str(graph))
    assert f"{graph}:3:{len(setting) + 4}: error: setting '{setting}' expects a file path in quotes" in err, err
    assert 'got ""' in err
