"""The benchmark scripts: bad reference files and options refused with a message before anything
runs, help texts whole, targets judged only on the case they are set for, JCTs compared over the
same jobs, a warm-up run left untimed, and tables that keep their columns."""

from __future__ import annotations

import argparse
import importlib
import runpy
import subprocess
import sys
import types
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import REPO

BENCH = REPO / "benchmarks"
TRACE_NAME = "msr_seed0_0e4a51.trace"
RESULTS_NAME = "msr_0e4a51_36-36-36_results_all_policies.csv"


def script(name: str):
    """A benchmark script imported as a module (its folder first on the path, as when run)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def run(name: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=timeout,
    )


def refused(done: subprocess.CompletedProcess, status: int, *words: str) -> None:
    """The run ended with `status` and a message holding `words`, and no traceback."""
    assert done.returncode == status, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


# A small trace in Gavel's 10-column format (job type, command, working dir, steps argument,
# needs data dir, total steps, scale factor, priority weight, SLO, arrival), four jobs.
GAVEL_JOBS = [
    ("Transformer (batch size 128)", 400, 0.0),
    ("Recommendation (batch size 8192)", 300, 6.0),
    ("ResNet-18 (batch size 32)", 2000, 6.0),
    ("Transformer (batch size 256)", 300, 400.0),
]


def gavel_folder(folder: Path, results: str | bytes | None) -> Path:
    folder.mkdir(exist_ok=True)
    lines = [f"{model}\tpython3 train.py\t.\t-step\t1\t{steps}\t1\t1\t-1\t{arrival:f}" for model, steps, arrival in GAVEL_JOBS]
    (folder / TRACE_NAME).write_text("\n".join(lines) + "\n")
    if isinstance(results, bytes):
        (folder / RESULTS_NAME).write_bytes(results)
    elif results is not None:
        (folder / RESULTS_NAME).write_text(results)
    return folder


# --- Gavel's shared results, read before anything runs ---


@pytest.mark.parametrize(
    "results, what",
    [("a,b\n", "missing column(s) policy, job_id, jct_s"), (b"policy,job_id,jct_s\n\xff\xfe\n", "not UTF-8")],
    ids=["columns", "undecodable"],
)
def test_gavel_msr_refuses_a_bad_results_file_naming_it_before_any_run(tmp_path, results, what):
    data = gavel_folder(tmp_path / "data", results)
    done = run("gavel_msr", "--data", str(data))
    refused(done, 1, str(data / RESULTS_NAME), what)
    assert "case" not in done.stdout  # (no case ran: the table's header is not printed)


def test_gavel_msr_averages_ours_and_gavels_jct_over_the_same_jobs(tmp_path):
    """Gavel gives job 2 no JCT under FIFO: both averages are over jobs 0, 1 and 3, and the row
    says 3 of 4; under LAS all four are compared; Gavel has no `fifo_perf`, so ours is over all."""
    rows = ["policy,job_id,arrival_time_s,jct_s"]
    las = {0: 5000.0, 1: 4000.0, 2: 9000.0, 3: 7000.0}
    fifo = {0: 3000.0, 1: 6000.0, 2: None, 3: 12000.0}
    rows += [f"max_min_fairness_perf,{j},0,{t}" for j, t in las.items()]
    rows += [f"fifo,{j},0,{'' if t is None else t}" for j, t in fifo.items()]
    data = gavel_folder(tmp_path / "data", "\n".join(rows) + "\n")
    done = run("gavel_msr", "--data", str(data))
    assert done.returncode == 0, done.stderr
    lines = {line.split("  ")[0].strip(): line.split() for line in done.stdout.splitlines() if line.startswith("Gavel msr")}
    assert lines["Gavel msr 0e4a51, FIFO"][-1] == "3/4"
    assert float(lines["Gavel msr 0e4a51, FIFO"][-2]) == pytest.approx(7000.0)  # Gavel's, over its three
    assert lines["Gavel msr 0e4a51, LAS"][-1] == "4/4"
    assert float(lines["Gavel msr 0e4a51, LAS"][-2]) == pytest.approx(6250.0)
    assert lines["Gavel msr 0e4a51, FIFO, aware"][-2:] == ["all", "4"]


def test_same_jobs_jct_leaves_out_ours_for_a_job_gavel_gives_no_jct():
    gavel_msr = script("gavel_msr")
    ours = pl.DataFrame({"job_id": [0, 1, 2, 3], "jct_s": [10.0, 20.0, 1000.0, None]})
    theirs = pl.DataFrame({"job_id": [0, 1, 3], "gavel_jct_s": [11.0, 21.0, 31.0]})
    # Job 2: Gavel has no JCT for it; job 3: we did not finish it.
    assert gavel_msr.same_jobs_jct(ours, theirs) == (15.0, 16.0, 2)


def test_gavel_job_lines_are_read_from_gavels_output():
    gavel_msr = script("gavel_msr")
    text = "Job completion times:\nJob 0: 12.500\nJob 3 (high priority): 40.000\nAverage job completion time: 26.250 seconds\n"
    assert gavel_msr.GAVEL_JOB_JCT.findall(text) == [("0", "12.500"), ("3", "40.000")]


def test_gavel_solvers_names_the_missing_trace_by_its_absolute_path(tmp_path, monkeypatch, capsys):
    gavel_solvers = script("gavel_solvers")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gavel_solvers, "SHARED", tmp_path / "nowhere")
    gavel_solvers.whole_simulation()
    assert f"({tmp_path / 'nowhere' / TRACE_NAME} not found)" in capsys.readouterr().out


def test_gavel_solvers_refuses_a_bad_results_file_naming_it(tmp_path, monkeypatch):
    gavel_solvers = script("gavel_solvers")
    data = gavel_folder(tmp_path / "data", "a,b\n")
    monkeypatch.setattr(gavel_solvers, "SHARED", data)
    with pytest.raises(SystemExit) as ended:
        gavel_solvers.whole_simulation()
    assert str(data / RESULTS_NAME) in str(ended.value.code)


def test_gavel_solvers_table_keeps_its_columns(capsys):
    """An interpolated figure of Gavel's (64 jobs) stays in its column: the verdict starts where
    the header's `target` does."""
    gavel_solvers = script("gavel_solvers")
    gavel_solvers.scaling([32, 64], 1, 0)
    lines = capsys.readouterr().out.splitlines()
    header = lines[1]
    target = header.index("target")
    rows = [line for line in lines[2:] if "max-min" in line]
    assert any("(interpolated)" in line for line in rows)
    for line in rows:
        assert line[target - 1] == " " and line[target:].startswith("<="), line
    assert len("no result within minutes") < gavel_solvers.GAVEL_WIDTH + 1


# --- derive_communication.py ---


def test_derive_communication_names_an_undecodable_workload_file(tmp_path):
    workloads = tmp_path / "wl"
    workloads.mkdir()
    bad = workloads / "vgg11_B256_astra-sim.csv"
    bad.write_bytes(b"layer\tALLREDUCE\t\xff\xfe\n")
    out = tmp_path / "communication.csv"
    done = run("derive_communication", "--workloads", str(workloads), "--out", str(out))
    refused(done, 1, str(bad), "not UTF-8")
    assert not out.exists()


# --- pollux_search.py ---


def test_pollux_search_refuses_a_folder_that_is_not_pollux_s(tmp_path):
    refused(run("pollux_search", "--pollux", str(tmp_path / "nonexistent")), 2, "--pollux", "no such folder")
    (tmp_path / "pollux.py").write_text("")
    refused(run("pollux_search", "--pollux", str(tmp_path)), 2, "no utils.py there")


def pollux_folder(folder: Path, pollux: str) -> Path:
    folder.mkdir()
    (folder / "pollux.py").write_text(pollux)
    (folder / "utils.py").write_text(
        "class JobInfo:\n    def __init__(self, **fields):\n        pass\n\n"
        "class NodeInfo:\n    def __init__(self, resources, preemptible):\n        pass\n"
    )
    return folder


def test_pollux_search_reports_a_missing_module_on_each_line(tmp_path):
    folder = pollux_folder(tmp_path / "sim", "import pymoo_not_installed_here\n")
    done = run("pollux_search", "--pollux", str(folder), "--repeat", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2
    assert all("Pollux's own search cannot run here (No module named 'pymoo_not_installed_here')" in line for line in lines)


def test_pollux_search_says_where_pollux_s_own_code_failed(tmp_path):
    folder = pollux_folder(
        tmp_path / "sim",
        "class PolluxPolicy:\n    def optimize(self, jobs, nodes, base, template):\n        return {}['missing']\n",
    )
    done = run("pollux_search", "--pollux", str(folder), "--repeat", "1")
    refused(done, 1, "PolluxPolicy.optimize raised KeyError", f"{folder / 'pollux.py'}:3")
    assert "ours" in done.stdout  # (our figures for the case were printed first)


# --- options checked before anything runs, or refused when they have no effect ---


def test_gavel_msr_checks_its_gavel_options_first(tmp_path):
    refused(run("gavel_msr", "--gavel-python", sys.executable), 2, "--gavel-python has no effect without --gavel")
    checkout = tmp_path / "gavel"
    (checkout / "scripts" / "drivers").mkdir(parents=True)
    (checkout / "scripts" / "drivers" / "simulate_scheduler_with_trace.py").write_text("")
    data = gavel_folder(tmp_path / "data", None)
    done = run("gavel_msr", "--data", str(data), "--gavel", str(checkout), "--gavel-python", str(tmp_path / "no" / "python"))
    refused(done, 2, f"--gavel-python {tmp_path / 'no' / 'python'}: no such file")
    assert done.stdout == ""  # (no case ran first)


def test_scale_refuses_alibaba_options_without_effect(tmp_path):
    refused(run("scale", "--alibaba-python", sys.executable), 2, "--alibaba-python has no effect without --alibaba")
    simulator = tmp_path / "simulator"
    simulator.mkdir()
    for name in ("simulator.py", "cluster.py", "scheduler.py"):
        (simulator / name).write_text("")
    refused(run("scale", "--only", "active-1k", "--alibaba", str(simulator)), 2, "--alibaba has no effect")
    refused(
        run("scale", "--only", "alibaba-fifo", "--alibaba", str(simulator), "--alibaba-python", str(tmp_path / "python")),
        2,
        "--alibaba-python",
        "no such file",
    )


def test_program_problem():
    bench_common = script("bench_common")
    assert bench_common.program_problem(sys.executable) is None
    assert bench_common.program_problem("/nonexistent/python") == "no such file"
    assert bench_common.program_problem(str(BENCH)) == "a folder, not a program"
    assert bench_common.program_problem(str(BENCH / "bench_common.py")) == "not executable"
    assert bench_common.program_problem("surely-no-such-program-here") == "no such program on PATH"


# --- help texts ---

SCRIPTS = [
    "dally_batch",
    "derive_communication",
    "engine_las",
    "explain_cost",
    "fork",
    "gavel_msr",
    "gavel_solvers",
    "lease_check",
    "live_scale",
    "ones_search",
    "policies",
    "pollux_fidelity",
    "pollux_search",
    "scale",
    "scheduler_messages",
    "sweep_local",
]


class _Parsed(Exception):
    pass


def parser_of(name: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser the script builds, caught when it parses its arguments."""
    caught = {}

    def parse_args(self, *args, **kwargs):
        caught["parser"] = self
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    monkeypatch.syspath_prepend(str(BENCH))
    with pytest.raises(_Parsed):
        runpy.run_path(str(BENCH / f"{name}.py"), run_name="__main__")
    return caught["parser"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_gives_the_whole_first_paragraph_and_every_option_a_help(name, monkeypatch):
    parser = parser_of(name, monkeypatch)
    doc = (BENCH / f"{name}.py").read_text().split('"""')[1]
    first = " ".join(doc.strip().split("\n\n")[0].split())
    assert parser.description == first
    assert parser.description.endswith((".", ")"))
    for action in parser._actions:
        if action.help != argparse.SUPPRESS:
            assert action.help, f"{name}: {action.option_strings} has no help"


def test_derive_communication_help_says_the_default_out_overwrites_the_shipped_profile(monkeypatch):
    out = next(a for a in parser_of("derive_communication", monkeypatch)._actions if "--out" in a.option_strings)
    assert "communication.csv" in out.help and "overwritten" in out.help


# --- targets judged only on their own case ---


def test_fork_judges_its_target_only_on_the_target_s_world(monkeypatch, capsys):
    fork = script("fork")
    monkeypatch.setattr(sys, "argv", ["fork.py", "--jobs", "60", "--forks", "2"])
    fork.main()
    out = capsys.readouterr().out
    assert "met" not in out and "the target, under 50 ms, is for the 10,000-job world" in out
    monkeypatch.setattr(fork, "TARGET_JOBS", 60)  # the same world, now the target's size
    fork.main()
    assert "target: a fork of the 60-job world under 50 ms:" in capsys.readouterr().out


def test_explain_cost_judges_its_target_only_on_the_target_s_case(monkeypatch, capsys):
    explain_cost = script("explain_cost")
    monkeypatch.setattr(sys, "argv", ["explain_cost.py", "--jobs", "30", "--repeat", "1"])
    explain_cost.main()
    out = capsys.readouterr().out
    assert "met" not in out and "MISSED" not in out
    assert out.count("the target, under 15%, is for 10,000 jobs") == 2  # (CPU and wall)
    monkeypatch.setattr(explain_cost, "TARGET_JOBS", 30)
    explain_cost.main()
    out = capsys.readouterr().out
    assert out.count("target: under 15%: met") + out.count("target: under 15%: MISSED") == 2


def test_explain_cost_times_no_run_before_an_untimed_one(monkeypatch):
    """The first run (slow here, as a process's first run is) is not among the timed ones."""
    explain_cost = script("explain_cost")
    calls = []
    clock = [0.0]  # (a clock of our own: each run takes the seconds it is given)

    def fake_simulate(graph, explain=False):
        calls.append(explain)
        clock[0] += 100.0 if len(calls) == 1 else 1.0
        return "result"

    monkeypatch.setattr(explain_cost, "simulate", fake_simulate)
    monkeypatch.setattr(explain_cost, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], process_time=lambda: clock[0]))
    walls, cpus, result = explain_cost.measure("graph", 2)
    assert len(calls) == 5 and result == "result"
    assert walls[False] + walls[True] == [1.0] * 4 and cpus[False] + cpus[True] == [1.0] * 4


# --- the live benchmarks ---


def test_barrier_returns_once_the_scheduler_handled_everything_sent(tmp_path):
    """Many messages, then the barrier: the scheduler has counted every one of them by then
    (its count covers every frame received: ours, and the one status poll)."""
    live_common = script("live_common")
    with live_common.running_scheduler(2, 1) as cluster:
        agents = live_common.LoadAgents(cluster.address, 2, 1)
        try:
            with live_common.submitter(cluster.address) as client:
                live_common.wait_until(lambda: client.status()["nodes_online"] == 2, 60, agents.serve)
                agents.barrier(60)
                before, sent = client.status()["messages_in"], agents.sent
                for k in range(3000):
                    agents.send(k % 2, "heartbeat", running=[])
                agents.barrier(60)
                after = client.status()["messages_in"]
                # (heartbeats the agents sent while the barrier waited may not be counted yet)
                assert after - before >= agents.covered - sent + 1
        finally:
            agents.close()


def test_lease_check_says_one_agent(tmp_path):
    done = run("lease_check", "--max", "1", "--seconds", "0.2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 job running on 1 agent;" in done.stdout
    assert script("bench_common").plural(4, "agent") == "4 agents"


# --- scale.py's table ---


def test_scale_table_keeps_its_columns(monkeypatch, capsys):
    """The longest case description (an Alibaba-shape case's) stays in its column: every row's
    wall time ends where the header's `wall s` does."""
    scale = script("scale")

    def fake_run_case(name, folder, skip):
        return dict(
            name=name, wall_s=1.25, rounds=100, skipped=1, passed=0, in_system=3.0, peak_rss_mb=100.0,
            phases_s={}, phases_peak_mb={}, avg_jct_h=1.0, generate_s=0.0,
        )  # fmt: skip

    monkeypatch.setattr(scale, "run_case", fake_run_case)
    # (A script's own process handles SIGTERM and compiles the package; the test's must not.)
    monkeypatch.setattr(scale, "exit_on_terminate", lambda: None)
    monkeypatch.setattr(scale, "compile_bytecode", lambda: None)
    monkeypatch.setattr(sys, "argv", ["scale.py", "--only", "alibaba-fifo", "--only", "active-1k"])
    scale.main()
    lines = capsys.readouterr().out.splitlines()
    end = lines[0].index("wall s") + len("wall s")
    rows = [line for line in lines[1:3]]
    assert any(line.startswith("Alibaba's shape") for line in rows)
    for line in rows:
        assert line[:end].endswith("1.25") and line[end] == " ", line


# --- derive_communication.py: workloads whose sizes give no scale ---


def test_derive_communication_names_a_workload_whose_sizes_give_no_scale(tmp_path):
    derive = script("derive_communication")
    for filename in {f for _, f, _ in derive.TABLE_I.values()}:
        # Every layer all-reduces nothing: no finite, positive scale fits Table I's shares.
        (tmp_path / filename).write_text("layer\tALLREDUCE\t0\n" * 3)
    with pytest.raises(SystemExit) as stop:
        derive.derive(tmp_path)
    message = str(stop.value)
    assert message.startswith(f"error: {tmp_path / derive.TABLE_I['VGG11'][1]}: VGG11: ") and "Traceback" not in message


# --- bench_common.compile_bytecode: start-up timed as an installed package's ---


def test_the_package_is_compiled_to_bytecode_before_command_line_runs_are_timed():
    import importlib.util

    engine = REPO / "runtime" / "engine.py"
    cached = Path(importlib.util.cache_from_source(str(engine)))
    cached.unlink(missing_ok=True)
    script("bench_common").compile_bytecode()
    assert cached.is_file() and cached.stat().st_size > 0
    # (what this Python reads at its next start instead of compiling the source again)
    assert cached.read_bytes()[:4] == importlib.util.MAGIC_NUMBER


def test_scale_profiled_case_runs_a_gavel_format_trace_of_profiled_models(tmp_path):
    """scale.py's profiled case generates its jobs in Gavel's format (models whose rates come
    from the throughput profile, not durations), and its graph runs them: here 200 of them."""
    from roundhouse.tools.cli import main

    scale = script("scale")
    group, _, _, rate, cluster, policy, placer, how, _ = scale.CASES["profiled-100k"]
    assert group == "profiled" and how == "cli"
    scale.generate_trace(tmp_path, 200, rate, profiled=True)
    trace = scale.trace_path(tmp_path, 200, rate, profiled=True)
    first = trace.read_text().splitlines()[0].split("\t")
    assert trace.suffix == ".trace" and len(first) == 10 and "(batch size" in first[0]  # (Gavel's job type)
    graph = tmp_path / "profiled.sched"
    graph.write_text(scale.graph_text(trace, cluster, policy, placer, skip=True))
    assert main(["run", str(graph), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    jobs = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert len(jobs) == 1 + 200
