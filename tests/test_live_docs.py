"""The loopback walkthrough of docs/live.md, run as written: its shell block is read from the
page (so a change to the page that stops it working fails here), and each command runs as a
real process on 127.0.0.1, with the agents' emulated GPUs. The only change: a free port for
5555, so that the test never meets another program's."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from roundhouse.tools.loopback import free_port
from tests.conftest import REPO

DOC = REPO / "docs" / "live.md"
GRAPH = "graphs/live-loopback.sched"


def walkthrough() -> list[str]:
    """The lines of the page's first ```sh block that runs the loopback graph."""
    blocks = re.findall(r"^```sh\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    for block in blocks:
        if GRAPH in block:
            return [line for line in block.splitlines() if line.strip()]
    raise AssertionError(f"{DOC} has no ```sh block that runs {GRAPH}")


class Shell:
    """Runs the few shell forms the walkthrough uses: `roundhouse ...` in the foreground (must
    exit 0), `roundhouse ... &` in the background, and `wait` (for every background command,
    each of which must exit 0). Anything else fails the test: the page must stay this simple."""

    def __init__(self, cwd: Path, env: dict[str, str], port: int):
        self.cwd, self.env, self.port = cwd, env, port
        self.background: list[tuple[str, subprocess.Popen]] = []
        self.outputs: dict[str, str] = {}

    def argv(self, words: list[str]) -> list[str]:
        assert words[0] == "roundhouse", f"the test runs only roundhouse commands, not {words[0]!r}"
        return [sys.executable, "-m", "roundhouse.tools.cli", *(w.replace(":5555", f":{self.port}") for w in words[1:])]

    def run(self, line: str) -> None:
        words = shlex.split(line, comments=True)
        if not words:
            return
        if words == ["wait"]:
            for shown, proc in self.background:
                status = proc.wait(timeout=300)
                assert status == 0, f"{shown} exited with {status}\n{self.logs()}"
            return
        if words[-1] == "&":
            log = self.cwd / f"background-{len(self.background) + 1}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(self.argv(words[:-1]), cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            self.background.append((line, proc))
            return
        done = subprocess.run(self.argv(words), cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=120)
        self.outputs[line] = done.stdout + done.stderr
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}\n{self.logs()}"

    def log(self, i: int) -> str:
        return (self.cwd / f"background-{i}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"===== {line}\n{self.log(i + 1)[-4000:]}" for i, (line, _) in enumerate(self.background))

    def close(self) -> None:
        for _, proc in self.background:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in self.background:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def fresh_folder(tmp_path, monkeypatch):
    """A folder as a user has it: the repository's graphs, nothing else. The agents' temporary
    folders go to a TMPDIR short enough for their ipc sockets, so that the test sees them go."""
    (tmp_path / "graphs").symlink_to(REPO / "graphs")
    temp = Path(tempfile.mkdtemp(prefix="rh-doc-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp), "PYTHONUNBUFFERED": "1"}
    yield tmp_path, env, temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.live
@pytest.mark.slow
def test_the_loopback_walkthrough_runs_as_written(fresh_folder):
    cwd, env, temp = fresh_folder
    lines = walkthrough()
    assert any("--emulate" in line for line in lines), "the walkthrough's agents emulate their GPUs"
    shell = Shell(cwd, env, free_port())
    try:
        for line in lines:
            shell.run(line)
        assert shell.background, "the walkthrough starts a scheduler and agents in the background"
        assert all(proc.returncode == 0 for _, proc in shell.background), "`wait` waited for everything"
    finally:
        shell.close()

    # Every job submitted finished: the submitters' answers name the job ids, the journal (where
    # the docs and `serve --help` say it is by default) records each one done.
    submitted = set()
    for output in shell.outputs.values():
        found = re.search(r"submitted \d+ job\(s\): ([\d, -]+)", output)
        if found:  # (ids printed as runs: "0-2, 5")
            for part in found.group(1).split(","):
                first, _, last = part.strip().partition("-")
                submitted |= set(range(int(first), int(last or first) + 1))
    assert len(submitted) == 4, shell.outputs
    journal = cwd / "checkpoints" / "roundhouse-journal.sqlite"
    assert journal.is_file()
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        done = {job for (job,) in db.execute("SELECT job_id FROM exits WHERE outcome = 'done' AND rank = 0")}
    finally:
        db.close()
    assert done == submitted, shell.logs()
    scheduler = shell.log(1)
    assert "stopped: every job finished" in scheduler and "4 / 4" in scheduler, scheduler
    # Its times are spans of this short run, whenever the jobs were submitted (some may have been
    # while the scheduler still waited for its agents): none negative, none longer than the run.
    for metric in ("average JCT", "median JCT", "p99 JCT", "average queueing", "makespan"):
        found = re.search(rf"│ {metric}\s+│\s+(\S+) (s|min|h) │", scheduler)
        assert found, (metric, scheduler)
        seconds = float(found.group(1)) * {"s": 1, "min": 60, "h": 3600}[found.group(2)]
        assert 0 <= seconds <= 300, (metric, seconds, scheduler)
    # The agents stopped by themselves and removed their work folders.
    for i in (2, 3):
        assert "the scheduler asked" in shell.log(i) and "removed its work folder" in shell.log(i), shell.log(i)
    assert list(temp.iterdir()) == []

    # What the page says of the journal holds: `serve` run again in the same folder reads it,
    # and refuses it, as its run had ended (it would otherwise pass the old run off as a new one).
    serve = next(line for line, _ in shell.background if "serve" in line)
    again = subprocess.run(shell.argv(shlex.split(serve)[:-1]), cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2, again.stderr
    assert "resuming the journal's run" not in again.stderr  # (refused before it says it resumes)
    assert "the run this journal holds had already ended" in again.stderr and "Traceback" not in again.stderr, again.stderr
    page = DOC.read_text()
    assert "checkpoints/roundhouse-journal.sqlite" in page and "resumes the run" in page
    helped = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", "serve", "--help"], env=env, capture_output=True, text=True
    )
    assert "./checkpoints/roundhouse-journal.sqlite" in " ".join(helped.stdout.split())
