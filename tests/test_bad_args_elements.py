"""Absurd element arguments are refused when the graph is compiled, at their place in the
`.sched` file; arguments only a run can check fail with a message naming the element."""

from __future__ import annotations

import pytest

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

PIPELINE = "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n"


def _graph(tmp_path, declaration: str, pipeline: str = PIPELINE):
    path = tmp_path / "g.sched"
    path.write_text(f'round = 5min;\ncluster = "2x4:V100";\nsrc :: {declaration};\n{pipeline}')
    return path


@pytest.mark.parametrize(
    "declaration, message",
    [
        ("PoissonSource(rate=1/h, jobs=1000000000)", "argument 'jobs' of PoissonSource must be at most 10000000"),
        ("PoissonSource(rate=1e300/h)", "argument 'rate' of PoissonSource must be at most"),
        ("PoissonSource(rate=1/h, start_id=9223372036854775807)", "argument 'start_id' of PoissonSource must be at most"),
        ("CostWorkload(jobs=1000000000)", "argument 'jobs' of CostWorkload must be at most"),
        ("CostWorkload(start_id=9223372036854775000)", "argument 'start_id' of CostWorkload must be at most"),
        ("BurstSource(jobs=10, min_duration=1s, max_duration=1e300s)", "argument 'max_duration' of BurstSource must be at most"),
        ("BurstSource(jobs=1000000000)", "argument 'jobs' of BurstSource must be at most"),
        ("BurstSource(jobs=10000, bursts=10000)", "jobs x bursts (100,000,000) is more than 10,000,000"),
        ("BurstSource(jobs=10, start_id=9223372036854775807)", "argument 'start_id' of BurstSource must be at most"),
        ('TraceSource(path="g.sched", jobs=1000000000)', "argument 'jobs' of TraceSource must be at most"),
        ("LiveSource(jobs=1000000000)", "argument 'jobs' of LiveSource must be at most"),
    ],
)
def test_absurd_source_arguments_are_refused_at_their_place(tmp_path, declaration, message):
    with pytest.raises(RoundhouseError) as caught:
        compile_file(_graph(tmp_path, declaration))
    text = str(caught.value)
    assert message in text and "g.sched:3:" in text, text


@pytest.mark.parametrize(
    "sink",
    ["JobMetrics(track=0..9223372036854775807)", "JobMetrics(track=-5..10)", "SloMetrics(track=-1..4)"],
)
def test_track_ranges_must_be_job_ids(tmp_path, sink):
    src = "PoissonSource(rate=1/h, jobs=5)"
    pipeline = f"src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: {sink};\n"
    if "9223372036854775807" in sink:  # the largest id is allowed as the end of a half-open range
        compile_file(_graph(tmp_path, src, pipeline))
        return
    with pytest.raises(RoundhouseError, match="argument 'track' of .* must be a range of job ids"):
        compile_file(_graph(tmp_path, src, pipeline))


def test_optimus_samples_are_bounded(tmp_path):
    pipeline = "src -> AcceptAll -> JobPool -> Optimus(samples=1000000000) -> Consolidated -> Launch -> JobMetrics;\n"
    with pytest.raises(RoundhouseError, match="argument 'samples' of Optimus must be at most 1000"):
        compile_file(_graph(tmp_path, "PoissonSource(rate=1/h, jobs=5)", pipeline))


def test_effective_throughput_by_an_unknown_column_names_the_element(tmp_path):
    pipeline = (
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> run :: Launch -> JobMetrics;\n"
        'run -> work :: EffectiveThroughput(by="usr");\n'
    )
    graph = compile_file(_graph(tmp_path, "PoissonSource(rate=60/h, jobs=5, seed=0)", pipeline))
    with pytest.raises(SchedError, match=r"work \(EffectiveThroughput\): by='usr': the job table has no column 'usr'"):
        simulate(graph, until=3600.0)
