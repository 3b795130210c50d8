"""A Ctrl-C (or SIGTERM) while the command line builds its parser, importing the command's
modules, is said as at any other time ("interrupted", status 130), not as Python's traceback."""

from __future__ import annotations

import pytest

from roundhouse.tools import cli


@pytest.mark.parametrize("command", ["run", "reproduce", "sweep", "trace"])
def test_ctrl_c_while_the_parser_is_built_is_interrupted(monkeypatch, capsys, command):
    def interrupted(command=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main([command, "--help"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted"


def test_sigterm_while_the_parser_is_built_is_terminated(monkeypatch, capsys):
    def terminated(command=None):
        raise cli.Terminated

    monkeypatch.setattr(cli, "build_parser", terminated)
    assert cli.main(["run", "--help"]) == 128 + 15
    assert "terminated (SIGTERM)" in capsys.readouterr().err
