"""The benchmark scripts measure what they say: every phase of scale.py's command-line runs
timed (reading the trace included), its plot written whole or not at all and refused when it
would draw nothing, options that would run for ever refused, a job process of lease_check.py
that fails said at once, and a live scheduler that ends said with its log, not waited on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.figure
import pytest

from tests.test_benchmark_scripts_fixes import BENCH, run, script

# --- scale.py: a command-line case's phases ---


def test_scale_times_every_phase_of_a_command_line_run(tmp_path):
    """The Alibaba-shape case on a small trace in its trace's place: reading the trace is a
    phase of its own (not counted in the simulation), and the peak is the highest phase's."""
    scale = script("scale")
    _, _, jobs, rate, *_ = scale.CASES["alibaba-fifo"]
    trace = scale.trace_path(tmp_path, jobs, rate)
    generate = [sys.executable, "-m", "roundhouse.tools.cli", "trace", "generate", "-o", str(trace)]
    subprocess.run([*generate, "--jobs", "300", "--rate", f"{rate:g}/h", "--seed", "0"], check=True, capture_output=True)
    done = run("scale", "--child", "alibaba-fifo", "--folder", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(figures["phases_s"]) == list(scale.PHASES)
    assert figures["phases_s"]["read"] > 0 and figures["phases_peak_mb"]["read"] > 0
    assert figures["peak_rss_mb"] == max(figures["phases_peak_mb"].values())
    run_json = json.loads((tmp_path / "alibaba-fifo-out" / "run.json").read_text())
    assert figures["rounds"] == run_json["rounds"]


# --- scale.py: the plot ---


def results_for_plot(scale) -> list[dict]:
    return [
        {"name": name, "wall_s": 1.0 + i, "rounds": 1000 * (i + 1), "in_system": 10.0 * (i + 1)}
        for i, name in enumerate(n for n, case in scale.CASES.items() if case[0] in ("active", "size"))
    ]


def test_scale_plot_is_drawn_before_the_file_is_written(tmp_path, monkeypatch):
    """A drawing that fails part-way through a file (a full disk) leaves the plot of an earlier
    run as it was; one that succeeds replaces it with a whole PNG."""
    scale = script("scale")
    path = tmp_path / "scale.png"
    path.write_bytes(b"an earlier run's plot")
    real = matplotlib.figure.Figure.savefig

    def savefig(fig, target, **kwargs):
        if isinstance(target, (str, Path)):  # straight into the file: half of it, then the disk is full
            Path(target).write_bytes(b"\x89PNG\r\n\x1a\n half")
            raise OSError(28, "No space left on device", str(target))
        return real(fig, target, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    scale.plot(results_for_plot(scale), path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82")
    assert not [p for p in tmp_path.iterdir() if p != path]  # (no part left beside it)


def test_scale_plot_that_cannot_be_written_is_a_message(tmp_path):
    scale = script("scale")
    path = tmp_path / "gone" / "scale.png"  # (its folder removed while the cases ran)
    with pytest.raises(SystemExit) as ended:
        scale.plot(results_for_plot(scale), path)
    assert str(path) in str(ended.value.code)
    assert not path.parent.exists()


def test_scale_refuses_a_plot_of_no_plotted_case(tmp_path):
    done = run("scale", "--only", "alibaba-fifo", "--plot", str(tmp_path / "x.png"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--plot has no effect" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.png").exists()


# --- options that would run for ever ---


@pytest.mark.parametrize("option, value", [("--seconds", "inf"), ("--iteration", "1e400")])
def test_an_infinite_option_value_is_refused(tmp_path, option, value):
    done = run("lease_check", option, value, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: must be a finite number" in done.stderr and "Traceback" not in done.stderr


def test_bounded_types_refuse_infinities():
    import argparse

    bench_common = script("bench_common")
    for convert in (bench_common.at_least(0.0), bench_common.above(0.0)):
        assert convert("2.5") == 2.5
        for text in ("inf", "Infinity", "nan"):
            with pytest.raises(argparse.ArgumentTypeError):
                convert(text)


# --- lease_check.py: a job process that fails ---


def test_lease_check_says_at_once_that_a_job_process_failed(tmp_path, capfd):
    """A job whose iteration cannot run (a negative sleep raises in the job process) ends the
    measurement with a message, rather than a wait of two minutes and a traceback. (Two such
    jobs end one after the other: the message counts those ended when it is written.)"""
    lease_check = script("lease_check")
    with pytest.raises(SystemExit) as ended:
        lease_check.measure("optimistic", 2, "unused", tmp_path, -1.0, 0.5)
    assert re.search(r"error: [12] job process\(es\) ended with an error \(exit status 1", str(ended.value.code))
    assert "ValueError" in capfd.readouterr().err  # (the job's own error, printed by its process)


# --- live_scale.py ---


def test_live_scale_says_the_scheduler_ended_and_where_its_log_is(monkeypatch, capsys):
    """A scheduler that cannot start (its graph does not compile) is said at once, naming its
    log, which is kept; every process started is stopped."""
    live_scale = script("live_scale")
    monkeypatch.setattr(live_scale, "GRAPH", "no such graph;\n")
    monkeypatch.setattr(sys, "argv", ["live_scale.py", "--sizes", "1x1", "--rounds", "1"])
    with pytest.raises(SystemExit) as ended:
        live_scale.main()
    message = str(ended.value.code)
    assert message.startswith("error: 1x1: the scheduler process exited with status")
    log = Path(message.split("see ", 1)[1])
    try:
        assert log.name == "scheduler.log" and log.is_file()
        assert f"its folder (logs included) is kept: {log.parent}" in capsys.readouterr().err
    finally:
        shutil.rmtree(log.parent, ignore_errors=True)


def test_live_scale_target_is_not_judged_without_a_measured_lag():
    live_scale = script("live_scale")
    row = {"gpus": 1000, "lag_rounds": 0, "lag_median_ms": float("nan")}
    assert live_scale.target_verdict([row]).startswith("not measured")
    assert live_scale.target_verdict([{**row, "lag_rounds": 5, "lag_median_ms": 40.0}]) == "met"
    assert live_scale.target_verdict([{**row, "lag_rounds": 5, "lag_median_ms": 140.0}]) == "not met"
    assert live_scale.target_verdict([{**row, "gpus": 100, "lag_rounds": 5, "lag_median_ms": 1.0}]).startswith("not measured")


# --- stopping a script that started processes ---


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_lease_check_stops_its_scheduler_and_jobs_when_terminated(tmp_path):
    """`kill PID` (SIGTERM) on a script measuring with a scheduler and job processes running
    ends it through its cleanup: none of the processes it started is left running."""
    import signal
    import time

    out = tmp_path / "out.txt"
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(BENCH / "lease_check.py"), "--max", "1", "--seconds", "120"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    started = []
    try:
        deadline = time.time() + 120
        while "checks made/answered" not in out.read_text():
            assert proc.poll() is None and time.time() < deadline, out.read_text()
            time.sleep(0.2)
        time.sleep(1.0)  # (the job processes of the first measurement started)
        started = children_of(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
        time.sleep(0.5)
        assert [pid for pid in started if running(pid)] == [], out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in started:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        kept = [line.split("kept: ", 1)[1].strip() for line in out.read_text().splitlines() if "is kept: " in line]
        for folder in kept:
            shutil.rmtree(folder, ignore_errors=True)


# --- derive_communication.py: the shipped profile ---


def test_derive_communication_leaves_the_profile_whole_when_the_write_fails(tmp_path):
    """A write cut short (here a file size limit of 200 bytes, as a full disk would) leaves the
    profile as it was, not its first 200 bytes, and says which file it could not write."""
    import resource

    out = tmp_path / "communication.csv"
    out.write_text("the profile as it was\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    done = subprocess.run(
        [sys.executable, str(BENCH / "derive_communication.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=limit,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"cannot write {out}" in done.stderr
    assert out.read_text() == "the profile as it was\n"
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


# --- targets judged, met or MISSED ---


def test_engine_las_judges_each_target(monkeypatch, capsys):
    engine_las = script("engine_las")
    walls = {"10,000 jobs, Consolidated": 1.5, "10,000 jobs, FirstFree": 2.5, "100,000 jobs, Consolidated": 14.0}

    def measure(label, text, repeat=1):
        return next((wall for name, wall in walls.items() if name in label), 0.3 if "Consolidated" == label.strip() else 20.0)

    monkeypatch.setattr(engine_las, "measure", measure)
    monkeypatch.setattr(sys, "argv", ["engine_las.py", "--full"])
    engine_las.main()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("target:")]
    assert lines == [
        "target: 10,000 jobs under 2 s: Consolidated 1.50 s (met), FirstFree 2.50 s (MISSED)",
        "target: 100,000 jobs under 15 s: Consolidated 14.00 s (met), FirstFree 20.00 s (MISSED)",
        "target: Blox's experiment under 0.35 s (at least 1,000x faster than Blox's simulator's 351 s, measured once, when the target was set): 0.30 s = 1170x (met)",
    ]


class _Experiment:
    def run(self, out, quick):
        import polars as pl

        runs = pl.DataFrame({"scheme": ["Dally"], "racks": [2], "wall_s": [0.5], "rounds": [100]})
        return type("Report", (), {"tables": {"runs": runs}})()


@pytest.mark.parametrize(
    "argv, targets, verdict",
    [
        (["--quick"], None, "target: under 60 s on 2 cores:"),
        (["--quick"], {("dally-batch", True): 0.0}, "(MISSED)"),
        (["--experiment", "dally-poisson"], None, None),
    ],
    ids=["met", "missed", "no-target"],
)
def test_dally_batch_judges_its_target(monkeypatch, capsys, tmp_path, argv, targets, verdict):
    dally_batch = script("dally_batch")
    monkeypatch.setattr(dally_batch, "load_all", lambda: {"dally-batch": _Experiment(), "dally-poisson": _Experiment()})
    if targets is not None:
        monkeypatch.setattr(dally_batch, "TARGETS_S", targets)
    monkeypatch.setattr(sys, "argv", ["dally_batch.py", *argv, "--out", str(tmp_path)])
    dally_batch.main()
    out = capsys.readouterr().out
    if verdict is None:
        assert "target" not in out
    else:
        line = next(line for line in out.splitlines() if line.startswith("target:"))
        assert verdict in line and line.endswith(("(met)", "(MISSED)"))
        assert ("(met)" in line) == (targets is None)


@pytest.mark.parametrize("wall, verdict", [(1.0, "290x faster (target 50x: met)"), (10.0, "29x faster (target 50x: MISSED)")])
def test_gavel_solvers_judges_the_whole_simulation(monkeypatch, capsys, tmp_path, wall, verdict):
    gavel_solvers = script("gavel_solvers")
    (tmp_path / "msr_seed0_0e4a51.trace").write_text("")
    monkeypatch.setattr(gavel_solvers, "SHARED", tmp_path)  # (no shared results there)
    monkeypatch.setattr(gavel_solvers, "compile_file", lambda path: None)
    summary = {"avg_jct_s": 1000.0, "jobs_finished": 984}
    result = type("Result", (), {"wall_s": wall, "rounds": 26413, "reports": {"m": {"summary": summary}}})()
    monkeypatch.setattr(gavel_solvers, "simulate", lambda graph: result)
    gavel_solvers.whole_simulation()
    assert verdict in capsys.readouterr().out


@pytest.mark.parametrize(
    "jcts, wall, verdict",
    [
        ([2500.0], 9.0, "met; at least 50x faster (under 37 s a run): met"),
        ([2500.0, 2700.0], 9.0, "(the mean of the seeds): MISSED; at least 50x faster (under 37 s a run): met"),
        ([2446.0], 40.0, "2,446 s: met; at least 50x faster (under 37 s a run): MISSED"),
    ],
    ids=["met", "jct-missed", "speed-missed"],
)
def test_pollux_fidelity_judges_its_goal(monkeypatch, capsys, jcts, wall, verdict):
    pollux_fidelity = script("pollux_fidelity")
    if not (pollux_fidelity.WORKLOAD.is_file() and pollux_fidelity.PROFILE.is_dir()):
        pytest.fail(f"Pollux's data is not at {pollux_fidelity.DATA}")
    seeds = iter(jcts)
    clock = iter(range(0, 10_000, int(wall)))

    def simulate(graph):
        summary = {"avg_jct_s": next(seeds), "jobs_finished": 160, "jobs_tracked": 160}
        return type("Result", (), {"rounds": 981, "reports": {"m": {"summary": summary}}})()

    monkeypatch.setattr(pollux_fidelity, "compile_file", lambda name, text: None)
    monkeypatch.setattr(pollux_fidelity, "simulate", simulate)
    clocks = {"perf_counter": lambda: float(next(clock)), "process_time": lambda: 0.0}
    monkeypatch.setattr(pollux_fidelity, "time", type("Clock", (), {k: staticmethod(f) for k, f in clocks.items()}))
    monkeypatch.setattr(sys, "argv", ["pollux_fidelity.py", "--seeds", str(len(jcts))])
    pollux_fidelity.main()
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("goal: average JCT within 5% of 2,446 s") and line.endswith(verdict), line


@pytest.mark.parametrize("seconds, verdict", [(0.01, "met"), (0.2, "MISSED")])
def test_ones_search_judges_its_target(monkeypatch, capsys, seconds, verdict):
    ones_search = script("ones_search")
    clock = iter(range(10_000))

    def generation(pop, rng, **kwargs):
        return pop, None

    monkeypatch.setattr(ones_search.search, "generation", generation)
    monkeypatch.setattr(ones_search, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: seconds * next(clock))}))
    monkeypatch.setattr(sys, "argv", ["ones_search.py"])
    ones_search.main()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("K = ")]
    assert len(lines) == 2 and all(line.endswith(f"(target: a median under 50 ms: {verdict})") for line in lines), lines


@pytest.mark.parametrize("seconds, verdict", [(0.5, "met"), (1.5, "MISSED")])
def test_pollux_search_judges_its_target(monkeypatch, capsys, seconds, verdict):
    pollux_search = script("pollux_search")
    monkeypatch.setattr(pollux_search, "ours", lambda *args, **kwargs: (seconds, seconds / 2))
    monkeypatch.setattr(sys, "argv", ["pollux_search.py", "--repeat", "1"])
    pollux_search.main()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(f"(target: under 1000 ms wall: {verdict})" in line for line in lines), lines


def test_a_reproduction_figure_is_written_whole_or_with_a_message(tmp_path):
    from roundhouse.errors import UsageError
    from roundhouse.tools.reproductions._runs import save_figure

    good = save_figure(tmp_path / "f.png", lambda ax: ax.plot([0, 1], [1, 0]))
    assert good.read_bytes().startswith(b"\x89PNG")
    (tmp_path / "taken").mkdir()  # (a folder where the figure goes: the write fails)
    with pytest.raises(UsageError, match="taken"):
        save_figure(tmp_path / "taken", lambda ax: ax.plot([0, 1], [1, 0]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "taken"]  # (no part left)
