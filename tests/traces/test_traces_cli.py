"""`roundhouse trace describe | convert | generate` through `tools.cli.main`."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


def test_describe_sample(capsys):
    assert main(["trace", "describe", str(SAMPLES / "philly-1000.csv")]) == 0
    out = capsys.readouterr().out
    for words in ("jobs", "1,000", "jobs/hour", "GPUs per job", "1: ", "median", "ResNet-18", "columns"):
        assert words in out


def test_describe_reports_skipped_records(capsys):
    assert main(["trace", "describe", str(SAMPLES / "philly-cluster-job-log-50.json"), "--format", "philly"]) == 0
    assert "never ran" in capsys.readouterr().out


def test_describe_bad_file_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,10\n1,5,four,10\n")
    assert main(["trace", "describe", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: error: column 'gpus': 'four' is not a whole number" in err
    assert "Traceback" not in err
    assert main(["trace", "describe", str(tmp_path / "missing.csv")]) == 2
    assert main(["trace", "describe", str(path), "--format", "gavl"]) == 2
    assert "did you mean 'gavel'" in capsys.readouterr().err


def test_convert_between_formats(tmp_path, capsys):
    source = SAMPLES / "gavel-50.trace"
    assert main(["trace", "convert", str(source), str(tmp_path / "g.csv")]) == 0
    assert read_trace(tmp_path / "g.csv").equals(read_trace(source))
    assert main(["trace", "convert", str(tmp_path / "g.csv"), str(tmp_path / "g2.trace")]) == 0
    assert (tmp_path / "g2.trace").read_text() == source.read_text()
    assert main(["trace", "convert", str(SAMPLES / "philly-1000.csv"), str(tmp_path / "t.csv"), "--to", "tiresias"]) == 0
    assert read_trace(tmp_path / "t.csv").height == 1000
    assert main(["trace", "convert", str(SAMPLES / "philly-cluster-job-log-50.json"), str(tmp_path / "p.parquet")]) == 0
    assert "skipped" in capsys.readouterr().out
    # Durations only: a Gavel trace cannot be written without models.
    assert main(["trace", "convert", str(SAMPLES / "philly-single-200.csv"), str(tmp_path / "x.trace")]) == 2
    assert "no model" in capsys.readouterr().err


def test_convert_says_what_a_format_cannot_keep_and_tiresias_keeps_the_rest(tmp_path, capsys):
    source = tmp_path / "c.csv"
    source.write_text(
        "job_id,arrival_s,gpus,duration_s,model,batch_size,user,weight,cpus\n"
        "5,0.4,1,100.6,ResNet-18,64,alice,2.5,3\n7,10.5,2,200,ResNet-50,32,bob,1,4\n"
    )
    assert main(["trace", "convert", str(source), str(tmp_path / "c.trace")]) == 0
    err = capsys.readouterr().err
    assert "note: left out, as a Gavel trace has no field for them: user, cpus" in err
    assert "note: job ids not kept" in err
    assert main(["trace", "convert", str(source), str(tmp_path / "t.csv"), "--to", "tiresias"]) == 0
    assert "note: arrival times rounded to whole numbers" in capsys.readouterr().err
    back = read_trace(tmp_path / "t.csv", "tiresias")
    assert back["job_id"].to_list() == [5, 7] and back["user"].to_list() == ["alice", "bob"]
    assert back["weight"].to_list() == [2.5, 1.0] and back["cpus"].to_list() == [3.0, 4.0]
    # A column named as one of Tiresias' own is left out, and said to be.
    clash = tmp_path / "clash.csv"
    clash.write_text("job_id,arrival_s,gpus,duration_s,interval\n0,0,1,10,5\n")
    assert main(["trace", "convert", str(clash), str(tmp_path / "t2.csv"), "--to", "tiresias"]) == 0
    assert "note: left out, as Tiresias' own columns have these names: interval" in capsys.readouterr().err
    # Canonical to canonical keeps everything and says nothing.
    assert main(["trace", "convert", str(source), str(tmp_path / "same.csv")]) == 0
    assert "note:" not in capsys.readouterr().err


def test_the_ones_artifact_trace_is_a_format_and_every_format_is_a_trace_source_s(tmp_path):
    from roundhouse.elements.sources import TraceSource
    from roundhouse.traces.formats import FORMATS, load_trace

    path = tmp_path / "trace.csv"
    path.write_text(
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
        "0,resnet50,imagenet,10000,10,32,5.00E-04,0.008,0.55,4\n"
    )
    loaded = load_trace(path)
    assert loaded.format == "ones" and loaded.frame["model"].to_list() == ["resnet50-imagenet"]
    for name in ("auto", *FORMATS):
        TraceSource(path=str(path), format=name)  # accepted: every format a trace file can be in


def test_generate(tmp_path):
    out = tmp_path / "g.parquet"
    assert main(["trace", "generate", "-o", str(out), "--jobs", "30", "--rate", "2/min", "--seed", "3"]) == 0
    df = read_trace(out)
    assert df.height == 30 and df["model"].null_count() == 30


@pytest.mark.parametrize(
    "args, words",
    [
        (["--jobs", "many"], "--jobs must be a whole number, got 'many'"),
        (["--jobs", "0"], "--jobs must be 1 or more"),
        (["--rate", "8 per hour"], "--rate"),
        (["--rate", "8/week"], "unknown time unit"),
        (["--rate", "0/h"], "more than 0"),
        (["--seed", "-1"], "--seed must be 0 or more"),
        (["--gpus", "singel"], "did you mean 'single'"),
        (["--models", "gavel"], "--models must be one of none, blox"),
        (["--format", "csv"], "--format must be one of"),
        (["--format", "gavel"], "needs --models blox"),
        # A workload with models of its own is not told to add --models.
        (["--format", "gavel", "--workload", "tiresias"], "--workload tiresias cannot be written as --format gavel"),
        (["--format", "philly", "--models", "blox"], "cluster_job_log"),
    ],
)
def test_generate_bad_values_exit_2(tmp_path, capsys, args, words):
    base = {"--jobs": "10", "--rate": "8/h", "--seed": "0"}
    extra = []
    for i in range(0, len(args), 2):
        if args[i] in base:
            base[args[i]] = args[i + 1]
        else:
            extra += args[i : i + 2]
    argv = ["trace", "generate", "-o", str(tmp_path / "x.csv")] + [x for kv in base.items() for x in kv] + extra
    assert main(argv) == 2
    assert words in capsys.readouterr().err
