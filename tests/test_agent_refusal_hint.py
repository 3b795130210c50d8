"""What an agent says when a scheduler refuses its handshake: an agent with keys is told to check
them; one running --insecure offers no keys, so it is told the other end may want them (or is
not a scheduler), not to check keys it does not have."""

from __future__ import annotations

from collections import defaultdict

import pytest
import zmq

from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import ClientSecurity
from tests.test_agent_submit_fixes import HELLO, _curve_server, _watch


@pytest.mark.live
def test_an_insecure_agent_refused_by_a_keyed_scheduler_is_told_it_may_need_keys(tmp_path, logs):
    keys = tmp_path / "keys"
    make_keys(keys, ["a"])
    context = zmq.Context()
    server, auth = _curve_server(context, keys, keys / "authorized")
    port = server.bind_to_random_port("tcp://127.0.0.1")
    address = f"tcp://127.0.0.1:{port}"
    link = SchedulerLink(address, ClientSecurity.choose(None, "a", True, address), HELLO, defaultdict(int))
    try:
        link.open(context)
        _watch(link, 10.0, lambda: link.refused)
        assert link.refused
        said = logs.text
        assert f"the scheduler at {address} refused this agent" in said
        assert "this agent runs --insecure: does the scheduler there need keys" in said
        assert "check the keys (roundhouse keys)" not in said
    finally:
        link.close()
        server.close()
        auth.stop()
        context.term()
