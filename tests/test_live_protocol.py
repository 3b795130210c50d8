"""The wire protocol: every message type round-trips; bad frames become ProtocolErrors with a reason."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roundhouse.wire import protocol
from roundhouse.wire.protocol import ProtocolError, SeqTracker, decode, encode
from tests.test_live_fuzz import EXAMPLES


@pytest.mark.parametrize("type_", sorted(protocol.SCHEMAS))
def test_every_message_type_round_trips(type_):
    body = EXAMPLES.get(type_, {})
    if type_ == "error":
        body = {"reason": "bad", "ref": 3}
    elif type_ in ("accepted",):
        body = {"job_ids": [1, 2]}
    elif type_ == "status_reply":
        body = {"status": {"jobs": 3.0}}
    elif type_ == "lease_reply":
        body = {"job": 1, "attempt": 2, "valid": True}
    elif type_ == "unknown":
        body = {"reason": "register"}
    frame = encode(type_, 7, **body)
    got_type, seq, got = decode(frame)
    assert (got_type, seq) == (type_, 7)
    assert protocol._without_nulls(got) == body


@pytest.mark.parametrize(
    "frame, reason",
    [
        (b"\xff\xfe", "not a UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"v": 9, "type": "status", "seq": 1}', "unsupported protocol version 9"),
        (b'{"v": 4, "type": "launch2", "seq": 1}', "unknown message type"),
        (b'{"v": 4, "type": "status"}', "bad 'seq'"),
        (b'{"v": 4, "type": "status", "seq": true}', "bad 'seq'"),
        (b'{"v": 4, "type": "status", "seq": 1, "x": 1}', "unknown field 'x'"),
        (b'{"v": 4, "type": "lease", "seq": 1, "job": 1}', "missing field 'attempt'"),
        (b'{"v": 4, "type": "lease", "seq": 1, "job": -1, "attempt": 1}', "job must be between"),
        (b'{"v": 4, "type": "lease", "seq": 1, "job": 1.5, "attempt": 1}', "must be a whole number"),
        (
            b'{"v": 4, "type": "metrics", "seq": 1, "job": 1, "attempt": 1, "rank": 0, "iteration": 1, "values": {"Loss!": 1}}',
            "bad key",
        ),
        (
            b'{"v": 4, "type": "metrics", "seq": 1, "job": 1, "attempt": 1, "rank": 0, "iteration": 1, "values": {"loss": NaN}}',
            "NaN is not allowed",
        ),
        (
            b'{"v": 4, "type": "exited", "seq": 1, "job": 1, "attempt": 1, "rank": 0, "outcome": "exploded", "iteration": 1, "start_iteration": 0, "permanent": false, "reason": ""}',
            "must be one of",
        ),
        (b"a" * (protocol.MAX_BYTES + 1), "exceeds"),
        (b"[" * 100000 + b"]" * 100000, "not a UTF-8 JSON"),
        (b"{" * 50000, "not a UTF-8 JSON"),
    ],
    ids=lambda v: v[:40].decode(errors="replace") if isinstance(v, bytes) else v,
)
def test_bad_frames_are_refused_with_a_reason(frame, reason):
    with pytest.raises(ProtocolError) as err:
        decode(frame)
    assert reason in err.value.reason


def test_receivers_can_restrict_the_types_they_accept():
    with pytest.raises(ProtocolError, match="not a message this side accepts"):
        decode(encode("launch", 1, **EXAMPLES["launch"]), {"register"})


def test_encode_refuses_a_body_that_breaks_its_schema():
    with pytest.raises(ProtocolError):
        encode("lease", 1, job="seven", attempt=1)
    with pytest.raises(ValueError, match="unknown message type"):
        encode("nonsense", 1)


def test_sequence_numbers_must_increase_per_sender():
    seqs = SeqTracker()
    assert seqs.accept("a", 5) and seqs.accept("b", 1) and seqs.accept("a", 6)
    assert not seqs.accept("a", 6) and not seqs.accept("a", 2)
    seqs.forget("a")
    assert seqs.accept("a", 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_decode_never_raises_anything_but_protocol_errors(data):
    try:
        decode(data)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
        max_leaves=20,
    ),
    st.sampled_from(sorted(protocol.SCHEMAS)),
)
def test_decode_checks_any_json_body(value, type_):
    frame = json.dumps({"v": protocol.VERSION, "type": type_, "seq": 1, "body": value}).encode()
    with pytest.raises(ProtocolError):
        decode(frame)  # "body" is never a field
    if isinstance(value, dict):
        frame = json.dumps({**value, "v": protocol.VERSION, "type": type_, "seq": 1}).encode()
        try:
            decode(frame)
        except ProtocolError:
            pass
