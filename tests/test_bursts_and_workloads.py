"""BurstSource, duration timing for traces, and the Tiresias testbed workload generator."""

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import RoundhouseError, TraceError
from roundhouse.tools.cli import main
from roundhouse.traces.generators import TIRESIAS_GPU_MIX, tiresias_testbed
from tests.conftest import jobs_of

BURSTS = """
round = 5min;
main  :: TraceSource(path="trace.csv");
burst :: BurstSource(jobs=5, length=1h, every=6h, offset=2h, bursts=3, {extra} seed=2);
admit :: AcceptAll;
main -> admit;
burst -> admit;
admit -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_burst_source_injects_jobs_in_its_windows(run_graph):
    trace = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 60.0}]
    result = run_graph(BURSTS.format(extra="min_duration=10min, max_duration=1h, gpus=single,"), trace, cluster="4x4:V100")
    jobs = result.reports["m"]["jobs"].filter(pl.col("job_id") >= 1_000_000)
    assert jobs.height == 15
    window = (jobs["arrival_s"].to_numpy() - 7200.0) % 21600.0
    assert (window < 3600.0).all()
    assert sorted(set(((jobs["arrival_s"].to_numpy() - 7200.0) // 21600.0).astype(int))) == [0, 1, 2]
    assert jobs["duration_s"].min() >= 600.0 and jobs["duration_s"].max() <= 3600.0
    assert (jobs["gpus"] == 1).all()
    assert result.counters["burst"]["arrived"] == 15
    again = run_graph(BURSTS.format(extra="min_duration=10min, max_duration=1h, gpus=single,"), trace, cluster="4x4:V100")
    assert again.reports["m"]["jobs"].equals(result.reports["m"]["jobs"])


@pytest.mark.parametrize(
    "extra, message",
    [
        ("min_duration=10min,", "give both min_duration and max_duration"),
        ("min_duration=2h, max_duration=1h,", "longer than max_duration"),
        ("length=7h,", "cannot last longer than the time between bursts"),
    ],
)
def test_burst_source_arguments_are_checked(run_graph, extra, message):
    text = BURSTS.format(extra=extra).replace("length=1h, ", "") if "length" in extra else BURSTS.format(extra=extra)
    with pytest.raises(RoundhouseError, match=message):
        run_graph(text, [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 60.0}], cluster="1x1:V100")


def test_duration_timing_ignores_the_profile(run_graph):
    # A ResNet-50 job on 16 GPUs: the profile has no such entry (an error with profile timing);
    # with timing=duration it simply runs for its duration.
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 16, "duration_s": 1000.0, "model": "ResNet50"}]
    graph = 'round = 100s;\nsrc :: TraceSource(path="trace.csv"{timing});\nsrc -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;\n'
    got = jobs_of(run_graph(graph.format(timing=", timing=duration"), jobs, cluster="4x4:P100"))
    assert got[0]["finish_s"] == pytest.approx(1000.0)
    with pytest.raises(TraceError, match="no throughput for ResNet-50"):
        run_graph(graph.format(timing=""), jobs, cluster="4x4:P100")


def test_tiresias_testbed_workload():
    frame = tiresias_testbed(480, 1 / 30, seed=3)
    counts = dict(frame.group_by("gpus").len().iter_rows())
    assert counts == TIRESIAS_GPU_MIX
    assert frame["model"].value_counts()["count"].to_list() == [48] * 10
    small = frame["gpus"] <= 4
    short = frame["duration_s"] < 800
    assert (small & short).sum() == 301 and (small & ~short).sum() == 59  # Table 3: 63.5%, 12.5%
    assert (~small & short).sum() == 82 and (~small & ~short).sum() == 38  # 16.5%, 7.5%
    assert frame["duration_s"].min() >= 120 and frame["duration_s"].max() <= 7200
    gaps = np.diff(frame["arrival_s"].to_numpy())
    assert 20 < gaps.mean() < 40
    assert tiresias_testbed(480, 1 / 30, seed=3).equals(frame)
    scaled = tiresias_testbed(48, 1 / 30, seed=0)
    # 48 jobs: the mix scaled by 1/10, whole numbers by largest remainder (2.5 and 0.5 -> 3, 0).
    assert dict(scaled.group_by("gpus").len().iter_rows()) == {1: 24, 2: 4, 4: 8, 8: 9, 16: 3}


def test_trace_generate_workload_and_loss_flags(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert (
        main(["trace", "generate", "-o", str(out), "--jobs", "20", "--rate", "120/h", "--seed", "1", "--workload", "tiresias"])
        == 0
    )
    assert pl.read_csv(out)["gpus"].max() >= 8
    assert main(["trace", "generate", "-o", str(out), "--jobs", "20", "--rate", "4/h", "--seed", "1", "--loss", "blox"]) == 0
    assert {"loss_start", "loss_final", "loss_speed"} <= set(pl.read_csv(out).columns)
    assert (
        main(
            [
                "trace",
                "generate",
                "-o",
                str(out),
                "--jobs",
                "20",
                "--rate",
                "4/h",
                "--seed",
                "1",
                "--workload",
                "tiresias",
                "--models",
                "blox",
            ]
        )
        == 2
    )
    assert "leave out --gpus, --models" in capsys.readouterr().err
