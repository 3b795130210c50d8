"""`roundhouse profile`: what it refuses before measuring (a GPU type its profile could not hold,
a model beside with no workload, a batch larger than a workload's dataset), how a failed or
hung measurement is reported, and a graph that uses the profile it writes."""

from __future__ import annotations

import os
import time

import pytest

import roundhouse.agents.profiler as profiler
from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.cli import main
from roundhouse.traces.generators import generate


@pytest.fixture
def not_measured(monkeypatch):
    """Fail the test if anything is measured."""

    def measure(*args, **kwargs):
        raise AssertionError("measured, where the options should have been refused first")

    monkeypatch.setattr(profiler, "profile", measure)


@pytest.mark.parametrize(
    "gpu_type, message",
    [
        ("V100,x", "error: --gpu-type 'V100,x': ',' cannot be part of a GPU type's name"),
        ('V"100', "error: --gpu-type 'V\"100': '\"' cannot be part"),
        ("#1", "error: --gpu-type '#1': '#' cannot be part"),
        ("a\nb", "error: --gpu-type 'a\\nb': '\\n' cannot be part"),
        ("", "error: --gpu-type: give the name of a GPU type"),
        ("  ", "error: --gpu-type: give the name of a GPU type"),
        (" V100", "error: --gpu-type ' V100': has spaces at its ends"),
    ],
)
def test_a_gpu_type_the_profile_could_not_hold_is_refused_before_measuring(tmp_path, capsys, not_measured, gpu_type, message):
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "ResNet-18", "--gpu-type", gpu_type, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert not out.exists()


def test_a_model_beside_with_no_workload_is_refused_before_measuring(tmp_path, capsys, not_measured):
    out = tmp_path / "p.csv"
    args = ["profile", "--models", "ResNet-18", "--concurrent", "2", "--beside", "ResNet-18,Transformer"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --beside: no example workload for model 'Transformer' (have: ResNet-18,"), err
    assert not out.exists()


class _FailingRunner:
    """A runner whose measurement fails as a crashed workload's does."""

    def __init__(self, folder, threads):
        pass

    def measure(self, model, batch, gpus, seconds, companions):
        raise RuntimeError("the LM workload failed (exit status 1); the end of its log:\nImportError: no torch")

    def close(self) -> None:
        pass


def test_a_failed_measurement_is_reported_with_the_model_and_the_log(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(profiler, "_Runner", _FailingRunner)
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "ResNet-18", "--seconds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the LM workload failed (exit status 1)"), err
    assert "ImportError: no torch" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.live
def test_a_workload_that_fails_to_start_is_reported_with_its_log(tmp_path, capsys, monkeypatch):
    real = profiler.workload_for
    monkeypatch.setattr(profiler, "workload_for", lambda m: "roundhouse.no_such_workload" if m == "LM" else real(m))
    out = tmp_path / "p.csv"
    args = ["profile", "--models", "ResNet-18", "--seconds", "1", "--concurrent", "2", "--beside", "LM"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the LM workload failed (exit status 1)"), err
    assert "No module named roundhouse.no_such_workload" in err
    assert not out.exists()


# --- a batch larger than the workload's dataset is refused before measuring ---
@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--models", "LM", "--batch-sizes", "4096"],
            "error: --batch-sizes 4096: LM's example workload has a dataset of 2,048 samples, too few for batch size 4,096",
        ),
        (
            ["--models", "Recommendation", "--gpus", "1,128"],
            "error: --gpus 1,128: Recommendation's example workload has a dataset of 4,096 samples, too few for batch size 64 on each of 128",
        ),
        (
            ["--models", "ResNet-18", "--gpus", "1,100", "--concurrent", "2", "--beside", "Recommendation"],
            "error: --gpus 1,100 (with --beside Recommendation): Recommendation's example workload has a dataset of 4,096 samples, "
            "too few for batch size 64 on each of 100",
        ),
    ],
)
def test_a_batch_larger_than_the_workloads_dataset_is_refused_before_measuring(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setattr(profiler, "_Runner", lambda *a: pytest.fail("measured, where the batch should have been refused"))
    out = tmp_path / "p.csv"
    assert main(["profile", *args, "--seconds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert not out.exists()


def test_the_profiler_itself_refuses_a_batch_its_workload_cannot_hold(monkeypatch):
    monkeypatch.setattr(profiler, "_Runner", lambda *a: pytest.fail("measured, where the batch should have been refused"))
    with pytest.raises(profiler.UsageError, match="LM's example workload has a dataset of 2,048 samples"):
        profiler.profile(["LM"], {"LM": [1025]}, gpus=[1, 2])


@pytest.mark.live
def test_the_dataset_sizes_the_profiler_knows_are_the_workloads(monkeypatch):
    import importlib

    for model, samples in profiler.DATASET_SAMPLES.items():
        module = importlib.import_module(profiler.workload_for(model))
        seen = []
        monkeypatch.setattr(module, "train", lambda build, dataset, *a, seen=seen, **k: seen.append(len(dataset)))
        module.main()
        assert seen == [samples], model


# --- workloads that die, hang or count for longer than the slack, without PyTorch ---
class _NoForkServer:
    """The fork server's place, never ready: workers start as new processes (`python -m`), so
    that a stand-in workload starts without importing PyTorch."""

    def __init__(self, env=None):
        pass

    def wait_ready(self) -> bool:
        return False

    def ready(self) -> bool:
        return False

    def close(self) -> None:
        pass


# A stand-in workload that speaks the client library's protocol: reports every 20 ms; on
# revocation says it is exiting and exits as preempted.
FAKE_WORKLOAD = """
import os, sys, time
import zmq
from roundhouse.agents.client import Lease
from roundhouse.wire import protocol

env = os.environ
job, attempt = int(env["ROUNDHOUSE_JOB_ID"]), int(env["ROUNDHOUSE_ATTEMPT"])
sock = zmq.Context.instance().socket(zmq.PUSH)
sock.connect(env["ROUNDHOUSE_AGENT"])
lease = Lease(env["ROUNDHOUSE_LEASE"])
start = it = int(env.get("ROUNDHOUSE_RESUME_ITERATION") or 0)
total = int(env["ROUNDHOUSE_ITERATIONS"])
seq = 0

def send(type_, **fields):
    global seq
    seq += 1
    sock.send(protocol.encode(type_, seq, job=job, attempt=attempt, rank=0, **fields))

while it < total and not lease.revoked():
    time.sleep(0.02)
    it += 1
    send("report", iteration=it, values={"startup_s": 0.1})
done = it >= total
send("exiting", outcome="done" if done else "preempted", iteration=it, start_iteration=start, checkpoint_iteration=it)
sock.close(linger=2000)
sys.exit(0 if done else protocol.EXIT_PREEMPTED)
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """Run ResNet-18 as the stand-in workload module `code` (written to a folder on the
    workers' PYTHONPATH), started as a new process; returns a function taking `code`."""
    folder = tmp_path / "modules"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setattr(profiler, "ForkServer", _NoForkServer)

    def use(code: str, name: str = "rh_stand_in") -> None:
        (folder / f"{name}.py").write_text(code)
        real = profiler.workload_for
        monkeypatch.setattr(profiler, "workload_for", lambda m: name if m == "ResNet-18" else real(m))

    return use


def test_a_count_longer_than_the_slack_finishes(tmp_path, capsys, monkeypatch, stand_in):
    # The step that counts iterations may take its seconds and the slack: a count of 6 minutes
    # is not cut off at a fixed 5 (here: 2 s counted, with 1.5 s of slack: room for a loaded
    # machine to start the workload, and still less than the count).
    stand_in(FAKE_WORKLOAD)
    monkeypatch.setattr(profiler._Runner, "slack_s", 1.5)
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "ResNet-18", "--seconds", "2", "--out", str(out)]) == 0, capsys.readouterr().err
    row = out.read_text().splitlines()[-1].split(",")
    assert row[:5] == ["ResNet-18", "16", "V100", "1", "consolidated"]
    assert 10 < float(row[5]) < 60  # (one iteration every 20 ms, on a loaded machine)


def test_a_measured_workload_that_dies_before_its_first_report_is_said_at_once_with_its_log(tmp_path, capsys, stand_in):
    stand_in("import sys\nprint('ValueError: no global batch here', file=sys.stderr)\nsys.exit(1)\n")
    out = tmp_path / "p.csv"
    t0 = time.monotonic()
    assert main(["profile", "--models", "ResNet-18", "--seconds", "1", "--out", str(out)]) == 2
    assert time.monotonic() - t0 < 30  # (not after the slack of 300 s)
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the ResNet-18 workload failed (exit status 1)"), err
    assert "ValueError: no global batch here" in err and "Traceback" not in err
    assert not out.exists()


def test_a_failed_second_worker_is_said_with_its_own_log_and_the_first_is_killed(tmp_path, capsys, stand_in):
    pid_file = tmp_path / "rank0.pid"
    stand_in(
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        f"    while not os.path.exists({str(pid_file)!r}): time.sleep(0.02)\n"
        "    print('rank 1 fell over', file=sys.stderr)\n"
        "    sys.exit(3 + 4)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    assert main(["profile", "--models", "ResNet-18", "--gpus", "2", "--seconds", "1", "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert "the ResNet-18 workload failed (exit status 7)" in err and "rank 1 fell over" in err, err
    _assert_ended(pid_file)


HANGING_WORKLOAD = (
    "import os, sys, time\nprint('hanging', flush=True)\nopen({pid!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
)


def _assert_ended(pid_file) -> None:
    deadline = time.monotonic() + 10
    pid = int(pid_file.read_text())
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"worker {pid} still runs")


def test_a_hung_workload_is_killed_after_the_slack_and_said_with_its_log(tmp_path, capsys, monkeypatch, stand_in):
    pid_file = tmp_path / "worker.pid"
    stand_in(HANGING_WORKLOAD.format(pid=str(pid_file)))
    monkeypatch.setattr(profiler._Runner, "slack_s", 3.0)
    assert main(["profile", "--models", "ResNet-18", "--seconds", "1", "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the workloads did not get to the next step"), err
    assert "within 3 s; the end of the ResNet-18 workload's log:\nhanging" in err and "Traceback" not in err
    _assert_ended(pid_file)


@pytest.mark.live
def test_a_hung_forked_workload_is_killed_after_the_slack(tmp_path, capsys, monkeypatch):
    # As the profiler runs workloads: forked from the fork server (which has imported PyTorch).
    folder = tmp_path / "modules"
    folder.mkdir()
    pid_file = tmp_path / "worker.pid"
    (folder / "rh_hangs.py").write_text(HANGING_WORKLOAD.format(pid=str(pid_file)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p))
    real = profiler.workload_for
    monkeypatch.setattr(profiler, "workload_for", lambda m: "rh_hangs" if m == "ResNet-18" else real(m))
    monkeypatch.setattr(profiler._Runner, "slack_s", 2.0)
    assert main(["profile", "--models", "ResNet-18", "--seconds", "1", "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the workloads did not get to the next step"), err
    assert "within 2 s; the end of the ResNet-18 workload's log:\nhanging" in err and "Traceback" not in err
    _assert_ended(pid_file)


# --- PoissonSource(models=blox) draws its models from the graph's profile ---
MEASURED = """# as `roundhouse profile` writes it: its own batch sizes, not Gavel's
model,batch_size,gpu_type,gpus,placement,iters_per_s
ResNet-18,8,V100,1,consolidated,90.0
LM,16,V100,1,consolidated,170.0
LM,16,V100,2,consolidated,50.0
"""


def _poisson_graph(tmp_path, profile: str | None, gpus: str = "single", cluster: str = "2x2:V100"):
    setting = ""
    if profile is not None:
        (tmp_path / "measured.csv").write_text(profile)
        setting = 'profile = "measured.csv";\n'
    path = tmp_path / "g.sched"
    path.write_text(
        f'round = 6min;\ncluster = "{cluster}";\n{setting}'
        f"arrivals :: PoissonSource(rate=3/h, jobs=20, gpus={gpus}, models=blox, seed=0);\n"
        "arrivals -> AcceptAll -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return compile_file(path)


def _models(graph) -> set[tuple[str, int]]:
    columns = graph.elements["arrivals"]._batch.columns
    return set(zip(columns["model"], columns["batch_size"].tolist()))


def test_poisson_models_come_from_the_graphs_measured_profile(tmp_path):
    graph = _poisson_graph(tmp_path, MEASURED)
    result = simulate(graph)
    assert result.stop_reason == "every job finished"
    assert _models(graph) == {("ResNet-18", 8), ("LM", 16)}
    assert graph.elements["arrivals"].counters["arrived"] == 20


def test_poisson_models_with_no_profile_are_the_shipped_tables_as_before(tmp_path):
    graph = _poisson_graph(tmp_path, None, gpus="philly", cluster="2x8:V100")
    simulate(graph, until=1.0)
    trace = generate(20, 3 / 3600, 0, gpus="philly", models="blox")  # (the shipped table)
    columns = graph.elements["arrivals"]._batch.columns
    assert list(columns["model"]) == trace["model"].to_list()
    assert columns["batch_size"].tolist() == trace["batch_size"].to_list()
    assert len(_models(graph)) > 3  # (Gavel's models and batch sizes)


def test_poisson_gpu_counts_the_measured_profile_lacks_are_said(tmp_path):
    graph = _poisson_graph(tmp_path, MEASURED, gpus="philly", cluster="2x8:V100")
    with pytest.raises(RoundhouseError, match=r"no model of \['LM', 'ResNet-18'\] runs on (4|8) GPUs in .*measured.csv"):
        simulate(graph)


def test_check_and_run_say_the_gpu_counts_the_measured_profile_lacks_at_the_argument(tmp_path, capsys):
    _poisson_graph(tmp_path, MEASURED, gpus="philly", cluster="2x8:V100")
    graph_file = tmp_path / "g.sched"
    expected = (
        "g.sched:4:66: error: argument 'models' of PoissonSource: no model of ['LM', 'ResNet-18'] runs on 4 GPUs "
        "in " + str(tmp_path / "measured.csv") + " (gpus=philly draws 1, 2, 4, 8 GPUs)"
    )
    assert main(["check", str(graph_file)]) == 2
    assert expected in capsys.readouterr().err
    assert main(["run", str(graph_file)]) == 2
    assert expected in capsys.readouterr().err
    graph_file.write_text(graph_file.read_text().replace("gpus=philly", "gpus=single"))
    assert main(["check", str(graph_file)]) == 0  # (one GPU: LM and ResNet-18 were measured there)


def test_models_given_by_set_are_said_as_that_option_at_the_element(tmp_path, capsys):
    # (The file writes models=none; the --set gives blox: said as the option's, not at the file's
    # models=none, which is not what ran.)
    _poisson_graph(tmp_path, MEASURED, gpus="philly", cluster="2x8:V100")
    graph_file = tmp_path / "g.sched"
    graph_file.write_text(graph_file.read_text().replace("models=blox", "models=none"))
    assert main(["check", str(graph_file), "--set", "arrivals.models=blox"]) == 2
    err = capsys.readouterr().err
    assert "g.sched:4:1: error: --set arrivals.models=blox: argument 'models' of PoissonSource: no model of" in err, err
