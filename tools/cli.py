"""`roundhouse`: the command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import sys

from runtime.errors import RoundhouseError

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
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
