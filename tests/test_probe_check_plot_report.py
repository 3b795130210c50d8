"""What a new user met probing `check`, `plot`, `report`, `profile` and `sweep`: the ways they are
used wrongly (an output that cannot be written, a path with quotes in it) answered at once and
in words that fit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from roundhouse.tools.cli import main

ROOT = Path(__file__).resolve().parent.parent

GRAPH = """round = 5min;
cluster = "4x4:V100";
src :: PoissonSource(rate=8/h, jobs=20, seed=1);
src -> JobPool -> Las(service=wall_seconds) -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("run")
    (where / "g.sched").write_text(GRAPH)
    assert main(["run", str(where / "g.sched"), "--out", str(where / "out")]) == 0
    return where / "out"


def refused(capsys, argv) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# --- plot and report: an output that cannot be written is refused before the folder is read ---


@pytest.mark.parametrize(
    "command, name",
    [("plot", "figure.png"), ("report", "page.html")],
)
def test_an_output_in_a_missing_folder_is_refused_before_the_run_is_read(tmp_path, capsys, run_folder, command, name):
    # A damaged run beside a missing output folder: the output is named (as `render` names it),
    # not the run, whose reading (and a report's drawing) would be wasted.
    damaged = tmp_path / "damaged"
    shutil.copytree(run_folder, damaged)
    (damaged / "jobs.csv").write_text("")
    out = tmp_path / "no such folder" / name
    err = refused(capsys, [command, damaged, "-o", out])
    assert f"cannot write {out}: no folder {out.parent}" in err, err
    assert "jobs.csv" not in err
    assert not out.parent.exists()


@pytest.mark.parametrize(
    "command, name",
    [("plot", "figure.svg"), ("report", "page.html")],
)
def test_a_folder_in_the_outputs_place_is_refused_before_the_run_is_read(tmp_path, capsys, run_folder, command, name):
    damaged = tmp_path / "damaged"
    shutil.copytree(run_folder, damaged)
    (damaged / "jobs.csv").write_text("")
    (tmp_path / name).mkdir()
    err = refused(capsys, [command, damaged, "-o", tmp_path / name])
    assert f"cannot write {tmp_path / name}: Is a directory" in err, err
    assert (tmp_path / name).is_dir() and not any((tmp_path / name).iterdir())


@pytest.mark.parametrize(
    "command, name, example",
    [("plot", ".png", "figure.png"), ("plot", ".SVG", "figure.SVG"), ("report", ".html", "report.html")],
)
def test_an_output_named_by_its_extension_alone_is_said_to_name_no_file(tmp_path, capsys, run_folder, command, name, example):
    # (`.html` is a hidden file's name without an extension: "end the name in .html" would be no help)
    err = refused(capsys, [command, run_folder, "-o", tmp_path / name])
    assert f"-o {tmp_path / name}: names no file before its extension; write e.g. {example}" in err, err
    assert not (tmp_path / name).exists()


def test_plot_and_report_still_write_beside_other_files(tmp_path, run_folder):
    assert main(["plot", str(run_folder), "-o", str(tmp_path / "a.png")]) == 0
    assert main(["report", str(run_folder), "-o", str(tmp_path / "a.html")]) == 0
    assert (tmp_path / "a.png").read_bytes().startswith(b"\x89PNG")
    assert b"<html" in (tmp_path / "a.html").read_bytes()[:200].lower()


# --- profile: the line it says to put in a graph reads back in a graph ---

PROFILE_TABLE = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nLM,10,V100,1,consolidated,150.0\n"


def test_the_profile_line_the_hint_gives_reads_back_whatever_the_path_holds(tmp_path, capsys, monkeypatch):
    import roundhouse.agents.profiler as profiler

    class Measured:
        restore_s, checkpoint_s = 0.25, 0.5

        def csv(self, header):
            return f"# {header}\n{PROFILE_TABLE}"

    # (what is measured is not the point: the table a measurement writes, and the hint's text)
    monkeypatch.setattr(profiler, "profile", lambda *args, **kw: Measured())
    folder = tmp_path / 'say "hi" \\ back'
    folder.mkdir()
    assert main(["profile", "--models", "LM", "--seconds", "1", "--out", str(folder / "p.csv")]) == 0
    hint = capsys.readouterr().out
    ((profile_line, restore, checkpoint),) = re.findall(r"use it with `(.*)` and (restore = \S+;) (checkpoint = \S+;)", hint)
    assert (restore, checkpoint) == ("restore = 0.25s;", "checkpoint = 0.50s;")
    graph = tmp_path / "uses.sched"
    graph.write_text(
        f"{profile_line}\n{restore}\n{checkpoint}\n"
        'cluster = "2x1:V100";\nround = 1min;\n'
        "src :: PoissonSource(rate=8/h, jobs=3, gpus=single, seed=1);\n"
        "src -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["check", str(graph)]) == 0, capsys.readouterr().err
    from roundhouse.runtime.compiler import compile_file

    assert Path(compile_file(str(graph)).settings.profile) == folder / "p.csv"


# --- a sweep of one run, for the options of plot ---


@pytest.fixture(scope="module")
def one_run_sweep(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("sweep")
    (where / "g.sched").write_text(GRAPH)
    assert main(["sweep", str(where / "g.sched"), "--workers", "1", "--out", str(where / "out")]) == 0
    return where / "out"


# --- plot: an empty option is refused, not taken for the option left out ---


@pytest.mark.parametrize(
    "options, message",
    [
        (["--kind", ""], "--kind: no kind given; choose jct-cdf, load, utilisation or gantt"),
        (["--kind", " "], "--kind: no kind given; choose jct-cdf, load, utilisation or gantt"),
        (["--metric", ""], "--metric: no metric given"),
        (["--x", ""], "--x: no varied name given"),
    ],
)
def test_an_empty_option_of_plot_is_refused(tmp_path, capsys, one_run_sweep, run_folder, options, message):
    folder = run_folder if options[0] == "--kind" else one_run_sweep
    err = refused(capsys, ["plot", folder, *options, "-o", tmp_path / "a.png"])
    assert err.startswith(f"error: {message}"), err
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize(
    "kind, hint",
    [("utilization", "did you mean utilisation?"), ("JCT-CDF", "did you mean jct-cdf?"), ("Gantt", "did you mean gantt?")],
)
def test_a_kind_misspelt_is_refused_before_the_folder_is_read_with_the_kind_meant(tmp_path, capsys, run_folder, kind, hint):
    damaged = tmp_path / "damaged"
    shutil.copytree(run_folder, damaged)
    (damaged / "jobs.csv").write_text("")
    err = refused(capsys, ["plot", damaged, "--kind", kind, "-o", tmp_path / "a.png"])
    assert err.startswith(f"error: --kind {kind}: unknown kind; {hint} (the kinds: jct-cdf, load, utilisation, gantt)"), err
