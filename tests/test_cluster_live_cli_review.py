"""Cluster specs and the live commands' options given out-of-the-way values: a count of thousands
of digits, a cluster of many racks or many nodes, Gavel's shorthand with spaces, a missing file;
blank paths, an inproc:// address, a journal in the checkpoint folder a run makes; key pairs kept
or broken; profile lists with a number left out and more workers than a machine holds."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from roundhouse.agents import profiler
from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import MAX_LINK_ENTRIES, Cluster
from roundhouse.tools.cli import main
from roundhouse.tools.loopback import free_port
from tests.conftest import refused

REPO = Path(__file__).resolve().parents[1]

KNOWN = ("V100", "P100", "K80")


# --- cluster specs ---


@pytest.mark.parametrize("spec", ["{n}:1:1", "1:{n}:0", "dally:{n}", "{n}x1", "1x{n}:V100", "2x4,1x{n}"])
def test_a_count_of_thousands_of_digits_is_refused_in_a_short_message(spec):
    text = spec.format(n="9" * 5000)
    with pytest.raises(ClusterError, match="a count of 5,000 digits") as err:
        Cluster.parse(text, KNOWN)
    assert len(err.value.message) < 300  # (the spec is cut short, not echoed whole)


def test_a_count_of_thousands_of_digits_on_the_command_line_is_a_message(capsys):
    from tests.conftest import REPO

    err = refused(capsys, ["run", REPO / "graphs" / "las.sched", "--cluster", "9" * 5000 + "x1"], "--cluster: bad cluster")
    assert "a count of 5,000 digits" in err


def test_leading_zeros_do_not_count_as_digits():
    assert Cluster.parse("0" * 40 + "32x4:V100", KNOWN).n_gpus == 128
    assert Cluster.parse("0" * 5000 + "1x4", KNOWN).n_gpus == 4
    with pytest.raises(ClusterError, match="has no GPUs"):
        Cluster.parse("0" * 5000 + ":0:0", KNOWN)


def test_a_cluster_of_many_racks_is_built_in_time_linear_in_its_racks(tmp_path):
    spec = tmp_path / "racks.toml"
    spec.write_text("[[group]]\nnodes = 60000\ngpus_per_node = 1\nracks = 60000\n")
    started = time.monotonic()
    cluster = Cluster.parse(str(spec), KNOWN)
    took = time.monotonic() - started
    assert cluster.n_racks == 60000
    assert cluster.racks[:2] == ("r0-0", "r0-1") and cluster.racks[-1] == "r0-59999"
    assert np.array_equal(cluster.node_rack, np.arange(60000))
    assert took < 20, took  # (a rack looked up in a list took about two minutes)


def test_racks_are_numbered_in_the_order_first_met(tmp_path):
    spec = tmp_path / "shared.toml"
    spec.write_text(
        '[[group]]\nnodes = 2\ngpus_per_node = 4\nrack = "b"\n'
        '[[group]]\nnodes = 4\ngpus_per_node = 4\nrack = "a"\nracks = 2\n'
        '[[group]]\nnodes = 1\ngpus_per_node = 4\nrack = "b"\n'
    )
    cluster = Cluster.parse(str(spec), KNOWN)
    assert cluster.racks == ("b", "a-0", "a-1")
    assert cluster.node_rack.tolist() == [0, 0, 1, 1, 2, 2, 0]


def test_a_cluster_without_topologies_holds_no_link_table():
    tracemalloc.start()
    try:
        cluster = Cluster.parse("1x64,20000x1", KNOWN)  # (the table was 20,001 x 64 x 64 numbers: 655 MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100e6, peak
    links = cluster.node_link_gbps
    assert links.shape == (20001, 64, 64)
    assert np.isnan(links[0]).all() and np.isnan(links[20000]).all()
    assert not links.flags.writeable


def test_a_cluster_with_topologies_whose_link_table_is_too_large_is_refused():
    with pytest.raises(ClusterError, match="link table") as err:
        Cluster.parse("1x4:V100@p3.8xlarge,1x64,999931x1", KNOWN)
    assert f"at most {MAX_LINK_ENTRIES:,}" in err.value.message
    assert "999,933 nodes of up to 64 GPUs" in err.value.message
    # (one of topologies and many small nodes is still held)
    cluster = Cluster.parse("2x4:V100@p3.8xlarge,1x4:K80", KNOWN)
    assert cluster.node_link_gbps.shape == (3, 4, 4)
    assert cluster.node_link_gbps[0, 0, 3] == 400 and np.isnan(cluster.node_link_gbps[2]).all()


def test_gavels_shorthand_takes_spaces_as_the_groups_do():
    spaced = Cluster.parse("36 : 36 : 36", KNOWN)
    assert spaced.describe() == Cluster.parse("36:36:36", KNOWN).describe()


def test_a_missing_cluster_file_is_said_to_be_missing(capsys):
    with pytest.raises(ClusterError, match="cluster spec not found: no file clusters/nope"):
        Cluster.parse("clusters/nope", KNOWN)


# --- live commands ---


@pytest.mark.parametrize("flag", ["--journal", "--out", "--keys"])
def test_serve_refuses_a_blank_path_rather_than_ignoring_it(live_graph, tmp_path, capsys, flag):
    ck = tmp_path / "ck"
    args = ["serve", live_graph, "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--checkpoints", ck,
            "--wait-for-agents", "0s", "--until", "1s", flag, ""]  # fmt: skip
    refused(capsys, args, f"{flag}: the name is empty")
    assert not ck.exists()


def test_submit_refuses_blank_keys(capsys):
    refused(
        capsys, ["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--keys", "", "--status"], "--keys: the name is empty"
    )


@pytest.mark.parametrize("command", ["serve", "run"])
def test_an_inproc_address_no_agent_can_reach_is_refused(live_graph, tmp_path, capsys, command):
    flag = "--bind" if command == "serve" else "--live"
    ck = tmp_path / "ck"
    args = [
        command,
        live_graph,
        flag,
        "inproc://sched",
        "--insecure",
        "--checkpoints",
        ck,
        "--wait-for-agents",
        "0s",
        "--until",
        "1s",
    ]
    refused(capsys, args, f"{flag} inproc://sched: an inproc:// address is reachable only inside this process")
    assert not ck.exists()


@pytest.mark.live
def test_a_journal_in_the_checkpoint_folder_the_run_makes_is_taken(live_graph, tmp_path, capsys):
    ck = tmp_path / "ck"
    args = ["serve", live_graph, "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--checkpoints", ck,
            "--journal", ck / "run.sqlite", "--wait-for-agents", "0s", "--until", "1s"]  # fmt: skip
    assert main([str(a) for a in args]) == 0, capsys.readouterr().err
    assert (ck / "run.sqlite").is_file()
    assert not (ck / "roundhouse-journal.sqlite").exists()


def test_a_journal_that_is_the_checkpoint_folder_the_run_makes_is_refused(live_graph, tmp_path, capsys):
    ck = tmp_path / "ck"
    args = ["serve", live_graph, "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--checkpoints", ck, "--journal", ck]
    refused(capsys, args, f"--journal {ck}: is a folder, not a file")
    assert not ck.exists()  # (the folder made for it is removed)
    refused(capsys, [*args[:-1], ck / "sub" / "j.sqlite"], f"no folder {ck / 'sub'}")


# --- keys ---


def test_keys_says_which_existing_pairs_it_kept(tmp_path, capsys):
    keys = tmp_path / "keys"
    assert main(["keys", str(keys), "a"]) == 0
    secret = (keys / "a.key_secret").read_bytes()
    capsys.readouterr()
    assert main(["keys", str(keys), "a", "b"]) == 0
    out = capsys.readouterr().out
    assert "kept the existing key pairs of scheduler, a" in out
    assert str(keys / "b.key_secret") in out and str(keys / "a.key_secret") not in out
    assert (keys / "a.key_secret").read_bytes() == secret


@pytest.mark.parametrize("damage", ["empty", "swapped"])
def test_keys_refuses_to_keep_an_existing_pair_that_is_not_one(tmp_path, capsys, damage):
    keys = tmp_path / "keys"
    if damage == "empty":  # (as a failed copy leaves them)
        keys.mkdir()
        (keys / "a.key").write_text("")
        (keys / "a.key_secret").write_text("")
        message = "'a' has a key pair that is not one"
    else:
        assert main(["keys", str(keys), "a", "b"]) == 0
        (keys / "a.key").write_bytes((keys / "b.key").read_bytes())
        message = "a.key is not the public key of a.key_secret"
    capsys.readouterr()
    err = refused(capsys, ["keys", keys, "a"], message)
    assert "remove a.key and a.key_secret" in err
    (keys / "a.key").unlink()
    (keys / "a.key_secret").unlink()
    assert main(["keys", str(keys), "a"]) == 0
    assert (keys / "authorized" / "a.key").read_bytes() == (keys / "a.key").read_bytes()


# --- profile ---


@pytest.fixture
def no_measuring(monkeypatch):
    monkeypatch.setattr(profiler, "_Runner", lambda *a: pytest.fail("measured, where the options should have been refused"))


@pytest.mark.parametrize("gpus", ["1,,2", "1,", ","])
def test_profile_refuses_a_list_with_a_number_left_out(tmp_path, capsys, no_measuring, gpus):
    refused(capsys, ["profile", "--gpus", gpus, "--seconds", "1", "--out", tmp_path / "p.csv"], "has an empty item")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrent", "100000"], "--concurrent 100000 with --gpus 1: 100,000 worker processes at once"),
        (["--concurrent", "3", "--gpus", "1,100"], "300 worker processes at once on this machine; at most 256"),
        (["--threads", "1000000"], "--threads 1000000: at most 256 CPU threads per worker"),
    ],
)
def test_profile_refuses_more_workers_than_a_machine_holds(tmp_path, capsys, no_measuring, args, message):
    out = tmp_path / "p.csv"
    refused(capsys, ["profile", "--models", "ResNet-18", *args, "--seconds", "1", "--out", out], message)
    assert not out.exists()


def test_run_refuses_a_blank_live_address_rather_than_simulating(capsys):
    # (an unset shell variable in `--live "$ADDR"` would otherwise run a simulation instead)
    graph = REPO / "graphs" / "las.sched"
    assert main(["run", str(graph), "--live", " "]) == 2
    assert "--live: the address is empty" in capsys.readouterr().err


def test_check_takes_a_cluster_for_a_graph_without_one(tmp_path, capsys):
    # (a graph without a cluster setting: `check` alone cannot start its elements, and says so;
    # with --cluster it finds what `run --cluster` would refuse)
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\nsrc :: TraceSource(path="{REPO / "traces" / "samples" / "philly-1000.csv"}");\n'
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    assert main(["check", str(graph)]) == 0
    assert "no cluster: give --cluster" in capsys.readouterr().out
    assert main(["check", str(graph), "--cluster", "32x4:V100"]) == 0
    assert "cluster 128 GPUs" in capsys.readouterr().out
    refused(capsys, ["check", graph, "--cluster", "1x1:V100"], "asks for 4 GPUs but the cluster has 1")
    refused(capsys, ["check", graph, "--cluster", "4x4:Z99"], "--cluster: bad cluster '4x4:Z99'")
