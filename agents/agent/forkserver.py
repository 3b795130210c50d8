"""Training processes forked from one that has already imported PyTorch.

`import torch` costs two to three seconds of CPU in every new Python process, and a job starts
one process per worker on every launch and on every resume after a preemption. So an agent (and
the profiler, which must time launches as the agent makes them) keeps a fork server: a process
started once, which imports PyTorch and the client library and then forks a child for each
worker of a job given as a workload module. The child runs the module as `python -m` would, in
its own session (signalled as a group, as before), with its own environment, working folder and
log. The server reports each child's exit status; `ForkedWorker` answers `pid`, `poll()` and
`wait()` as a `subprocess.Popen` does. Jobs given as commands still start new processes.

Deaths follow the same chain as before: a child dies with the server, and the server with the
thread that started it (Linux's parent-death signal), so a lost agent's jobs do not run on.

The server (`main`, given the socket to its owner) writes one JSON line per event (`ready`,
`started`, `exited`) and reads one per fork request.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# What the children would import first; anything missing is left to the child to import.
PRELOADED = (
    "torch",
    "torch.nn",
    "torch.distributed",
    "torch.utils.data",
    "zmq",
    "roundhouse.agents.client",
    "roundhouse.agents.elastic",
    "roundhouse.agents.workloads.common",
)
READY_TIMEOUT_S = 120.0  # importing PyTorch on a loaded machine; past this the server is taken as failed

try:  # loaded here, not in a forked child (loading a library after fork is unsafe)
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _libc = None


def die_with_parent() -> None:
    """In a new process: die when the thread that started it ends (Linux), so that a lost
    agent's jobs do not run on while the scheduler restarts them elsewhere."""
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ForkServer:
    """The owner's side: start the server, ask it for children, collect their exits."""

    def __init__(self, env: dict[str, str] | None = None):
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from roundhouse.agents.agent.forkserver import main; main()", str(theirs.fileno())],
            env=env,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C goes to the agent, which revokes gracefully
            preexec_fn=die_with_parent,
        )
        theirs.close()
        ours.setblocking(False)
        self._socket = ours
        self._buffer = b""
        self._started_at = time.monotonic()
        self._ready = False
        self.lost = False  # the server ended (or never became ready): start processes directly
        # By request: a process id may be reused once its process has been reaped.
        self._children: set[int] = set()
        self._exits: dict[int, int] = {}
        self._next_id = 0

    def ready(self) -> bool:
        """Whether forks can be asked for now (without waiting)."""
        self._read(block=False)
        if not self._ready and not self.lost and time.monotonic() - self._started_at > READY_TIMEOUT_S:
            self._lose()
        return self._ready and not self.lost

    def wait_ready(self) -> bool:
        """Wait until the server has imported what it preloads; False if it failed to."""
        while not self.ready():
            if self.lost:
                return False
            self._read(block=True, timeout=1.0)
        return True

    def start(self, module: str, env: dict[str, str], cwd: Path, log_path: Path) -> ForkedWorker:
        """Fork a child that runs `module` as `python -m` would. Raises OSError if it cannot."""
        if not self.ready():
            raise OSError("the fork server is not running")
        self._next_id += 1
        request = {"id": self._next_id, "module": module, "env": env, "cwd": str(cwd), "log": str(log_path)}
        self._socket.setblocking(True)
        try:
            self._socket.sendall(json.dumps(request).encode() + b"\n")
        except OSError as err:
            self._lose()
            raise OSError(f"the fork server is gone: {err}") from err
        finally:
            self._socket.setblocking(False)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not self.lost:
            for event in self._read(block=True, timeout=0.5):
                if event.get("id") != request["id"]:
                    continue
                if "error" in event:
                    raise OSError(event["error"])
                self._children.add(request["id"])
                return ForkedWorker(self, int(event["started"]), request["id"])
        self._process.kill()  # stuck: give it up, and start processes directly from now on
        self._lose()
        raise OSError("the fork server did not answer")

    def returncode(self, request: int, block: bool = False, timeout: float | None = None) -> int | None:
        """The exit status (negative: the signal that ended it) of the child forked for a
        request, or None while it runs."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._read(block=False)
            if request in self._exits or not block:
                return self._exits.get(request)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self._read(block=True, timeout=0.5 if left is None else min(0.5, left))

    def close(self) -> None:
        """End the server at once (any child still running dies with it)."""
        with contextlib.suppress(OSError):
            self._socket.close()
        self._process.kill()
        self._process.wait()
        self._lose()

    @property
    def pid(self) -> int:
        return self._process.pid

    def _read(self, block: bool, timeout: float | None = None) -> list[dict]:
        if self._socket.fileno() < 0:
            return []
        if block and not select.select([self._socket], [], [], timeout)[0]:
            return []
        events = []
        while True:
            try:
                data = self._socket.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:
                self._lose()
                break
            self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            event = json.loads(line)
            if event.get("ready"):
                self._ready = True
            elif "exited" in event:
                self._exits[int(event["id"])] = int(event["code"])
                self._children.discard(int(event["id"]))
            events.append(event)
        return events

    def _lose(self) -> None:
        # The server's children die with it (their parent-death signal).
        self.lost = True
        for request in self._children:
            self._exits.setdefault(request, -signal.SIGKILL)
        self._children.clear()


class ForkedWorker:
    """A child of the fork server, answering as much of `subprocess.Popen` as the agent uses."""

    def __init__(self, server: ForkServer, pid: int, request: int):
        self._server = server
        self.pid = pid
        self._request = request
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.returncode(self._request)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.returncode(self._request, block=True, timeout=timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
        return self.returncode


# --- the server process ---


def _serve(sock: socket.socket) -> dict | None:
    """Fork a child per request; report exits. Returns the request in a child, None at the end."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # set_wakeup_fd needs a handler to write
    signal.set_wakeup_fd(wake_w)
    server = os.getpid()
    requests: dict[int, int] = {}  # the request each living child was forked for, by process id

    def send(**event) -> None:
        sock.sendall(json.dumps(event).encode() + b"\n")

    send(ready=server)
    buffer = b""
    while True:
        readable = select.select([sock, wake_r], [], [])[0]
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            send(exited=pid, id=requests.pop(pid, -1), code=os.waitstatus_to_exitcode(status))
        if sock not in readable:
            continue
        data = sock.recv(1 << 16)
        if not data:
            return None  # the owner closed: end (the children die with this process)
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            request = json.loads(line)
            sys.stdout.flush()
            sys.stderr.flush()
            settled_r, settled_w = os.pipe()
            try:
                pid = os.fork()
            except OSError as err:
                os.close(settled_r)
                os.close(settled_w)
                send(id=request["id"], error=f"cannot fork: {err}")
                continue
            if pid == 0:
                # Its own session and death with the server before the owner hears of it, so
                # that the owner can signal its group at once.
                os.setsid()
                die_with_parent()
                if os.getppid() != server:
                    os._exit(1)  # the server ended before the signal was set
                os.close(settled_r)
                os.close(settled_w)
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                sock.close()
                return request
            os.close(settled_w)
            os.read(settled_r, 1)  # end of file once the child has settled (or died)
            os.close(settled_r)
            requests[pid] = request["id"]
            send(id=request["id"], started=pid)


def _become(request: dict) -> None:
    """In the child: the worker's output, folder, environment, threads and arguments."""
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    threads = request["env"].get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
        # The OpenMP runtime read its variable when the server started, not now.
        sys.modules["torch"].set_num_threads(int(threads))
    # As `python -m` has it: the working folder first, then PYTHONPATH's folders.
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[0:1] = [request["cwd"], *extra]
    sys.argv = [request["module"]]


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    try:
        request = _serve(sock)
    except (ConnectionResetError, BrokenPipeError):  # the owner (an agent stopping) went first: end quietly
        return
    if request is None:
        return
    _become(request)
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
