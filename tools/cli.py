"""`roundhouse`: the command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import sys
import threading

from roundhouse.errors import EXIT_USER_ERROR, RoundhouseError
from roundhouse.runtime import registry
from roundhouse.runtime.values import quoted
from roundhouse.tools.common import error_text
from roundhouse.tools.outputs import standard_output

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
    "roundhouse.tools.explain_cmd",
    "roundhouse.tools.plot_cmd",
    "roundhouse.tools.report_cmd",
    "roundhouse.tools.serve_cmd",
    "roundhouse.tools.agent_cmd",
    "roundhouse.tools.submit_cmd",
    "roundhouse.tools.whatif_cmd",
    "roundhouse.tools.keys_cmd",
    "roundhouse.tools.profile_cmd",
)


# Options each of whose occurrences adds to the ones before (`--set`, `--vary`): the ones meant to be repeated.
_REPEATABLE = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that takes options only as spelled in full: argparse would otherwise
    take a prefix for the option it begins (`sweep --seed 3` for --seeds, three runs per point,
    where `run --seed` is an error), and refuses an option of one value given twice, where
    argparse would keep the last and drop the first without a word. Subcommands' parsers are
    made of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: dict[argparse.Action, list[str]] = {}

    def parse_known_args(self, args=None, namespace=None):
        self._given = {}  # (the values given so far are those of this command line only)
        return super().parse_known_args(args, namespace)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):
        # (argparse reads each occurrence of an option here, in whichever spelling: `--out A`,
        # `--out=A`, `-oA`, `-o A`.) A flag (store_true and the like, taking no value) may be
        # given twice: it says the same thing again, and nothing given is lost.
        if action.option_strings and action.nargs != 0 and not isinstance(action, _REPEATABLE):
            first = self._given.setdefault(action, arg_strings)
            if first is not arg_strings:
                raise argparse.ArgumentError(
                    action, f"given twice ({quoted(' '.join(first))} and {quoted(' '.join(arg_strings))}); keep one"
                )
        return super()._get_values(action, arg_strings)

    def _print_message(self, message: str, file=None) -> None:
        # Help (`--help`) is the command's one answer: argparse's own writer drops a failure to
        # write it, and the command said nothing and ended with 0. (Usage errors go to standard
        # error, written as argparse writes them.)
        if message and file is not None and file is sys.stdout:
            file.write(message)
            return
        super()._print_message(message, file)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with `command` (a command's name), of that one only, so that
    running one command does not import the modules of the fifteen others."""
    import importlib

    modules: tuple[str, ...] = COMMAND_MODULES
    if command is not None and f"roundhouse.tools.{command}_cmd" in COMMAND_MODULES:
        modules = (f"roundhouse.tools.{command}_cmd",)

    parser = Parser(
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
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def _negative_values(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """`--until -5h` (or `-inf`) read as `--until=-5h`: argparse takes a value that starts with '-' and is
    not a plain number for an option and answers "expected one argument", where the command's
    own check would say what is wrong with the value. Only after a long option that takes a
    value: after a flag (`check --fork -1`) the word is a positional argument."""
    valued = _valued_options(parser, argv)
    out: list[str] = []
    for arg in argv:
        # (`--` alone ends the options and takes no value: `explain RUN -- -5` keeps its -5)
        if out and out[-1].startswith("--") and out[-1] in valued and re.match(r"-(\.?\d|inf(inity)?$)", arg, re.IGNORECASE):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _valued_options(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The options that take a value of the command `argv` names (and of the commands it is
    under). (Options are never abbreviated: `allow_abbrev` is off.)"""
    valued: set[str] = set()
    words = iter(argv)
    while True:
        valued.update(name for action in parser._actions if action.nargs != 0 for name in action.option_strings)
        command = _subcommands(parser).get(next(words, ""))
        if command is None:
            return valued
        parser = command


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The command line read with a command's options allowed between its positional arguments
    (`submit ADDR --insecure jobs.csv`, `check a.sched --flag b.sched`). argparse reads them so
    only when asked, and not through subcommands: the command's own parser reads them again."""
    args, rest = parser.parse_known_args(argv)
    if not rest:
        return args
    command = _subcommands(parser).get(argv[0])
    if command is None or _subcommands(command):  # a command of commands: argparse's own message
        return parser.parse_args(argv)
    return command.parse_intermixed_args(argv[1:])


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `timeout`, a batch scheduler), raised where the command is, so that it
    stops as on Ctrl-C: files being written are removed (a record's `.part`, spill folders)."""


def _on_terminate(process: int):
    def handler(signum, frame):
        if os.getpid() != process:  # (a worker forked with this handler: it ends as it would have)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    return handler


def _reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (rather than a broken pipe
    of some connection the command made)."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # (no file behind it, or no poll here)
        return False


def _drop_what_stdout_cannot_take() -> None:
    """After an error: what standard output still holds and cannot take (a full disk) is
    dropped, rather than reported again at exit as Python's complaint, with status 120."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        standard_output.silence_stdout()


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is not threading.main_thread():  # (signals reach the main thread only)
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _on_terminate(os.getpid()))
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    # (The command comes first: the main parser's only other option is --help. Help, or an
    # unknown or missing command, gets the whole parser, whose messages list every command.)
    try:
        # (inside: a Ctrl-C while the command's modules are imported is "interrupted" too)
        parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
        argv = _negative_values(argv, parser)
        with standard_output.marking():
            return _run(parser, argv, debug)
    except RoundhouseError as err:
        detail = getattr(err, "detail", "")
        if debug and detail:
            print(detail.rstrip(), file=sys.stderr)
        print(error_text(err), file=sys.stderr)
        if detail and not debug:
            print("(the Python detail: run again with --debug)", file=sys.stderr)
        _drop_what_stdout_cannot_take()  # (`explain ... > /dev/full`: its result is the error)
        return err.exit_code
    except OSError as err:  # last resort: a file a command could not read or write
        if isinstance(err, BrokenPipeError) and _reader_gone():
            # (`roundhouse explain RUN JOB | head`: the reader had what it wanted; what is left
            # of the output goes nowhere, and the command ends as if it had printed it)
            standard_output.silence_stdout()
            return 0
        print(f"error: {_where(err)}{err.strerror or err}", file=sys.stderr)
        _drop_what_stdout_cannot_take()
        return EXIT_USER_ERROR
    except Terminated:
        print("terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run(parser: argparse.ArgumentParser, argv: list[str], debug: bool) -> int:
    """The command line read and its command run, standard output flushed at its end (a reader
    that went away, or a full disk, shows here, not as Python's complaint at exit)."""
    try:
        args = _parse(parser, argv)
    except SystemExit:  # (help printed, or a usage error: what argparse wrote must reach its reader)
        standard_output.flush()
        raise
    args.debug = debug  # (taken out of argv above: a handler that prints more with it reads it here)
    # The element files the command's graphs require are its own: their classes are forgotten
    # when it ends, so that a process that goes on (a notebook, a test) may require another
    # copy of a file defining classes of the same names. (A file forgotten so is known again
    # when required unchanged, as after a Simulation. Each of `whatif`'s two graphs has a
    # scope of its own within this one; a sweep's worker processes require the files anew.)
    with registry.scope(remember=True):
        status = args.handler(args)
    standard_output.flush()
    return int(status or 0)


def _where(err: OSError) -> str:
    """What a failure to read or write was about, as an error message starts: the file or files
    it names, or standard output. (Of another, such as a connection the command made, nothing
    is known here: its message is the system's alone.)"""
    if err.filename and err.filename2:
        return f"{err.filename} -> {err.filename2}: "
    if err.filename:
        return f"{err.filename}: "
    return "standard output: " if standard_output.failed_to_write(err) else ""


if __name__ == "__main__":
    sys.exit(main())
