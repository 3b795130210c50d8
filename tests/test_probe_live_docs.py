"""Live mode as a new user meets it, following docs/live.md: a bad --heartbeat or --retries is
refused naming the value given (and the timeout the heartbeat must stay under); `submit` and
`agent` refuse an inproc:// address at once, as `serve` does (no other process reaches one: they
waited out their timeout, or for ever), and do not offer one as an address to write; and a run
with `--stop-agents` but no agent connected at its end says there was none to ask, not that
"every one answered" an empty list."""

from __future__ import annotations

import subprocess
import sys

import pytest

from roundhouse.tools.loopback import free_port
from tests.conftest import REPO

GRAPH = str(REPO / "graphs" / "live-loopback.sched")


def roundhouse(*args: str, cwd, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    "given, said",
    [
        (["--heartbeat", "0"], "error: --heartbeat 0: must be more than 0\n"),
        # (a negative one was told "0 or more", which 0 is not)
        (["--heartbeat", "-1"], "error: --heartbeat -1: must be more than 0\n"),
        (["--heartbeat-timeout", "-1"], "error: --heartbeat-timeout -1: must be more than 0\n"),
        (["--heartbeat-timeout", "0"], "error: --heartbeat-timeout 0: must be more than 0\n"),
        (["--heartbeat", "20s"], "error: --heartbeat 20s: must be shorter than --heartbeat-timeout (10s)"),
        (
            ["--heartbeat", "2s", "--heartbeat-timeout", "1s"],
            "error: --heartbeat 2s: must be shorter than --heartbeat-timeout (1s)",
        ),
        (["--retries", "-2"], "error: --retries -2: must be 0 or more"),
    ],
)
def test_a_bad_heartbeat_or_retries_is_named_with_its_value(tmp_path, given, said):
    done = roundhouse("serve", GRAPH, "--bind", "tcp://127.0.0.1:5555", "--insecure", *given, cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["submit", "inproc://sched", "--insecure", "--status", "--timeout", "5"],
        ["agent", "--scheduler", "inproc://sched", "--insecure", "--name", "a", "--fake-gpus", "1:V100"],
    ],
)
def test_submit_and_agent_refuse_an_inproc_address(tmp_path, command):
    done = roundhouse(*command, cwd=tmp_path, timeout=20)
    said = "error: cannot connect to inproc://sched: an inproc:// address is reachable only inside one process"
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_an_address_without_transport_is_not_offered_inproc(tmp_path):
    done = roundhouse("submit", "127.0.0.1:5555", "--insecure", "--status", cwd=tmp_path)
    said = "error: cannot connect to 127.0.0.1:5555: not an address a client connects to (tcp://HOST:PORT or ipc://PATH)\n"
    assert done.returncode == 2 and said in done.stderr, done.stderr


@pytest.mark.live
def test_stop_agents_with_no_agent_connected_says_there_was_none(tmp_path):
    bind = f"tcp://127.0.0.1:{free_port()}"
    done = roundhouse(
        "serve", GRAPH, "--bind", bind, "--insecure", "--stop-agents", "--wait-for-agents", "0", "--until", "1s", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "no agent to ask to stop: none is connected" in done.stderr, done.stderr
    assert "every one answered" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("names", "nodes", "submitters"),
    [(["node-a"], True, False), (["--submitters", "alice"], False, True), ([], True, True)],
)
def test_keys_says_how_the_kinds_of_keys_it_made_are_used(tmp_path, capsys, names, nodes, submitters):
    from roundhouse.tools.cli import main

    assert main(["keys", str(tmp_path / "keys"), *names]) == 0
    out = capsys.readouterr().out
    assert f"scheduler: roundhouse serve ... --keys {tmp_path / 'keys'}" in out
    assert ("roundhouse agent --name NAME" in out) == nodes, out
    assert ("roundhouse submit ADDRESS --name NAME" in out) == submitters, out


@pytest.mark.live
def test_a_run_resumed_past_its_time_limit_says_the_limit_had_passed(tmp_path):
    # The first run ran 3 s; resumed with a limit of 1 s, which its clock (counted from the
    # first start) is past, it stops, saying why.
    serve = ["serve", GRAPH, "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--wait-for-agents", "0"]
    serve += ["--journal", "j.sqlite", "--checkpoints", "ck"]
    first = roundhouse(*serve, "--until", "3s", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = roundhouse(*serve, "--until", "1s", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resuming the journal's run" in again.stderr, again.stderr
    assert "the time limit (--until 1s) had passed when the run resumed at t=" in again.stderr, again.stderr
    assert "had passed" not in first.stderr, first.stderr
