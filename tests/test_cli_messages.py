"""What the command line says about bad input: where it was given, in one form, and early."""

import re

import pytest

from roundhouse.tools.cli import main
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
    # (line 8: the second group's gpu_type)
    assert err.startswith(f"{graph}:2:11: error: setting 'cluster': {spec}:8: [[group]] #2: unknown GPU type 'V10'")
    assert "if you meant the throughput profile's V100, write that in the cluster" in err
    err = fails(capsys, "run", graph, "--cluster", spec)
    assert err.startswith(f"{spec}:8: error: [[group]] #2: unknown GPU type 'V10'")


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


# --- roundhouse profile: what it would measure wrongly, or forever, is refused before measuring ---


@pytest.mark.parametrize(
    "options, message",
    [
        (["--models", "LM,LM"], "error: --models LM,LM: LM is listed twice"),
        (["--models", "LM", "--batch-sizes", "10,10"], "error: --batch-sizes 10,10: 10 is listed twice"),
        (["--gpus", "1,1"], "error: --gpus 1,1: 1 is listed twice"),
        (["--seconds", "nan"], "error: --seconds: 'nan' is not a duration"),
        (["--seconds", "inf"], "error: --seconds: 'inf' is not a duration"),
        (["--seconds", "0.5"], "error: --seconds 0.5: must be a time from 1 second to 1 day"),
        (["--concurrent", "0"], "error: --concurrent 0: must be at least 1"),
        (["--threads", "0"], "error: --threads 0: must be at least 1"),
        (["--beside", "ResNet-18"], "error: --beside ResNet-18: only with --concurrent 2 or more"),
    ],
)
def test_profile_refuses_repeats_endless_times_and_options_it_would_ignore(tmp_path, capsys, options, message):
    err = fails(capsys, "profile", *options, "--out", tmp_path / "p.csv")
    assert err.startswith(message), err
    assert not (tmp_path / "p.csv").exists()


def test_profile_takes_a_duration_and_its_hint_names_the_whole_path(tmp_path, capsys, monkeypatch):
    import roundhouse.agents.profiler as profiler
    from roundhouse.tools.cli import main

    measured = {}

    class Result:
        restore_s, checkpoint_s = 1.0, 2.0

        def csv(self, header):
            return f"# {header}\n"

    def fake(models, batches, gpus, gpu_type, seconds, *rest, **kw):
        measured["seconds"] = seconds
        return Result()

    monkeypatch.setattr(profiler, "profile", fake)
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--models", "LM", "--seconds", "2min", "--out", "p.csv"]) == 0
    assert measured["seconds"] == 120.0
    # A graph reads `profile` relative to its own folder: a path relative to here would mislead.
    assert f'`profile = "{tmp_path / "p.csv"}";`' in capsys.readouterr().out


# --- one name given twice: refused, as a graph that sets a setting twice is ---


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--set", "round=1min", "--set", "round=10min"],
            "error: --set round=1min and --set round=10min: round is set twice; keep one",
        ),
        (
            ["--set", "report.track=5..10", "--set", "report.track=1..3"],
            "error: --set report.track=5..10 and --set report.track=1..3: report.track is set twice; keep one",
        ),
        (['--set=cluster="4x4"', "--cluster", "8x4"], 'error: --cluster 8x4 and --set cluster="4x4": the cluster is given twice'),
    ],
)
def test_run_refuses_a_name_given_twice(graph, capsys, options, message):
    err = fails(capsys, "run", graph, *options, "--until", "1h")
    assert err.startswith(message), err


def test_run_refuses_trace_beside_a_set_of_the_path_it_replaces(tmp_path, capsys):
    path = tmp_path / "t.sched"
    path.write_text(
        GRAPH.replace("PoissonSource(rate=8/h, jobs=5, seed=0)", f'TraceSource(path="{REPO}/traces/samples/philly-1000.csv")')
    )
    trace = REPO / "traces" / "samples" / "philly-single-200.csv"
    err = fails(capsys, "run", path, "--trace", trace, "--set", 'arrivals.path="x.csv"')
    assert err.startswith(f'error: --trace {trace} and --set arrivals.path="x.csv": --trace replaces arrivals.path; keep one'), (
        err
    )
    err = fails(capsys, "sweep", path, "--vary", "seed=1,2", "--set", "order.backfill=true", "--set", "order.backfill=false")
    assert "order.backfill is set twice" in err


def test_reproduce_list_with_names_lists_those_and_refuses_unknown_ones(capsys):
    from roundhouse.tools.cli import main

    assert main(["reproduce", "--list", "tiresias-toy"]) == 0
    out = capsys.readouterr().out
    assert "tiresias-toy" in out and "blox-intranode" not in out
    err = fails(capsys, "reproduce", "--list", "tiresias-typo")
    assert err.startswith("error: no experiment 'tiresias-typo'")


def test_whatif_of_a_folder_says_it_is_one(tmp_path, capsys):
    err = fails(capsys, "whatif", tmp_path)
    assert err.startswith(f"error: {tmp_path}: is a folder; give a live scheduler's journal file (its --journal)")
    assert "Simulation.save" in err


def test_whatif_of_a_runs_results_says_they_hold_no_state(tmp_path, capsys):
    # A run's --out folder is what a new user has at hand: it records the run, and whatif
    # needs a state to go on from, which only a journal or a snapshot holds.
    out = tmp_path / "run"
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\nsrc :: PoissonSource(rate=4/h, jobs=3, seed=1);\n'
        "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    from roundhouse.tools.cli import main

    assert main(["run", str(graph), "--out", str(out)]) == 0
    capsys.readouterr()
    err = fails(capsys, "whatif", out)
    assert err.startswith(f"error: {out}: is a folder of a run's results, which hold no state to simulate on from; give")
    assert "Simulation.save" in err


def test_a_category_asked_of_elements_lists_its_elements(capsys):
    err = fails(capsys, "elements", "source")
    assert "'source' is a category of elements, not an element class" in err
    assert "PoissonSource" in err and "TraceSource" in err and "Fifo" not in err


# --- a rate per several units ---


def test_trace_generate_says_a_rate_is_per_one_unit_as_a_graph_does(tmp_path, graph, capsys):
    # `8/2h` is refused by a .sched file and --set with what it means (4/h); trace generate's
    # --rate says the same, not only that it is no rate.
    err = fails(capsys, "trace", "generate", "-o", tmp_path / "t.csv", "--jobs", "5", "--rate", "8/2h", "--seed", "1")
    assert err.strip() == (
        "error: --rate: '8/2h' is not written per one unit: a rate is a count per unit of time, such as 8/h (8/2h is 4/h)"
    )
    assert not (tmp_path / "t.csv").exists()
    err = fails(capsys, "run", graph, "--set", "arrivals.rate=8/2h")
    assert "not written per one unit" in err and "8/2h is 4/h" in err
    # Per no unit, or per a word that is no unit, it is still just no rate.
    for text in ("8/0h", "8/2x"):
        err = fails(capsys, "trace", "generate", "-o", tmp_path / "t.csv", "--jobs", "5", "--rate", text, "--seed", "1")
        assert f"'{text}' is not a rate (write e.g. 8/h, 0.5/min)" in err


# --- a duration in several units ---


def test_a_duration_option_in_several_units_says_it_in_one(graph, capsys):
    # `1h30min` is refused by a .sched file with what it is in one unit; --until and --timeout
    # say the same, not only that it is no duration.
    err = fails(capsys, "run", graph, "--until", "1h30min")
    assert err.startswith(
        "error: --until: '1h30min' is written in several units: a duration is written with one "
        "(such as 300s, 5min, 2h, 1d; 1h30min is 90min)"
    )
    err = fails(capsys, "sweep", graph, "--vary", "arrivals.jobs=2,3", "--timeout", "1min30s")
    assert "'1min30s' is written in several units" in err and "1min30s is 90s" in err
    # A unit that is none is still just no duration.
    assert "'1h30xyz' is not a duration (write e.g. 300s" in fails(capsys, "run", graph, "--until", "1h30xyz")


# --- a built-in elastic profile's jobs, in a graph that sets none ---


@pytest.mark.parametrize(("workload", "job_said"), [("ones", "model 'vgg16-cifar'"), ("pollux", "Recommendation")])
def test_elastic_jobs_without_an_elastic_profile_are_told_which_to_set(graph, tmp_path, capsys, workload, job_said):
    # A trace of `trace generate --workload ones` (or pollux) run by a graph that sets no
    # elastic_profile cannot be run: the error names the built-in profile its models belong to.
    trace = tmp_path / f"{workload}.csv"
    assert (
        main(["trace", "generate", "-o", str(trace), "--jobs", "20", "--rate", "8/h", "--seed", "3", "--workload", workload]) == 0
    )
    capsys.readouterr()
    graph.write_text(GRAPH.replace("arrivals :: PoissonSource(rate=8/h, jobs=5, seed=0);", 'arrivals :: TraceSource(path="t");'))
    err = fails(capsys, "run", graph, "--trace", trace, "--cluster", "4x4:V100")
    assert job_said in err
    assert f"is an application of the built-in elastic profile '{workload}', which this graph does not set" in err
    assert f'set elastic_profile = "{workload}" (as graphs/{workload}.sched does)' in err
    # Written bare, the profile's name is told to be quoted; quoted, the run goes.
    err = fails(capsys, "run", graph, "--trace", trace, "--cluster", "4x4:V100", "--set", f"elastic_profile={workload}")
    assert f"hint: the built-in profile '{workload}' is named in quotes too: --set 'elastic_profile=\"{workload}\"'" in err
    quoted = f'elastic_profile="{workload}"'
    assert main(["run", str(graph), "--trace", str(trace), "--cluster", "4x4:V100", "--set", quoted, "--until", "1h"]) == 0


def test_a_model_of_no_profile_at_all_gets_no_elastic_note(graph, tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,model,iterations\n0,0,1,nosuchmodel,100\n")
    graph.write_text(
        GRAPH.replace("arrivals :: PoissonSource(rate=8/h, jobs=5, seed=0);", 'arrivals :: TraceSource(path="t.csv");')
    )
    err = fails(capsys, "run", graph)
    assert "model 'nosuchmodel' is not in the profile" in err and "elastic" not in err
