"""`roundhouse profile` and `profiler.profile()`: an interrupted measurement leaves no worker or
fork server behind, the library refuses what the command refuses, the command refuses a `--beside`
or `--out` that names nothing, and the table is written whole or not at all."""

from __future__ import annotations

import os
import resource
import signal
import time

import pytest

import roundhouse.agents.profiler as profiler
from roundhouse.errors import UsageError
from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable
from tests.test_profile_fixes import _NoForkServer


def _ended(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_an_interrupted_profile_ends_the_workers_it_started_as_new_processes(tmp_path, monkeypatch):
    # A caller that goes on after the interrupt (a reproduction, a notebook) must not keep a
    # worker training: its lease lives in the profiler's deleted folder, so none would end it.
    folder = tmp_path / "modules"
    folder.mkdir()
    pid_file = tmp_path / "worker.pid"
    (folder / "rh_review_hangs.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setattr(profiler, "ForkServer", _NoForkServer)
    monkeypatch.setattr(profiler, "workload_for", lambda m: "rh_review_hangs")

    def interrupted(self, state, procs, until, seconds=0.0):
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        raise KeyboardInterrupt  # (Ctrl-C while measuring)

    monkeypatch.setattr(profiler._Runner, "_pump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        profiler.profile(["ResNet-18"], seconds=1, log=lambda s: None)
    pid = int(pid_file.read_text())
    try:
        assert _ended(pid, 5.0), f"worker {pid} still runs after the interrupted profile"
    finally:
        if not _ended(pid, 0.0):  # (the test failed: end the worker all the same)
            os.killpg(pid, signal.SIGKILL)


def test_an_interrupt_while_the_fork_server_starts_ends_the_server(tmp_path, monkeypatch):
    closed = []

    class Interrupted(_NoForkServer):
        def wait_ready(self) -> bool:
            raise KeyboardInterrupt  # (Ctrl-C while the server imports PyTorch)

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(profiler, "ForkServer", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        profiler.profile(["ResNet-18"], seconds=1, log=lambda s: None)
    assert closed == [True]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"models": []}, "give at least one model to measure"),
        ({"models": ["LM"], "gpus": []}, "give at least one worker count to measure"),
        ({"models": ["LM"], "beside": ["Recommendation"]}, "beside Recommendation: only with concurrent 2 or more"),
        ({"models": ["LM"], "beside": ["Transformer"], "concurrent": 2}, "no example workload for model 'Transformer'"),
    ],
)
def test_the_profiler_refuses_what_it_could_not_measure_before_starting(monkeypatch, kwargs, message):
    monkeypatch.setattr(profiler, "_Runner", lambda *a: pytest.fail("measured, where the call should have been refused"))
    with pytest.raises(UsageError, match=message):
        profiler.profile(**kwargs)


@pytest.fixture
def not_measured(monkeypatch):
    monkeypatch.setattr(profiler, "profile", lambda *a, **k: pytest.fail("measured, where the options should have been refused"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--concurrent", "2", "--beside", ""], "error: --beside: unknown model ''"),
        (["--concurrent", "2", "--beside", "LM,lstm"], "error: --beside LM,lstm: LM is listed twice"),
        (["--out", ""], "error: --out: give the file to write the profile table to"),
        (["--out", " "], "error: --out: give the file to write the profile table to"),
    ],
)
def test_a_beside_or_out_that_names_nothing_is_refused(tmp_path, capsys, not_measured, args, message):
    out = ["--out", str(tmp_path / "p.csv")] if "--out" not in args else []
    assert main(["profile", "--models", "ResNet-18", "--seconds", "1", *args, *out]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert list(tmp_path.iterdir()) == []


def _measured(monkeypatch) -> None:
    """Measure nothing: `profile()` gives a result at once."""
    m = profiler.Measurement("LM", 10, 1, 123.4567, 0.25, 0.3, 0.12)
    result = profiler.ProfileResult("CPU1", 2, (m,), ("Recommendation",))
    monkeypatch.setattr(profiler, "profile", lambda *a, **k: result)


ARGS = ["profile", "--models", "LM", "--gpu-type", "CPU1", "--seconds", "1", "--concurrent", "2", "--beside", "Recommendation"]


def test_a_table_that_cannot_be_written_whole_leaves_the_old_one(tmp_path, capsys, monkeypatch):
    _measured(monkeypatch)
    out = tmp_path / "p.csv"
    old = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nLM,10,CPU1,1,consolidated,99.0\n"
    out.write_text(old)
    # A disk that fills up as the table is written: files may not grow past a few bytes more.
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(old) + 20, limits[1]))
    try:
        status = main([*ARGS, "--out", str(out)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous)
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {out}: File too large"), err
    assert out.read_text() == old
    assert [p.name for p in tmp_path.iterdir()] == ["p.csv"]  # (no part-written file left beside it)


def test_the_table_replaces_the_old_one_and_says_what_its_columns_hold(tmp_path, capsys, monkeypatch):
    _measured(monkeypatch)
    out = tmp_path / "p.csv"
    out.write_text("old\n")
    out.chmod(0o640)
    assert main([*ARGS, "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["p.csv"]
    text = out.read_text()
    assert "# columns: model; batch_size, each worker's batch;" in text
    assert "iters_per_s, the job's training steps a second" in text
    assert ProfileTable.load(out).rate("LM", 10, "CPU1", 1) == pytest.approx(123.4567)


def test_a_table_measured_alone_says_so_and_a_header_of_several_lines_stays_a_comment(tmp_path):
    m = profiler.Measurement("LM", 10, 1, 50.0, 0.2, 0.3, 0.1)
    text = profiler.ProfileResult("V100", 1, (m,)).csv("measured by a script\nbefore the live run")
    assert "# each measured alone; gpu_type V100" in text and "other job(s)" not in text
    assert "the mean over them" not in text  # (a rate measured alone is no mean over models)
    assert text.startswith("# measured by a script\n# before the live run\n")
    (tmp_path / "p.csv").write_text(text)
    table = ProfileTable.load(tmp_path / "p.csv")
    assert table.models == ("LM",) and table.rate("LM", 10, "V100", 1) == pytest.approx(50.0)


def test_the_hint_for_a_table_of_another_gpu_type_sets_the_graphs_reference_type(tmp_path, capsys, monkeypatch):
    # A graph's reference type is V100 unless it sets one; a table of CPU1s has no V100 speed.
    _measured(monkeypatch)
    assert main([*ARGS, "--out", str(tmp_path / "p.csv")]) == 0
    assert 'checkpoint = 0.12s; reference_gpu = "CPU1"; in the graph' in capsys.readouterr().out


@pytest.mark.parametrize(("beside", "a_mean"), [((), False), (("Recommendation",), False), (("Recommendation", "LM"), True)])
def test_the_columns_note_calls_a_rate_a_mean_only_when_measured_beside_several_models(beside, a_mean):
    m = profiler.Measurement("LM", 10, 1, 50.0, 0.2, 0.3, 0.1)
    text = profiler.ProfileResult("V100", 2, (m,), beside).csv()
    assert ("measured beside several models in turn, the mean over them" in text) == a_mean
    assert "# (a step trains a batch on every worker)" in text
