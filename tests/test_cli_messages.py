"""What the command line says about bad input: where it was given, in one form, and early."""

import re

import pytest

from tests.conftest import REPO, fails

GRAPH = """round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=0);
arrivals -> JobPool -> order :: Las -> Consolidated -> Launch -> report :: JobMetrics;
"""


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH)
    return path


# --- GPU types the throughput profile does not know ---


def test_check_refuses_an_unknown_gpu_type_at_the_setting(graph, capsys):
    graph.write_text(GRAPH.replace("2x4:V100", "32x4:NOPE"))
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:2:11: error: setting 'cluster': ")
    assert "unknown GPU type 'NOPE'; known: V100, P100, K80" in err
    assert "ok" not in err + capsys.readouterr().out


def test_an_unknown_gpu_type_in_a_cluster_file_names_the_file_and_the_setting(graph, tmp_path, capsys):
    spec = tmp_path / "c.toml"
    spec.write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\n\n[[group]]\nnodes = 1\ngpus_per_node = 4\ngpu_type = "V10"\n')
    graph.write_text(GRAPH.replace("2x4:V100", "c.toml"))
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:2:11: error: setting 'cluster': {spec}: [[group]] #2: unknown GPU type 'V10'")
    assert "did you mean 'V100'?" in err
    err = fails(capsys, "run", graph, "--cluster", spec)
    assert err.startswith(f"{spec}: error: [[group]] #2: unknown GPU type 'V10'")


def test_run_names_the_flag_for_an_unknown_gpu_type(capsys):
    err = fails(capsys, "run", REPO / "graphs" / "las.sched", "--cluster", "32x4:NOPE")
    assert err.startswith("error: --cluster: bad cluster '32x4:NOPE': unknown GPU type 'NOPE'; known: V100, P100, K80")
    err = fails(capsys, "run", REPO / "graphs" / "las.sched", "--set", 'cluster="32x4:NOPE"')
    assert err.startswith("error: --set cluster: bad cluster '32x4:NOPE': unknown GPU type 'NOPE'")
    err = fails(capsys, "sweep", REPO / "graphs" / "las.sched", "--cluster", "32x4:NOPE", "--vary", "round=5min,10min")
    assert err.startswith("error: --cluster: bad cluster '32x4:NOPE': unknown GPU type 'NOPE'")


def test_a_duration_trace_on_an_unknown_gpu_type_is_refused_too(capsys):
    # Tiresias' trace runs by duration; NOPE is neither in the profile nor the reference type.
    err = fails(capsys, "run", REPO / "graphs" / "tiresias.sched", "--cluster", "15x4:NOPE", "--until", "2h")
    assert "--cluster: bad cluster '15x4:NOPE': unknown GPU type 'NOPE'" in err


# --- where a value came from ---


def test_a_trace_folder_gets_the_same_message_from_run_and_describe(graph, tmp_path, capsys):
    folder = tmp_path / "adir"
    folder.mkdir()
    graph.write_text(GRAPH.replace("PoissonSource(rate=8/h, jobs=5, seed=0)", 'TraceSource(path="t.csv")'))
    from_run = fails(capsys, "run", graph, "--trace", folder)
    from_describe = fails(capsys, "trace", "describe", folder)
    assert from_run == from_describe == f"{folder}: error: is a folder, not a trace file\n"
    assert fails(capsys, "run", graph, "--trace", tmp_path / "none.csv") == f"{tmp_path / 'none.csv'}: error: no such file\n"


def test_sweep_names_vary_for_a_bad_varied_value(graph, capsys):
    err = fails(capsys, "sweep", graph, "--vary", "order.backfill=true,maybe")
    assert err.startswith("error: --vary order.backfill=maybe: argument 'backfill' of Las expects true or false")
    assert "--set" not in err
    err = fails(capsys, "sweep", graph, "--vary", "round=1min,often")
    assert err.startswith("error: --vary round: setting 'round' expects a duration")
    err = fails(capsys, "sweep", graph, "--set", "order.backfill=maybe", "--vary", "round=1min,2min")
    assert err.startswith("error: --set order.backfill=maybe: ")


# --- one form for every message ---

# A message names its place, if it has one (a file, file:line or file:line:col), then says
# "error:"; one without a place begins with it.
ONE_FORM = re.compile(r"^(error: |[^\s:]+(:\d+){0,2}: error: )")


def bad_inputs(tmp_path) -> dict[str, list]:
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    broken = tmp_path / "broken.sched"
    broken.write_text(GRAPH.replace("JobPool ->", "JobPool =>"))
    bad_cluster = tmp_path / "bad-cluster.sched"
    bad_cluster.write_text(GRAPH.replace("2x4:V100", "2x:V100"))
    spec = tmp_path / "c.toml"
    spec.write_text("[[group]]\nnodes = 2\n")
    folder = tmp_path / "adir"
    folder.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    return {
        "run: --cluster shorthand": ["run", graph, "--cluster", "4xx"],
        "run: --cluster file": ["run", graph, "--cluster", spec],
        "run: --set cluster": ["run", graph, "--set", 'cluster="0x4"'],
        "run: --until": ["run", graph, "--until", "-5"],
        "run: --out": ["run", graph, "--out", afile],
        "run: --set value": ["run", graph, "--set", "order.backfill=maybe"],
        "run: no graph": ["run", tmp_path / "none.sched"],
        "check: syntax": ["check", broken],
        "check: cluster setting": ["check", bad_cluster],
        "render: format": ["render", graph, "-o", tmp_path / "x.bmp"],
        "trace describe: folder": ["trace", "describe", folder],
        "trace generate: rate": ["trace", "generate", "-o", tmp_path / "t.csv", "--jobs", "5", "--rate", "0/h", "--seed", "1"],
        "trace generate: extension": [
            "trace",
            "generate",
            "-o",
            tmp_path / "t.xyz",
            "--jobs",
            "5",
            "--rate",
            "4/h",
            "--seed",
            "1",
        ],
        "trace convert: duration lost": ["trace", "convert", REPO / "traces/samples/dally-batch-500.csv", tmp_path / "d.trace"],
        "sweep: --vary twice": ["sweep", graph, "--vary", "round=5min", "--vary", "round=10min"],
        "run: --set no value": ["run", graph, "--set", "round="],
        "elements: unknown": ["elements", "NoSuchElement"],
        "sweep: --vary": ["sweep", graph, "--vary", "round"],
        "reproduce: unknown": ["reproduce", "no-such-experiment"],
        "profile: --out": ["profile", "--out", folder],
        "plot: not a run": ["plot", folder, "-o", tmp_path / "p.png"],
        "report: not a run": ["report", folder, "-o", tmp_path / "r.html"],
    }


def test_every_error_message_has_one_form(tmp_path, capsys):
    for what, argv in bad_inputs(tmp_path).items():
        err = fails(capsys, *argv)
        assert ONE_FORM.match(err), f"{what}: {err!r}"
        assert err.count("error: ") == 1 or "error(s)" in err, f"{what}: {err!r}"
