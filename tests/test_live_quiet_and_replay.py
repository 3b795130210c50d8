"""An agent pointed at something that accepts connections but never completes a handshake says
so within seconds (naming the address, and what it likely means), and keeps trying as an agent
that cannot register does; a resumed scheduler's replay reads the journal's rounds in batches,
never every round at once."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
import tracemalloc
from collections import defaultdict

import pytest

from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import ClientSecurity
from tests.test_agent_submit_fixes import HELLO, PROJECT, Forwarder

STALLED = "but the handshake has not completed after"


# --- an agent at an address where nothing speaks ZeroMQ ---
@pytest.mark.live
@pytest.mark.parametrize("keyed", [True, False])
def test_a_handshake_that_never_completes_is_said_within_seconds(tmp_path, logs, keyed):
    import zmq

    keys = tmp_path / "keys"
    make_keys(keys, ["a"])
    silent = Forwarder(silent=True)
    security = ClientSecurity.choose(str(keys) if keyed else None, "a", not keyed, silent.address)
    link = SchedulerLink(silent.address, security, HELLO, defaultdict(int))
    context = zmq.Context()
    try:
        link.open(context)
        started = time.time()
        said_at = None
        while time.time() - started < 12 and said_at is None:
            link.monitor.poll(100)
            link.watch_handshakes()
            link.keep_alive(time.time(), lambda: [])
            if STALLED in logs.text:
                said_at = time.time() - started
        assert said_at is not None and said_at < 10, logs.text  # (ZeroMQ itself gives up only after 30 s)
        assert silent.accepted  # (it was a connection made, not a port closed)
        line = next(r.getMessage() for r in logs.records if STALLED in r.getMessage())
        assert silent.address in line and "still trying" in line
        assert "something other than a Roundhouse scheduler" in line
        assert ("are the keys mismatched" in line) == keyed
        assert not link.refused and not link.registered
        for _ in range(10):  # said once, not on every turn of the loop
            link.keep_alive(time.time(), lambda: [])
        assert sum(STALLED in r.getMessage() for r in logs.records) == 1
    finally:
        link.close()
        context.term()
        silent.close()


@pytest.mark.live
def test_an_agent_with_keys_at_a_silent_listener_says_so_and_keeps_trying(tmp_path):
    keys = tmp_path / "keys"
    make_keys(keys, ["a"])
    silent = Forwarder(silent=True)
    log = tmp_path / "agent.log"
    with open(log, "wb") as out:
        agent = subprocess.Popen(
            [sys.executable, "-m", "roundhouse.tools.cli", "agent", "--scheduler", silent.address, "--keys", str(keys),
             "--name", "a", "--fake-gpus", "1:V100", "--workdir", str(tmp_path / "work")],
            cwd=PROJECT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.time() + 20
        while time.time() < deadline and agent.poll() is None and STALLED not in log.read_text():
            time.sleep(0.2)
        text = log.read_text()
        assert STALLED in text, text
        assert f"connected to the scheduler's address {silent.address}" in text
        assert agent.poll() is None, text  # it keeps trying, as an agent that cannot register does
        agent.terminate()
        assert agent.wait(timeout=20) == 0, log.read_text()
        assert "refused" not in log.read_text()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        silent.close()


# --- a resumed scheduler's replay reads the rounds a batch at a time ---
ROUNDS = 3000
# (Each record's progress names this many jobs: about 0.8 kB of JSON a round. What the memory checks
# compare is one batch of rounds against all of them, which the rounds' count sets, not their size;
# smaller records keep the parse, slowed by tracemalloc, short.)
JOBS_PER_ROUND = 30


def _record(k: int, submitted: list[int]) -> dict:
    jobs = list(range(JOBS_PER_ROUND))
    return {
        "finished": [],
        "failed": [],
        "requeued": [],
        "online": None,
        "joined": [],
        "lost": [],
        "metrics": {},
        "submitted": submitted,
        "progress": [jobs, [k * 10 + j for j in jobs], [k * 1.5 + j for j in jobs], [k * 1.25 + j for j in jobs]],
        "plans": [],
    }


def _make_journal(path, rounds: int = ROUNDS) -> int:
    """A journal of `rounds` one-second rounds, the first few delivering one submission each;
    returns the bytes of JSON its rounds hold."""
    from roundhouse.runtime.journal import Journal

    journal = Journal(path)
    journal.begin({"graph": "g.sched", "graph_digest": "d", "cluster": "1x2:V100", "round_s": 1.0})
    text = 0
    for k in range(rounds):
        submitted = [k] if k < 5 else []
        if submitted:
            journal.add_submission(k, {"duration": "10"}, float(k))
            journal.mark_delivered(submitted, k)
        record = _record(k, submitted)
        journal.add_round(k, float(k), record)
        text += len(json.dumps(record, separators=(",", ":")))
    journal.commit()
    journal.close()
    return text


def _peak(work) -> int:
    """The most memory Python held at once (beyond what it held before) while `work` ran."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def long_journal(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "j.sqlite"
    return path, _make_journal(path)


def test_reading_the_rounds_never_holds_every_round_at_once(long_journal):
    from roundhouse.runtime.journal import Journal

    path, text = long_journal
    journal = Journal(path, read_only=True)
    try:
        seen = []
        peak = _peak(lambda: seen.append(sum(1 for _ in journal.rounds())))
        assert seen == [ROUNDS]
        # (every round's text at once, as one fetchall read them, is `text` bytes and more)
        assert peak < text / 4, (peak, text)
    finally:
        journal.db.close()


def test_a_replay_is_checked_whole_then_read_a_batch_at_a_time(long_journal):
    from roundhouse.runtime.journal import Journal

    path, text = long_journal
    journal = Journal(path, read_only=True)
    try:
        replay = None
        got = []

        def replay_as_a_restarted_scheduler_does():
            nonlocal replay
            replay = journal.replay()
            i = 0
            first = replay[0]
            got.append(first[0])
            while i < len(replay):  # (a round is asked for twice: as it is polled, then to move on)
                k, now, record = replay[i]
                assert replay[i][0] == k and record["progress"][1][0] == k * 10
                got.append(k)
                i += 1

        peak = _peak(replay_as_a_restarted_scheduler_does)
        assert len(replay) == ROUNDS and got == [0, *range(ROUNDS)]
        assert peak < text / 4, (peak, text)
        # the same rounds, with the same records, as reading them all gives
        assert [(k, now, dict(r)) for k, now, r in replay] == [(k, now, dict(r)) for k, now, r in journal.rounds()]
        with pytest.raises(IndexError):
            replay[ROUNDS]
    finally:
        journal.db.close()


@pytest.mark.parametrize(
    "damage, said",
    [
        ("UPDATE rounds SET now = 1.5 WHERE k = {last}", "table rounds, round {last}: its time, t=1.5s, is before"),
        ("UPDATE rounds SET record = 'not json' WHERE k = {last}", "table rounds, round {last}: not JSON"),
        ("UPDATE submissions SET round = 4 WHERE job_id = 3", "table submissions, job 3: round 4 delivered it, says its row"),
    ],
)
def test_a_damaged_journal_is_refused_before_any_round_replays(tmp_path, damage, said):
    import sqlite3

    from roundhouse.errors import UsageError
    from roundhouse.runtime.journal import ROUND_BATCH, Journal

    rounds = ROUND_BATCH * 2 + 10  # (the damage in the last batch: found before the first round is handed out)
    path = tmp_path / "j.sqlite"
    _make_journal(path, rounds)
    db = sqlite3.connect(path)
    db.execute(damage.format(last=rounds - 1))
    db.commit()
    db.close()
    before = path.read_bytes()
    journal = Journal(path, read_only=True)
    try:
        with pytest.raises(UsageError) as err:
            journal.replay()
        assert str(err.value) == str(err.value).strip() and f"{path}: damaged journal: " in str(err.value)
        assert said.format(last=rounds - 1) in str(err.value), str(err.value)
    finally:
        journal.db.close()
    assert path.read_bytes() == before


# --- an agent and a scheduler restarted with a clock behind the old one's ---
@pytest.mark.live
def test_an_agent_takes_a_restarted_schedulers_messages_numbered_from_a_clock_behind(logs):
    """A scheduler numbers its messages from its clock as it starts: one restarted on a machine
    whose clock is behind (or after the clock stepped back) numbers them below the old one's.
    Its messages come on a new connection, in order there: the agent reads them (its `unknown`
    makes it register again) rather than dropping every one as out of order."""
    import zmq

    from roundhouse.wire import protocol

    context = zmq.Context()
    old = context.socket(zmq.ROUTER)
    old.setsockopt(zmq.LINGER, 0)
    port = old.bind_to_random_port("tcp://127.0.0.1")
    address = f"tcp://127.0.0.1:{port}"
    link = SchedulerLink(address, ClientSecurity(None), HELLO, defaultdict(int))
    link.open(context)
    new = None

    def answered(router, type_: str, seq: int, **fields) -> tuple[str, dict] | None:
        """Send something to `router` until it hears the agent; answer it; what the agent reads."""
        deadline = time.time() + 10
        while time.time() < deadline:
            link.watch_handshakes()
            link.send("heartbeat", running=[])
            if router.poll(200):
                identity = router.recv_multipart()[0]
                router.send_multipart([identity, protocol.encode(type_, seq, **fields)])
                while time.time() < deadline:
                    if link.dealer.poll(200):
                        return link.receive(link.dealer.recv_multipart())
        raise AssertionError("no answer")

    try:
        late = time.time_ns() // 1000
        assert answered(old, "welcome", late, node_index=0, heartbeat_s=1.0, session="old") is not None
        old.close()
        new = context.socket(zmq.ROUTER)
        new.setsockopt(zmq.LINGER, 0)
        for _ in range(100):  # (the old socket's port is let go in the background)
            try:
                new.bind(address)
                break
            except zmq.ZMQError:
                time.sleep(0.05)
        got = answered(new, "unknown", late - 60_000_000, reason="this scheduler does not know this agent: register")
        assert got is not None and got[0] == "unknown", logs.text
        assert "out-of-order" not in logs.text
    finally:
        link.close()
        if new is not None:
            new.close()
        context.destroy(linger=0)


# --- a submitter at an address where nothing speaks ZeroMQ ---
@pytest.mark.live
@pytest.mark.parametrize("keyed", [True, False])
def test_a_submitter_at_a_silent_listener_says_no_handshake_completed(tmp_path, keyed):
    from roundhouse.agents.submitter import SchedulerError, Submitter

    keys = tmp_path / "keys"
    if keyed:
        make_keys(keys, [], submitters=["s"])
    silent = Forwarder(silent=True)
    security = ClientSecurity.choose(str(keys) if keyed else None, "s", not keyed, silent.address)
    try:
        with Submitter(silent.address, security, timeout_s=2.0) as submitter, pytest.raises(SchedulerError) as err:
            submitter.status()
        said = str(err.value)
        assert said.startswith(f"no answer from the scheduler at {silent.address} within 2s; ")
        assert "a connection to it was made, but the handshake never completed" in said
        assert "something other than a Roundhouse scheduler" in said
        assert ("are the keys mismatched" in said) == keyed
    finally:
        silent.close()
