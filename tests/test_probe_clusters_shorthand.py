"""Cluster shorthands as a new user writes them: whole-cluster shorthands (Gavel's V:P:K,
Dally's dally:N) joined with node groups, and empty groups between commas, are refused saying
what is wrong, not that a form the message itself lists as an example is not one."""

from __future__ import annotations

import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import ClusterSpec
from roundhouse.tools.cli import main
from tests.conftest import REPO


def refusal(text: str) -> str:
    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse(text)
    return str(err.value)


@pytest.mark.parametrize("text", ["36:36:36,4x4:V100", "4x4:V100, 36 : 36 : 36"])
def test_gavel_shorthand_joined_with_groups_says_it_is_a_whole_cluster_and_writes_its_groups_out(text):
    message = refusal(text)
    assert "is not NODESxGPUS" not in message, message
    assert "Gavel's shorthand for a whole cluster" in message
    assert "36x1:V100,36x1:P100,36x1:K80" in message
    # the groups it suggests, joined with the rest, are a cluster that parses
    spec = ClusterSpec.parse("36x1:V100,36x1:P100,36x1:K80,4x4:V100")
    assert sum(g.nodes * g.gpus_per_node for g in spec.groups) == 124


def test_gavel_shorthand_with_a_zero_count_suggests_only_the_types_it_has():
    message = refusal("4x4:V100,0:2:0")
    assert "write its groups out: 2x1:P100" in message


@pytest.mark.parametrize("text", ["dally:2,4x4:V100", "4x4:V100,dally:2"])
def test_dally_joined_with_groups_says_it_is_a_whole_cluster(text):
    message = refusal(text)
    assert "Dally's whole cluster" in message, message
    assert "write dally:N" not in message
    assert "is not NODESxGPUS" not in message


@pytest.mark.parametrize("text", ["2x4:V100,,4x4:P100", "2x4:V100,", ","])
def test_an_empty_group_between_commas_is_named_as_such(text):
    message = refusal(text)
    assert "a node group is empty" in message, message
    assert "'' is not" not in message


def test_the_shorthands_alone_still_parse():
    assert [g.gpu_type for g in ClusterSpec.parse("36:36:36").groups] == ["V100", "P100", "K80"]
    assert ClusterSpec.parse("dally:2").groups[0].nodes == 16
    assert ClusterSpec.parse("16x4:V100, 16x4:P100").groups[1].gpu_type == "P100"


def test_the_command_line_refuses_a_joined_shorthand_without_a_traceback(capsys):
    graph = str(REPO / "graphs" / "las.sched")
    assert main(["check", graph, "--cluster", "36:36:36,4x4"]) == 2
    err = capsys.readouterr().err
    assert "--cluster" in err and "Gavel's shorthand for a whole cluster" in err
    assert "Traceback" not in err
