"""The `roundhouse` command's entry point: the command line (tools/cli.py) imported under a
Ctrl-C guard. Importing it takes about half a second (NumPy, polars); a Ctrl-C in that time
would print Python's traceback rather than what a Ctrl-C prints later, "interrupted". It
also sets what must be set before NumPy loads."""

from __future__ import annotations

import os
import sys


def main() -> int:
    # OpenBLAS's threads only spin on a simulation's small arrays (scipy's fit of an elastic
    # profile, Pollux's search): one thread does the same work, to the same bits, in a fraction
    # of the CPU time. Set before NumPy loads, and inherited by the processes a sweep starts.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from roundhouse.tools.cli import main as command_line
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return command_line()
