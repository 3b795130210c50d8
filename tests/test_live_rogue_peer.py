"""A rogue peer on the live wire: a registered agent's messages that are well formed but name a
worker this scheduler never launched (a job it does not have, an attempt not yet made, a rank
the attempt lacks) are dropped or acknowledged with a log line naming the sender and what was
wrong; nothing is booked or journaled, and the scheduler goes on serving its good agents."""

from __future__ import annotations

import json
import threading

import pytest
import zmq

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.tools.loopback import free_port
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity
from tests.test_live_backend import handled, launch_two, live, pump, serve_until  # noqa: F401  (live: the backend fixture)
from tests.test_wire_review_fixes import lines  # noqa: F401  (the logger-listening fixture)

pytestmark = pytest.mark.live

EXIT = dict(outcome="failed", iteration=3, start_iteration=0, permanent=True, reason="rogue")


@pytest.mark.parametrize(
    ("job", "attempt", "rank", "why"),
    [
        (999, 1, 0, "job 999 is not one of this scheduler's jobs"),
        (1, 7, 0, "job 1 has had 1 attempt(s), not 7"),
        (1, 1, 9, "job 1 attempt 1 has 1 rank(s), not rank 9"),
    ],
)
def test_reports_on_a_worker_never_launched_are_logged_naming_the_sender(live, lines, job, attempt, rank, why):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    launch_two(live, 1000.0)
    pump(backend)
    a.receive()
    exits_before = journal.db.execute("SELECT COUNT(*) FROM exits").fetchone()[0]
    done = handled(backend, 3)
    a.send("started", job=job, attempt=attempt, rank=rank)
    a.send("metrics", job=job, attempt=attempt, rank=rank, iteration=3, values={"loss": 0.5})
    a.send("exited", job=job, attempt=attempt, rank=rank, **EXIT)
    serve_until(backend, done, "the rogue reports")
    # The exit is acknowledged (an agent resends an exit until it is), and nothing else is said.
    replies = a.receive(1)
    assert replies == [("ack", {"job": job, "attempt": attempt, "rank": rank})]
    worker = f"of job {job} attempt {attempt} rank {rank} from node a: "
    said = got.having(f"acknowledged exited {worker}")
    assert said and said[0].endswith(why), got.lines
    if (job, attempt) in backend.attempts.live:  # (a rank its attempt lacks: refused as another node's)
        why = "that worker does not run there"
    for what in ("started", "metrics"):
        said = [line for line in got.lines if worker in line and what in line.split(" of job")[0]]
        assert said and said[0].endswith(why), (what, got.lines)
    # Nothing was booked: the real attempt runs on, and the journal holds no exit.
    att = backend.attempts.live[(1, 1)]
    assert not att.exits and not att.ended and att.iteration == 0 and not backend.news.metrics
    assert journal.db.execute("SELECT COUNT(*) FROM exits").fetchone()[0] == exits_before
    assert backend.counters["handler_errors"] == 0
    # A good agent is still served.
    report = handled(backend)
    b.send("metrics", job=2, attempt=1, rank=0, iteration=10, values={"loss": 0.1})
    serve_until(backend, report, "b's metrics")
    assert backend.attempts.live[(2, 1)].iteration == 10


def test_a_late_report_of_an_ended_attempt_is_no_fault(live, lines):  # noqa: F811
    """An exit resent after it was taken, and a report that crossed its attempt's end on the
    wire, are part of the protocol: acknowledged or dropped without a warning."""
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    launch_two(live, 1000.0)
    pump(backend)
    b.receive()
    done = handled(backend, 3)
    b.exited(2, 1, 0, "done", 100)
    b.exited(2, 1, 0, "done", 100)  # resent: its ack was not seen
    b.send("metrics", job=2, attempt=1, rank=0, iteration=100, values={"loss": 0.1})
    serve_until(backend, done, "b's exit, again, and a late report")
    assert [t for t, _ in b.receive(2)] == ["ack", "ack"]
    assert not [line for line in got.lines if "job 2 attempt 1 rank 0 from node b" in line], got.lines
    assert journal.db.execute("SELECT COUNT(*) FROM exits WHERE job_id = 2").fetchone()[0] == 1


@pytest.mark.parametrize(("address", "said"), [("", ": empty"), ("bad\nhost\x00", ': holds "\\n"'), ("my host", ': holds " "')])
def test_a_registration_at_an_address_no_host_has_is_refused_and_changes_nothing(live, lines, address, said):  # noqa: F811
    """Before: taken, journaled, and given to the node's jobs as their rendezvous address."""
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    a.receive()
    done = handled(backend)
    gpus = [{"index": i, "type": "V100"} for i in range(2)]
    body = dict(node="a", address=address, session="a", gpus=gpus, running=[])
    a.sock.send(
        json.dumps({"v": protocol.VERSION, "type": "register", "seq": a.seq.next(), **body}).encode()
    )  # (as no encoder would)
    serve_until(backend, done, "the re-registration")
    (reply,) = a.receive(1)
    assert reply[0] == "error" and reply[1]["reason"].startswith("register: address") and said in reply[1]["reason"]
    assert got.having("refused a message from ") and said in got.having("refused a message from ")[0]
    assert backend.nodes.by_name["a"].address == "127.0.0.1"
    assert journal.db.execute("SELECT address FROM nodes WHERE name = 'a'").fetchone() == ("127.0.0.1",)
    # The node serves on: its jobs meet at the address it registered first.
    launch_two(live, 100.0)
    launches = [body for t, body in a.receive(1) if t == "launch"]
    assert launches and launches[0]["master_addr"] == "127.0.0.1"


@pytest.mark.parametrize("ids", [[], [7, 8, 9]])
def test_a_submitter_refuses_an_answer_accepting_another_number_of_jobs(ids):
    """A scheduler (or a stand-in) that answers a submission of two jobs with another number of
    ids: before, the submitter returned them as the two jobs' ids."""
    ctx = zmq.Context()
    stand_in = ctx.socket(zmq.ROUTER)
    stand_in.setsockopt(zmq.LINGER, 0)
    address = f"tcp://127.0.0.1:{free_port()}"
    stand_in.bind(address)
    answered = threading.Event()

    def answer() -> None:
        if stand_in.poll(10_000):
            identity, frame = stand_in.recv_multipart()
            _, seq, _ = protocol.decode(frame)
            stand_in.send_multipart([identity, protocol.encode("accepted", seq + 1, job_ids=ids)])
            answered.set()

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        with Submitter(address, ClientSecurity(None), timeout_s=10.0) as client:
            job = {"gpus": 1, "model": "LM", "iterations": 5}
            with pytest.raises(SchedulerError, match=f"bad answer from the scheduler: it accepted {len(ids)} job id"):
                client.submit([job, job])
        assert answered.is_set()
    finally:
        thread.join()
        stand_in.close()
        ctx.term()
