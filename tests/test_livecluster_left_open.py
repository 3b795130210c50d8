"""A live test that fails before its own `close()` (in a helper that starts a cluster and waits
for a job) leaves no process running into the tests after it: every cluster made is closed
after its test (tests/conftest.py), and Loopback lets an option given for serve or an agent
take its default's place, as the commands refuse an option given twice."""

from __future__ import annotations

import pytest

from roundhouse.tools.loopback import with_defaults
from tests import livecluster
from tests.conftest import LIVE_GRAPH


@pytest.mark.live
def test_a_cluster_its_test_left_open_is_closed_after_it(tmp_path):
    cluster = livecluster.LiveCluster(tmp_path, LIVE_GRAPH, serve_args=("--wait-for-agents", "0s"))
    scheduler = cluster.start_scheduler()
    agent = cluster.start_agent("node-a")
    assert cluster in livecluster.left_open
    livecluster.close_left_open()  # (what the fixture does after each test)
    assert scheduler.poll() is not None and agent.poll() is not None
    assert not livecluster.left_open


def test_an_option_given_takes_its_default_s_place():
    defaults = {"--out": "a", "--wait-for-agents": "20s", "--heartbeat": "1s"}
    given = ["--wait-for-agents", "0s", "--heartbeat=2s", "--stop-agents"]
    assert with_defaults(defaults, given) == ["--out", "a", "--wait-for-agents", "0s", "--heartbeat=2s", "--stop-agents"]
