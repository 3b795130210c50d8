"""The agent's work folder: leases, job logs and the jobs' working folders (and the reports
socket). What the agent made there is removed when it exits, unless it is asked to keep it.
One agent at a time: a live agent holds a lock on `agent.lock` in it for its whole life (two
agents in one folder would take each other's reports socket and remove each other's files)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import attrs

from roundhouse.runtime.files import hold_lock, make_folder

log = logging.getLogger("roundhouse.agent")
PARTS = ("leases", "logs", "jobs")
LOCK = "agent.lock"


@attrs.define(eq=False)
class WorkFolder:
    path: Path
    made: list[Path]  # what did not exist before (the agent's to remove, with what is in it)
    lock_fd: int
    # Parents of the folder made with it, innermost first: removed only if left empty (another
    # agent or a serve may have put its own folder beside ours since).
    parents: list[Path] = attrs.Factory(list)

    def leave(self, keep: bool, name: str) -> None:
        try:
            _leave(self, keep, name)
        finally:
            os.close(self.lock_fd)  # (the lock goes with it)


def make_workfolder(workdir: Path | None, name: str) -> WorkFolder:
    """The work folder (a temporary one if `workdir` is None) with its parts, locked for this
    agent. Raises UsageError for a folder that cannot be made or that a live agent uses."""
    parents: list[Path] = []
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix=f"rh-{name}-"))
        made = [workdir]
    else:
        workdir = workdir.absolute()  # (the jobs, which start elsewhere, get paths in it)
        missing = _missing(workdir)
        make_folder(workdir, "--workdir")
        made = missing[:1]
        parents = missing[1:]
    try:
        lock_fd = _lock(workdir)
    except BaseException:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        _remove_if_empty(parents)
        raise
    for sub in PARTS:
        path = workdir / sub
        if not path.exists():
            made.append(path)
        path.mkdir(parents=True, exist_ok=True)
    return WorkFolder(workdir, made, lock_fd, parents)


def _missing(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, innermost first."""
    missing = []
    for path in [folder, *folder.parents]:
        if path.exists():
            break
        missing.append(path)
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in folders:  # (innermost first: each may be left empty by the one before)
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone): someone else's now
            return


def _lock(workdir: Path) -> int:
    """Hold an exclusive lock on the folder's lock file, as long as the descriptor returned is
    open (`files.hold_lock`)."""
    path = workdir / LOCK
    busy = f"--workdir {workdir}: another agent is using this work folder (it holds {path}); give each agent its own --workdir"
    return hold_lock(path, f"--workdir {workdir}", busy)


def _leave(folder: WorkFolder, keep: bool, name: str) -> None:
    workdir = folder.path
    # The socket and the lock file are useless once the agent is gone, kept folder or not
    # (removed while still locked, so that no other agent can lock the file being removed).
    (workdir / "reports.sock").unlink(missing_ok=True)
    (workdir / LOCK).unlink(missing_ok=True)
    if keep:
        log.info("agent %s: kept its work folder %s (job logs in logs/)", name, workdir)
        return
    for path in folder.made:
        shutil.rmtree(path, ignore_errors=True)
    _remove_if_empty(folder.parents)
    if workdir in folder.made:
        log.info("agent %s: removed its work folder %s", name, workdir)
    else:  # a folder the user named: only what the agent made in it goes
        log.info("agent %s: removed its files (leases, logs, jobs) from %s", name, workdir)
