"""Element references checked against behaviour: placers, Launch and the metrics sinks."""

from __future__ import annotations

from roundhouse.elements.placement.gandiva import Gandiva
from roundhouse.elements.placement.tiresias import TiresiasDally
from roundhouse.elements.sinks import LinkBandwidth
from roundhouse.runtime import topologies
from roundhouse.runtime.element import parse_doc
from tests.test_placement import place, world_with


def test_link_bandwidth_works_per_launch_as_its_cost_line_says(run_graph, monkeypatch):
    # Two 2-GPU jobs launched once each and running for many rounds: the sink measures each
    # launch once, whatever the running jobs, and its reference says what its work grows with.
    calls = []
    real = topologies.mean_link_gbps
    monkeypatch.setattr(topologies, "mean_link_gbps", lambda *a: calls.append(a) or real(*a))
    result = run_graph(
        """
        round = 60s;
        src :: TraceSource(path="trace.csv");
        src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> l :: Launch -> m :: JobMetrics;
        l -> lb :: LinkBandwidth;
        """,
        jobs=[{"job_id": j, "arrival_s": 0.0, "gpus": 2, "duration_s": 6000.0} for j in (1, 2)],
        cluster="1x4:V100@p3.8xlarge",
    )
    assert result.reports["lb"]["bandwidth"]["launches"] == 2
    assert len(calls) == 2  # (100 rounds of two running jobs)
    cost = parse_doc(LinkBandwidth).cost
    assert "launches" in cost and "running jobs r" not in cost, cost


def test_gandiva_does_not_search_the_machines_again_for_each_job_that_cannot_fit(monkeypatch):
    # Every machine has 1 GPU free; 300 waiting jobs of 2 or 3 GPUs find no room. As its cost
    # line says, each costs O(1) once the least such demand found none: one search, not 300.
    machines = 8
    jobs = [(j, 3) for j in range(1, machines + 1)] + [(100 + k, 2 + k % 2) for k in range(300)] + [(999, 1)]
    running = {j: list(range((j - 1) * 4, (j - 1) * 4 + 3)) for j in range(1, machines + 1)}
    world = world_with(f"{machines}x4:V100", jobs, running)
    searches = []
    real = Gandiva._machine
    monkeypatch.setattr(Gandiva, "_machine", lambda self, per_node, want: searches.append(want) or real(self, per_node, want))
    launched, suspended, kept = place(Gandiva(seed=1), world, [j for j, _ in jobs])
    assert launched == {999: [3]} and suspended == [] and kept == list(range(1, machines + 1))
    assert searches == [2, 1], searches  # (the 2-GPU job, then the 1-GPU job that fits)


def test_tiresias_dally_puts_a_job_on_the_first_machine_with_room_as_its_reference_says(tmp_path):
    # Free GPUs per machine: 1, 3, 2, 4 (two racks of two machines). A 2-GPU job of a model not
    # consolidated takes the first machine with room (machine 1), not the one with the most
    # free GPUs (machine 3), and the reference says so rather than "most free GPUs first".
    tiers = tmp_path / "tiers.toml"
    tiers.write_text('name = "t"\n[[group]]\nnodes = 4\ngpus_per_node = 4\nracks = 2\n[tiers]\n')
    world = world_with(str(tiers), [(1, 3), (2, 1), (3, 2), (4, 2)], {1: [0, 1, 2], 2: [4], 3: [8, 9]})
    launched, _, _ = place(TiresiasDally(), world, [1, 2, 3, 4])
    assert launched == {4: [5, 6]}
    description = " ".join(parse_doc(TiresiasDally).description.split())
    assert "first machine with room (the lowest-numbered" in description
