"""SynergyOpt's `time_limit` bound is said as a duration, as the argument is written (it was
said in bare seconds: "must be at most 3600, got 2h")."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file

GRAPH = """round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=6, gpus=single, models=blox, seed=0);
arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> SynergyOpt(time_limit={limit}) -> Launch -> JobMetrics;
"""


def _compile(tmp_path, limit: str):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(limit=limit))
    return compile_file(path)


def test_a_time_limit_over_an_hour_is_refused_in_durations(tmp_path):
    with pytest.raises(SchedError, match=r"argument 'time_limit' of SynergyOpt must be at most 1h, got 2h"):
        _compile(tmp_path, "2h")


def test_a_time_limit_of_an_hour_is_accepted(tmp_path):
    assert _compile(tmp_path, "1h").elements
