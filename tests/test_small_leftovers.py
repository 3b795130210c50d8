"""Small defects probes found: an error writing standard output that did not say where, a moved
snapshot's missing trace that did not say where the snapshot looks for it, job ids spelled with
digits other than 0-9, and a sweep that gave none of the warnings `check` and `run` give."""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys

import pytest

from roundhouse.tools.cli import main
from tests.conftest import fails

HEADER = "job_id,arrival_s,gpus,duration_s,model,batch_size\n"
THIRTY = HEADER + "".join(f"{i},{60.0 * i},1,600.0,ResNet-18,16\n" for i in range(30))
FIFO = 'round = 5min;\ncluster = "1x2:V100";\nPoissonSource(rate=4/h, jobs=6, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'


def flat(text: str) -> str:
    """Printed text as one line: rich wraps lines at the terminal's width."""
    return " ".join(text.split())


# --- an error writing standard output says so ---


def _command_line(argv: list[str], buffered: bool) -> subprocess.CompletedProcess:
    """`roundhouse ARGV > /dev/full`, as the installed command runs it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    code = "import sys; from roundhouse.tools.entry_point import main; sys.exit(main())"
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-c", code, *argv], stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120
        )


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "argv",
    [["check", "{graph}"], ["--help"], ["run", "--help"]],
    ids=["check", "help", "run-help"],
)
def test_a_full_disk_under_standard_output_is_said_to_be_standard_outputs(tmp_path, argv, buffered):
    """A short result (held in the buffer until the end) and argparse's help (whose own writer
    swallowed the error: a status of 0, nothing written)."""
    graph = tmp_path / "g.sched"
    graph.write_text(FIFO)
    done = _command_line([a.format(graph=graph) for a in argv], buffered)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr == "error: standard output: No space left on device\n", done.stderr


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["elements"], "the list of elements"),
        (["elements", "Las"], "the reference of Las"),
        (["elements", "--markdown"], "the element reference"),
    ],
)
def test_the_element_reference_lost_to_a_full_disk_is_an_error(argv, what):
    """The list and an element's reference are the command's one result (Rich's console on
    standard output dropped the failure: status 0, nothing written)."""
    done = _command_line(argv, buffered=True)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr == f"error: standard output: cannot write {what} (No space left on device)\n", done.stderr


def test_an_error_of_no_file_and_not_of_standard_output_is_not_said_to_be_standard_outputs(tmp_path, monkeypatch, capsys):
    from roundhouse.tools import check_cmd

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(check_cmd, "check", full)
    assert main(["check", str(tmp_path / "g.sched")]) == 2
    assert capsys.readouterr().err == "error: No space left on device\n"


def test_an_error_naming_two_files_names_both(tmp_path, monkeypatch, capsys):
    from roundhouse.tools import check_cmd

    def cross(args):
        raise OSError(errno.EXDEV, "Invalid cross-device link", "a.part", None, "b")

    monkeypatch.setattr(check_cmd, "check", cross)
    assert main(["check", str(tmp_path / "g.sched")]) == 2
    assert capsys.readouterr().err == "error: a.part -> b: Invalid cross-device link\n"


class _FullDisk(io.TextIOBase):
    """Standard output on a full disk: every write fails, as to /dev/full."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_standard_output_is_itself_again_after_the_command(tmp_path, monkeypatch, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(FIFO)
    stream = _FullDisk()
    monkeypatch.setattr(sys, "stdout", stream)
    assert main(["check", str(graph)]) == 2
    assert sys.stdout is stream
    monkeypatch.undo()
    assert capsys.readouterr().err == "error: standard output: No space left on device\n"
    assert main(["check", str(graph)]) == 0 and ": ok (" in capsys.readouterr().out


# --- a snapshot whose graph's folder moved ---


@pytest.fixture
def moved_snapshot(tmp_path):
    """A snapshot of a graph whose trace is beside it (`../traces/`), saved, then the graph's
    project folder moved elsewhere."""
    from roundhouse import Simulation

    project = tmp_path / "project"
    (project / "graphs").mkdir(parents=True)
    (project / "traces").mkdir()
    (project / "traces" / "t.csv").write_text(THIRTY)
    graph = project / "graphs" / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "2x4:V100";\narrivals :: TraceSource(path="../traces/t.csv");\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    snap = Simulation(graph).run_until(1800).save(tmp_path / "half.snap")
    project.rename(tmp_path / "elsewhere")
    return snap, project


def _hint(project) -> str:
    return (
        "hint: the snapshot expects its graph's files where they were when it was saved: its graph's relative "
        f"paths resolve from {project / 'graphs'}/, the folder of its graph {project / 'graphs' / 'g.sched'}, "
        "which is no longer there (moved?); put them back there to load it"
    )


def test_loading_a_snapshot_whose_graph_moved_names_the_folder_it_expects(moved_snapshot):
    from roundhouse import Simulation
    from roundhouse.runtime.snapshot import SnapshotError

    snap, project = moved_snapshot
    with pytest.raises(SnapshotError) as caught:
        Simulation.load(snap)
    text = str(caught.value)
    assert f"names no file: {project / 'traces' / 't.csv'}" in text, text
    assert _hint(project) in flat(text), text


def test_whatif_on_a_snapshot_whose_graph_moved_names_the_folder_it_expects(moved_snapshot, capsys):
    snap, project = moved_snapshot
    assert _hint(project) in flat(fails(capsys, "whatif", snap))
    # With other arguments, the snapshot's own graph is compiled first: the same hint.
    assert _hint(project) in flat(fails(capsys, "whatif", snap, "--set", "Fifo@3.backfill=true"))
    # Its files back where they were, it loads.
    (project.parent / "elsewhere").rename(project)
    assert main(["whatif", str(snap)]) == 0, capsys.readouterr().err


def test_a_snapshot_whose_graph_is_where_it_was_gets_no_hint_of_a_move(moved_snapshot):
    from roundhouse import Simulation
    from roundhouse.runtime.snapshot import SnapshotError

    snap, project = moved_snapshot
    shutil.copytree(project.parent / "elsewhere", project)
    (project / "traces" / "t.csv").unlink()  # (removed, not moved)
    with pytest.raises(SnapshotError) as caught:
        Simulation.load(snap)
    assert "hint" not in str(caught.value) and "names no file" in str(caught.value)


# --- job ids in the digits 0-9 ---


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explain")
    (folder / "g.sched").write_text(FIFO)
    assert main(["run", str(folder / "g.sched"), "--out", str(folder / "run")]) == 0
    return folder / "run"


@pytest.mark.parametrize("job", ["3", "03", "+3", " 3 ", "3.0", "0.3e1"])
def test_a_job_id_in_ascii_digits_names_the_job(run_folder, capsys, job):
    assert main(["explain", str(run_folder), job]) == 0
    assert capsys.readouterr().out.startswith("job 3: ")


@pytest.mark.parametrize("job", ["0_3", "٣", "३", "٣.٠", "3_0e-1", "³"])
def test_a_job_id_in_other_digits_is_said_not_to_be_one(run_folder, capsys, job):
    err = fails(capsys, "explain", run_folder, job)
    assert f"no job '{job.strip()}' in the record" in err or f"no job '{job}' in the record" in err, err
    assert "job ids are whole numbers written in the digits 0-9, with a sign, a point or an exponent if any" in err, err


# --- a sweep warns as check and run do ---

TRACKED = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> report :: JobMetrics(track=3000..4000);
"""


def test_a_sweep_warns_once_of_a_run_to_no_use(tmp_path, capsys):
    (tmp_path / "trace.csv").write_text(THIRTY)
    graph = tmp_path / "g.sched"
    graph.write_text(TRACKED)
    argv = ["sweep", str(graph), "--vary", "seed=1,2,3", "--workers", "1", "--until", "1h"]
    assert main(argv) == 0
    err = flat(capsys.readouterr().err)
    warning = "g.sched:4:66: warning: element 'report' (JobMetrics): track=3000..4000 (ids 3000 to 3999) names none"
    assert err.count(warning) == 1, err
    # A graph to some use: no warning.
    graph.write_text(TRACKED.replace("3000..4000", "0..10"))
    assert main(argv) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_result_lost_to_a_full_disk_is_said_once(tmp_path, buffered):
    """`explain`'s timeline is its one result: its error says what was lost, and what standard
    output still held is not reported again at exit (Python's "Exception ignored", status 120)."""
    (tmp_path / "g.sched").write_text(FIFO)
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(tmp_path / "run")]) == 0
    done = _command_line(["explain", str(tmp_path / "run"), "3"], buffered)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr == "error: standard output: cannot write job 3's timeline (No space left on device)\n", done.stderr
