"""`roundhouse reproduce` given an option that shapes a run when nothing is to run (no NAME, or
--list): a usage error naming the option, with exit status 2, not the list as if it were read."""

from __future__ import annotations

import pytest

from roundhouse.tools.cli import main
from tests.conftest import fails


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--quick"], "--quick"),
        (["--out", "elsewhere"], "--out"),
        (["--data", "somewhere"], "--data"),
        (["--quick", "--out", "elsewhere"], "--quick"),
        (["--list", "--quick"], "--quick"),
    ],
)
def test_a_run_option_without_an_experiment_is_a_usage_error(tmp_path, capsys, monkeypatch, options, named):
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, "reproduce", *options)
    assert err.strip() == f"error: {named} needs an experiment NAME; --list shows them"
    assert list(tmp_path.iterdir()) == []  # (nothing written: no runs/ folder, no --out folder)


def test_a_run_option_with_list_and_names_says_list_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, "reproduce", "--list", "gavel-las", "--quick")
    assert err.strip() == ("error: --quick has no effect with --list, which runs nothing; leave out --list to run gavel-las")
    assert list(tmp_path.iterdir()) == []


def test_the_list_alone_still_lists(capsys):
    assert main(["reproduce"]) == 0
    assert "gavel-las" in capsys.readouterr().out
    assert main(["reproduce", "--list", "gavel-las"]) == 0
    listed = capsys.readouterr().out
    assert "gavel-las" in listed and "tiresias-toy" not in listed
