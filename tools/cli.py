"""`roundhouse`: the command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import re
import sys

from roundhouse.errors import EXIT_USER_ERROR, RoundhouseError

# Modules that provide `register(subparsers)`; each adds one subcommand whose handler
# (set with `parser.set_defaults(handler=...)`) takes the parsed args and returns an exit status.
COMMAND_MODULES = (
    "roundhouse.tools.run_cmd",
    "roundhouse.tools.check_cmd",
    "roundhouse.tools.render_cmd",
    "roundhouse.tools.elements_cmd",
    "roundhouse.tools.trace_cmd",
    "roundhouse.tools.reproduce_cmd",
    "roundhouse.tools.sweep_cmd",
    "roundhouse.tools.serve_cmd",
    "roundhouse.tools.agent_cmd",
    "roundhouse.tools.submit_cmd",
    "roundhouse.tools.keys_cmd",
    "roundhouse.tools.profile_cmd",
)


# --- helpers the subcommands share for their command-line values ---


def positive_int(text: str) -> int:
    """An argparse `type` for counts such as --workers (argparse reports the error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# An error message names its place, if it has one, then says "error:" (`g.sched:3:9: error: ...`,
# `t.csv:4: error: ...`); one without a place starts with it (`error: --cluster: ...`).
_ERROR_FORM = re.compile(r"([^\n]*?: )?error: ")


def error_text(err: RoundhouseError) -> str:
    """How the command line prints an error: in the one form above, whatever raised it."""
    text = str(err)
    return text if _ERROR_FORM.match(text) else f"error: {text}"


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="roundhouse",
        description="Deep-learning cluster schedulers as graphs of small typed elements.",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="with an error that comes from Python code (an element that failed), also print its traceback "
        "(may be given anywhere on the command line)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    args = parser.parse_args([a for a in argv if a != "--debug"])
    try:
        status = args.handler(args)
    except RoundhouseError as err:
        detail = getattr(err, "detail", "")
        if debug and detail:
            print(detail.rstrip(), file=sys.stderr)
        print(error_text(err), file=sys.stderr)
        if detail and not debug:
            print("(the Python detail: run again with --debug)", file=sys.stderr)
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
