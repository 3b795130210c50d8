"""An agent whose connection closes during the handshake (the scheduler killed behind a
forwarder, something else listening at its address) is not refused: it says so, keeps its
workers and keeps trying, while a key the scheduler refuses still stops it; a submitter waits
through such connections too. A refused job is named by its place in the submission, never by
an id the scheduler did not keep; accepted ids are printed as runs. `roundhouse keys DIR/`
prints normalised paths. Real sockets on 127.0.0.1."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from roundhouse.agents import submitter
from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster

PROJECT = Path(__file__).resolve().parents[1]
HELLO = {"node": "a", "address": "127.0.0.1", "session": "s", "gpus": [{"index": 0, "type": "V100"}]}


class Forwarder:
    """A TCP forwarder on 127.0.0.1: each connection is passed on to `target` port; when nothing
    listens there it accepts and closes at once (as a forwarder or load balancer in front of a
    dead scheduler does). Without a target it only accepts and closes; with `silent`, it accepts,
    keeps each connection open and says nothing (an HTTP server waiting for a request, a
    database, a stuck process): `accepted` counts them."""

    def __init__(self, target: int | None = None, silent: bool = False):
        self.target = target
        self.silent = silent
        self.accepted = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.1)  # (to see `close()`: closing a socket wakes no `accept`)
        self.port = self.listener.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.closed_at_once = 0
        self._open: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            self.accepted += 1
            if self.silent:
                self._open.append(client)
                continue
            backend = None
            if self.target is not None:
                try:
                    backend = socket.create_connection(("127.0.0.1", self.target), timeout=1)
                    backend.settimeout(None)
                except OSError:
                    backend = None
            if backend is None:
                client.close()
                self.closed_at_once += 1
                continue
            self._open += [client, backend]
            for a, b in ((client, backend), (backend, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        self.listener.close()
        for s in self._open:
            s.close()


def _watch(link: SchedulerLink, seconds: float, until=lambda: False) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and not until():
        link.monitor.poll(100)
        link.watch_handshakes()


# --- an agent: a connection closed during the handshake is no refusal ---
@pytest.mark.live
def test_a_connection_closed_during_the_handshake_is_no_refusal(logs):
    closer = Forwarder()
    context = zmq.Context()
    link = SchedulerLink(closer.address, ClientSecurity(None), HELLO, defaultdict(int))
    link.open(context)
    try:
        _watch(link, 3.0)
        assert closer.closed_at_once >= 2  # (it reconnected after each)
        assert not link.refused, logs.text
        assert link.cut_handshakes >= 2
        assert "refused" not in logs.text
        said = f"the connection to the scheduler at {closer.address} closed during the handshake; still trying"
        assert logs.text.count(said) == 1, logs.text  # (once, not at every reconnection)
        link.warn_every_s = 0.0
        link.keep_alive(time.time(), lambda: [])
        assert re.search(r"not registered .* still trying \(\d+ connection\(s\) closed during the handshake", logs.text)
    finally:
        link.close()
        context.term()
        closer.close()


def _curve_server(context: zmq.Context, keys: Path, admitted: Path) -> tuple[zmq.Socket, ThreadAuthenticator]:
    """A CURVE ROUTER with the scheduler's keys of `keys`, admitting the public keys in `admitted`."""
    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve(domain="*", location=str(admitted))
    server = context.socket(zmq.ROUTER)
    server.setsockopt(zmq.LINGER, 0)
    public, secret = zmq.auth.load_certificate(str(keys / "scheduler.key_secret"))
    server.curve_secretkey, server.curve_publickey, server.curve_server = secret, public, True
    return server, auth


@pytest.mark.live
def test_an_unknown_key_is_still_refused_and_another_schedulers_key_keeps_trying(tmp_path, logs):
    keys, strangers = tmp_path / "keys", tmp_path / "strangers"
    make_keys(keys, ["a"])
    make_keys(strangers, ["a"])
    context = zmq.Context()
    server, auth = _curve_server(context, keys, keys / "authorized")
    port = server.bind_to_random_port("tcp://127.0.0.1")
    address = f"tcp://127.0.0.1:{port}"
    links = []
    try:
        # A key the scheduler does not know: the scheduler says so (authentication); refused.
        unknown = tmp_path / "unknown"
        unknown.mkdir()
        (unknown / "scheduler.key").write_bytes((keys / "scheduler.key").read_bytes())
        (unknown / "a.key_secret").write_bytes((strangers / "a.key_secret").read_bytes())
        link = SchedulerLink(address, ClientSecurity(unknown, "a"), HELLO, defaultdict(int))
        links.append(link)
        link.open(context)
        _watch(link, 10.0, lambda: link.refused)
        assert link.refused
        assert f"the scheduler at {address} refused this agent: authentication refused" in logs.text

        # Another scheduler's public key: the scheduler hangs up without a word, as a dead
        # scheduler behind a forwarder does; the agent keeps trying, and names the key as a cause.
        other = SchedulerLink(address, ClientSecurity(strangers, "a"), HELLO, defaultdict(int))
        links.append(other)
        other.open(context)
        _watch(other, 2.5)
        assert not other.refused and other.cut_handshakes >= 1, logs.text
        assert "scheduler.key in the key folder another scheduler's?" in logs.text
    finally:
        for link in links:
            link.close()
        server.close(linger=0)
        auth.stop()
        context.term()


@pytest.mark.live
def test_an_agent_against_a_listener_that_hangs_up_keeps_running(tmp_path):
    closer = Forwarder()
    log = tmp_path / "agent.log"
    with open(log, "wb") as out:
        agent = subprocess.Popen(
            [sys.executable, "-m", "roundhouse.tools.cli", "agent", "--scheduler", closer.address, "--insecure",
             "--name", "a", "--fake-gpus", "2:V100", "--emulate", "--workdir", str(tmp_path / "work")],
            cwd=PROJECT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.time() + 20
        while closer.closed_at_once < 3 and time.time() < deadline and agent.poll() is None:
            time.sleep(0.1)
        time.sleep(0.5)
        assert agent.poll() is None, log.read_text()  # (it used to exit 2: "refused this agent")
        assert closer.closed_at_once >= 3
        agent.terminate()
        assert agent.wait(timeout=20) == 0, log.read_text()
        text = log.read_text()
        assert "closed during the handshake; still trying" in text and "refused" not in text, text
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        closer.close()


GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.mark.live
def test_an_agent_behind_a_forwarder_keeps_its_jobs_when_the_scheduler_dies(tmp_path):
    cluster = LiveCluster(tmp_path / "run", GRAPH, {"profile.csv": TEST_PROFILE}, serve_args=("--wait-for-agents", "0s"))
    forwarder = Forwarder(cluster.port)
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        direct = cluster.address
        cluster.address = forwarder.address  # (the agent connects through the forwarder)
        try:
            agent = cluster.start_agent("a")
        finally:
            cluster.address = direct
        cluster.wait_for(lambda: "agent a registered" in cluster.log("a"), 30, "the agent to register")
        with Submitter(direct, ClientSecurity(None)) as client:
            client.submit([{"model": "ResNet-18", "iterations": 1_000_000, "gpus": 1}])
        cluster.wait_for(lambda: "started job 0" in cluster.log("a"), 30, "the job to start")
        cluster.kill("scheduler")
        cluster.wait_for(lambda: forwarder.closed_at_once >= 3, 20, "the agent to reconnect through the forwarder")
        time.sleep(0.5)
        text = cluster.log("a")
        assert agent.poll() is None, text  # (it used to stop, killing its job, as if refused)
        assert "lost contact with the scheduler" in text and "closed during the handshake; still trying" in text, text
        assert "refused" not in text and "killed" not in text, text
    finally:
        cluster.close()
        forwarder.close()


# --- submitting ---
@pytest.mark.live
def test_a_submitter_waits_through_connections_closed_during_the_handshake():
    closer = Forwarder()
    try:
        started = time.time()
        with Submitter(closer.address, ClientSecurity(None), timeout_s=1.5) as client:
            with pytest.raises(SchedulerError) as err:
                client.status()
        assert time.time() - started >= 1.4  # (not given up at the first one, as a refusal)
        message = str(err.value)
        assert message.startswith(f"no answer from the scheduler at {closer.address} within 1.5s; ")
        assert re.search(r"\d+ connection\(s\) to it closed during the handshake \(is something else listening", message)
        assert "refused" not in message
    finally:
        closer.close()


def test_a_refused_job_is_never_named_by_an_id_the_scheduler_chose():
    one, three = submitter.plain_names(1), submitter.plain_names(3)
    forms = {  # the scheduler's message -> what the user reads, for a job that gave no id
        "submission:1: error: job 3: model 'X' is not in the profile": "the job: error: model 'X' is not in the profile",
        "submission:1: error: column 'iterations': job 3: 9e+15 iterations take more than a century": (
            "the job: error: column 'iterations': 9e+15 iterations take more than a century"
        ),
        "submission:1: error: job 0 asks for 5 GPUs but the cluster has 4": (
            "the job: error: it asks for 5 GPUs but the cluster has 4"
        ),
        "submission:1: error: column 'gpus': must be at least 1": "the job: error: column 'gpus': must be at least 1",
    }
    for said, shown in forms.items():
        assert submitter._name_rows(f"the scheduler refused: {said}", one, 0, [{}]) == f"the scheduler refused: {shown}"
    # In a longer submission, the place named; a job that gave its own id is still named by it.
    text = "the scheduler refused: submission:2: error: job 7 asks for 5 GPUs"
    assert submitter._name_rows(text, three, 0, [{}] * 3) == "the scheduler refused: job 2 of 3: error: it asks for 5 GPUs"
    assert submitter._name_rows(text, three, 0, [{}, {"job_id": 7}, {}]) == (
        "the scheduler refused: job 2 of 3: error: job 7 asks for 5 GPUs"
    )
    # Counted from the message's first job (a later message of a long submission).
    assert submitter._name_rows(text, [f"t.csv:{n}" for n in range(2, 12)], 5, [{}] * 10) == (
        "the scheduler refused: t.csv:8: error: it asks for 5 GPUs"
    )


@pytest.mark.live
def test_submit_names_no_unkept_id_and_prints_ids_as_runs(tmp_path, capsys):
    cluster = LiveCluster(tmp_path / "run", GRAPH, {"profile.csv": TEST_PROFILE}, serve_args=("--wait-for-agents", "0s"))
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        submit = ["submit", cluster.address, "--insecure", "--model", "ResNet-18"]
        assert main([*submit, "--iterations", "100", "--count", "3"]) == 0
        assert capsys.readouterr().out.strip() == "submitted 3 job(s): 0-2"
        for flags, what in (
            (["--iterations", "9007199254740992"], "the job: error: column 'iterations': "),
            (["--iterations", "100", "--gpus", "5"], "the job: error: it asks for 5 GPUs"),
            (["--iterations", "100", "--gpus", "5", "--count", "2"], "job 1 of 2: error: it asks for 5 GPUs"),
        ):
            assert main([*submit, *flags]) == 2
            err = capsys.readouterr().err
            assert what in err, err
            assert not re.search(r"\bjob \d+\b(?! of)", err), err  # (no id: the scheduler kept none)
        assert main([*submit, "--iterations", "100", "--count", "25000", "--timeout", "60s"]) == 0
        out = capsys.readouterr().out
        assert out.strip() == "submitted 25,000 job(s): 3-25002", out[:300]
    finally:
        cluster.close()


# --- keys ---
def test_keys_prints_normalised_paths(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for folder in ("keys/", "./keys//"):
        assert main(["keys", folder, "a", "b"]) == 0
        out = capsys.readouterr().out
        assert "//" not in out, out
        assert "--keys keys\n" in out and "needs keys/scheduler.key and keys/NAME.key_secret" in out, out
    assert (tmp_path / "keys" / "scheduler.key").is_file()
    assert "keys: every key already exists" in out  # (the second time)
