"""Bad input to the language, cluster specs and command line: a clear message and exit 2,
never a traceback, a hang or lost results."""

from pathlib import Path

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.loader import MAX_DEPTH
from roundhouse.runtime.dsl.parser import parse, parse_value
from roundhouse.tools.cli import main
from tests.conftest import fails

GRAPH = """round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=0);
arrivals -> JobPool -> Las -> Consolidated -> Launch -> report :: JobMetrics;
"""

NO_METRICS = """round = 5min;
cluster = "2x4:V100";
PoissonSource(rate=8/h, jobs=5, seed=0) -> JobPool -> Las -> Consolidated -> Launch;
"""


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH)
    return path


# --- numbers in the language ---


@pytest.mark.parametrize(
    "text, message",
    [
        ("1e999s", "'1e999s' is too large"),
        ("1e308d", "'1e308d' is too large"),
        ("1e999", "'1e999' is too large"),
        ("1e999/h", "'1e999/h' is too large"),
        ("1e999x", "'1e999x' is too large"),
        ("99999999999999999999", "whole numbers must lie within"),
        ("-9223372036854775809", "whole numbers must lie within"),
        ("0..99999999999999999999", "range 0..99999999999999999999"),
        ("1" * 5000, "(5000 characters)"),
    ],
)
def test_values_that_do_not_fit_are_refused_at_their_location(text, message):
    with pytest.raises(SchedError) as got:
        parse(f"x :: Las(a={text});", "f.sched")
    assert message in got.value.message
    assert str(got.value.location) == "f.sched:1:12"


def test_int64_limits_are_accepted():
    assert parse_value("9223372036854775807").value == 2**63 - 1
    assert parse_value("-9223372036854775808").value == -(2**63)


def test_deeply_nested_lists_are_an_error_not_a_crash():
    with pytest.raises(SchedError, match="nests too deeply"):
        parse_value("[" * 3000 + "]" * 3000)


def test_infinite_or_tiny_round_refused(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "round=1e999s")
    assert "--set round=1e999s" in err and "too large" in err
    err = fails(capsys, "run", graph, "--set", "round=1e-300s")
    assert "setting 'round' must be at least 0.001s" in err
    err = fails(capsys, "run", graph, "--set", "round=1e300d")  # (finite, and no scheduler's)
    assert "setting 'round' must be at most 7d, got 1e+300d" in err
    graph.write_text(GRAPH.replace("round = 5min", "round = 1e999min"))
    assert f"{graph}:1:9" in fails(capsys, "check", graph)


def test_infinite_rate_in_set_refused(graph, capsys):
    assert "'1e999/h' is too large" in fails(capsys, "run", graph, "--set", "arrivals.rate=1e999/h")


def test_set_value_with_extra_statements(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "round=5min; x :: Las")
    assert "--set round=5min; x :: Las" in err and "not a single value" in err
    err = fails(capsys, "sweep", graph, "--vary", "round=5min; x :: Las")
    assert "not a single value" in err
    assert "'5min;' is not a single value" in fails(capsys, "run", graph, "--set", "round=5min;")  # (not dropped)


# --- require, imports, compounds ---


@pytest.mark.parametrize("name", ["my_elements", "x.sched"])
def test_require_of_a_non_python_file(tmp_path, name):
    (tmp_path / "x.sched").write_text("")
    path = tmp_path / "r.sched"
    path.write_text(f'require "{name}";\n' + GRAPH)
    with pytest.raises(SchedError) as got:
        compile_file(path)
    assert str(got.value.location) == f"{path}:1:9" and "Python ending in .py" in got.value.message


def test_require_of_a_file_that_calls_sys_exit(tmp_path, capsys):
    (tmp_path / "bye.py").write_text("import sys\n\nsys.exit(7)\n")
    path = tmp_path / "r.sched"
    path.write_text('require "bye.py";\n' + GRAPH)
    err = fails(capsys, "check", path)
    assert f"{path}:1:9" in err and "bye.py:3: SystemExit: 7" in err


def test_import_chain_too_deep(tmp_path):
    for i in range(MAX_DEPTH + 5):
        (tmp_path / f"i{i}.sched").write_text(f'import "i{i + 1}.sched";\n')
    (tmp_path / f"i{MAX_DEPTH + 5}.sched").write_text("")
    with pytest.raises(SchedError, match="imports chain more than"):
        compile_file(tmp_path / "i0.sched")


def test_compounds_nested_too_deep(tmp_path):
    lines = ["elementclass C0 { input -> AcceptAll -> output; }"]
    lines += [f"elementclass C{i} {{ input -> C{i - 1} -> output; }}" for i in range(1, MAX_DEPTH + 20)]
    path = tmp_path / "deep.sched"
    path.write_text("\n".join(lines) + f"\nx :: C{MAX_DEPTH + 19};\n")
    with pytest.raises(SchedError, match="element classes nest more than"):
        compile_file(path)


def test_compound_parameter_declared_twice(tmp_path):
    path = tmp_path / "d.sched"
    path.write_text("elementclass G { $x, $x=1x | input -> AcceptThreshold(factor=$x) -> output; }\n")
    with pytest.raises(SchedError) as got:
        compile_file(path)
    assert "parameter $x twice" in got.value.message and str(got.value.location) == f"{path}:1:22"


def test_compound_parameter_given_twice(tmp_path):
    path = tmp_path / "d.sched"
    path.write_text(
        "elementclass G { $f | input -> AcceptThreshold(factor=$f) -> output; }\n"
        + GRAPH.replace("arrivals -> JobPool", "arrivals -> G(1.2x, f=2x) -> JobPool")
    )
    with pytest.raises(SchedError) as got:
        compile_file(path)
    assert "parameter 'f' is given twice" in got.value.message and got.value.location.line == 5


# --- cluster specs ---


def test_cluster_in_graph_too_large_points_at_the_setting(graph, capsys):
    graph.write_text(GRAPH.replace('"2x4:V100"', '"1x99999999999999999999:V100"'))
    err = fails(capsys, "check", graph)
    assert f"{graph}:2:11" in err and "GPUs per node" in err


def test_cluster_given_with_set_is_blamed_on_set(graph, capsys):
    err = fails(capsys, "run", graph, "--set", 'cluster="0x4"')
    assert err.startswith("error: --set cluster: bad cluster '0x4'") and str(graph) not in err


def _trace_graph(tmp_path, rows: str) -> Path:
    trace = tmp_path / "t.csv"
    trace.write_text(rows)
    graph = tmp_path / "d.sched"
    graph.write_text(f'round = 5min;\nTraceSource(path="{trace}") -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n')
    return graph


def test_unknown_gpu_type_is_refused_before_running(tmp_path, capsys):
    graph = _trace_graph(tmp_path, "job_id,arrival_s,gpus,model,iterations\n0,0,1,ResNet-18,1000\n")
    err = fails(capsys, "run", graph, "--cluster", "2x4:NOPE")
    assert err.startswith("error: --cluster: ") and "unknown GPU type 'NOPE'; known: V100, P100, K80" in err


def test_jobs_known_by_duration_run_on_the_reference_gpu_type(tmp_path, capsys):
    # A type the profile lacks is one the graph can run on when it is the graph's reference_gpu
    # (the type its durations were measured on); any other is refused even for such a trace.
    graph = _trace_graph(tmp_path, "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,10,2,200\n")
    assert "unknown GPU type 'A100'" in fails(capsys, "run", graph, "--cluster", "2x4:A100")
    assert main(["run", str(graph), "--cluster", "2x4:A100", "--set", "reference_gpu=A100"]) == 0
    graph.write_text('reference_gpu = "A100";\ncluster = "2x4:A100";\n' + graph.read_text())
    assert main(["check", str(graph)]) == 0


# --- command-line values and output paths ---


def test_until_negative(graph, capsys):
    assert "--until -5: must be 0 or more" in fails(capsys, "run", graph, "--until", "-5")


def test_run_out_checked_before_simulating(graph, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    assert f"--out {afile}: exists and is not a folder" in fails(capsys, "run", graph, "--out", afile)
    assert afile.read_text() == "keep me"
    assert f"--out {afile}/sub: cannot create the folder" in fails(capsys, "run", graph, "--out", afile / "sub")
    assert "--out: the folder name is empty" in fails(capsys, "run", graph, "--out", "")


def test_run_out_write_failure_names_the_file(graph, tmp_path, capsys):
    from roundhouse.tools.cli import main

    assert main(["run", str(graph), "--quiet", "--out", str(tmp_path / "o")]) == 0  # (an earlier run's folder)
    (tmp_path / "o" / "jobs.csv").unlink()
    (tmp_path / "o" / "jobs.csv").mkdir()
    err = fails(capsys, "run", graph, "--quiet", "--out", tmp_path / "o")
    assert "error: cannot write" in err and "jobs.csv" in err


def test_render_to_a_bad_path(graph, tmp_path, capsys):
    err = fails(capsys, "render", graph, "-o", tmp_path / "nowhere" / "x.dot")
    assert f"error: cannot write {tmp_path}/nowhere/x.dot" in err
    (tmp_path / "d.dot").mkdir()
    assert f"cannot write {tmp_path}/d.dot" in fails(capsys, "render", graph, "-o", tmp_path / "d.dot")


def test_sweep_bad_out_and_workers(graph, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert "not a folder" in fails(capsys, "sweep", graph, "--vary", "round=5min", "--out", afile)
    for workers in ("0", "-1"):
        with pytest.raises(SystemExit) as got:
            main(["sweep", str(graph), "--vary", "round=5min", "--workers", workers])
        assert got.value.code == 2
        assert "--workers: must be at least 1" in capsys.readouterr().err


def test_sweep_without_job_metrics_refused_before_running(tmp_path, capsys):
    path = tmp_path / "n.sched"
    path.write_text(NO_METRICS)
    err = fails(capsys, "sweep", path, "--vary", "round=5min,10min")
    assert "no JobMetrics element" in err


def test_reproduce_out_is_a_file(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert f"--out {afile}/tiresias-toy: cannot create the folder" in fails(capsys, "reproduce", "--out", afile, "tiresias-toy")


def test_unexpected_oserror_is_a_message(monkeypatch, graph, capsys):
    import roundhouse.tools.check_cmd

    def broken(args):
        raise PermissionError(13, "Permission denied", "/some/file")

    monkeypatch.setattr(roundhouse.tools.check_cmd, "check", broken)
    assert "error: /some/file: Permission denied" in fails(capsys, "check", graph)


def test_elements_markdown_of_one_element(capsys):
    assert main(["elements", "--markdown", "Las"]) == 0
    out = capsys.readouterr().out
    assert "### Las" in out and "### Fifo" not in out and "### JobPool" not in out
    assert "no element class 'Lass'" in fails(capsys, "elements", "--markdown", "Lass")


@pytest.mark.parametrize(
    "target, message",
    [("/dev/zero", "larger than 16 MB"), ("FOLDER", "is a directory"), ("BINARY", "not UTF-8 text (byte 0")],
)
def test_unreadable_graphs_and_imports(tmp_path, capsys, target, message):
    # A device that never ends, a folder, bytes that are not text: as the file itself, and imported.
    (tmp_path / "bin.sched").write_bytes(b"\xff\xfe")
    target = target.replace("FOLDER", str(tmp_path)).replace("BINARY", str(tmp_path / "bin.sched"))
    assert message in fails(capsys, "check", target)
    path = tmp_path / "i.sched"
    path.write_text(f'import "{target}";\n')
    with pytest.raises(SchedError) as got:
        compile_file(path)
    assert message in got.value.message and str(got.value.location) == f"{path}:1:8"


@pytest.mark.parametrize(
    "text, message, hint",
    [
        ("src :: PoissonSource(rate=8/h jobs=50);\n", "unexpected 'jobs', expected ')' or ','", None),
        ("src :: PoissonSource(rate=8/h, jobs=50;\n", "unexpected ';', expected ')' or ','", None),
        ("x :: Las(thresholds=[1h 2h]);\n", "unexpected '2h', expected ',' or ']'", None),
        ("a -> b c;\n", "unexpected 'c', expected one of", None),
        (
            "round = 5min\nsrc :: Fifo;\n",
            "unexpected 'src', expected ';'",
            "a statement ends with ';' (did the previous line forget one?)",
        ),
    ],
)
def test_syntax_errors_name_only_what_could_come_next(text, message, hint):
    with pytest.raises(SchedError) as info:
        parse(text, "g.sched")
    assert info.value.message.startswith(message) and info.value.hint == hint


def test_path_settings_of_an_imported_file_are_relative_to_it(tmp_path, capsys):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "c.toml").write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "V100"\n')
    (lib / "settings.sched").write_text('cluster = "c.toml";\n')
    graph = tmp_path / "g.sched"
    graph.write_text('import "lib/settings.sched";\n' + GRAPH.replace('cluster = "2x4:V100";\n', ""))
    assert main(["check", str(graph)]) == 0
    assert "8 GPUs on 2 nodes" in capsys.readouterr().out


@pytest.mark.parametrize(
    "setting, message",
    [
        ('profile = "nope.csv";', "setting 'profile' names no file"),
        ('pair_profile = "nope.csv";', "setting 'pair_profile' names no file"),
        ('elastic_profile = "nope";', "setting 'elastic_profile' names no folder"),
    ],
)
def test_path_settings_must_name_existing_files(tmp_path, capsys, setting, message):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH + setting + "\n")
    err = fails(capsys, "check", graph)
    assert f"{graph}:5:" in err and message in err


# A compound of one element whose argument is the compound's parameter $f.
GATE_GRAPH = (
    "elementclass Gate { $f | input -> AcceptThreshold(factor=$f) -> output; }\n"
    'round = 5min;\ncluster = "4x4:V100";\n'
    "src :: PoissonSource(rate=4/h, jobs=20, seed=0);\ng :: Gate(1.5x);\n"
    "src -> g -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
)


def test_set_on_a_compound_names_its_elements(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(GATE_GRAPH)
    err = fails(capsys, "run", graph, "--until", "0", "--set", "g.factor=2x")
    assert "'g' is a compound; its elements are g/AcceptThreshold@1" in err
    assert "--set g/AcceptThreshold@1.factor=" in err
    assert main(["run", str(graph), "--until", "0", "--set", "g/AcceptThreshold@1.factor=2x"]) == 0


def test_set_of_a_compound_parameter_points_to_its_declaration(tmp_path, capsys):
    # `g.f` names the elementclass's parameter $f, which no element inside takes by that name:
    # the hint must not suggest `g/AcceptThreshold@1.f`, which is refused in turn.
    graph = tmp_path / "g.sched"
    graph.write_text(GATE_GRAPH)
    err = fails(capsys, "run", graph, "--until", "0", "--set", "g.f=2x")
    assert "'g' is a compound; its elements are g/AcceptThreshold@1" in err
    assert "g/AcceptThreshold@1.f=" not in err
    assert "none of them has an argument 'f'" in err
    assert "(g :: Gate(f=...))" in err
    assert "--set g/AcceptThreshold@1.ARGUMENT=" in err
    # Swept, the same name gets the same hint.
    err = fails(capsys, "sweep", graph, "--vary", "g.f=2x,3x", "--until", "0")
    assert "none of them has an argument 'f'" in err and "(g :: Gate(f=...))" in err
