"""Defects a new user meets on the first runs of a graph: writing `.sched` files and running them
(`roundhouse run`, `check`, `trace`), each pinned by what the command line says and leaves."""

from pathlib import Path

from roundhouse.runtime.compiler import compile_file
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails

LAS = REPO / "graphs" / "las.sched"

GRAPH = """cluster = "2x4:V100";
arrivals :: TraceSource(path="jobs.csv");
arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- a failed run leaves no folder it made, the parents of --out included ---


def test_a_failed_run_removes_the_parent_folders_of_out_that_it_made(tmp_path, capsys):
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,-10\n")  # read once the run starts
    graph = write(tmp_path / "g.sched", GRAPH)
    out = tmp_path / "results" / "today" / "las"
    err = fails(capsys, "run", graph, "--out", out)
    assert "column 'duration_s': must be greater than 0, got -10" in err
    assert not (tmp_path / "results").exists()


def test_a_failed_run_leaves_folders_that_were_there_before(tmp_path, capsys):
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,-10\n")
    graph = write(tmp_path / "g.sched", GRAPH)
    write(tmp_path / "results" / "keep.txt", "mine")
    fails(capsys, "run", graph, "--out", tmp_path / "results" / "today" / "las")
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["keep.txt"]


BESIDE = '''from roundhouse.runtime.element import Element, In, element
from roundhouse.runtime.types import Events


@element
class WritesBesideThenFails(Element):
    """Stands for another run that puts its results beside this run's, then fails this one.

    Ports:
        events: what happened in the round.
    Arguments:
        none
    Counters:
        none
    See also: JobMetrics
    Paper: none.
    """

    category = "sink"
    inputs = (In("events", Events),)

    def tick(self, ctx, events):
        import pathlib

        other = pathlib.Path(__file__).parent / "results" / "other"
        other.mkdir(parents=True)
        (other / "jobs.csv").write_text("theirs")
        raise RuntimeError("stopped")
'''


def test_a_failed_run_keeps_what_another_run_put_in_a_folder_it_made(tmp_path, capsys):
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    write(tmp_path / "beside.py", BESIDE)
    graph = write(
        tmp_path / "g.sched",
        'require "beside.py";\n'
        + GRAPH.replace("Launch -> JobMetrics;", "run :: Launch -> JobMetrics;\nrun -> WritesBesideThenFails;"),
    )
    fails(capsys, "run", graph, "--out", tmp_path / "results" / "today" / "las")
    assert (tmp_path / "results" / "other" / "jobs.csv").read_text() == "theirs"
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["other"]


def test_a_failed_run_leaves_an_existing_folder_reached_through_a_missing_one(tmp_path, capsys):
    """`--out tmp/../results`, with tmp missing and results there: the path did not exist as
    written, so the whole of results (and what it held) was taken for this run's and removed."""
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,-10\n")
    graph = write(tmp_path / "g.sched", GRAPH)
    write(tmp_path / "results" / "keep.txt", "mine")
    fails(capsys, "run", graph, "--out", f"{tmp_path}/tmp/../results")
    assert (tmp_path / "results" / "keep.txt").read_text() == "mine"
    assert (tmp_path / "g.sched").exists()


def test_a_failed_run_into_a_missing_folders_parent_removes_nothing_it_did_not_make(tmp_path, capsys):
    """`--out new/..` is the folder holding new: it was there before, so it stays, with the graph."""
    write(tmp_path / "graph" / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,-10\n")
    graph = write(tmp_path / "graph" / "g.sched", GRAPH)
    fails(capsys, "run", graph, "--out", f"{tmp_path}/new/..")
    assert (tmp_path / "graph" / "g.sched").exists() and (tmp_path / "graph" / "jobs.csv").exists()


def test_an_out_through_a_symbolic_link_loop_is_said_not_to_be_made(tmp_path, capsys):
    (tmp_path / "loop").symlink_to("loop")
    err = fails(capsys, "run", LAS, "--out", tmp_path / "loop" / "x")
    assert err == f"error: --out {tmp_path / 'loop' / 'x'}: cannot create the folder: Too many levels of symbolic links\n"


def test_a_run_that_succeeds_keeps_the_folders_it_made(tmp_path, capsys):
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    graph = write(tmp_path / "g.sched", GRAPH)
    out = tmp_path / "results" / "today" / "las"
    assert main(["run", str(graph), "--quiet", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} >= {"jobs.csv", "summary.json", "run.json"}


# --- an empty trace path is said to be empty ---


def test_an_empty_trace_path_is_said_to_be_empty_not_a_folder(capsys):
    for argv in (
        ["run", LAS, "--trace", ""],
        ["run", LAS, "--trace", " "],
        ["trace", "describe", ""],
        ["sweep", LAS, "--vary", "seed=1,2", "--trace", ""],
    ):
        err = fails(capsys, *argv)
        named = "--trace: " if "--trace" in argv else ""  # (the option, where one was given)
        assert err == f"error: {named}the trace path is empty: give a trace file\n", (argv, err)


# --- --set decides a setting that two imported files set differently ---


def _two_libraries(tmp_path: Path) -> Path:
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    write(tmp_path / "lib" / "a.sched", "round = 10min;\n")
    write(tmp_path / "lib" / "b.sched", "round = 15min;\n")
    return write(tmp_path / "g.sched", 'import "lib/a.sched";\nimport "lib/b.sched";\n' + GRAPH)


def test_set_decides_a_setting_two_imported_files_set_differently(tmp_path, capsys):
    graph = _two_libraries(tmp_path)
    assert compile_file(graph, ["round=20min"]).settings.round == 1200
    assert main(["run", str(graph), "--quiet", "--set", "round=20min"]) == 0


def test_without_set_two_imported_files_setting_differently_are_still_an_error(tmp_path, capsys):
    graph = _two_libraries(tmp_path)
    err = fails(capsys, "run", graph)
    assert "lib/b.sched:1:1: error: setting 'round' is set differently by two files" in err
    assert "--set round=" in err  # (the hint names the way out on the command line)
    # A --set of another setting decides nothing about this one.
    err = fails(capsys, "check", graph)
    assert "setting 'round' is set differently by two files" in err
    err = fails(capsys, "run", graph, "--set", "seed=3")
    assert "setting 'round' is set differently by two files" in err


def test_a_sweep_varying_a_setting_two_imported_files_set_differently_decides_it(tmp_path, capsys):
    graph = _two_libraries(tmp_path)
    out = tmp_path / "sweep"
    argv = ["sweep", str(graph), "--vary", "round=20min,30min", "--until", "2h", "--workers", "1", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    rounds = sorted(line.split(",") for line in (out / "points.csv").read_text().splitlines()[1:])
    assert len(rounds) == 2
    # Varying another setting leaves the clash to be said, before any run.
    err = fails(capsys, "sweep", graph, "--vary", "seed=1,2", "--until", "2h", "--out", tmp_path / "other")
    assert "setting 'round' is set differently by two files" in err


# --- arguments given to a declared element where it is used ---


def test_arguments_given_to_a_declared_element_in_a_chain_say_where_they_belong(tmp_path, capsys):
    write(tmp_path / "jobs.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    graph = write(
        tmp_path / "g.sched",
        GRAPH.replace("JobPool -> Fifo", "JobPool -> order(backfill=true)") + "order :: Las;\n",
    )
    err = fails(capsys, "check", graph)
    assert err.startswith(
        f"{graph}:3:37: error: 'order' is an element (declared at {graph}:4:1), not an element class: "
        "an element's arguments are given where it is declared"
    )
    assert "hint: write them there (order :: Las(...)) and the name alone here" in err
    assert "unknown element class" not in err


# --- a canonical trace read as Tiresias' ---


def test_a_canonical_trace_read_as_tiresias_is_told_its_format_not_a_clash(tmp_path):
    import pytest

    from roundhouse.errors import TraceError
    from roundhouse.traces import tiresias

    canonical = write(tmp_path / "canon.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    with pytest.raises(TraceError) as err:
        tiresias.read(canonical)
    said = str(err.value)
    assert "has both" not in said and "missing column 'num_gpu' of Tiresias' job CSV" in said
    assert "its columns are the canonical format's (arrival_s, gpus): read it as canonical" in said
    # A file with a Tiresias column and its canonical one both is still a clash, naming that one.
    both = write(tmp_path / "both.csv", "job_id,num_gpu,gpus,submit_time,duration\n0,1,1,0,10\n")
    with pytest.raises(TraceError, match=r"has both Tiresias and canonical columns \(gpus\); which one is meant"):
        tiresias.read(both)
