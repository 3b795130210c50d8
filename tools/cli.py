"""`roundhouse`: the command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from runtime.errors import EXIT_USER_ERROR, RoundhouseError, UsageError

# Modules that provide `register(subparsers)`; each adds one subcommand whose handler
# (set with `parser.set_defaults(handler=...)`) takes the parsed args and returns an exit status.
COMMAND_MODULES = (
    "tools.run_cmd",
    "tools.check_cmd",
    "tools.render_cmd",
    "tools.elements_cmd",
    "tools.trace_cmd",
    "tools.reproduce_cmd",
    "tools.sweep_cmd",
    "tools.serve_cmd",
    "tools.agent_cmd",
    "tools.submit_cmd",
    "tools.keys_cmd",
    "tools.profile_cmd",
)


# --- helpers the subcommands share for their command-line values and output files ---


def positive_int(text: str) -> int:
    """An argparse `type` for counts such as --workers (argparse reports the error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


@contextlib.contextmanager
def writing(path: str | Path):
    """Report a failure to write `path` (or a file in it) as a message, not a traceback."""
    try:
        yield
    except OSError as err:
        raise UsageError(f"error: cannot write {err.filename or path}: {err.strerror or err}") from None


def output_folder(path: str, option: str) -> Path:
    """The folder `path` for a command's results, created now: a bad one is refused before any
    work is done (a long simulation's results are not lost to a typo)."""
    if not path.strip():
        raise UsageError(f"{option}: the folder name is empty")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {path}: not a folder")
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"error: cannot write {folder}: permission denied")
    return folder


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="roundhouse",
        description="Deep-learning cluster schedulers as graphs of small typed elements.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = args.handler(args)
    except RoundhouseError as err:
        print(str(err), file=sys.stderr)
        return err.exit_code
    except OSError as err:  # last resort: a file a command could not read or write
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}{err.strerror or err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
