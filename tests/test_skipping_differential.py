"""Event skipping, differentially: seeded graphs over policies, placers, admission gates, round
lengths (whole and fractional seconds), clusters of several node sizes and GPU types, checkpoint
and restore costs and time limits, each run with skipping off and on; every job's times, the
reports, the counters and the explanation record must be the same, bit for bit."""

from pathlib import Path

import attrs
import numpy as np
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import write_trace
from tests.test_event_skipping import assert_same, assert_same_reports


def edge_trace(path: Path, seed: int, round_s: float, n: int) -> Path:
    """Jobs that stress the boundaries: several at one time, arrivals exactly on a boundary (as
    k times the round) or a hair either side of one, durations of whole rounds, a hair either
    side of one, tiny ones, and from one to 300 rounds (a queue forms); 1 to 4 GPUs."""
    rng = np.random.default_rng(seed)
    t, rows = 0.0, []
    for i in range(n):
        kind = rng.integers(4)
        if kind == 1:
            t = round(t / round_s + int(rng.integers(0, 4))) * round_s
        elif kind == 2:
            t = t + round_s + float(rng.choice([-1e-10, 1e-10, 1e-9, 2e-9]))
        elif kind == 3:
            t = t + float(rng.uniform(0, 2 * round_s))
        duration = float(rng.choice([round_s, 3 * round_s, round_s - 1e-9, round_s + 1e-9, 0.001, 0.0]))
        if duration == 0.0:  # (the last choice: a long job)
            duration = float(np.exp(rng.uniform(0, np.log(300)))) * round_s
        rows.append({"job_id": i, "arrival_s": max(t, 0.0), "gpus": int(rng.choice([1, 1, 2, 4])), "duration_s": duration})
    return write_trace(path, rows)


def run_both(path: Path, until: float | None):
    """The graph run with skipping off, then on, each explaining."""
    results = []
    for skip in (False, True):
        graph = compile_file(path)
        graph = attrs.evolve(graph, settings=attrs.evolve(graph.settings, skip_rounds=skip))
        results.append(simulate(graph, until=until, explain=True))
    return results


CASES = {
    # (settings, source, body, trace seed and jobs (None: the source generates), until)
    "srtf-mixed-nodes-fractional-restore": (
        'round = 45.3s;\ncluster = "1x3:V100,2x5:V100,3x2:V100";\nrestore = 4.53s;\n',
        'src :: TraceSource(path="trace.csv");\n',
        "src -> AcceptAll -> JobPool -> Srtf -> Consolidated(strict=false) -> Launch -> m :: JobMetrics;\n",
        (1, 60),
        None,
    ),
    "las-two-types-until": (
        'round = 100.25s;\ncluster = "2x4:V100,1x8:P100";\ncheckpoint = 2s;\nrestore = 3s;\n',
        'src :: TraceSource(path="trace.csv");\n',
        "src -> AcceptAll -> JobPool -> Las -> SkewAwarePlacer -> Launch -> m :: JobMetrics(track=3..12);\n",
        (2, 50),
        40 * 100.25 + 1e-10,
    ),
    "tiresias-promotion-short-rounds": (
        'round = 7.5s;\ncluster = "4x4:V100";\ncheckpoint = 0.4s;\nrestore = 0.75s;\n',
        'src :: TraceSource(path="trace.csv");\n',
        "src -> AcceptAll -> JobPool -> TiresiasLas(queues=3, thresholds=[5min, 30min], promote_knob=1) "
        "-> FirstFree -> Launch -> m :: JobMetrics;\n",
        (3, 50),
        None,
    ),
    "yarn-gandiva-threshold": (
        'round = 60s;\ncluster = "3x4:V100";\n',
        'src :: TraceSource(path="trace.csv");\n',
        "src -> AcceptThreshold(factor=1x) -> JobPool -> YarnCS -> Gandiva -> Launch -> m :: JobMetrics;\n",
        (4, 50),
        None,
    ),
    "srsf-odd-nodes-wall-service": (
        'round = 300s;\ncluster = "2x6:V100,4x3:V100";\n',
        'src :: TraceSource(path="trace.csv");\n',
        "src -> AcceptAll -> JobPool -> Srsf -> FirstFree -> Launch -> m :: JobMetrics;\n",
        (5, 60),
        None,
    ),
    # Rounds carried out in passing and in bulk (whole-second rounds, one GPU type, plain jobs).
    "fifo-in-bulk-tracked": (
        'round = 333s;\ncluster = "20x4:V100";\n',
        "src :: PoissonSource(rate=40/h, jobs=150, gpus=single, seed=7);\n",
        "src -> AcceptAll -> JobPool -> Fifo(backfill=true) -> Consolidated -> Launch -> m :: JobMetrics(track=5..40);\n",
        None,
        3 * 86400.0,
    ),
    "las-wall-in-passing-mixed-nodes": (
        'round = 120s;\ncluster = "4x1:V100,2x4:V100,1x8:V100";\n',
        "src :: PoissonSource(rate=10/h, jobs=50, gpus=philly, seed=11);\n",
        "src -> AcceptAll -> JobPool -> Las(service=wall_seconds, backfill=false) -> FirstFree -> Launch -> m :: JobMetrics;\n",
        None,
        2 * 86400.0,
    ),
    # Gavel's path on three GPU types, with the objective sinks that settle passed rounds.
    "gavel-three-types-objectives": (
        'round = 6min;\ncluster = "4:8:4";\n',
        "src :: PoissonSource(rate=3/h, jobs=25, gpus=single, models=blox, seed=3);\n",
        "src -> AcceptAll -> JobPool -> MaxMinFairness(interval=10min) -> GavelRounds -> GavelPlacer -> run :: Launch "
        '-> m :: JobMetrics;\nrun -> CostMetrics(prices=["V100:2.48", "P100:1.46", "K80:0.45"]);\n'
        "run -> FinishTimeFairnessMetrics;\n",
        None,
        3 * 86400.0,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_skipping_on_and_off_give_the_same_run(tmp_path, name):
    settings, source, body, trace, until = CASES[name]
    if trace is not None:  # (its round: the graph's, read from the settings' first line)
        round_s = float(settings.split(";")[0].removeprefix("round = ").removesuffix("s"))
        edge_trace(tmp_path / "trace.csv", trace[0], round_s, trace[1])
    path = tmp_path / "graph.sched"
    path.write_text(settings + source + body)
    off, on = run_both(path, until)
    assert_same(off, on)
    assert_same_reports(off.reports, on.reports)
    assert off.world.explain.frame(off.world).equals(on.world.explain.frame(on.world))
    assert on.skipped_rounds > 0  # (the case exercises skipping)
    if "passing" in name or "bulk" in name:
        assert on.passed_rounds > 0
