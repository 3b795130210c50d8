"""Keys say their role: a submitter's key is marked as such in what the scheduler's socket says
sent a message, and so is an agent's (a key made before roles is its name); an existing pair is not silently given another role."""

from __future__ import annotations

import pytest

from roundhouse.errors import UsageError
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import AGENT, SUBMITTER, key_of_user_id, key_role, user_id


def test_each_key_says_its_role(tmp_path):
    make_keys(tmp_path, ["node-a"], submitters=["alice"])
    assert key_role(tmp_path / "node-a.key") == AGENT
    assert key_role(tmp_path / "authorized" / "alice.key") == SUBMITTER
    assert key_role(tmp_path / "scheduler.key") == ""
    assert key_of_user_id(user_id("alice", SUBMITTER)) == ("alice", SUBMITTER)
    assert key_of_user_id(user_id("node-a", AGENT)) == ("node-a", AGENT)
    assert key_of_user_id(user_id("old", "")) == ("old", "")


def test_a_key_made_before_roles_serves_as_an_agent_s_not_as_a_submitter_s(tmp_path):
    import zmq.auth

    zmq.auth.create_certificates(str(tmp_path), "old")  # (as `roundhouse keys` made them before roles)
    assert key_role(tmp_path / "old.key") == ""
    make_keys(tmp_path, ["old"])  # kept: a key of no role may still register a node
    with pytest.raises(UsageError, match="already has a key of no role"):
        make_keys(tmp_path, [], submitters=["old"])


def test_a_name_keeps_its_role(tmp_path, capsys):
    assert main(["keys", str(tmp_path), "node-a", "--submitters", "alice"]) == 0
    assert main(["keys", str(tmp_path), "alice"]) == 2
    assert "'alice' already has a submitter's key" in capsys.readouterr().err
    assert main(["keys", str(tmp_path), "bob", "--submitters", "bob"]) == 2
    assert "bob: named both as an agent and as a submitter" in capsys.readouterr().err
    assert main(["keys", str(tmp_path), "node-a", "--submitters", "alice"]) == 0  # as they were: kept
