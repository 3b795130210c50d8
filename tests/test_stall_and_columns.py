"""A stalled run names the GPU count a placer was asked for a job (which a policy such as Optimus
chooses), not only the trace's; and a canonical trace's column whose name is close to a known
column but is none of them is kept with a warning naming the file, the column and the name it
most likely meant."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.engine import StalledError, stall_message
from roundhouse.runtime.types import Ranking

# A model that runs on one or eight V100s, or on eight K80s and nothing less: Optimus (its speeds
# read on the reference type, K80, and offering only counts every type the job may land on runs)
# can only ask eight GPUs for it, which no type of the cluster holds.
EIGHT_K80_PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
Big,32,V100,1,consolidated,10.0
Big,32,V100,1,spread,10.0
Big,32,V100,8,consolidated,50.0
Big,32,V100,8,spread,50.0
Big,32,K80,8,consolidated,40.0
Big,32,K80,8,spread,40.0
"""

OPTIMUS = """
round = 5min;
profile = "profile.csv";
reference_gpu = "K80";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> o :: Optimus(max_gpus=8) -> c :: Consolidated -> Launch -> m :: JobMetrics;
"""


def test_a_stall_names_the_count_the_policy_asked_the_placer_for(run_graph, tmp_path):
    (tmp_path / "profile.csv").write_text(EIGHT_K80_PROFILE)
    job = {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 6000.0, "model": "Big", "batch_size": 32}
    with pytest.raises(StalledError) as stalled:
        run_graph(OPTIMUS, [job], cluster="1x4:V100,1x4:K80")
    message = str(stalled.value)
    # (Before, it named the trace's count: "wants 1 GPUs of one type, and the largest type, V100, has 4".)
    # The job's profile has no 1-GPU K80 entry, so the placers keep it to the V100s: the stall is
    # certain at once (runtime/certain_stalls.py), not after STALL_ROUNDS rounds.
    assert message.startswith("run stalled at t=0s: 1 job(s) wait, none runs") and stalled.value.certain, message
    assert (
        "the largest waiting job (0) wants 8 GPUs (what placer 'c' (Consolidated) was last asked for it; "
        "its trace asks for 1) and the cluster has 4 of the types it can run on (V100)." in message
    ), message


class _Jobs:
    def __init__(self, columns: dict[str, np.ndarray]):
        self._columns = columns

    def __len__(self) -> int:
        return len(self._columns["job_id"])

    def column(self, name: str) -> np.ndarray:
        return self._columns[name]

    def has_column(self, name: str) -> bool:
        return name in self._columns


class _Cluster:
    n_gpus = 8
    gpu_types = ("V100",)
    gpus_by_type = np.array([8])


class _World:
    """What `stall_message` reads of a world: the job table's columns and the cluster."""

    def __init__(self, gpus: list[int]):
        n = len(gpus)
        self.jobs = _Jobs({"job_id": np.arange(10, 10 + n), "status": np.zeros(n, dtype=np.int8), "gpus": np.array(gpus)})
        self.cluster = _Cluster()


class _Placer:
    name = "place"


def test_a_stall_says_which_count_it_names(run_graph):
    world = _World([2, 16])
    placer = _Placer()
    # A ranking that asks what the trace asks: the count, with nothing more to say.
    same = stall_message(world, 0.0, (), [(placer, Ranking(np.array([0, 1]), np.array([2, 16])))])
    assert "the largest waiting job (11) wants 16 GPUs of 8." in same
    # The placer was asked another count than the trace's: that count, and where it comes from.
    other = stall_message(world, 0.0, (), [(placer, Ranking(np.array([0, 1]), np.array([12, 4])))])
    assert "the largest waiting job (10) wants 12 GPUs (what placer 'place' (_Placer) was last asked" in other
    assert "its trace asks for 2) of 8." in other
    # A job no placer was asked to place: the trace's count, said to be the trace's.
    unranked = stall_message(world, 0.0, (), [(placer, Ranking(np.array([0]), np.array([2])))])
    assert (
        "the largest waiting job (11) wants 16 GPUs (the count its trace asks for: no placer was asked to place it) of 8."
        in unranked
    )
    # No placer's ranking known to the engine: the trace's count, said to be the trace's.
    unknown = stall_message(world, 0.0)
    assert "the largest waiting job (11) wants 16 GPUs (the count its trace asks for) of 8." in unknown


# --- near-miss column names ----------------------------------------------------------------


def _typo_trace(path, extra: dict[str, list]) -> None:
    columns = {"job_id": [0, 1], "arrival_s": [0.0, 5.0], "gpus": [1, 2], "duration_s": [100.0, 50.0], **extra}
    frame = pl.DataFrame(columns)
    if path.suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_csv(path)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_misspelt_optional_column_is_kept_with_a_warning(tmp_path, capsys, suffix):
    from roundhouse.traces.formats import check_trace_header, load_trace

    path = tmp_path / f"jobs{suffix}"
    _typo_trace(path, {"modle": ["ResNet-50", "ResNet-50"], "Weight": [2.0, 1.0], "node": [3, 4], "vc": ["a", "b"]})
    check_trace_header(path)  # (a run reads the header first, then the jobs: one warning each)
    frame = load_trace(path).frame
    err = capsys.readouterr().err
    assert f"warning: {path}: column 'modle' is not a column Roundhouse reads" in err and "did you mean 'model'?" in err
    assert f"warning: {path}: column 'Weight' is not a column Roundhouse reads" in err and "did you mean 'weight'?" in err
    assert err.count("warning:") == 2, err  # once each, and nothing on 'node' or 'vc' (not near any)
    # The columns are still kept as extras, as before.
    assert {"modle", "Weight", "node", "vc"} <= set(frame.columns)
    assert frame["model"].null_count() == frame.height


def test_a_trace_of_known_and_unrelated_columns_says_nothing(tmp_path, capsys):
    from roundhouse.traces.formats import load_trace

    path = tmp_path / "jobs.csv"
    _typo_trace(path, {"model": ["ResNet-50", "ResNet-50"], "cpus": [4.0, 8.0], "team": ["x", "y"], "node": [1, 2]})
    load_trace(path)
    assert capsys.readouterr().err == ""


def test_a_run_warns_of_a_misspelt_column_once(tmp_path, capsys):
    from roundhouse.tools.cli import main

    _typo_trace(tmp_path / "jobs.csv", {"users": ["ann", "bob"]})
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\nsrc :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["run", str(graph), "--quiet", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("column 'users' is not a column Roundhouse reads") == 1, err
    assert "jobs.csv: column 'users'" in err and "did you mean 'user'?" in err
