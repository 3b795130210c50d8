"""The guardian: a small process that outlives its agent just long enough to kill what the
agent's workers started.

A worker dies with its agent (its parent-death signal), but that signal is not inherited: a
command job's own children (`sh -c 'train; ...'` runs `train` as one) would run on, training
behind the scheduler's back. Each worker leads its own process group, so the agent tells the
guardian each worker's group as it starts and when it has ended, over a pipe whose writing end
only the agent holds; when that end closes, however the agent ended (SIGKILL included), the
guardian kills every group still listed, and exits. Told the agent's work folder (one the agent
made, and is not to keep), it removes it then too, unless the agent closed its end as it exits
normally (it removes or keeps its folder itself): a killed agent leaves no folder behind.

It runs as a script (`python -I -S guardian.py FD`), so it imports nothing but the standard
library and starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

log = logging.getLogger("roundhouse.agent")


class Guardian:
    """The agent's side: start the guardian; `watch` and `forget` a worker's process group."""

    def __init__(self) -> None:
        read, self._write = os.pipe()  # (neither end is inherited by the processes the agent starts)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(read)],
                pass_fds=(read,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # not stopped by the terminal's Ctrl-C with the agent
            )
        except BaseException:
            os.close(self._write)
            raise
        finally:
            os.close(read)
        os.set_blocking(self._write, False)  # a stuck guardian must not stop the agent
        self.lost = False

    @property
    def pid(self) -> int:
        return self._process.pid

    def watch(self, group: int) -> None:
        """A worker started, leading process group `group`: killed if the agent dies."""
        self._say(f"+{group}")

    def remove_on_death(self, folder: str) -> None:
        """The agent's work folder, removed if the agent dies without closing the guardian."""
        self._say(f"!{folder}")

    def forget(self, group: int) -> None:
        """A worker ended (what was left of its group was killed): no longer the guardian's."""
        self._say(f"-{group}")

    def close(self) -> None:
        """The agent is done: the guardian kills any group still listed and exits (leaving the
        work folder to the agent)."""
        self._say("=")
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _say(self, line: str) -> None:
        if self.lost or self._write < 0:
            return
        try:
            os.write(self._write, line.encode() + b"\n")
        except OSError as err:  # (gone, or not reading: a full pipe)
            self.lost = True
            log.warning(
                "the guardian of the workers' process groups is not listening (%s): "
                "if this agent dies, the processes its workers started may outlive it",
                err.strerror or err,
            )


def kill_group(group: int) -> None:
    """Kill process group `group`, if anything is left in it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def main() -> None:
    pipe = int(sys.argv[1])
    groups: set[int] = set()
    folder = ""  # the agent's work folder, to remove if the agent dies (not if it closed us)
    buffer = b""
    while True:
        data = os.read(pipe, 1 << 16)
        if not data:  # the agent closed its end, or died
            break
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.startswith((b"!", b"=")):
                folder = os.fsdecode(line[1:])
                continue
            group = int(line[1:])
            if line.startswith(b"+"):
                groups.add(group)
            else:
                groups.discard(group)
    for group in groups:
        kill_group(group)
    if folder:
        remove_unless_taken(folder)


def remove_unless_taken(folder: str) -> None:
    """Remove a killed agent's work folder, unless an agent started since has taken it: one
    holds its `agent.lock` for its whole life (agents/agent/workfolder.py). The lock is held
    while the folder goes, as an agent leaving holds it, so that no agent takes it half removed."""
    try:
        fd = os.open(os.path.join(folder, "agent.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:  # (the folder is gone already)
        return
    try:
        # (The agent's own processes, forked with its descriptors, share its lock until the
        # kills above take them: a while is given to them, not to an agent that took the folder.)
        deadline = time.monotonic() + _TAKEN_AFTER_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:  # (another agent works there now)
                    return
                time.sleep(0.05)
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)


# How long the lock of a killed agent's folder may stay held by its dying processes.
_TAKEN_AFTER_S = 5.0


if __name__ == "__main__":
    main()
