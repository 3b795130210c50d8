"""Elastic profiles and Pollux workloads: one validation curve, damaged curves, batch limits a
trace breaks, the run's own elastic profile when a trace is read, `check` reading the profile,
and Pollux's counter of jobs it cannot start."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import pollux
from roundhouse.traces.goodput import ElasticProfile, efficiency
from tests.conftest import REPO, fails
from tests.test_elastic import _app_folder, _replace_row


def _one_curve(root):
    """The toy application of tests/test_elastic.py with only its batch-100 validation curve."""
    folder = _app_folder(root) / "toy"
    for m in (200, 400):
        (folder / f"validation-{m}.csv").unlink()
    return root


# --- one validation curve: efficiency 1, not inf/inf ---


def test_an_infinite_noise_scale_is_efficiency_one():
    with np.errstate(all="raise"):  # (no inf/inf on the way)
        got = efficiency(np.array([np.inf, 300.0]), 100.0, np.array([400.0, 400.0]))
    assert got.tolist() == pytest.approx([1.0, 400 / 700])


def test_one_validation_curve_runs_at_efficiency_one(tmp_path, run_graph):
    profile = ElasticProfile.load_pollux(_one_curve(tmp_path / "prof"), epochs={"toy": 3})
    app = profile.apps[0]
    assert app.noise_scale == np.inf and app.init_batch == app.max_batch == 100
    assert np.isfinite(app.rate(1, 1, 100)) and profile.efficiency(np.array([0]), [100]).tolist() == [1.0]
    jobs = [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "model": "toy", "epochs": 1.0} for i in range(2)]
    for policy in ("Pollux(seed=0) -> PolluxAgent", "Fifo -> FirstFree"):
        graph = (
            f'round = 60s;\nelastic_profile = "{tmp_path / "prof"}";\n'
            f't :: TraceSource(path="trace.csv");\nt -> AcceptAll -> JobPool -> {policy} -> Launch -> JobMetrics;\n'
        )
        result = run_graph(graph, jobs, cluster="1x2:V100", until=36000)
        assert result.stop_reason == "every job finished", policy


# --- measurement files ---


def test_a_validation_curve_that_goes_down_is_a_located_error(tmp_path):
    folder = _app_folder(tmp_path) / "toy"
    _replace_row(folder / "validation-200.csv", 3, "1.0,100.0,0.5,1.0,1.0")  # progress 1000 -> 1 -> 1500
    with pytest.raises(TraceError, match=r"validation-200.csv:3: error: column 'progress': 1 is less than 500 at line 2"):
        ElasticProfile.load_pollux(tmp_path, epochs={"toy": 3})


def test_iterations_that_go_down_are_a_located_error(tmp_path):
    folder = _app_folder(tmp_path) / "toy"
    lines = (folder / "validation-400.csv").read_text().split("\n")
    progress = lines[3].split(",")[0]
    _replace_row(folder / "validation-400.csv", 4, f"{progress},1.0,0.5,1.0,1.0")
    with pytest.raises(TraceError, match=r"validation-400.csv:4: error: column 'iteration': 1 is less than"):
        ElasticProfile.load_pollux(tmp_path, epochs={"toy": 3})


def _graph_with_a_bad_profile(tmp_path):
    """A FIFO graph whose elastic profile has a placement time that is not a number."""
    folder = _app_folder(tmp_path / "prof") / "toy"
    _replace_row(folder / "placements.csv", 2, "1,50,abc,0.0")
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 60s;\nelastic_profile = "prof";\nt :: TraceSource(path="t.csv");\n'
        "t -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return graph


def test_check_reads_the_elastic_profile(tmp_path, capsys):
    err = fails(capsys, "check", _graph_with_a_bad_profile(tmp_path))
    assert "placements.csv:2: error: column 'step_time': 'abc' is not a number" in err


# --- the batch PolluxAgent picks ---


def test_best_batch_never_goes_below_the_smallest_validated_one():
    profile = pollux.profile()
    rows = np.array([profile.row(a.name) for a in profile.apps])
    for replicas in (1, 2, 3, 4, 8):
        batch, _ = profile.best_batch(rows, np.ones(len(rows)), np.full(len(rows), replicas))
        low = np.array([max(a.init_batch, a.min_local * replicas) for a in profile.apps])
        high = np.array([max(a.max_batch, lo) for a, lo in zip(profile.apps, low, strict=True)])
        assert (batch >= low).all() and (batch <= high).all(), replicas
    imagenet = np.array([profile.row("imagenet")])
    batch, _ = profile.best_batch(imagenet, 1, 1)
    assert batch.tolist() == [200]  # (it was 199: floor(exp(log(200))))


# --- reading a trace for a run with an elastic profile ---


def test_a_pollux_workload_is_read_against_the_runs_elastic_profile(tmp_path):
    from roundhouse.traces.formats import read_trace

    _app_folder(tmp_path / "prof", name="mynet")
    profile = ElasticProfile.load_pollux(tmp_path / "prof", epochs={"mynet": 3})
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\nmynet-0,0,mynet,2,200\n")
    with pytest.raises(TraceError, match="unknown application 'mynet'"):
        read_trace(path)  # (no elastic profile given: Pollux's six)
    frame = read_trace(path, elastic=profile)
    # Its epochs and GPU limit are the profile's: 3 epochs, at most 400 / 50 GPUs.
    assert frame["model"].to_list() == ["mynet"] and frame["epochs"].to_list() == [3.0]
    assert frame["max_gpus"].to_list() == [8.0]
    path.write_text("name,time,application,num_replicas,batch_size\nmynet-0,0,mynet,2,800\n")
    with pytest.raises(TraceError, match=r"w.csv:2: error: column 'batch_size': 800 is outside .* mynet \(100 to 400\)"):
        read_trace(path, elastic=profile)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_canonical_job_of_an_elastic_application_needs_no_work_column(tmp_path, suffix):
    from roundhouse.traces.formats import check_trace_header, read_trace

    frame = pl.DataFrame({"job_id": [0, 1], "arrival_s": [0.0, 5.0], "gpus": [1, 2], "model": ["cifar10", "bert"]})
    path = tmp_path / f"t.{suffix}"
    frame.write_csv(path) if suffix == "csv" else frame.write_parquet(path)
    with pytest.raises(TraceError, match=r"missing column 'duration_s' \(or both 'model' and 'iterations'\)"):
        read_trace(path)  # (a run without an elastic profile)
    check_trace_header(path, elastic=pollux.profile())
    assert read_trace(path, elastic=pollux.profile())["model"].to_list() == ["cifar10", "bert"]
    # A job of a model that is not an application still needs its work.
    other = frame.with_columns(pl.Series("model", ["cifar10", "ResNet-50"]))
    other.write_csv(path) if suffix == "csv" else other.write_parquet(path)
    line = "3" if suffix == "csv" else "2"
    with pytest.raises(TraceError, match=rf"t.{suffix}:{line}: error: column 'duration_s': no value, .*elastic profile"):
        read_trace(path, elastic=pollux.profile())


def test_a_huge_replica_count_is_a_clear_error(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,1e30,128\n")
    with pytest.raises(TraceError, match=r"w.csv:2: error: column 'num_replicas': 1e30 is too large"):
        pollux.read_workload(path)


# --- batch limits a trace's row breaks ---

ELASTIC_ROW = {"job_id": "0", "arrival_s": "0", "gpus": "2", "model": "bert-cola", "epochs": "1"}


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (
            {"batch_size": "256", "local_batch": "128", "max_batch_size": "64"},
            r"t.csv:3: error: column 'local_batch': 128 is above its max_batch_size 64",
        ),
        (
            {"batch_size": "32", "local_batch": "8", "max_batch_size": "64"},
            r"t.csv:3: error: column 'batch_size': 32 is not its local_batch 8 times its 2 GPU\(s\)",
        ),
    ],
)
def test_batch_sizes_past_their_limit_are_refused_when_read(tmp_path, cells, message):
    from roundhouse.traces.formats import read_trace

    good = {**ELASTIC_ROW, "batch_size": "32", "local_batch": "16", "max_batch_size": "64"}
    rows = [good, {**ELASTIC_ROW, "job_id": "1", **cells}]
    path = tmp_path / "t.csv"
    pl.DataFrame(rows).write_csv(path)
    with pytest.raises(TraceError, match=message):
        read_trace(path)
    pl.DataFrame([good, {**good, "job_id": "1", "local_batch": "", "batch_size": "48"}]).write_csv(path)
    assert read_trace(path).height == 2  # (within the limit, or no local batch given)


def test_a_run_refuses_a_local_batch_past_the_limit_before_it_starts(tmp_path, capsys):
    from roundhouse.traces import ones

    frame = ones.generate(3, seed=0)
    frame = frame.with_columns(
        pl.when(pl.col("job_id") == 1).then(pl.col("max_batch_size") * 2).otherwise(pl.col("local_batch")).alias("local_batch")
    )
    frame = frame.with_columns((pl.col("local_batch") * pl.col("gpus")).alias("batch_size"))
    frame.write_csv(tmp_path / "t.csv")
    graph = REPO / "graphs" / "ones.sched"
    err = fails(capsys, "run", graph, "--trace", tmp_path / "t.csv", "--out", tmp_path / "out", "--quiet")
    assert "t.csv:3: error: column 'local_batch':" in err and "is above its max_batch_size" in err


def test_submit_refuses_a_local_batch_past_the_limit(tmp_path):
    from roundhouse.tools.submit_cmd import trace_jobs

    good = {**ELASTIC_ROW, "batch_size": "32", "local_batch": "16", "max_batch_size": "64"}
    rows = [{k: v for k, v in r.items() if k != "arrival_s"} for r in (good, {**good, "job_id": "1", "local_batch": "128"})]
    pl.DataFrame(rows).write_csv(tmp_path / "s.csv")
    with pytest.raises(TraceError, match=r"s.csv:3: error: column 'local_batch': 128 is above its max_batch_size 64"):
        trace_jobs(str(tmp_path / "s.csv"))


# --- Pollux and jobs it cannot start; GPU types ---


def test_pollux_counts_the_waiting_jobs_it_cannot_start(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "cifar10", "batch_size": 128, "epochs": 0.01},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 2, "duration_s": 100.0},
    ]
    graph = (
        'round = 60s;\nelastic_profile = "pollux";\nt :: TraceSource(path="trace.csv");\n'
        "t -> AcceptAll -> JobPool -> p :: Pollux(seed=0) -> PolluxAgent -> Launch -> JobMetrics;\n"
    )
    result = run_graph(graph, jobs, cluster="1x4:V100", until=600)
    assert result.counters["p"]["unschedulable"] == 2


def test_the_docs_say_elastic_rates_do_not_depend_on_the_gpu_type():
    from roundhouse.elements.policies.pollux import Pollux

    assert "pace of the slowest" not in (Pollux.__doc__ or "")
    assert "rate does not depend on the types" in " ".join((Pollux.__doc__ or "").split())
    text = " ".join((REPO / "docs" / "semantics.md").read_text().split())
    assert "an elastic job runs at the same rate whatever types it gets" in text


def test_check_and_run_read_a_trace_under_the_graph_s_elastic_profile(tmp_path, capsys):
    """Through the command line: a Pollux workload naming an application of the graph's own
    profile folder, and a canonical trace of jobs given by application alone."""
    from roundhouse.tools.cli import main

    _app_folder(tmp_path / "prof", name="mynet")
    (tmp_path / "w.csv").write_text("name,time,application,num_replicas,batch_size\nmynet-0,0,mynet,1,200\n")
    (tmp_path / "c.csv").write_text("job_id,arrival_s,gpus,model\n0,0,1,mynet\n")
    for trace in ("w.csv", "c.csv"):
        graph = tmp_path / f"{trace}.sched"
        graph.write_text(
            f'round = 60s;\ncluster = "2x2:V100";\nelastic_profile = "prof";\nt :: TraceSource(path="{trace}");\n'
            "t -> AcceptAll -> JobPool -> Pollux(seed=0) -> PolluxAgent -> Launch -> JobMetrics;\n"
        )
        assert main(["check", str(graph)]) == 0, capsys.readouterr().err
        assert main(["run", str(graph), "--quiet", "--out", str(tmp_path / f"out-{trace}")]) == 0, capsys.readouterr().err
        assert pl.read_csv(tmp_path / f"out-{trace}" / "jobs.csv")["finish_s"].null_count() == 0


def test_a_run_stalled_on_jobs_pollux_cannot_start_says_so(run_graph):
    from roundhouse.runtime.engine import StalledError

    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "cifar10", "batch_size": 128, "epochs": 0.01},
        {"job_id": 7, "arrival_s": 0.0, "gpus": 1, "model": "ResNet-18", "duration_s": 100.0},
    ]
    graph = (
        'round = 5min;\nelastic_profile = "pollux";\nt :: TraceSource(path="trace.csv");\n'
        "t -> AcceptAll -> JobPool -> p :: Pollux(seed=0) -> PolluxAgent -> Launch -> JobMetrics;\n"
    )
    with pytest.raises(StalledError) as err:
        run_graph(graph, jobs, cluster="1x4:V100")
    assert (
        "Element 'p' (Pollux) cannot start 1 waiting job(s), of no application of the elastic profile (job 7, model ResNet-18)"
        in str(err.value)
    )


def test_a_run_blames_a_bad_elastic_profile_on_its_own_file(tmp_path, capsys):
    err = fails(capsys, "run", _graph_with_a_bad_profile(tmp_path), "--quiet")
    assert "placements.csv:2: error: column 'step_time': 'abc' is not a number" in err
    assert "argument 'path' of TraceSource" not in err


def test_an_ones_job_asking_for_more_than_its_cap_runs_within_it(tmp_path, capsys):
    """The ONES reader's cap (base batch x max_lr / lr) may be below the batch a job asks for on
    all its GPUs: ONES starts it on one GPU and keeps its plans within the cap, so it runs."""
    from roundhouse.tools.cli import main
    from roundhouse.traces.formats import read_trace

    path = tmp_path / "w.csv"
    path.write_text(
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
        "0,resnet18,cifar,10000,10,128,0.001,0.003,0.55,4\n"
    )
    frame = read_trace(path)
    assert (frame["batch_size"][0], frame["max_batch_size"][0]) == (512, 384)
    assert main(["run", str(REPO / "graphs" / "ones.sched"), "--trace", str(path), "--quiet"]) == 0, capsys.readouterr().err


def test_a_stall_under_another_policy_blames_no_elastic_application(run_graph):
    from roundhouse.runtime.engine import StalledError

    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 12, "duration_s": 100.0}]
    graph = (
        'round = 5min;\nelastic_profile = "pollux";\nt :: TraceSource(path="trace.csv");\n'
        "t -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    with pytest.raises(StalledError) as err:
        run_graph(graph, jobs, cluster="2x4:V100,2x4:K80")
    assert "wants 12 GPUs of one type" in str(err.value) and "elastic profile" not in str(err.value)
