"""Shared by the benchmark scripts: argument types that refuse out-of-range values and empty
paths with a usage error (exit status 2) before anything starts, a script's description for its
--help, the check of a program given on the command line, the package compiled to bytecode
before command-line runs are timed, a child process stopped with time to clean up, a script's
main run so that Ctrl-C ends it with a message, and the refusal of a helper module run as a
script."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


def at_least(minimum: float) -> Callable[[str], float]:
    """An argparse type: a finite number of at least `minimum`, a whole number if `minimum` is an int."""
    return _bounded(minimum, lambda value: value >= minimum, f"at least {minimum:g}")


def above(minimum: float) -> Callable[[str], float]:
    """An argparse type: a finite number greater than `minimum`."""
    return _bounded(minimum, lambda value: value > minimum, f"greater than {minimum:g}")


def _bounded(minimum: float, fits: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    kind = int if isinstance(minimum, int) else float

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'a whole number' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if not fits(value):  # (NaN fits nothing)
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
        if not math.isfinite(value):  # (no option here means "for ever")
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        return value

    return convert


def path_option(text: str) -> Path:
    """An argparse type: a path, not empty (Path("") is the working folder, where an empty
    value, such as an unset shell variable's, would have a script read or write)."""
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got ''")
    return Path(text)


def description(doc: str | None) -> str:
    """A script's description for its --help: the first paragraph of its docstring, as one line."""
    first = (doc or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in first.splitlines())


def program_problem(program: str) -> str | None:
    """What is wrong with `program` (a path, or a name looked up on PATH) as a program to run,
    or None when it can be run."""
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.exists(program):
            return "no such file"
        if os.path.isdir(program):
            return "a folder, not a program"
        if not os.access(program, os.X_OK):
            return "not executable"
        return None
    return None if shutil.which(program) else "no such program on PATH"


def plural(count: int, word: str) -> str:
    """`count` and `word`, with an s unless `count` is 1: "1 agent", "4 agents"."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


class Terminated(SystemExit, KeyboardInterrupt):
    """SIGTERM, raised where the script is. As a SystemExit it ends the script with status 143
    and no traceback; as a KeyboardInterrupt it passes through a simulation as Ctrl-C does (the
    engine takes any other SystemExit raised in an element's tick for that element's failure,
    and would print its traceback)."""


def exit_on_terminate() -> None:
    """Make SIGTERM (`kill PID`) end this script as Ctrl-C does, through its cleanup: the
    servers and processes it started are stopped and its temporary folders removed, rather
    than left running. A second SIGTERM ends it at once."""
    import signal

    def stop(signum, frame) -> NoReturn:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated(TERMINATED_STATUS)

    signal.signal(signal.SIGTERM, stop)


# The exit statuses of a script stopped by Ctrl-C and by SIGTERM, as a shell gives a process
# ended by SIGINT and by SIGTERM.
INTERRUPTED_STATUS = 128 + 2
TERMINATED_STATUS = 128 + 15


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Run a script's `main` and exit with its status. Ctrl-C ends it after its cleanup (the
    `finally` blocks and `with` statements the interrupt passes through) with one line and
    status 130, rather than with a traceback of wherever the interrupt landed. SIGTERM through
    `exit_on_terminate` keeps its own status."""
    try:
        status = main()
    except KeyboardInterrupt as interrupt:
        if isinstance(interrupt, SystemExit):  # (Terminated: ends the script with its own status)
            raise
        print("interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED_STATUS)
    sys.exit(status)


# How long a child process asked to stop may take to clean up before it is killed.
STOP_GRACE_S = 10.0


def run_child(args: list[str], **popen) -> subprocess.CompletedProcess:
    """`subprocess.run(args, capture_output=True, text=True)`, except when this script is
    interrupted meanwhile (Ctrl-C, or SIGTERM through `exit_on_terminate`): subprocess.run then
    kills the child at once, which leaves what it was writing (a run's spilled explanation
    record, tens of MB in /tmp); here it is asked to stop (SIGTERM), as `kill` would, and
    killed only if it has not ended within STOP_GRACE_S seconds."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen) as child:
        try:
            out, err = child.communicate()
        except BaseException as interrupt:
            if isinstance(interrupt, KeyboardInterrupt) and not isinstance(interrupt, Terminated):
                # Ctrl-C reaches the whole process group: the child is stopping already, and a
                # SIGTERM now would cut its cleanup short.
                _ended(child, STOP_GRACE_S)
            if child.poll() is None:
                child.terminate()
                if not _ended(child, STOP_GRACE_S):
                    child.kill()
                    child.wait()
            raise
    return subprocess.CompletedProcess(args, child.returncode, out, err)


def _ended(child: subprocess.Popen, seconds: float) -> bool:
    """Whether `child` ends within `seconds`."""
    try:
        child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def compile_bytecode() -> None:
    """Compile the package's modules to bytecode before timing command-line runs, as installing
    a wheel does: an editable install on a machine that sets PYTHONDONTWRITEBYTECODE (this
    project's does) would otherwise compile every module it imports at every start, some 0.2 s
    of each run that no installed copy pays. (Written into each folder's __pycache__, which git
    ignores; a module edited later is compiled again when imported.)"""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for folder in ("runtime", "elements", "tools", "traces", "wire", "agents"):
        compileall.compile_dir(root / folder, quiet=1, workers=1)
    compileall.compile_file(root / "roundhouse" / "__init__.py", quiet=1)


def not_a_script(instead: str) -> NoReturn:
    """For a helper module run directly: say what to run instead, and exit with a usage error."""
    print(f"this module is a helper of the benchmarks and does nothing on its own; run {instead}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    not_a_script("one of the scripts in benchmarks/ (see docs/cost-model.md)")
