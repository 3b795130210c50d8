"""A live cluster on this machine: a `roundhouse serve` scheduler and `roundhouse agent`s with
fake GPUs, as real subprocesses on 127.0.0.1 (insecure mode, or CURVE with a key folder).

Used by the tests, the live-fidelity reproduction and the benchmarks. Ports are picked free,
every wait has a timeout, and `close()` stops every process it started, by process id. An
interrupt (Ctrl-C) is held back while a process starts until it is recorded, and while
`close()` stops them until it is done (tools/deferred_interrupts.py): neither leaves a
process behind."""

from __future__ import annotations

import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from roundhouse.agents.ports import LOWEST, first_outgoing_port
from roundhouse.tools.deferred_interrupts import deferred_interrupts

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendezvous_base() -> int:
    """The first of 500 rendezvous ports for the cluster's multi-worker jobs: drawn below the
    system's ephemeral ports, which any outgoing connection may take between the scheduler's
    choice and the job's bind (a job then fails with "address already in use"); drawn at
    random so that clusters started side by side (tests in parallel) rarely share ports."""
    return random.randint(LOWEST, max(LOWEST, first_outgoing_port() - 501))


def with_defaults(defaults: dict[str, str], given: Sequence[str]) -> list[str]:
    """The options `given`, after each default (flag: value) they do not give themselves: the
    commands refuse an option given twice, so one given takes its default's place."""
    named = {arg.split("=", 1)[0] for arg in given}
    return [part for flag, value in defaults.items() if flag not in named for part in (flag, value)] + list(given)


class Loopback:
    emulate_agents = False  # (what `start_agent` does unless told)

    def __init__(
        self,
        folder: Path,
        graph: Path,
        heartbeat: str = "0.3s",
        timeout: str = "3s",
        serve_args: tuple[str, ...] = (),
        security: tuple[str, ...] = ("--insecure",),
    ):
        # Absolute: the processes start in another folder (the project's) than the caller's.
        self.folder = Path(folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.graph = Path(graph).resolve()
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.journal_path = self.folder / "journal.sqlite"
        base = rendezvous_base()
        defaults = {
            "--journal": str(self.journal_path),
            "--checkpoints": str(self.folder / "checkpoints"),
            "--heartbeat": heartbeat,
            "--heartbeat-timeout": timeout,
            "--ports": f"{base}..{base + 500}",
            "--out": str(self.folder / "out"),
            "--wait-for-agents": "20s",
        }
        self.serve_args = ["--bind", self.address, *security, *with_defaults(defaults, serve_args)]
        self.processes: dict[str, subprocess.Popen] = {}  # (by name: the last started of each)
        self._started: list[subprocess.Popen] = []  # every process started, for `close`

    def __enter__(self) -> Loopback:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- processes ---
    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        # An interrupt between the process's start and its record here would leave it running
        # with nothing to stop it (it is in this process's group: a Ctrl-C at a terminal
        # reaches it, one sent to this process alone does not): held back until it is recorded.
        with deferred_interrupts(), open(self.folder / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "roundhouse.tools.cli", *args],
                cwd=PROJECT_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            self._started.append(proc)
            self.processes[name] = proc
        return proc

    def start_scheduler(self) -> subprocess.Popen:
        return self._spawn("scheduler", ["serve", str(self.graph), *self.serve_args])

    def start_agent(
        self,
        name: str,
        gpus: str = "2:V100",
        extra: tuple[str, ...] = ("--insecure",),
        emulate: bool | None = None,
        nodes: int | None = None,
    ) -> subprocess.Popen:
        """An agent named `name` with `gpus` (COUNT:TYPE) faked, its log `name`.log, emulating its
        GPUs if `emulate` (by default, if the class's `emulate_agents`). With `nodes`, one process
        emulating that many nodes, `name`-0 to `name`-{nodes-1} (`--nodes`, which implies
        `--emulate`); such a process runs no job processes and refuses their options (work
        folder, revoke grace, threads), so it is given none."""
        defaults = {"--scheduler": self.address, "--name": name, "--fake-gpus": gpus}
        if nodes is None:
            defaults |= {"--threads-per-gpu": "1", "--workdir": str(self.folder / name), "--revoke-grace": "30s"}
            emulate = self.emulate_agents if emulate is None else emulate
        else:
            defaults["--nodes"], emulate = str(nodes), True
        args = ["agent", *with_defaults(defaults, extra)]
        return self._spawn(name, args + (["--emulate"] if emulate else []))

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.processes[name]
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait(timeout=30)

    def close(self, grace: float = 10.0) -> None:
        """Stop every process started and still running: SIGTERM, then SIGKILL to those still
        running after `grace` seconds. An interrupt meanwhile does not cut it short (which would
        leave processes running): it hurries it (SIGKILL at once) and is delivered once every
        process has ended. Closing again stops what was started since, if anything."""
        with deferred_interrupts() as held:
            running = [proc for proc in self._started if proc.poll() is None]
            for proc in running:
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while running and not held.signals and time.monotonic() < deadline:
                time.sleep(0.05)
                running = [proc for proc in running if proc.poll() is None]
            for proc in running:
                if proc.poll() is None:
                    proc.kill()
            for proc in running:
                proc.wait(timeout=10)

    # --- looking in ---
    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"===== {name} =====\n{self.log(name)[-6000:]}" for name in self.processes)

    def query(self, sql: str, args=()) -> list[tuple]:
        if not self.journal_path.exists():
            return []
        db = sqlite3.connect(f"file:{self.journal_path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute(sql, args).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            db.close()

    def wait_for(self, check, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if check():
                return
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}\n{self.logs()}")

    def wait_exit(self, name: str, timeout: float) -> int:
        try:
            return self.processes[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{name} did not exit within {timeout:g}s\n{self.logs()}") from None
