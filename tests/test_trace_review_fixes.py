"""Trace writers and readers refuse what they cannot keep with one clear sentence (exit status
2, never a traceback or a file their own reader refuses), keep what they can (a Gavel SLO of
a job known by its iterations), and a job no GPU type of the cluster can run is refused
before the run rather than left waiting."""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.cluster import Cluster
from roundhouse.tools.cli import main
from roundhouse.traces import ones, pai
from roundhouse.traces.formats import read_trace
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.schema import validate
from roundhouse.traces.throughput import ThroughputModel
from tests.conftest import fails as fails_plainly

CANONICAL = "job_id,arrival_s,gpus,model,iterations,duration_s,slo_s,command"


def canonical(tmp_path: Path, *rows: str, header: str = CANONICAL) -> Path:
    path = tmp_path / "in.csv"
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows))
    return path


def fails(args: list[str], capsys, *words: str) -> str:
    """The command line exits 2, without a traceback, with every one of `words` in its message."""
    err = fails_plainly(capsys, *args)
    assert all(word in err for word in words), (words, err)
    return err


# --- numbers no 64-bit integer holds -------------------------------------------------------------


@pytest.mark.parametrize(
    "row, to, column, field",
    [
        ("0,0,1,LM,1e19,,,", "tiresias", "iterations", "iterations"),
        ("0,0,1,LM,1e19,,,", "gavel", "iterations", "total_steps"),
    ],
)
def test_writers_refuse_numbers_beyond_a_64_bit_integer(tmp_path, capsys, row, to, column, field):
    out = tmp_path / ("out.trace" if to == "gavel" else "out.csv")
    fails(
        ["trace", "convert", str(canonical(tmp_path, row)), str(out), "--to", to],
        capsys,
        f"{out}: error: column '{column}': job 0:",
        f"too large to write as {field}",
    )
    assert not out.exists()


@pytest.mark.parametrize(
    "row, column",
    [("0,1e308,1,LM,,100,,", "arrival_s"), ("0,0,1,LM,100,1e300,,", "duration_s"), ("0,0,1,LM,,1e300,,", "duration_s")],
)
def test_times_beyond_a_century_are_refused_as_the_trace_is_read(tmp_path, capsys, row, column):
    # (Before any writer: a run would otherwise count rounds toward them for ever.)
    for to in ("tiresias", "gavel"):
        out = tmp_path / ("out.trace" if to == "gavel" else "out.csv")
        fails(
            ["trace", "convert", str(canonical(tmp_path, row)), str(out), "--to", to],
            capsys,
            f"in.csv:2: error: column '{column}': must be at most 3.1536e+09 s (a century)",
        )
        assert not out.exists()


def test_iterations_that_would_take_more_than_a_century_are_refused_before_the_run(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,model,iterations\n0,0,1,ResNet-50,1e18\n1,0,1,ResNet-50,1e6\n")
    graph = Path(__file__).parents[1] / "graphs" / "las.sched"
    fails(
        ["run", str(graph), "--trace", str(trace)],
        capsys,
        f"{trace}: error: column 'iterations': job 0: 1e+18 iterations of 'ResNet-50' take",
        "more than a century",
    )


def test_tiresias_blames_iterations_for_a_duration_derived_from_them(tmp_path, capsys):
    # 1e19 iterations at LM's V100 throughput still fit; 1e25 give a duration beyond int64.
    out = tmp_path / "out.csv"
    fails(
        ["trace", "convert", str(canonical(tmp_path, "0,0,1,LM,1e25,,,")), str(out), "--to", "tiresias"],
        capsys,
        "column 'iterations'",
    )


def test_writers_still_round_numbers_that_fit(tmp_path):
    source = canonical(tmp_path, "0,1e9,1,LM,1e18,1000,,")
    assert main(["trace", "convert", str(source), str(tmp_path / "t.csv"), "--to", "tiresias"]) == 0
    assert read_trace(tmp_path / "t.csv", "tiresias")["iterations"].to_list() == [1e18]
    assert main(["trace", "convert", str(source), str(tmp_path / "g.trace")]) == 0
    assert read_trace(tmp_path / "g.trace")["iterations"].to_list() == [1e18]


# --- Gavel: tabs and line breaks inside fields -----------------------------------------------------


@pytest.mark.parametrize(
    "row, column",
    [
        ('1,0,1,"Foo\tBar",100,,,x', "model"),
        ('1,0,1,LM,100,,,"run\there"', "command"),
        ('1,0,1,LM,100,,,"run\nthere"', "command"),
        ('1,0,1,LM,100,,,"run\rthere"', "command"),
    ],
)
def test_gavel_writer_refuses_tabs_and_line_breaks_in_fields(tmp_path, capsys, row, column):
    out = tmp_path / "out.trace"
    source = canonical(tmp_path, "0,0,1,LM,100,,,ok", row)
    fails(["trace", "convert", str(source), str(out)], capsys, f"column '{column}': job 1:", "tab or line break")
    assert not out.exists()


def test_gavel_writer_refuses_a_working_directory_with_a_tab(tmp_path, capsys):
    source = canonical(tmp_path, '0,0,1,LM,100,"a\tb"', header="job_id,arrival_s,gpus,model,iterations,working_directory")
    fails(["trace", "convert", str(source), str(tmp_path / "out.trace")], capsys, "column 'working_directory': job 0:")


# --- Gavel: an SLO of a job known by its iterations ---------------------------------------------


def test_gavel_keeps_the_slo_of_a_job_given_by_iterations(tmp_path, capsys):
    source = canonical(tmp_path, "0,0,1,LM,1000,,3600,")
    out = tmp_path / "slo.trace"
    assert main(["trace", "convert", str(source), str(out)]) == 0
    assert "slo_s" not in capsys.readouterr().err
    profile = ProfileTable.load()
    rate = float(profile.rates(["LM"], [profile.default_batch_size("LM")], "V100", [1])[0])
    factor = float(out.read_text().split("\t")[8])
    assert factor == pytest.approx(3600 / (1000 / rate))
    # Read back, the simulator's deadline (the factor times steps at the V100 rate) is the SLO.
    back = read_trace(out)
    assert back["slo_factor"][0] * back["iterations"][0] / rate == pytest.approx(3600)


def test_gavel_says_when_it_cannot_keep_an_slo(tmp_path, capsys):
    # A model the profile does not know, given by iterations: no duration to take a factor of.
    source = canonical(tmp_path, "0,0,1,Mystery,1000,,3600,", "1,0,1,LM,1000,,3600,")
    out = tmp_path / "slo.trace"
    assert main(["trace", "convert", str(source), str(out)]) == 0
    assert "note: slo_s left out for job(s) 0:" in capsys.readouterr().err
    assert [line.split("\t")[8] for line in out.read_text().splitlines()][0] == "-1"


# --- ONES: a tiny learning rate ------------------------------------------------------------------


def test_ones_tiny_lr_converts_without_a_warning(tmp_path):
    path = tmp_path / "ones.csv"
    path.write_text(
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
        "0,resnet50,imagenet,10000,10,32,1e-320,0.008,0.55,16\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = ones.read_trace(path)
    assert frame["max_batch_size"][0] == 2.0**53


# --- PAI: a fractional instance count ------------------------------------------------------------


def test_pai_fractional_inst_num_is_named_itself(tmp_path):
    path = tmp_path / "pai_task_table.csv"
    path.write_text("j1,t,1.5,Terminated,1000,2000,600,29.3,50,V100\n")
    with pytest.raises(TraceError) as err:
        pai.read(path)
    assert err.value.column == "inst_num" and err.value.row == 1
    assert "1.5 is not a whole number" in str(err.value)


# --- a job no GPU type of the cluster can run ----------------------------------------------------


def test_job_with_no_throughput_on_any_cluster_type_is_refused():
    profile = ProfileTable.load()
    cluster = Cluster.parse("4x1:K80", profile.gpu_types)
    model = ThroughputModel(profile, cluster)
    trace = validate(_frame({"job_id": [0, 1], "gpus": [2, 1], "model": ["ResNet-50", "A3C"], "batch_size": [128, 4]}), "t")
    # The reference type (V100, absent here) has a rate for job 0; K80, the only type, has none.
    assert profile.rates(["ResNet-50"], [128], "V100", [2])[0] > 0
    assert not profile.rates(["ResNet-50"], [128], "K80", [2])[0] > 0
    with pytest.raises(
        TraceError,
        match=r"job 0: the profile has no throughput for ResNet-50 \(batch size 128\) "
        r"on 2 GPU\(s\) of any type in this cluster \(K80\)",
    ):
        prepare_jobs(trace, model, "V100", cluster.n_gpus, "t")
    # A job that runs on the cluster's type is still prepared.
    ok = validate(_frame({"job_id": [0], "gpus": [1], "model": ["A3C"], "batch_size": [4]}), "t")
    batch, _ = prepare_jobs(ok, model, "V100", cluster.n_gpus, "t")
    assert batch.columns["reference_rate"][0] > 0 and batch.type_rates[0, 0] > 0


def _frame(columns: dict) -> pl.DataFrame:
    return pl.DataFrame({"arrival_s": [0.0] * len(columns["job_id"]), "iterations": [100.0] * len(columns["job_id"]), **columns})


def test_a_job_whose_only_usable_type_is_too_small_is_refused_when_read(tmp_path, capsys):
    """ResNet-50 at batch size 128 has no K80 throughput: on four K80s and two V100s, a job of
    four GPUs could run on no type (the one large enough cannot run it), so it would wait forever."""
    from roundhouse.tools.cli import main

    (tmp_path / "t.csv").write_text(
        "job_id,arrival_s,gpus,model,batch_size,iterations\n0,0,1,ResNet-50,128,100\n1,0,4,ResNet-50,128,100\n"
    )
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 6min;\ncluster = "4x1:K80,2x1:V100";\nt :: TraceSource(path="t.csv");\n'
        "t -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["run", str(graph), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        "job 1 asks for 4 GPUs of one type, and no GPU type of this cluster has that many with a throughput for "
        "ResNet-50 at batch size 128: K80 has 4 but no throughput for it, V100 has 2" in err
    )
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,model,batch_size,iterations\n1,0,2,ResNet-50,128,100\n")
    assert main(["run", str(graph), "--quiet"]) == 0  # two fit on the V100s
