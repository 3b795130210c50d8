"""Pollux's restart penalty and a job searched the moment it arrives: its factor is 0, so the
first search leaves it waiting on an idle cluster until the next one. The element's
documentation says so, and the simulation does what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse.elements.policies.pollux import Pollux
from roundhouse.runtime.element import parse_doc
from roundhouse.runtime.simulation import Simulation

HEADER = "job_id,arrival_s,gpus,model,batch_size,epochs,name,max_gpus,batch_fixed"


def _graph(tmp_path: Path, pollux: str) -> Path:
    trace = tmp_path / "pollux.csv"
    trace.write_text(f"{HEADER}\n0,0.0,1,cifar10,128,2.0,cifar10-0,64.0,0.0\n")
    graph = tmp_path / "pollux.sched"
    graph.write_text(
        'round = 60s;\ncluster = "4x4:V100";\nelastic_profile = "pollux";\nresize_restart = 30s;\n\n'
        f'arrivals :: TraceSource(path="{trace}");\n'
        f"arrivals -> AcceptAll -> pool :: JobPool -> {pollux} -> PolluxAgent -> Launch -> report :: JobMetrics;\n"
    )
    return graph


def _first_start(graph: Path) -> float:
    sim = Simulation(str(graph), skip_rounds=False)
    sim.run_until(600.0)
    return float(sim.jobs(["job_id", "first_start_s"])["first_start_s"][0])


@pytest.mark.parametrize(
    ("pollux", "started"),
    [
        ("Pollux(seed=0)", 60.0),  # the next search, a round later
        ("Pollux(seed=0, interval=5min)", 300.0),  # the next search, an interval later
        ("Pollux(seed=0, restart_delay=0)", 0.0),  # no penalty: started at once
    ],
)
def test_a_job_searched_as_it_arrives_starts_at_the_next_search(tmp_path, pollux, started):
    assert _first_start(_graph(tmp_path, pollux)) == started


def test_pollux_s_documentation_says_a_job_of_age_0_waits_for_the_next_search():
    text = " ".join(parse_doc(Pollux).description.split())
    assert "is 0 for a job searched the moment it arrives" in text
    assert "waits for the next search" in text
    assert "`restart_delay=0` starts it at once" in text
