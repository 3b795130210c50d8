"""What the live side's clients check before anything reaches the wire: loopback addresses for
--insecure, key files, the agent's command line against the protocol's limits, metric names,
job environment variables, `submit`'s flags and trace files, and long submissions split over
several messages. The tests that start a scheduler are marked `live`; they bind to 127.0.0.1 and
stop by themselves."""

from __future__ import annotations

import json
import os

import pytest
import zmq

from roundhouse.agents.client import Job
from roundhouse.agents.jobenv import JobEnv
from roundhouse.agents.submitter import SchedulerError, Submitter, _chunks, _name_rows, id_ranges
from roundhouse.errors import UsageError
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.tools.loopback import free_port
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity, ServerSecurity, is_loopback
from tests.conftest import refused
from tests.livecluster import LiveCluster

# --- --insecure: loopback only ---------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    ["tcp://127.0.0.1:5555", "tcp://127.1.2.3:5555", "tcp://[::1]:5555", "tcp://localhost:5555", "ipc:///tmp/x", "inproc://x"],
)
def test_loopback_addresses(address):
    assert is_loopback(address)
    assert ClientSecurity.choose(None, "a", True, address).insecure


@pytest.mark.parametrize(
    "address",
    [
        "tcp://127.0.0.1:0;192.0.2.10:5555",  # ZeroMQ's SOURCE;DESTINATION: connects to 192.0.2.10
        "tcp://127.example.net:5555",
        "tcp://127.0.0.1.nip.io:5555",
        "tcp://localhost.example.net:5555",
        "tcp://10.0.0.1:5555",
        "tcp://0.0.0.0:5555",
        "tcp://*:5555",
        "ipc:///tmp/a;tcp://10.0.0.1:5",
    ],
)
def test_insecure_is_refused_off_loopback(address):
    assert not is_loopback(address)
    with pytest.raises(UsageError, match="only for loopback"):
        ClientSecurity.choose(None, "a", True, address)
    with pytest.raises(UsageError, match="only for loopback"):
        ServerSecurity.choose(None, True, address)


# --- key files --------------------------------------------------------------------------------


def _cut_key(path, which: str) -> None:
    lines = path.read_text().splitlines()
    path.write_text(
        "\n".join(f'    {which}-key = "tooshort"' if line.strip().startswith(f"{which}-key") else line for line in lines)
    )


@pytest.mark.parametrize("which", ["secret", "public"])
def test_a_key_of_the_wrong_length_is_refused_naming_the_file(tmp_path, capsys, which):
    keys = tmp_path / "keys"
    make_keys(keys, ["alice", "node-a"])
    _cut_key(keys / "alice.key_secret", which)
    err = refused(
        capsys,
        ["submit", f"tcp://127.0.0.1:{free_port()}", "--keys", keys, "--name", "alice", "--status"],
        f"alice.key_secret: not a ZeroMQ key file: the {which} key is not 40 Z85 characters (32 bytes)",
    )
    assert "Invalid argument" not in err
    _cut_key(keys / "scheduler.key_secret", which)
    journal = tmp_path / "ck"
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 1s;\ncluster = "1x2:V100";\nsrc :: LiveSource;\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch;\n'
    )
    refused(
        capsys,
        ["serve", graph, "--bind", f"tcp://127.0.0.1:{free_port()}", "--keys", keys, "--checkpoints", journal],
        "scheduler.key_secret: not a ZeroMQ key file",
    )
    assert not journal.exists()  # refused before the journal was made


def test_a_key_of_characters_outside_z85_is_refused(tmp_path):
    keys = tmp_path / "keys"
    make_keys(keys, ["alice"])
    text = (keys / "alice.key_secret").read_text()
    secret = text.split('secret-key = "')[1][:40]
    (keys / "alice.key_secret").write_text(text.replace(secret, "~" * 40))
    with pytest.raises(UsageError, match="secret key is not 40 Z85 characters"):
        ClientSecurity.choose(str(keys), "alice", False, "tcp://127.0.0.1:5555")


def test_the_scheduler_socket_gets_its_keys_before_the_authenticator_starts(tmp_path, caplog):
    keys = tmp_path / "keys"
    make_keys(keys, ["alice"])
    security = ServerSecurity.choose(str(keys), False, "tcp://127.0.0.1:5555")
    _cut_key(keys / "scheduler.key_secret", "secret")  # changed after the start's check
    import logging

    with zmq.Context() as context, context.socket(zmq.ROUTER) as sock:
        sock.setsockopt(zmq.LINGER, 0)
        with pytest.raises(UsageError, match="scheduler.key_secret"):
            security.apply(context, sock, logging.getLogger("test"))
    # (no authenticator thread left running: leaving the `with` would otherwise hang in term())


# --- the wire's wording -------------------------------------------------------------------------


def test_a_missing_top_level_field_names_no_empty_location():
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode(json.dumps({"v": protocol.VERSION, "seq": 18, "type": "submit"}).encode())
    assert err.value.reason == "submit: missing field 'jobs'"
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode(json.dumps({"v": protocol.VERSION, "seq": 1, "type": "launch", "job": 1}).encode())
    assert err.value.reason == "launch: missing field 'attempt'"


# --- the agent's command line ----------------------------------------------------------------


def _agent(*extra):
    return ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", *extra]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--name", "a", "--fake-gpus", "5000:V100"], "--fake-gpus 5000:V100: at most 1024 GPUs per node"),
        (["--name", "a", "--fake-gpus", "2:V/100"], "--fake-gpus 2:V/100: GPU type 'V/100' must be a plain name"),
        (["--name", "a", "--fake-gpus", "²:V100"], "write COUNT:TYPE"),
        (
            ["--name", "a" * 63, "--fake-gpus", "2:V100", "--emulate", "--nodes", "3"],
            f"--nodes 3 with --name {'a' * 63}: the node names {'a' * 63}-0 to {'a' * 63}-2 must be at most 64 characters",
        ),
    ],
)
def test_agent_values_past_the_protocols_limits_are_refused_at_start(capsys, extra, message):
    refused(capsys, _agent(*extra), message)


def test_more_emulated_nodes_than_the_open_file_limit_are_refused_at_start():
    """In a process whose hard open-file limit is 256 (set in the child, as `ulimit -Hn 256`
    would), 200 emulated nodes cannot be opened: refused at start, naming the limit."""
    import resource
    import subprocess
    import sys

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    args = _agent("--name", "a", "--fake-gpus", "1:V100", "--emulate", "--nodes", "200")
    done = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", *args],
        preexec_fn=low_limit,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--nodes 200: 200 emulated nodes need about" in done.stderr and "at most 256 (ulimit -Hn)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_emulated_nodes_past_zeromqs_socket_limit_say_so(monkeypatch):
    """Should the budget be off, a ZeroMQ refusal while opening the nodes' sockets is a message."""
    from roundhouse.agents.agent import emulated
    from roundhouse.agents.agent.gpus import Gpu

    monkeypatch.setattr(emulated, "SOCKETS_PER_NODE", 0)  # the context then allows only 64 sockets
    nodes = emulated.EmulatedNodes(f"tcp://127.0.0.1:{free_port()}", "emu", 40, [Gpu(0, "V100")], ClientSecurity(None))
    with pytest.raises(UsageError, match=r"--nodes 40: could not open the connection of node \d+ \(Too many open files\)"):
        nodes.run()


def test_emulated_nodes_with_keys_need_a_key_each(tmp_path, capsys):
    keys = tmp_path / "keys"
    make_keys(keys, ["emu", "emu-0"])
    err = refused(
        capsys,
        [
            "agent",
            "--scheduler",
            f"tcp://127.0.0.1:{free_port()}",
            "--keys",
            keys,
            "--name",
            "emu",
            "--nodes",
            "3",
            "--fake-gpus",
            "2:V100",
            "--emulate",
        ],  # fmt: skip
        "each emulated node connects with its own key pair",
    )
    assert "has none for emu-1, emu-2" in err and "emu-{0..2}" in err


# --- the client library ------------------------------------------------------------------------


@pytest.mark.parametrize("agent", [None, "ipc:///nonexistent/agent.sock"])
def test_metric_names_follow_the_wires_rule_with_or_without_an_agent(monkeypatch, agent):
    for name in list(os.environ):
        if name.startswith("ROUNDHOUSE_"):
            monkeypatch.delenv(name)
    if agent:
        monkeypatch.setenv("ROUNDHOUSE_AGENT", agent)
    job = Job.from_env()
    job.report(loss=1.0, val_acc=0.5)
    with pytest.raises(ValueError, match=r"metric name 'valAcc': use lower-case letters, digits and '_'"):
        job.report(loss=1.0, valAcc=0.5)
    with pytest.raises(ValueError, match="metric name 'x" + "y" * 32):
        job.report(**{"x" + "y" * 32: 1.0})
    with pytest.raises(ValueError, match="metric 'acc': 'high' is not a number"):
        job.report(acc="high")  # type: ignore[arg-type]
    job.report(**{f"m{i}": float(i) for i in range(57)})  # 58 names of its own, with val_acc
    with pytest.raises(ValueError, match="metric 'one_more': a job reports at most 58 metric names"):
        job.report(one_more=1.0)
    job.report(m3=4.0)  # a name it has reported already is not one more
    values = {"loss": 1.0, "val_acc": 0.5, **{f"m{i}": float(i) for i in range(57)}, "m3": 4.0}
    protocol.encode("report", 1, job=0, attempt=1, rank=0, iteration=0, values={**values, "iter_time_s": 0.1})


@pytest.mark.parametrize(
    "variable, text, message",
    [
        ("ROUNDHOUSE_CHECKPOINT_EVERY", "60s", "ROUNDHOUSE_CHECKPOINT_EVERY='60s': expected a number of seconds"),
        ("ROUNDHOUSE_ITERATIONS", "1e3", "ROUNDHOUSE_ITERATIONS='1e3': expected a whole number"),
        ("MASTER_PORT", "http", "MASTER_PORT='http': expected a whole number"),
    ],
)
def test_a_job_variable_of_the_wrong_kind_is_named(variable, text, message):
    with pytest.raises(ValueError) as err:
        JobEnv.read({variable: text})
    assert str(err.value) == message


# --- submit ------------------------------------------------------------------------------------


def _submit(*extra):
    return ["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", *extra]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model", "LM", "--iterations", "5", "--status"], "--status submits nothing: leave out --model"),
        (["--count", "3", "--status"], "--status submits nothing: leave out --count"),
        (["--gpus", "2", "{trace}"], "--gpus describes a job given on the command line"),
        (["--count", "1", "{trace}"], "--count describes a job"),
        (["--batch-size", "8", "{trace}"], "--batch-size describes a job"),
        (["--job-id", "5", "{trace}"], "--job-id describes a job"),
        (["--duration", "1min", "{trace}"], "--duration describes a job"),
        (["{trace}", "--status"], "--status submits nothing: leave out"),
    ],
)
def test_submit_refuses_flags_it_would_not_use(tmp_path, capsys, extra, message):
    trace = tmp_path / "jobs.csv"
    trace.write_text("job_id,gpus,model,iterations\n0,1,LM,10\n")
    refused(capsys, _submit(*[str(trace) if a == "{trace}" else a for a in extra]), message)


def test_a_submitted_trace_keeps_the_files_order_and_lines_and_may_leave_out_arrivals(tmp_path, capsys):
    from roundhouse.tools.submit_cmd import trace_jobs

    trace = tmp_path / "jobs.csv"
    trace.write_text("job_id,gpus,model,iterations\n# a comment\n7,1,LM,10\n3,2,ResNet-18,20\n")
    jobs, where = trace_jobs(str(trace))
    assert [j["job_id"] for j in jobs] == [7, 3] and "arrival_s" not in jobs[0]
    assert where == [f"{trace}:3", f"{trace}:4"]
    with_arrivals = tmp_path / "arrivals.csv"
    with_arrivals.write_text("job_id,arrival_s,gpus,model,iterations\n1,50,1,LM,10\n2,0,1,LM,10\n")
    jobs, where = trace_jobs(str(with_arrivals))
    assert [j["job_id"] for j in jobs] == [1, 2] and where == [f"{with_arrivals}:2", f"{with_arrivals}:3"]
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,gpus,model,iterations\n0,1,LM,10\n1,x,LM,10\n")
    refused(capsys, _submit(bad), f"{bad}:3: error: column 'gpus'")


def test_jobs_go_in_one_message_when_they_fit_else_in_as_few_as_fit():
    small = [{"model": "LM", "iterations": 5, "gpus": 1}] * 10_000
    assert _chunks(small) == [(0, 10_000)]
    assert _chunks(small * 2 + small[:5]) == [(0, 10_000), (10_000, 20_000), (20_000, 20_005)]
    big = [{"command": "x" * 4000, "gpus": 1}] * 600  # about 2.4 MB: more than one message's 1 MiB
    chunks = _chunks(big)
    assert len(chunks) > 1 and chunks[0][0] == 0 and chunks[-1][1] == 600
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    for start, end in chunks:
        assert len(protocol.encode("submit", protocol.SEQ_MAX, jobs=big[start:end])) <= protocol.MAX_BYTES


def test_refusals_name_the_row_in_the_users_file():
    where = [f"t.csv:{n}" for n in range(2, 30)]
    text = "the scheduler refused: submission:3: error: column 'gpus': must be at least 1"
    assert _name_rows(text, where, 10) == "the scheduler refused: t.csv:14: error: column 'gpus': must be at least 1"
    assert _name_rows("submission: error: job 5 asks for 64 GPUs", where, 10) == "submission: error: job 5 asks for 64 GPUs"
    assert id_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


# --- with a scheduler ---------------------------------------------------------------------------

GRAPH = """
round = 1s;
cluster = "2x2:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.mark.live
def test_a_refusal_after_an_accepted_message_says_what_was_accepted(tmp_path, capsys):
    cluster = LiveCluster(tmp_path / "run", GRAPH, serve_args=("--wait-for-agents", "0s"))
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        # 10,500 jobs: two messages; the 10,201st (line 10,202) asks for more GPUs than there are.
        trace = tmp_path / "jobs.csv"
        rows = [f"{i},{64 if i == 10_200 else 1},ResNet-18,5" for i in range(10_500)]
        trace.write_text("job_id,gpus,model,iterations\n" + "\n".join(rows) + "\n")
        assert main(["submit", cluster.address, "--insecure", str(trace), "--timeout", "60s"]) == 2
        err = capsys.readouterr().err
        assert "job 10200 asks for 64 GPUs" in err, err
        assert f"already accepted 10000 job(s), {trace}:2 to {trace}:10001 (ids 0-9999)" in err
        assert f"jobs from {trace}:10002 on were not submitted" in err
        # Within one message a refusal accepts nothing.
        small = tmp_path / "small.csv"
        small.write_text("job_id,gpus,model,iterations\n20000,1,LM,5\n20001,64,LM,5\n")
        assert main(["submit", cluster.address, "--insecure", str(small)]) == 2
        assert "job 20001 asks for 64 GPUs" in capsys.readouterr().err
        with Submitter(cluster.address, ClientSecurity(None)) as client:
            assert client.status()["submitted"] == 10_000
            with pytest.raises(SchedulerError) as refused:
                client.submit(
                    [{"model": "LM", "iterations": 5, "gpus": 1}] * 10_001 + [{"model": "LM", "iterations": 5, "gpus": 0}]
                )
            assert refused.value.accepted == list(range(10_000, 20_000))
            assert "job 10002: error: column 'gpus'" in str(refused.value), refused.value
            assert "(ids 10000-19999); jobs from job 10001 on were not submitted" in str(refused.value)
            assert client.status()["submitted"] == 20_000
    finally:
        cluster.close()


@pytest.mark.live
def test_emulated_nodes_each_connect_with_their_own_key(tmp_path):
    keys = tmp_path / "keys"
    make_keys(keys, ["emu-0", "emu-1", "alice"])  # no key named plain `emu`: each node uses its own
    cluster = LiveCluster(tmp_path / "run", GRAPH, security=("--keys", str(keys)), serve_args=("--wait-for-agents", "0s"))
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        cluster.start_agent("emu", "2:V100", extra=("--keys", str(keys)), nodes=2)
        for name in ("emu-0", "emu-1"):
            cluster.wait_for(lambda name=name: f"node {name} registered (key {name})" in cluster.log("scheduler"), 30, name)
        with Submitter(cluster.address, ClientSecurity(keys, "alice")) as client:
            assert client.status()["nodes_online"] == 2
        assert cluster.processes["emu"].poll() is None
    finally:
        cluster.close()
