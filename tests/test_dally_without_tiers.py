"""Dally's elements on a cluster without network tiers: `run` and `check` warn, before the run,
that their network awareness gains nothing there, naming each element and how to give tiers;
the run goes on (a warning, not an error)."""

from __future__ import annotations

import textwrap

import pytest

from roundhouse.runtime.useless_runs import warning_inputs, warnings_before_run
from roundhouse.tools.cli import main
from roundhouse.tools.results import compile_with_trace
from tests.conftest import REPO, write_trace

DALLY = """
round = 5min;
cluster = "{cluster}";
arrivals :: TraceSource(path="trace.csv");
order :: NetworkSensitive;
place :: DelayPlacer(tuned=true, release=true);
arrivals -> AcceptAll -> JobPool -> order -> place -> Launch -> JobMetrics;
"""

JOBS = [{"job_id": i, "arrival_s": 60.0 * i, "gpus": 1 + i % 4, "duration_s": 600.0} for i in range(6)]


def _graph(tmp_path, cluster: str):
    write_trace(tmp_path / "trace.csv", JOBS)
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(DALLY.format(cluster=cluster)))
    return graph


def _said(err: str) -> list[str]:
    return [line for line in err.splitlines() if "has no network tiers" in line]


def test_run_warns_of_each_dally_element_on_a_cluster_without_tiers(tmp_path, capsys):
    graph = _graph(tmp_path, "4x4:V100")
    assert main(["run", str(graph)]) == 0  # (not an error: the run goes on)
    said = _said(capsys.readouterr().err)
    assert [line.split(" warning: ")[0] for line in said] == [f"{graph}:5:1:", f"{graph}:6:1:"]
    for line, name, cls in zip(said, ("order", "place"), ("NetworkSensitive", "DelayPlacer")):
        assert f"element '{name}' ({cls})" in line
        assert "the cluster (16 GPUs on 4 nodes (4x4:V100)) has no network tiers" in line
        assert 'cluster = "dally:N"' in line and "[tiers] table" in line
    # --quiet says nothing; nor does `check` stay silent.
    assert main(["run", str(graph), "--quiet"]) == 0
    assert not _said(capsys.readouterr().err)
    main(["check", str(graph)])
    assert len(_said(capsys.readouterr().err)) == 2


def test_no_warning_with_dally_s_tiers_nor_for_other_elements(tmp_path, capsys):
    graph = _graph(tmp_path, "dally:1")
    assert main(["run", str(graph)]) == 0
    assert not _said(capsys.readouterr().err)
    # LAS on a cluster without tiers: nothing to warn of.
    assert main(["run", str(REPO / "graphs" / "las.sched"), "--until", "1h"]) == 0
    assert not _said(capsys.readouterr().err)


def test_the_cluster_given_for_the_run_is_the_one_looked_at(tmp_path):
    """`--cluster` (passed by the command as `cluster`) replaces the graph's setting: a graph set
    to Dally's cluster run on one without tiers is warned of, and the other way round not."""
    tiered, flat = compile_with_trace(_graph(tmp_path, "dally:1"), [], None), None
    assert not warnings_before_run(tiered)
    assert len(warnings_before_run(tiered, "4x4:V100")) == 2
    (tmp_path / "flat").mkdir()
    flat = compile_with_trace(_graph(tmp_path / "flat", "4x4:V100"), [], None)
    assert len(warnings_before_run(flat)) == 2 and not warnings_before_run(flat, "dally:1")
    # A sweep looks once at graphs read alike: two that differ in their cluster are not alike.
    assert warning_inputs(tiered) != warning_inputs(flat)


def test_a_spec_file_with_a_tiers_table_is_warned_of_only_without_it(tmp_path):
    graph = compile_with_trace(_graph(tmp_path, "4x4:V100"), [], None)
    spec = tmp_path / "racks.toml"
    body = '[[group]]\nnodes = 4\ngpus_per_node = 4\ngpu_type = "V100"\nracks = 2\n'
    spec.write_text(body)
    assert len(warnings_before_run(graph, str(spec))) == 2
    spec.write_text(body + "\n[tiers]\n")
    assert warnings_before_run(graph, str(spec)) == []


@pytest.mark.parametrize("cluster", ["nowhere.toml", "4x4:NOPE"])
def test_a_cluster_that_cannot_be_read_leaves_the_run_to_say_so(tmp_path, cluster):
    graph = compile_with_trace(_graph(tmp_path, "4x4:V100"), [], None)
    assert warnings_before_run(graph, cluster) == []


def test_the_command_lines_cluster_is_the_one_warned_of(tmp_path, capsys):
    graph = _graph(tmp_path, "dally:1")  # (its own cluster has tiers)
    assert main(["run", str(graph), "--cluster", "4x4:V100", "--until", "1h"]) == 0
    assert len(_said(capsys.readouterr().err)) == 2
    main(["check", str(graph), "--cluster", "4x4:V100"])
    assert len(_said(capsys.readouterr().err)) == 2
    assert main(["sweep", str(graph), "--cluster", "4x4:V100", "--vary", "place.tuned=true,false", "--until", "1h"]) == 0
    assert len(_said(capsys.readouterr().err)) == 2  # (each once, for every run)
    # The other way round: a tiered cluster given for a graph whose own has none.
    graph = _graph(tmp_path, "4x4:V100")
    assert main(["run", str(graph), "--cluster", "dally:1", "--until", "1h"]) == 0
    assert not _said(capsys.readouterr().err)


def test_tiresias_as_dally_ran_it_is_warned_of_too(tmp_path, capsys):
    write_trace(tmp_path / "trace.csv", JOBS)
    graph = tmp_path / "graph.sched"
    graph.write_text(
        'round = 5min;\ncluster = "4x4:V100";\narrivals :: TraceSource(path="trace.csv");\n'
        "arrivals -> AcceptAll -> JobPool -> Las -> place :: TiresiasDally -> Launch -> JobMetrics;\n"
    )
    assert main(["run", str(graph), "--until", "1h"]) == 0
    said = _said(capsys.readouterr().err)
    assert len(said) == 1 and "element 'place' (TiresiasDally)" in said[0], said
