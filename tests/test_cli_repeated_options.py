"""An option that takes one value, given twice, is refused naming it and both values (argparse
would keep the last without a word), in every command and subcommand, whichever way it is
spelled; options meant to be repeated (`--set`, `--vary`) and flags still may be. And counts in
what the commands say on the way are written with their digits grouped, as errors write them."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from roundhouse.tools.cli import build_parser, main
from roundhouse.tools.outputs.stdout_result import plural
from roundhouse.tools.sweep_cmd import SweepProgress
from tests.conftest import REPO

REPEATABLE = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Each command's words (`trace generate`) and parser, found through the parser itself."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _options(kind: str):
    """The options of every command that take one value (`single`), that are meant to be repeated
    (`repeated`), or that are flags taking none (`flag`)."""
    for path, parser in _commands(build_parser()):
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            found = "repeated" if isinstance(action, REPEATABLE) else "flag" if action.nargs == 0 else "single"
            if found == kind:
                yield pytest.param(path, parser, action, id=f"{' '.join(path) or 'roundhouse'} {action.option_strings[-1]}")


def _required(parser: argparse.ArgumentParser, but: argparse.Action) -> list[str]:
    """Placeholder texts, to follow the option tested, for what a command requires besides: its
    positional arguments, required options (`serve --bind`), and a command of commands' command."""
    texts: list[str] = []
    for action in parser._actions:
        if action is but:
            continue
        if isinstance(action, argparse._SubParsersAction):
            texts.append("elements")  # (a command that requires nothing more)
        elif not action.option_strings:
            texts += [] if action.nargs in ("?", "*") else ["x"]
        elif action.required:
            texts += [action.option_strings[-1], "x"]
    return texts


def test_every_command_is_found_with_options_of_each_kind():
    commands = {" ".join(path) for path, _ in _commands(build_parser())}
    assert {"run", "sweep", "trace generate", "trace convert", "keys", "submit", "serve", "agent"} <= commands
    assert len(list(_options("single"))) > 50
    assert len(list(_options("repeated"))) >= 5
    assert len(list(_options("flag"))) >= 10


@pytest.mark.parametrize("spelling", ["--opt=V", "--opt V"])
@pytest.mark.parametrize(("path", "parser", "action"), list(_options("single")))
def test_an_option_of_one_value_given_twice_is_refused_naming_it_and_both_values(path, parser, action, spelling, capsys):
    first, second = action.option_strings[0], action.option_strings[-1]  # (`-o` then `--output`, where both exist)
    again = [f"{second}=22"] if spelling == "--opt=V" else [second, "22"]
    argv = [*path, first, "11", *again]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    said = (
        f"roundhouse {' '.join(path)}: error: argument {'/'.join(action.option_strings)}: given twice ('11' and '22'); keep one"
    )
    assert said in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("path", "parser", "action"), list(_options("repeated")))
def test_an_option_meant_to_be_repeated_still_may_be(path, parser, action):
    option = action.option_strings[-1]
    args, _ = parser.parse_known_args([option, "a=1", f"{option}=b=2", *_required(parser, action)])
    assert getattr(args, action.dest) == ["a=1", "b=2"]


@pytest.mark.parametrize(("path", "parser", "action"), list(_options("flag")))
def test_a_flag_given_twice_is_taken_as_once(path, parser, action):
    option = action.option_strings[-1]
    once, _ = parser.parse_known_args([option, *_required(parser, action)])
    twice, _ = parser.parse_known_args([option, option, *_required(parser, action)])
    assert getattr(twice, action.dest) == getattr(once, action.dest) != action.default


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["run", "g.sched", "--trace", "a.csv", "--trace", "b.csv"],
            "roundhouse run: error: argument --trace: given twice ('a.csv' and 'b.csv')",
        ),
        (
            ["run", "g.sched", "--until", "5h", "--until=6h"],
            "roundhouse run: error: argument --until: given twice ('5h' and '6h')",
        ),
        # (a negative value, read as `--until=-6h` before argparse sees it)
        (["run", "g.sched", "--until", "5h", "--until", "-6h"], "argument --until: given twice ('5h' and '-6h')"),
        (
            ["run", "g.sched", "--out", "A", "--quiet", "--out", "B"],
            "roundhouse run: error: argument --out: given twice ('A' and 'B')",
        ),
        (
            ["trace", "generate", "-oa.csv", "--output", "b.csv"],
            "roundhouse trace generate: error: argument -o/--output: given twice ('a.csv' and 'b.csv')",
        ),
        # (options between positional arguments: the command's parser reads the line again)
        (
            ["check", "a.sched", "--cluster", "2x4:V100", "b.sched", "--cluster=4x4:V100"],
            "roundhouse check: error: argument --cluster: given twice ('2x4:V100' and '4x4:V100')",
        ),
    ],
)
def test_a_value_given_twice_is_refused_before_anything_is_read(argv, said, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (none of the files named exists: the refusal comes first)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_roundhouse_command_refuses_an_option_given_twice(tmp_path):
    # (the graph would run: the refusal is of the command line alone, before the graph is read)
    graph = REPO / "graphs" / "fifo.sched"
    command = [sys.executable, "-m", "roundhouse.tools.cli", "run", str(graph), "--out", "first", "--until", "1h", "--out=second"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == "roundhouse run: error: argument --out: given twice ('first' and 'second'); keep one"
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_set_given_twice_for_one_name_is_still_refused_by_its_own_check(capsys):
    # (--set repeats, each for a name of its own: the same name twice is its own refusal)
    assert main(["check", str(REPO / "graphs" / "fifo.sched"), "--set", "round=1min", "--set", "round=2min"]) == 2
    assert "--set round=1min and --set round=2min: round is set twice; keep one" in capsys.readouterr().err


# --- counts said on the way, grouped as errors group them ---


def test_a_count_with_its_noun_has_its_digits_grouped():
    assert plural(2_000_000, "job") == "2,000,000 jobs"
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(1234, "entry", "entries") == "1,234 entries"


def test_trace_generate_says_how_many_jobs_it_wrote_with_digits_grouped(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["trace", "generate", "-o", str(out), "--jobs", "1200", "--rate", "600/h", "--seed", "3"]) == 0
    assert capsys.readouterr().out == f"wrote 1,200 jobs to {out}\n"
    assert len(out.read_text().splitlines()) == 1201  # (the header, and a line a job)


def test_a_sweeps_progress_line_groups_the_digits_of_its_counts():
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    progress = SweepProgress(total=12_345, done=1_000, console=console)
    progress.update({"status": "ok", "point": "round=5min", "seed": 0, "key": "k", "run_s": 1.0})
    progress.update({"status": "failed", "point": "round=6min", "seed": 1, "key": "j", "error": "boom"})
    lines = console.file.getvalue().splitlines()
    assert lines[0] == "[1,001 done, 0 failed, 11,344 remaining] ok round=5min seed=0 in 1.0 s"
    assert lines[1] == "[1,001 done, 1 failed, 11,343 remaining] failed round=6min seed=1: boom"
