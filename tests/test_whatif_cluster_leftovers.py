"""Leftovers of `whatif`, `explain` and cluster specs: a cluster file, a trace or a Python file
given where a graph goes is said to be what it is; a journal's run of another round length says
so; a GPU type's near miss gets the documented hint, once; whatif's own options are checked
together, before any graph; and a topology is refused on GPUs other than its instance's."""

from __future__ import annotations

import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import Cluster, ClusterSpec
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.topologies import TOPOLOGIES
from tests.conftest import REPO, fails
from tests.test_whatif_fixes import open_journal

LAS = REPO / "graphs" / "las.sched"
GAVEL_PHYSICAL = REPO / "clusters" / "gavel-physical.toml"


# --- a file that is not a graph, given as one ------------------------------------------------
@pytest.mark.parametrize("command", [["run"], ["check"], ["sweep", "--vary", "round=1min,2min"]])
def test_a_cluster_file_given_as_the_graph_is_said_to_be_one(capsys, command):
    err = fails(capsys, command[0], GAVEL_PHYSICAL, *command[1:])
    assert err.startswith(f"error: {GAVEL_PHYSICAL} is a cluster spec"), err
    assert "not a .sched graph" in err and f"--cluster {GAVEL_PHYSICAL}" in err
    assert "unexpected" not in err  # (not the parser's complaint about its text)


def test_whatif_graph_given_a_cluster_file_says_so(tmp_path, capsys):
    journal = open_journal(tmp_path)
    err = fails(capsys, "whatif", journal, "--graph", GAVEL_PHYSICAL)
    assert f"{GAVEL_PHYSICAL} is a cluster spec" in err and "--cluster" in err


def test_a_cluster_spec_is_known_by_its_text_too(tmp_path):
    spec = tmp_path / "cluster"  # (no .toml: its [[group]] tables say what it is)
    spec.write_text("# two nodes\n[[group]]\nnodes = 2\ngpus_per_node = 4\n")
    with pytest.raises(Exception, match=r"is a cluster spec \(a \.toml file of node groups\), not a \.sched graph"):
        compile_file(spec)
    # A graph's own syntax error, in a file of no telling name, is the parser's still.
    graph = tmp_path / "g"
    graph.write_text("round = ;\n")
    with pytest.raises(Exception, match="unexpected") as err:
        compile_file(graph)
    assert "cluster spec" not in str(err.value)


@pytest.mark.parametrize(
    "name, text, said",
    [
        (
            "jobs.csv",
            "job_id,arrival_s,gpus,duration_s\n0,0,1,60\n",
            "is a trace, not a .sched graph: give a graph here, and the trace with --trace",
        ),
        (
            "mine.py",
            "import math\n",
            'is a Python file, not a .sched graph: give a graph here, and require the elements it defines in the graph (require "mine.py";)',
        ),
    ],
)
def test_a_trace_or_a_python_file_given_as_the_graph_is_said_to_be_one(tmp_path, capsys, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    err = fails(capsys, "run", path)
    assert err.startswith(f"error: {path} {said}"), err


def test_a_toml_file_that_reads_as_a_graph_is_a_graph(tmp_path):
    # (only a file that does not read as a .sched graph is told it is something else)
    path = tmp_path / "g.toml"
    path.write_text((REPO / "graphs" / "fifo.sched").read_text().replace('"../', f'"{REPO}/'))
    assert compile_file(path).elements


# --- a journal's run of another round length -------------------------------------------------
def test_a_run_set_of_another_round_length_names_both_lengths(tmp_path, capsys):
    journal = open_journal(tmp_path)  # (rounds of 10 s, as its journal records)
    err = fails(capsys, "whatif", journal, "--run-set", "round=1s")
    assert "is not the run's (its rounds are 1s long, the run's were 10s, as the journal recorded)" in err
    # Another difference is said as before: the journal keeps only a digest of the rest.
    err = fails(capsys, "whatif", journal, "--run-set", "seed=7")
    assert "is not the run's (its elements, arguments or settings differ" in err and "rounds are" not in err


# --- GPU types: the documented near-miss rule, one hint ------------------------------------
def test_a_type_one_character_replaced_away_is_told_no_type(capsys):
    err = fails(capsys, "run", LAS, "--cluster", "32x4:A100")
    assert "unknown GPU type 'A100';" in err
    assert "did you mean" not in err and "if you meant" not in err


def test_a_near_miss_of_a_profile_type_gets_one_hint(capsys):
    for near in ("V100x", "V1OO", "V10"):
        err = fails(capsys, "run", LAS, "--cluster", f"32x4:{near}")
        assert "did you mean" not in err, err
        assert err.count("if you meant the throughput profile's V100, write that in the cluster") == 1, err


def test_the_parser_alone_hints_by_the_same_rule():
    with pytest.raises(ClusterError, match=r"unknown GPU type 'A100'; known"):
        ClusterSpec.parse("1x4:A100", ["V100", "P100"])
    with pytest.raises(ClusterError, match=r"unknown GPU type 'V10O' \(did you mean 'V100'\?\)"):
        ClusterSpec.parse("1x4:V10O", ["V100", "P100"])


# --- whatif's own options, checked together and first ----------------------------------------
def test_whatif_says_every_bad_option_of_its_own_at_once(tmp_path, capsys):
    journal = open_journal(tmp_path)
    err = fails(capsys, "whatif", journal, "--set", "round=1min", "--set", "round=2min", "--horizon", "3q")
    assert "--horizon: unknown time unit 'q'" in err and "round is set twice" in err
    err = fails(capsys, "whatif", journal, "--set", "cluster=1x2:V100", "--horizon", "3q")
    assert "--horizon" in err and "the run's cluster is its own" in err
    # (checked before any graph is compiled: an unknown setting, found by compiling, waits)
    err = fails(capsys, "whatif", journal, "--set", "nope=1", "--horizon", "3q")
    assert "--horizon" in err and "nope" not in err


# --- a topology on GPUs other than its instance's --------------------------------------------
def test_a_topology_on_other_gpus_is_refused_naming_both_types(tmp_path):
    with pytest.raises(ClusterError, match=r"topology 'p3\.8xlarge' is an instance of 4 V100 GPUs .* the group's GPUs are K80"):
        ClusterSpec.parse("16x4:K80@p3.8xlarge")
    spec = tmp_path / "c.toml"
    spec.write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "P100"\ntopology = "p3.8xlarge"\n')
    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse(str(spec))
    assert err.value.path == f"{spec}:5"  # (at the topology's line)
    assert "the group's GPUs are P100" in err.value.message


def test_a_topology_on_its_own_gpus_is_taken_case_aside():
    cluster = Cluster.parse("2x4:v100@p3.8xlarge")
    assert (cluster.node_link_gbps[1] == TOPOLOGIES["p3.8xlarge"]).all()


def test_the_docs_say_the_topology_rule():
    page = (REPO / "docs" / "clusters.md").read_text()
    assert "its GPU type the group's `gpu_type`" in page and "is an error naming both types" in page
