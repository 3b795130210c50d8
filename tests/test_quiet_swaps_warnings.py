"""Graphs a swap of one element makes run to no use without a word, now warned of before the
run by `check`, `run` and `sweep` alike (runtime/useless_runs.py): Pollux given no elastic
profile by a graph whose sources' models are not known ahead; the intra-node bandwidth
elements on a cluster whose nodes have no topology; and a simulation whose only sources take
jobs submitted live (warned of by `run` and `sweep`, never by `check`, which cannot tell
whether the graph will be served live)."""

from __future__ import annotations

import textwrap

from roundhouse.runtime.useless_runs import warning_inputs, warnings_before_run
from roundhouse.tools.cli import main
from roundhouse.tools.results import compile_with_trace
from roundhouse.tools.sweep_warnings import SweepWarnings
from tests.conftest import REPO

POLLUX = """
round = 60s;
cluster = "4x4:V100";{profile}
arrivals :: PoissonSource(rate=20/h, jobs=6, models=blox, seed=1);
arrivals -> AcceptAll -> pool :: JobPool -> sched :: Pollux(seed=0) -> PolluxAgent -> Launch -> report :: JobMetrics;
"""

BANDWIDTH = """
round = 60s;
cluster = "{cluster}";
arrivals :: PoissonSource(rate=20/h, jobs=12, seed=1);
arrivals -> AcceptAll -> JobPool -> Fifo -> place :: {placer} -> run :: Launch -> report :: JobMetrics;
run -> links :: LinkBandwidth;
"""

LIVE_ONLY = """
round = 60s;
cluster = "2x2:V100";
submitted :: LiveSource(jobs=4);
submitted -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> report :: JobMetrics;
"""


def _write(tmp_path, text: str, name: str = "graph.sched"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _lines(err: str, words: str) -> list[str]:
    return [line for line in err.splitlines() if words in line]


# --- Pollux without an elastic profile, its jobs' models drawn when the source starts ---

_NO_PROFILE = "the graph sets none: it will never start any job"


def test_check_and_run_warn_of_pollux_without_a_profile_whose_models_are_not_known_ahead(tmp_path, capsys):
    graph = _write(tmp_path, POLLUX.format(profile=""))
    assert main(["check", str(graph)]) == 0  # (a warning, not a refusal)
    said = _lines(capsys.readouterr().err, _NO_PROFILE)
    assert len(said) == 1
    assert said[0].startswith(f"{graph}:5:45: warning: element 'sched' (Pollux) starts only elastic jobs")
    assert 'give elastic_profile = "pollux"' in said[0]
    graph_ = compile_with_trace(graph, [], None)
    assert _lines("\n".join(warnings_before_run(graph_)), _NO_PROFILE) == said
    # With a profile set, this warning is not given (the models drawn are not known ahead).
    profiled = compile_with_trace(_write(tmp_path, POLLUX.format(profile='\nelastic_profile = "pollux";'), "p.sched"), [], None)
    assert not _lines("\n".join(warnings_before_run(profiled)), _NO_PROFILE)


def test_pollux_fed_only_live_without_a_profile_is_warned_of_too(tmp_path):
    text = POLLUX.format(profile="").replace("PoissonSource(rate=20/h, jobs=6, models=blox, seed=1)", "LiveSource(jobs=4)")
    said = warnings_before_run(compile_with_trace(_write(tmp_path, text), [], None))
    assert len(_lines("\n".join(said), _NO_PROFILE)) == 1


def test_pollux_with_jobs_of_known_models_keeps_its_one_warning(tmp_path):
    """Jobs known ahead to have no model: the warning that counts them, not a second one."""
    graph = compile_with_trace(_write(tmp_path, POLLUX.format(profile="").replace(", models=blox", "")), [], None)
    said = [w for w in warnings_before_run(graph) if "(Pollux)" in w]
    assert len(said) == 1 and "it will never start any of the 6 jobs the graph's sources bring" in said[0]


_DRAWN = "draws its jobs' models from ResNet-18, CycleGAN, ResNet-50, LSTM, Recoder, Transformer, A3C, none of which is one"


def test_pollux_with_a_profile_none_of_whose_applications_a_generator_draws_is_warned_of(tmp_path, capsys):
    graph = _write(tmp_path, POLLUX.format(profile='\nelastic_profile = "pollux";'))
    assert main(["check", str(graph)]) == 0
    said = _lines(capsys.readouterr().err, _DRAWN)
    assert len(said) == 1 and "element 'sched' (Pollux)" in said[0] and "source 'arrivals' (PoissonSource)" in said[0]
    # A generator of no models draws none: its jobs, known ahead to have no model, are warned of
    # by the warning that counts them, not by this one.
    plain = compile_with_trace(
        _write(tmp_path, POLLUX.format(profile='\nelastic_profile = "pollux";').replace(", models=blox", ""), "n.sched"), [], None
    )
    said = warnings_before_run(plain)
    assert not _lines("\n".join(said), "draws its jobs' models") and len([w for w in said if "(Pollux)" in w]) == 1


# --- the intra-node bandwidth elements on nodes without a known topology ---

_NO_TOPOLOGY = "no node topology"


def test_run_warns_of_the_bandwidth_elements_on_nodes_without_a_topology(tmp_path, capsys):
    graph = _write(tmp_path, BANDWIDTH.format(cluster="4x4:V100", placer="BandwidthAwareIntraNode"))
    assert main(["run", str(graph), "--until", "2h"]) == 0
    said = _lines(capsys.readouterr().err, _NO_TOPOLOGY)
    assert [line.split(" warning: ")[0] for line in said] == [f"{graph}:5:45:", f"{graph}:6:8:"]
    place, links = said
    assert "element 'place' (BandwidthAwareIntraNode)" in place and "places as Consolidated does" in place
    assert "element 'links' (LinkBandwidth)" in links and "it will measure no launch" in links
    for line in said:
        assert "the cluster (16 GPUs on 4 nodes (4x4:V100))" in line
        assert "4x4:V100@p3.8xlarge" in line and 'topology = "p3.8xlarge"' in line and "docs/clusters.md" in line
    main(["check", str(graph)])
    assert len(_lines(capsys.readouterr().err, _NO_TOPOLOGY)) == 2
    assert main(["run", str(graph), "--until", "2h", "--quiet"]) == 0
    assert not _lines(capsys.readouterr().err, _NO_TOPOLOGY)


def test_the_cluster_given_decides_and_other_placers_are_not_warned_of(tmp_path):
    graph = compile_with_trace(_write(tmp_path, BANDWIDTH.format(cluster="4x4:V100", placer="RandomIntraNode(seed=1)")), [], None)
    said = _lines("\n".join(warnings_before_run(graph)), _NO_TOPOLOGY)
    assert len(said) == 1 and "(LinkBandwidth)" in said[0]  # (a random choice is one still)
    assert not _lines("\n".join(warnings_before_run(graph, "4x4:V100@p3.8xlarge")), _NO_TOPOLOGY)
    (tmp_path / "t").mkdir()
    known = compile_with_trace(
        _write(tmp_path / "t", BANDWIDTH.format(cluster="4x4:V100@p3.8xlarge", placer="BandwidthAwareIntraNode")), [], None
    )
    assert not _lines("\n".join(warnings_before_run(known)), _NO_TOPOLOGY)
    assert len(_lines("\n".join(warnings_before_run(known, "4x4:V100")), _NO_TOPOLOGY)) == 2
    # A sweep looks once at graphs read alike: two that differ in their cluster are not alike.
    assert warning_inputs(graph) != warning_inputs(known)


def test_a_sweep_warns_of_the_runs_on_nodes_without_a_topology(tmp_path):
    graph = _write(tmp_path, BANDWIDTH.format(cluster="4x4:V100", placer="BandwidthAwareIntraNode"))
    warnings = SweepWarnings()
    for cluster in ("4x4:V100", "4x4:V100@p3.8xlarge"):
        compiled = compile_with_trace(graph, [], None, then=[_override(f"cluster={cluster}")])
        warnings.add(compiled, {"cluster": cluster, "seed": 0})
    said = _lines("\n".join(warnings.lines()), _NO_TOPOLOGY)
    assert len(said) == 2 and all("warning: with cluster=4x4:V100: element" in line for line in said)


def _override(text: str):
    from roundhouse.tools.common import overrides

    return overrides([text])[0]


# --- only live sources, simulated ---

_NOBODY = "nobody can submit jobs in a simulation"


def test_a_simulated_run_of_only_live_sources_is_warned_of(tmp_path, capsys):
    graph = _write(tmp_path, LIVE_ONLY)
    assert main(["run", str(graph)]) == 0
    said = _lines(capsys.readouterr().err, _NOBODY)
    assert len(said) == 1
    assert said[0].startswith(f"{graph}:4:1: warning: element 'submitted' (LiveSource)")
    assert "run it live (`roundhouse serve`, docs/live.md) or add a TraceSource" in said[0]
    assert main(["run", str(graph), "--quiet"]) == 0
    assert not _lines(capsys.readouterr().err, _NOBODY)


def test_check_does_not_warn_a_live_graph(capsys):
    """`check` cannot tell whether a graph will be served live (as the shipped one is)."""
    assert main(["check", str(REPO / "graphs" / "live-loopback.sched")]) == 0
    err = capsys.readouterr().err
    assert not _lines(err, _NOBODY) and "warning" not in err


def test_a_sweep_of_only_live_sources_is_warned_of_and_a_trace_beside_them_is_not(tmp_path):
    live = compile_with_trace(_write(tmp_path, LIVE_ONLY), [], None)
    warnings = SweepWarnings()
    warnings.add(live, {"seed": 0})
    assert len(_lines("\n".join(warnings.lines()), _NOBODY)) == 1
    mixed = LIVE_ONLY.replace(
        "submitted -> AcceptAll", "more :: PoissonSource(rate=20/h, jobs=4);\nmore -> admit;\nsubmitted -> admit :: AcceptAll"
    )
    warnings = SweepWarnings()
    warnings.add(compile_with_trace(_write(tmp_path, mixed, "mixed.sched"), [], None), {"seed": 0})
    assert not _lines("\n".join(warnings.lines()), _NOBODY)
