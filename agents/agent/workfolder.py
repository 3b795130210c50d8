"""The agent's work folder: leases, job logs and the jobs' working folders (and the reports
socket). What the agent made there is removed when it exits, unless it is asked to keep it."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("roundhouse.agent")
PARTS = ("leases", "logs", "jobs")


def make_workfolder(workdir: Path | None, name: str) -> tuple[Path, list[Path]]:
    """The work folder (a temporary one if `workdir` is None) with its parts, and those of them
    that did not exist before (the agent's to remove)."""
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix=f"rh-{name}-"))
        made = [workdir]
    else:
        made = [] if workdir.exists() else [workdir]
    for sub in PARTS:
        path = workdir / sub
        if not path.exists():
            made.append(path)
        path.mkdir(parents=True, exist_ok=True)
    return workdir, made


def leave_workfolder(workdir: Path, made: list[Path], keep: bool, name: str) -> None:
    # The socket is useless once the agent is gone, kept folder or not.
    (workdir / "reports.sock").unlink(missing_ok=True)
    if keep:
        log.info("agent %s: kept its work folder %s (job logs in logs/)", name, workdir)
        return
    for path in made:
        shutil.rmtree(path, ignore_errors=True)
    if workdir in made:
        log.info("agent %s: removed its work folder %s", name, workdir)
    else:  # a folder the user named: only what the agent made in it goes
        log.info("agent %s: removed its files (leases, logs, jobs) from %s", name, workdir)
