"""The loopback cluster (tools/loopback.py) interrupted: a Ctrl-C sent to its program just as a
process of the cluster has started, before it was recorded, left that process running; one sent
while `close()` stopped the processes cut it short, and left them running. Each test runs a
child Python that uses the tool, on 127.0.0.1, and interrupts it (SIGINT) at a point the child
reports; the schedulers it starts stop by themselves (`--wait-for-agents`, `--until`), and the
test kills, by process id, any the child left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from roundhouse.tools.deferred_interrupts import deferred_interrupts
from tests.conftest import REPO

GRAPH = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""

# The child: a cluster in FOLDER, its scheduler stopping by itself within two minutes (not
# sooner: on a loaded machine its agent can take most of half a minute to register, and the
# scheduler must still be running when the test stops it).
PRELUDE = """
import sys, time
from pathlib import Path
from roundhouse.tools import loopback
folder = Path(sys.argv[1])
folder.mkdir()
(folder / "graph.sched").write_text(sys.argv[2])
cluster = loopback.Loopback(
    folder, folder / "graph.sched", serve_args=("--wait-for-agents", "30s", "--until", "120s", "--stop-agents"))
"""


def _child(tmp_path: Path, body: str) -> subprocess.Popen:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "c"), GRAPH],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _line(child: subprocess.Popen, starts: str) -> str:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith(starts), f"{line!r}; stderr: {child.stderr.read() if child.poll() is not None else ''}"
    return line[len(starts) :].strip()


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has ended)."""
    return _state(pid) not in ("", "Z")


def _state(pid: int) -> str:
    """Process `pid`'s state letter (R running, S sleeping, T stopped, Z ended; '' if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][:1]
    except FileNotFoundError:
        return ""


def _pending(pid: int) -> int:
    """The signals pending for process `pid` (its ShdPnd mask; none once it has ended)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1], 16) for line in status if line.startswith("ShdPnd:"))
    except FileNotFoundError:
        return 0


def _kill_left(pids: list[int], folder: Path) -> None:
    """Kill what the child left (checked to be the cluster's by its command line: a pid may be
    another's once its process ended)."""
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if str(folder).encode() in command:
            os.kill(pid, signal.SIGKILL)


@pytest.mark.live
def test_an_interrupt_as_a_process_starts_leaves_none_behind(tmp_path):
    """Between the process's start and its record (here: the child waits there for the test's
    word), a Ctrl-C was raised as KeyboardInterrupt, and `close` never knew of the process."""
    child = _child(
        tmp_path,
        """
        real = loopback.subprocess.Popen

        def started(*args, **kwargs):
            proc = real(*args, **kwargs)
            print("started", proc.pid, flush=True)
            sys.stdin.readline()  # (the test interrupts here)
            return proc

        loopback.subprocess.Popen = started
        with cluster:
            cluster.start_scheduler()
            print("recorded", flush=True)
            time.sleep(60)
        """,
    )
    pids: list[int] = []
    try:
        pids.append(int(_line(child, "started ")))
        child.send_signal(signal.SIGINT)
        time.sleep(0.5)  # (for the signal to be taken while the child waits)
        assert child.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # (a child the interrupt ended reads no more)
            child.stdin.write("go\n")
            child.stdin.flush()
        out, err = child.communicate(timeout=60)
        assert "KeyboardInterrupt" in err, err
        assert "recorded" not in out  # (the interrupt came before the body went on)
        assert not _alive(pids[0]), "the scheduler started as the interrupt came is still running"
    finally:
        child.kill()
        child.wait()
        _kill_left(pids, tmp_path / "c")


@pytest.mark.live
def test_a_second_interrupt_while_the_cluster_closes_hurries_it_and_leaves_none_behind(tmp_path):
    """Ctrl-C, then Ctrl-C again while `close` waits for the processes it asked to stop: the
    second cut `close` short, and what it had not yet stopped ran on. Here the scheduler cannot
    stop when asked (the test has stopped it, SIGSTOP), so `close` is waiting for it when the
    second interrupt comes (its SIGTERM pending says so)."""
    child = _child(
        tmp_path,
        """
        try:
            with cluster:
                scheduler = cluster.start_scheduler()
                agent = cluster.start_agent("a", "2:V100")
                cluster.wait_for(lambda: "agent a registered" in cluster.log("a"), 60, "the agent to register")
                print("pids", scheduler.pid, agent.pid, flush=True)
                time.sleep(60)
        except KeyboardInterrupt:
            print("interrupted; running:", [p.pid for p in cluster.processes.values() if p.poll() is None], flush=True)
            cluster.close()  # (again: nothing left to do)
            print("closed again", flush=True)
        """,
    )
    pids: list[int] = []
    try:
        pids += [int(pid) for pid in _line(child, "pids ").split()]
        os.kill(pids[0], signal.SIGSTOP)
        # Stopped before it is asked to stop: a SIGTERM that came while the SIGSTOP was still
        # pending would be taken first (the lower number) and no longer show as pending.
        deadline = time.monotonic() + 30
        while _state(pids[0]) != "T":
            assert time.monotonic() < deadline, "the scheduler did not stop on SIGSTOP"
            time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while not _pending(pids[0]) & (1 << (signal.SIGTERM - 1)):
            assert time.monotonic() < deadline and child.poll() is None, "close never asked the scheduler to stop"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        child.send_signal(signal.SIGINT)  # (and a third: it changes nothing more)
        interrupted = time.monotonic()
        out, err = child.communicate(timeout=60)
        assert "interrupted; running: []" in out and "closed again" in out, out + err
        assert "Traceback" not in err, err
        assert child.returncode == 0
        assert not any(_alive(pid) for pid in pids), [(pid, _alive(pid)) for pid in pids]
        assert time.monotonic() - interrupted < 8, "close waited out its grace (10s) though interrupted again"
    finally:
        child.kill()
        child.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGCONT)
        _kill_left(pids, tmp_path / "c")


def test_an_interrupt_held_back_is_delivered_once_the_block_is_done():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), deferred_interrupts() as held:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        assert held.signals == [signal.SIGINT, signal.SIGINT]
        done = True  # (reached: the interrupts did not cut the block short)
    assert done
    assert signal.getsignal(signal.SIGINT) is before


def test_a_block_not_interrupted_ends_as_it_would_have():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with deferred_interrupts() as held:
        pass
    assert held.signals == []
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
