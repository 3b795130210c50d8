"""Live mode as a new user meets it (docs/live.md, step by step): the mistakes and interruptions
that must end in a clear message naming where and what, with nothing lost or left behind."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.tools.cli import main
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity
from tests.conftest import refused
from tests.livecluster import TEST_PROFILE, free_port, stop

ROUNDHOUSE = [sys.executable, "-m", "roundhouse.tools.cli"]

# Jobs come only from `roundhouse submit`, as many as are sent; no agent ever comes, so the
# scheduler keeps taking submissions while it waits for one.
SUBMIT_ONLY = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
LiveSource -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def _start(args: list[str], cwd, log) -> subprocess.Popen:
    """A command as a terminal starts it: Ctrl-C (SIGINT) reaches it as KeyboardInterrupt, also
    under a test runner whose own workers ignore SIGINT."""
    return subprocess.Popen(
        [*ROUNDHOUSE, *args],
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _status(address: str) -> dict:
    with Submitter(address, ClientSecurity(None), 5.0) as client:
        return client.status()


def _listening(address: str) -> bool:
    try:
        return bool(_status(address))
    except SchedulerError:  # (not listening yet: the scheduler is still starting)
        return False


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


@pytest.mark.live
def test_an_interrupted_submission_says_what_the_scheduler_had_accepted(tmp_path):
    """Ctrl-C while a long file goes in several messages: the jobs already accepted stay (the
    scheduler runs them), so the message names them, the rows whose answer never came and the
    rows never sent, rather than a bare "interrupted" that invites submitting all again."""
    (tmp_path / "g.sched").write_text(SUBMIT_ONLY)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    rows = 60_000  # six messages: the first accepted well before the last is sent
    (tmp_path / "big.csv").write_text("model,iterations,gpus\n" + "LM,100,1\n" * rows)
    address = f"tcp://127.0.0.1:{free_port()}"
    serve_log = open(tmp_path / "serve.log", "w")
    server = _start(
        ["serve", "g.sched", "--bind", address, "--insecure", "--wait-for-agents", "120s", "--until", "1s"], tmp_path, serve_log
    )
    submit = None
    try:
        _wait(lambda: _listening(address), 60, "the scheduler to answer")
        submit_log = open(tmp_path / "submit.log", "w")
        submit = _start(["submit", address, "--insecure", "big.csv"], tmp_path, submit_log)
        # (Two messages taken: the second went only once the first's answer had come back.)
        _wait(lambda: _status(address).get("submitted", 0) >= 20_000, 120, "two messages' jobs to be accepted")
        submit.send_signal(signal.SIGINT)
        assert submit.wait(60) == 130
        said = (tmp_path / "submit.log").read_text()
        held = int(_status(address).get("submitted", 0))
    finally:
        for process in (submit, server):
            if process is not None:
                stop(process)
    assert held < rows, f"the whole file went in before the interrupt, which the test needs to come first:\n{said}"
    found = re.search(r"the scheduler had already accepted (\d+) job\(s\), big\.csv:2 to big\.csv:(\d+) \(ids 0-(\d+)\)", said)
    assert found, said
    accepted = int(found.group(1))
    assert accepted % 10_000 == 0 and int(found.group(2)) == accepted + 1 and int(found.group(3)) == accepted - 1
    pending = re.search(r"whether it accepted big\.csv:(\d+) to big\.csv:(\d+) is not known", said)
    assert pending and int(pending.group(1)) == accepted + 2, said
    assert f"roundhouse submit {address} --status" in said
    # What the scheduler holds is what was said: the accepted jobs, and maybe the unanswered message's.
    assert held in (accepted, int(pending.group(2)) - 1), (held, said)
    if int(pending.group(2)) - 1 < rows:
        assert f"jobs from big.csv:{int(pending.group(2)) + 1} on were not sent" in said
    assert said.rstrip().endswith("interrupted")
    assert "Traceback" not in said


def test_an_interrupted_wait_for_a_single_message_says_its_fate_is_unknown(tmp_path, monkeypatch):
    """The same for one message, interrupted while its answer is awaited (a scheduler that
    does not answer: here a port where none listens, so it never does)."""
    address = f"tcp://127.0.0.1:{free_port()}"
    logged: list[str] = []
    with Submitter(address, ClientSecurity(None), 30.0) as client:
        monkeypatch.setattr("roundhouse.agents.submitter.log.warning", lambda fmt, *a: logged.append(fmt % a))

        def interrupt(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr("zmq.Poller.poll", interrupt)
        with pytest.raises(KeyboardInterrupt):
            client.submit([{"model": "LM", "iterations": 10, "gpus": 1}] * 2)
    assert logged == [
        "interrupted while submitting; whether it accepted job 1 to job 2 is not known "
        f"(`roundhouse submit {address} --status` counts what it holds)"
    ]


def test_an_interrupt_before_anything_is_sent_adds_nothing(tmp_path, monkeypatch):
    """Interrupted while the request is being encoded: nothing went, so submitting the jobs
    again submits each once, and the bare "interrupted" is the whole story."""
    address = f"tcp://127.0.0.1:{free_port()}"
    logged: list[str] = []
    encode = protocol.encode

    def interrupt(type_, seq, **fields):
        if seq != protocol.SEQ_MAX:  # (the request's own encoding, not the measuring of its size)
            raise KeyboardInterrupt
        return encode(type_, seq, **fields)

    with Submitter(address, ClientSecurity(None), 30.0) as client:
        monkeypatch.setattr("roundhouse.agents.submitter.log.warning", lambda fmt, *a: logged.append(fmt % a))
        monkeypatch.setattr("roundhouse.wire.protocol.encode", interrupt)
        with pytest.raises(KeyboardInterrupt):
            client.submit([{"model": "LM", "iterations": 10, "gpus": 1}])
    assert logged == []


@pytest.mark.parametrize("flag", ["--insecure", "--keys"])
def test_serve_given_an_address_without_its_transport_says_how_to_write_one(live_graph, tmp_path, capsys, flag):
    """`--bind 127.0.0.1:5555` (tcp:// left out) was refused as an address off this machine with
    --insecure, and with keys as ZeroMQ's bare "Invalid argument"."""
    security = ["--insecure"] if flag == "--insecure" else ["--keys", str(_keys(tmp_path, capsys))]
    err = refused(
        capsys,
        ["serve", live_graph, "--bind", "127.0.0.1:5555", *security, "--checkpoints", tmp_path / "ck", "--until", "1s"],
        "cannot listen on 127.0.0.1:5555 (--bind): not an address to listen on (tcp://HOST:PORT, e.g. tcp://127.0.0.1:5555",
    )
    assert "loopback" not in err and "Invalid argument" not in err
    err = refused(
        capsys,
        ["serve", live_graph, "--bind", "tcp://127.0.0.1:", *security, "--checkpoints", tmp_path / "ck", "--until", "1s"],
        "cannot listen on tcp://127.0.0.1: (--bind): not HOST:PORT",
    )
    assert not (tmp_path / "ck").exists()


def test_an_address_with_a_free_port_or_an_ipc_path_is_still_served(live_graph, tmp_path, capsys):
    from roundhouse.tools.live_run import check_bind

    for good in ("tcp://127.0.0.1:*", "tcp://*:5555", "tcp://[::1]:5555", "tcp://eth0:5555", "ipc:///tmp/sched"):
        check_bind(good)


@pytest.mark.parametrize("nodes", [[], ["--nodes", "2", "--emulate"]])
def test_an_agent_given_an_address_without_its_transport_says_how_to_write_one(capsys, nodes):
    err = refused(
        capsys,
        ["agent", "--scheduler", "127.0.0.1:5555", "--insecure", "--name", "a", "--fake-gpus", "2:V100", *nodes],
        "cannot connect to 127.0.0.1:5555: not an address a client connects to (tcp://HOST:PORT",
    )
    assert "loopback" not in err


def _keys(tmp_path, capsys):
    from roundhouse.tools.cli import main

    assert main(["keys", str(tmp_path / "keys"), "node1"]) == 0
    capsys.readouterr()
    return tmp_path / "keys"


@pytest.mark.live
def test_a_stop_while_the_journal_replays_writes_no_results_and_leaves_the_journal(tmp_path):
    """Ctrl-C while a resumed run replays its journal: the engine then holds the run as it
    stood rounds ago. It used to be summed up and written to --out as the run (a partial
    replay's jobs.csv over the real one); now serve ends as an interrupt, and the journal,
    untouched, still resumes the whole run."""
    import os

    from roundhouse.runtime import serve as serving
    from roundhouse.runtime.backends.live import LiveOptions
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.journal import Journal
    from roundhouse.wire.security import ServerSecurity

    (tmp_path / "g.sched").write_text(SUBMIT_ONLY.replace("round = 1s", "round = 0.1s"))
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    graph = compile_file(str(tmp_path / "g.sched"))
    options = LiveOptions(wait_for_agents_s=0.0, heartbeat_s=0.3, heartbeat_timeout_s=3.0)
    journal = tmp_path / "j.sqlite"

    def serve(until: float, on_round=None):
        address = f"tcp://127.0.0.1:{free_port()}"
        return serving.serve(graph, address, ServerSecurity(None), journal, options, until=until, on_round=on_round)

    def rounds() -> int:
        j = Journal(journal, read_only=True)
        try:
            return len(j.replay())
        finally:
            j.close()

    first = serve(until=2.0)
    assert first.stop_reason == "reached the time limit (2s)"
    held = rounds()
    assert held >= 15
    seen: list[float] = []

    def interrupt_at_round_5(ctx) -> None:
        seen.append(ctx.now)
        if len(seen) == 5:
            os.kill(os.getpid(), signal.SIGINT)  # (serve's own handler takes it: the main thread's)

    with pytest.raises(KeyboardInterrupt):
        serve(until=60.0, on_round=interrupt_at_round_5)
    assert len(seen) < held  # (stopped within the replay)
    assert rounds() == held  # nothing journaled by the stopped replay
    again = serve(until=0.0)  # (past its limit at once: the whole replay, then the end)
    assert again.rounds >= held


def _free_ipv6_port() -> int:
    import socket

    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


@pytest.mark.live
def test_a_scheduler_on_the_ipv6_loopback_address_takes_agents_and_submitters(tmp_path):
    """`tcp://[::1]:PORT`, a loopback address the docs name: ZeroMQ's sockets use IPv4 alone
    unless told, so `serve` failed with "No such device", and agents and submitters could not
    reach it."""
    (tmp_path / "g.sched").write_text(SUBMIT_ONLY)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    address = f"tcp://[::1]:{_free_ipv6_port()}"
    serve_log = open(tmp_path / "serve.log", "w")
    server = _start(
        ["serve", "g.sched", "--bind", address, "--insecure", "--wait-for-agents", "120s", "--until", "1s"], tmp_path, serve_log
    )
    agent = None
    try:
        _wait(lambda: _listening(address) or server.poll() is not None, 60, "the scheduler to answer")
        assert server.poll() is None, (tmp_path / "serve.log").read_text()
        assert main(["submit", address, "--insecure", "--model", "LM", "--iterations", "10", "--gpus", "1"]) == 0
        assert _status(address)["submitted"] == 1
        agent = _start(
            ["agent", "--scheduler", address, "--insecure", "--name", "n", "--fake-gpus", "2:V100"],
            tmp_path,
            open(tmp_path / "agent.log", "w"),
        )
        _wait(lambda: "node n registered" in (tmp_path / "serve.log").read_text(), 60, "the agent to register")
    finally:
        for process in (agent, server):
            if process is not None:
                stop(process)
