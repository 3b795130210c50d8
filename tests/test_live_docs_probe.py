"""Slips a new user makes following docs/live.md: a submitter given --keys without --name, and
an emulating agent (`--nodes`) that cannot reach its scheduler or reaches it."""

from __future__ import annotations

import logging
import threading

import pytest

from roundhouse.agents.agent.emulated import EmulatedNodes
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.agents.submitter import Submitter
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.tools.loopback import free_port
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import LiveCluster


def test_submit_with_keys_but_no_name_says_the_default_name_and_the_folders_submitters(tmp_path, capsys):
    make_keys(tmp_path / "keys", ["node1"], ["alice", "bob"])
    status = main(["submit", "tcp://127.0.0.1:5555", "--keys", str(tmp_path / "keys"), "--status", "--timeout", "1s"])
    err = capsys.readouterr().err
    assert status == 2
    assert "without --name" in err and "'submitter'" in err and "alice, bob" in err, err
    assert "node1" not in err  # (an agent's pair is no submitter's)
    assert "Traceback" not in err


def test_an_emulating_agent_that_reaches_no_scheduler_says_so_once_for_all_its_nodes(caplog):
    nodes = EmulatedNodes(f"tcp://127.0.0.1:{free_port()}", "emu", 4, [Gpu(0, "V100")], ClientSecurity(None))
    for node in nodes.nodes:
        node.link.warn_every_s = 0.4
    stopper = threading.Timer(1.0, nodes.stop, ["the test is over"])
    stopper.start()
    with caplog.at_level(logging.WARNING, logger="roundhouse.agent"):
        assert nodes.run() == 0
    stopper.join()
    said = [r.getMessage() for r in caplog.records if "not registered with the scheduler" in r.getMessage()]
    # Two periods of 0.4 s in one second: two warnings, where each of the four nodes said its own.
    assert 1 <= len(said) <= 3, said


@pytest.mark.live
def test_an_emulating_agent_says_when_all_its_nodes_are_registered(tmp_path):
    graph = 'round = 1s;\ncluster = "3x1:V100";\nsrc :: LiveSource(jobs=1);\nsrc -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;\n'
    cluster = LiveCluster(tmp_path, graph, serve_args=("--stop-agents", "--until", "20s"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", "1:V100", nodes=3)
        with Submitter(cluster.address, ClientSecurity(None), timeout_s=20) as client:
            cluster.wait_for(lambda: client.status()["gpus_online"] == 3, 20, "every emulated node")
        cluster.wait_for(lambda: "all 3 emulated node(s) registered" in cluster.log("emu"), 10, "the agent's line")
    finally:
        cluster.close()
