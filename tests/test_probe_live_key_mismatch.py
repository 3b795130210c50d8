"""One end with CURVE keys and the other without (`--keys` on one side, `--insecure` on the
other): every side says which end has keys and what to do, not "protocol error (not CURVE, or
the wrong server key)", nor "check the keys" to a client whose keys are fine. Loopback only;
every socket and process stops by itself."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import pytest
import zmq

from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import ClientSecurity
from tests.conftest import REPO
from tests.livecluster import TEST_PROFILE, free_port, stop, wait_until
from tests.test_agent_submit_fixes import HELLO, _curve_server, _watch

ADVICE = "give --keys DIR to the scheduler and to every agent and submitter, or --insecure to all of them"


@pytest.fixture
def keys(tmp_path):
    folder = tmp_path / "keys"
    make_keys(folder, ["node1"], ["alice"])
    return folder


def _plain_server(context: zmq.Context) -> tuple[zmq.Socket, str]:
    """A scheduler's socket as `serve --insecure` makes it: no keys."""
    server = context.socket(zmq.ROUTER)
    server.setsockopt(zmq.LINGER, 0)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    return server, f"tcp://127.0.0.1:{port}"


@pytest.mark.live
def test_a_submitter_with_keys_told_the_scheduler_runs_insecure(keys):
    context = zmq.Context()
    server, address = _plain_server(context)
    try:
        with pytest.raises(SchedulerError) as refused:
            with Submitter(address, ClientSecurity(keys, "alice"), timeout_s=10) as client:
                client.status()
        said = str(refused.value)
        assert f"the scheduler at {address} refused this connection: it runs --insecure, without keys" in said, said
        assert ADVICE in said and "not CURVE" not in said, said
    finally:
        server.close()
        context.term()


@pytest.mark.live
def test_a_submitter_without_keys_told_the_scheduler_admits_only_keys(keys):
    context = zmq.Context()
    server, auth = _curve_server(context, keys, keys / "authorized")
    address = f"tcp://127.0.0.1:{server.bind_to_random_port('tcp://127.0.0.1')}"
    try:
        with pytest.raises(SchedulerError) as refused:
            with Submitter(address, ClientSecurity(None), timeout_s=10) as client:
                client.status()
        said = str(refused.value)
        assert "it admits only CURVE keys, and this submitter connects without keys (--insecure)" in said, said
        assert ADVICE in said
    finally:
        server.close()
        auth.stop()
        context.term()


@pytest.mark.live
def test_an_agent_with_keys_is_not_told_to_check_them_when_the_scheduler_has_none(keys, logs):
    context = zmq.Context()
    server, address = _plain_server(context)
    link = SchedulerLink(address, ClientSecurity.choose(str(keys), "node1", False, address), HELLO, defaultdict(int))
    try:
        link.open(context)
        _watch(link, 10.0, lambda: link.refused)
        assert link.refused
        said = logs.text
        assert f"the scheduler at {address} refused this agent: it runs --insecure, without keys" in said, said
        assert ADVICE in said and "check the keys" not in said, said
    finally:
        link.close()
        server.close()
        context.term()


GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
LiveSource -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.mark.live
def test_an_insecure_scheduler_says_a_peer_came_with_keys(tmp_path, keys):
    (tmp_path / "g.sched").write_text(GRAPH)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    address = f"tcp://127.0.0.1:{free_port()}"
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "roundhouse.tools.cli", "serve", str(tmp_path / "g.sched"), "--bind", address]
            + ["--insecure", "--checkpoints", str(tmp_path / "ck"), "--wait-for-agents", "0s", "--until", "90s"],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        # (a cold start, imports not yet compiled, can outlast a submitter's timeout: wait for it)
        started = lambda: scheduler.poll() is not None or "scheduler listening on" in log_path.read_text()  # noqa: E731
        wait_until(started, 60, "the scheduler to listen", log_path.read_text)
        assert scheduler.poll() is None, log_path.read_text()

        def refuse_a_keyed_submitter() -> None:
            with pytest.raises(SchedulerError, match="it runs --insecure, without keys"):
                with Submitter(address, ClientSecurity(keys, "alice"), timeout_s=15) as client:
                    client.status()

        refuse_a_keyed_submitter()
        # (The scheduler hears of the refused handshake from its own ZeroMQ I/O thread, a moment
        # after the submitter was told; and a submitter that hangs up before the scheduler has
        # read its greeting, as on a loaded machine, leaves it a handshake cut short, which is no
        # refusal. So the count is asked until it shows, another keyed submitter refused between.)
        with Submitter(address, ClientSecurity(None), timeout_s=10) as client:
            for attempt in range(5):
                if attempt:
                    refuse_a_keyed_submitter()
                try:
                    counted = lambda: client.status()["refused_peers"] >= 1  # noqa: E731
                    wait_until(counted, 3, "the refused handshake to be counted", log_path.read_text)
                    break
                except AssertionError:
                    if attempt == 4:
                        raise
    finally:
        stop(scheduler, timeout=20)
    said = log_path.read_text()
    assert f"refused a peer on {address}: it connects with CURVE keys (--keys), and this scheduler runs --insecure" in said, said
    assert ADVICE in said and "Traceback" not in said, said
