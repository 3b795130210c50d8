"""docs/sweeps.md, docs/plots.md, docs/explain.md, docs/clusters.md and docs/reproductions.md
read as a new user reads them: what a page says a command does, checked where no other test
runs it."""

from __future__ import annotations

import csv

import pytest

from roundhouse.runtime.cluster import ClusterError, ClusterSpec
from roundhouse.tools.cli import main
from tests.conftest import REPO


def said(page: str) -> str:
    """A page's text with its lines joined, as a sentence across a line break reads."""
    return " ".join((REPO / page).read_text().split())


def _traces(tmp_path):
    """A good trace of the sample's first jobs, and one whose header lacks every column a run needs."""
    head = (REPO / "traces" / "samples" / "philly-1000.csv").read_text().splitlines()[:6]
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("\n".join(head) + "\n")
    bad.write_text("foo,bar\n1,2\n")
    return good, bad


def test_a_trace_option_lacking_a_column_is_refused_before_any_run_as_the_sweeps_page_says(tmp_path, capsys):
    page = said("docs/sweeps.md")
    assert "nothing runs. So is a `--trace` whose header lacks a column the runs need" in page
    _, bad = _traces(tmp_path)
    graph = str(REPO / "graphs" / "las.sched")
    status = main(["sweep", graph, "--trace", str(bad), "--workers", "1", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert status == 2 and "missing column 'job_id'" in err
    assert not (tmp_path / "s" / "results").exists() or not any((tmp_path / "s" / "results").iterdir())


def test_a_varied_trace_lacking_a_column_is_that_run_s_failure_as_the_sweeps_page_says(tmp_path, capsys):
    page = said("docs/sweeps.md")
    assert "or a trace named by a `--vary` value whose header lacks a column) is that run's error" in page
    good, bad = _traces(tmp_path)
    graph = str(REPO / "graphs" / "las.sched")
    varied = f'arrivals.path="{bad}","{good}"'
    status = main(["sweep", graph, "--vary", varied, "--workers", "1", "--out", str(tmp_path / "s")])
    printed = capsys.readouterr()
    assert status == 1, printed.err
    with open(tmp_path / "s" / "summary.csv", newline="") as f:
        rows = {r["arrivals.path"]: r for r in csv.DictReader(f)}
    assert rows[f'"{bad}"']["status"] == "error" and "missing column 'job_id'" in rows[f'"{bad}"']["error"]
    assert rows[f'"{good}"']["status"] == "ok"


def test_a_spec_file_s_gpus_per_node_is_refused_with_the_range_a_node_may_have(tmp_path):
    # docs/clusters.md: a node has at most 64 GPUs; the refusal of a count out of range says so,
    # not the range of a whole cluster's GPUs.
    assert "(and from 1 to 64 for `gpus_per_node`)" in said("docs/clusters.md")
    for count, told in ((0, "must be a whole number from 1 to 64, got 0"), (65, "65 GPUs per node is more than the 64")):
        spec = tmp_path / f"n{count}.toml"
        spec.write_text(f"[[group]]\nnodes = 2\ngpus_per_node = {count}\n")
        with pytest.raises(ClusterError) as caught:
            ClusterSpec.parse(str(spec))
        assert told in str(caught.value) and "1,000,000" not in str(caught.value)
    ok = tmp_path / "ok.toml"
    ok.write_text("[[group]]\nnodes = 2\ngpus_per_node = 64\n")
    assert ClusterSpec.parse(str(ok)).groups[0].gpus_per_node == 64
