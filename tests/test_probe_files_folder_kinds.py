"""`roundhouse plot` and `report` of a folder that is no finished run's nor sweep's say what it
is: a run's folder still being written (or whose run was killed: only its record's `.part`),
and a reproduction's folder (`reproduction.json`), are named as such, not as "neither"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from roundhouse.tools.cli import main

GRAPH = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> metrics :: JobMetrics;
"""


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_killed_runs_folder_is_named_as_one(tmp_path, capsys, command):
    out = tmp_path / "out"
    out.mkdir()
    # What `run --out` leaves when killed before its end: the record it was writing, no run.json.
    (out / "explain.parquet.part").write_bytes(b"PAR1 cut short")
    target = tmp_path / ("x.png" if command == "plot" else "x.html")
    assert main([command, str(out), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert "explain.parquet.part" in err and "still" in err and "killed" in err, err
    assert "Traceback" not in err and not target.exists()


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_reproductions_folder_is_named_as_one(tmp_path, capsys, command):
    folder = tmp_path / "tiresias-toy"
    folder.mkdir()
    (folder / "reproduction.json").write_text(json.dumps({"experiment": "tiresias-toy", "written": []}))
    target = tmp_path / ("x.png" if command == "plot" else "x.html")
    assert main([command, str(folder), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert "reproduction" in err and "roundhouse reproduce" in err, err
    assert not target.exists()


RUN = "import sys; from roundhouse.tools.cli import main; sys.exit(main(['run', *sys.argv[1:]]))"


def test_a_run_stopped_by_sigkill_is_named(tmp_path, capsys):
    """The same, from a real `roundhouse run --out` stopped by SIGKILL while it runs."""
    (tmp_path / "trace.csv").write_text(
        "job_id,arrival_s,gpus,duration_s\n" + "".join(f"{i},{i * 60},1,{10**7}\n" for i in range(200))
    )
    (tmp_path / "g.sched").write_text(GRAPH)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, str(tmp_path / "g.sched"), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (out / "explain.parquet.part").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (out / "explain.parquet.part").is_file(), "the run wrote no record before it ended or was killed"
    assert not (out / "run.json").exists(), "the run ended before it was killed; make its trace longer"
    assert main(["plot", str(out), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert f"{out}: a run's folder with no run.json yet" in err and "killed" in err, err
