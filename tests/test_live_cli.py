"""The live subcommands' command lines: bad values are clear errors (exit status 2), never tracebacks."""

from __future__ import annotations

import pytest

from roundhouse.tools.cli import main


@pytest.mark.parametrize(
    "args, message",
    [
        (["serve", "{g}", "--bind", "tcp://0.0.0.0:5999", "--insecure"], "only for loopback"),
        (["serve", "{g}", "--bind", "tcp://127.0.0.1:5999"], "give --keys DIR"),
        (
            ["serve", "{g}", "--bind", "tcp://127.0.0.1:5999", "--insecure", "--heartbeat", "5s", "--heartbeat-timeout", "2s"],
            "shorter than --heartbeat-timeout",
        ),
        (["serve", "{g}", "--bind", "tcp://127.0.0.1:5999", "--insecure", "--ports", "9..3"], "LOW < HIGH"),
        # What the protocol's welcome (the heartbeat period) and launch (the checkpoint period)
        # carry: a value past it would fail every registration or every job.
        (
            ["serve", "{g}", "--bind", "tcp://127.0.0.1:5999", "--insecure", "--heartbeat", "2h", "--heartbeat-timeout", "3h"],
            "--heartbeat 2h: must be between 0.01s and 1h",
        ),
        (
            ["serve", "{g}", "--bind", "tcp://127.0.0.1:5999", "--insecure", "--heartbeat", "1ms"],
            "--heartbeat 1ms: must be between 0.01s and 1h",
        ),
        (
            ["run", "{g}", "--live", "tcp://127.0.0.1:5999", "--insecure", "--checkpoint-every", "200d"],
            "--checkpoint-every 200d: must be at most 10000000s",
        ),
        (["serve", "{g}", "--bind", "tcp://127.0.0.1:5999", "--insecure", "--until", "soon"], "--until"),
        (["serve", "{g}", "--bind", "nonsense", "--insecure"], "not an address to listen on"),
        (["run", "{g}", "--live", "tcp://10.1.2.3:5999", "--insecure"], "only for loopback"),
        (["agent", "--scheduler", "tcp://127.0.0.1:5999", "--insecure", "--fake-gpus", "four"], "COUNT:TYPE"),
        (
            ["agent", "--scheduler", "tcp://127.0.0.1:5999", "--keys", "/nonexistent", "--fake-gpus", "1:V100", "--name", "x"],
            "key file not found",
        ),
        (["submit", "tcp://127.0.0.1:5999", "--insecure"], "say what to run"),
        (["submit", "tcp://127.0.0.1:5999", "--insecure", "--model", "LM"], "--iterations"),
        (["submit", "tcp://127.0.0.1:5999", "--insecure", "--command", "true"], "--duration"),
        (
            [
                "submit",
                "tcp://127.0.0.1:5999",
                "--insecure",
                "--model",
                "LM",
                "--iterations",
                "5",
                "--job-id",
                "3",
                "--count",
                "2",
            ],
            "leave it out",
        ),
        (["profile", "--models", "Teleporter", "--out", "x.csv"], "unknown model"),
        (["profile", "--models", "A3C", "--out", "x.csv"], "no example workload"),
        (["profile", "--gpus", "0", "--out", "x.csv"], "1 or more"),
    ],
)
def test_bad_live_command_lines_exit_2_with_a_message(live_graph, capsys, args, message):
    assert main([a.replace("{g}", str(live_graph)) for a in args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_submit_reports_an_absent_scheduler_clearly(capsys):
    from roundhouse.tools.loopback import free_port

    assert main(["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--status", "--timeout", "0.5s"]) == 2
    assert "no answer from the scheduler" in capsys.readouterr().err


def test_serve_refuses_a_journal_of_another_run(live_graph, tmp_path, capsys):
    from roundhouse.runtime.journal import Journal

    journal = Journal(tmp_path / "j.sqlite")
    journal.begin({"graph_digest": "someone else's", "cluster": "x", "round_s": 1.0})
    journal.close()
    from roundhouse.tools.loopback import free_port

    status = main(
        [
            "serve",
            str(live_graph),
            "--bind",
            f"tcp://127.0.0.1:{free_port()}",
            "--insecure",
            "--journal",
            str(tmp_path / "j.sqlite"),
            "--checkpoints",
            str(tmp_path / "ck"),
        ]
    )
    assert status == 2
    assert "belongs to another run" in capsys.readouterr().err
