"""`run` without --live refuses every live-run option given, even one given its default value;
`run --live` gives the options left out the values `serve` gives them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from roundhouse.tools.cli import _parse, build_parser
from roundhouse.tools.live_run import add_live_options
from tests.conftest import fails

GRAPH = str(Path(__file__).resolve().parent.parent / "graphs" / "fifo.sched")


def _live_defaults() -> dict:
    """Each live option's name and default, as `serve` has them."""
    parser = argparse.ArgumentParser(add_help=False)
    add_live_options(parser)
    return vars(parser.parse_args([]))


def _flag_and_default():
    for name, default in _live_defaults().items():
        flag = "--" + name.replace("_", "-")
        if default is None:
            continue  # (no default to repeat: any value given differs, and was refused already)
        yield flag, [flag] if isinstance(default, bool) else [flag, str(default)]


@pytest.mark.parametrize(("flag", "given"), list(_flag_and_default()))
def test_run_refuses_a_live_option_given_its_default_value(capsys, flag, given):
    err = fails(capsys, "run", GRAPH, "--until", "1h", "--quiet", *given)
    assert f"{flag} is only for a live run: give --live ADDR, or leave it out" in err


def test_run_names_every_live_option_given_in_order(capsys):
    err = fails(capsys, "run", "--heartbeat", "2s", GRAPH, "--log-level", "info", "--keys", "k", "--until", "1h")
    assert "--keys, --heartbeat, --log-level are only for a live run" in err


def test_run_live_fills_in_the_options_left_out_as_serve_has_them():
    from roundhouse.tools.live_run import _fill_live_defaults

    run = _parse(build_parser("run"), ["run", GRAPH, "--live", "tcp://127.0.0.1:1", "--retries", "5"])
    serve = _parse(build_parser("serve"), ["serve", GRAPH, "--bind", "tcp://127.0.0.1:1", "--retries", "5"])
    assert not hasattr(run, "heartbeat")  # (left out: set only once the run is known to be live)
    _fill_live_defaults(run)
    for name in _live_defaults():
        assert getattr(run, name) == getattr(serve, name), name
    assert run.retries == 5 and run.heartbeat == "2s"
