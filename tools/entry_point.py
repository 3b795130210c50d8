"""The `roundhouse` command's entry point: the command line (tools/cli.py) imported under a
Ctrl-C guard. Importing it takes about half a second (NumPy, polars); a Ctrl-C in that time
would print Python's traceback rather than what a Ctrl-C prints later, "interrupted"."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from roundhouse.tools.cli import main as command_line
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return command_line()
