"""Sweeps: what a run's key covers (elastic profiles, cluster files, element files edited in a
long-lived process, the modules they import, the overrides in effect), what a resumed or
interrupted sweep says and leaves, runs whose element calls sys.exit() or never ends, files
named relative to the sweep's folder, the metrics sink compared, and Dask addresses that
cannot work, on local worker processes and on Dask."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import Override
from roundhouse.runtime.dsl.loader import element_file_digest, load_element_file
from roundhouse.runtime.sweep import RunSpec, compile_spec, record_run
from roundhouse.runtime.sweep_exec import LocalExecutor, Task
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails
from tests.test_sweep_dask import TRACE, probe_graph, stored, sweep_args

# An element whose tick misbehaves on demand, and notes when it starts and leaves a spin.
ELEMENT = '''
import sys
import time

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking
import attrs


@element
class Odd(Element):
    """Rank jobs in pool order; misbehave in round 2 as `mode` says.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs in pool order.
    Arguments:
        mode: none, sysexit, spin or raise.
        log: a file noting a spin's start and end.
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    mode: str = attrs.field(default="none")
    log: str = attrs.field(default="")

    def start(self, ctx):
        self.n = 0

    def tick(self, ctx, active):
        self.n += 1
        if self.n == 2 and self.mode == "sysexit":
            sys.exit(5)
        if self.n == 2 and self.mode == "raise":
            raise ValueError("MARK")
        if self.n == 2 and self.mode == "spin":
            with open(self.log, "a") as f:
                f.write("spinning\\n")
            try:
                while True:
                    pass
            finally:
                with open(self.log, "a") as f:
                    f.write("left\\n")
        return Ranking(active.rows, active.gpus, backfill=False)
'''


def odd_graph(folder: Path, element: str = ELEMENT, extra: str = "") -> Path:
    (folder / "odd.py").write_text(element)
    graph = folder / "g.sched"
    graph.write_text(
        f'require "odd.py";\nround = 1min;\ncluster = "2x4:V100";\n{extra}'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=5);\n'
        "arrivals -> AcceptAll -> JobPool -> odd :: Odd -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph


@pytest.fixture(autouse=True)
def own_registry():
    """Each test's element file is its own: forget it after the test (another defines Odd too)."""
    with registry.scope():
        yield


# --- what a run's key covers ------------------------------------------------------------------


def test_graphs_with_a_built_in_elastic_profile_have_keys_and_sweep(tmp_path, capsys):
    keys = {name: compile_spec(RunSpec(str(REPO / "graphs" / f"{name}.sched")))[1] for name in ("ones", "pollux")}
    assert keys["ones"] != keys["pollux"]
    out = tmp_path / "out"
    args = ["sweep", str(REPO / "graphs" / "ones.sched"), "--vary", "round=5min", "--until", "10min", "--workers", "1"]
    assert main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    assert set(stored(out)["status"]) == {"ok"}


def test_a_folder_elastic_profile_is_keyed_by_its_files(tmp_path):
    profile = tmp_path / "apps"
    (profile / "app").mkdir(parents=True)
    (profile / "app" / "placements.csv").write_text("a\n1\n")
    graph = odd_graph(tmp_path, extra='elastic_profile = "apps";\n')
    spec = RunSpec(str(graph))
    first = compile_spec(spec)[1]
    assert compile_spec(spec)[1] == first
    (profile / "app" / "placements.csv").write_text("a\n2\n")
    second = compile_spec(spec)[1]
    assert second != first
    (profile / "app" / "placements.csv").rename(profile / "app" / "other.csv")
    assert compile_spec(spec)[1] not in (first, second)


def test_a_cluster_file_given_on_the_command_line_is_keyed_where_the_run_reads_it(tmp_path, monkeypatch):
    def cluster_file(path: Path, gpus: int) -> None:
        path.write_text(f'name = "c"\n[[group]]\nnodes = 1\ngpus_per_node = {gpus}\ngpu_type = "V100"\n')

    (tmp_path / "g").mkdir()
    graph = odd_graph(tmp_path / "g")
    cluster_file(tmp_path / "g" / "c.toml", 2)  # beside the graph: not what --cluster c.toml reads
    cluster_file(tmp_path / "c.toml", 1)
    monkeypatch.chdir(tmp_path)
    spec = RunSpec(str(graph), cluster="c.toml")
    first = compile_spec(spec)[1]
    cluster_file(tmp_path / "g" / "c.toml", 8)
    assert compile_spec(spec)[1] == first
    cluster_file(tmp_path / "c.toml", 4)
    assert compile_spec(spec)[1] != first


def test_an_element_file_edited_after_its_import_is_imported_again(tmp_path):
    """A long-lived worker (Dask's) runs what the file says now, under the key of what it says."""
    graph = odd_graph(tmp_path)
    spec = RunSpec(str(graph))
    with registry.scope():
        key = compile_spec(spec)[1]
        assert record_run(spec, key)["status"] == "ok"
        digest = element_file_digest(tmp_path / "odd.py")
        assert digest is not None
        (tmp_path / "odd.py").write_text(ELEMENT.replace('self.mode == "raise"', "True"))
        _, edited = compile_spec(spec)
        assert edited != key
        assert element_file_digest(tmp_path / "odd.py") not in (None, digest)
        row = record_run(spec, edited)
        assert row["status"] == "error" and "ValueError: MARK" in row["error"]
        # A broken edit is reported, and the file is tried again once fixed.
        (tmp_path / "odd.py").write_text(ELEMENT + "\n(\n")
        assert "SyntaxError" in load_element_file(tmp_path / "odd.py")
        (tmp_path / "odd.py").write_text(ELEMENT)
        assert compile_spec(spec)[1] == key
        assert record_run(spec, key)["status"] == "ok"


# --- the command line ---------------------------------------------------------------------------


def test_cluster_given_both_fixed_and_varied_is_refused(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", 'cluster="1x1:V100","1x4:V100"', "--cluster", "1x2:V100", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--cluster 1x2:V100 and --vary cluster" in err and "both fixed and varied" in err
    assert not out.exists()


def test_a_bad_grid_value_leaves_no_new_folder(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    out = tmp_path / "new"
    assert main(["sweep", str(graph), "--vary", "round=5min,soon", "--out", str(out)]) == 2
    assert "--vary" in capsys.readouterr().err
    assert not out.exists()


def test_runs_stored_by_a_sweep_with_other_names_are_described_by_this_one(tmp_path, capsys):
    graph, _ = probe_graph(tmp_path)
    out = tmp_path / "out"
    first = ["sweep", str(graph), "--vary", "probe.fail_at=-1", "--vary", "probe.point=1", "--out", str(out), "--workers", "2"]
    assert main(first) == 0
    second = sweep_args(graph, out, [1, 2], "--set", "probe.fail_at=-1", "--seeds", "2", "--workers", "2")
    assert main(second) == 0
    assert "1 of 4 runs already in" in capsys.readouterr().err
    points = pl.read_csv(out / "points.csv")
    assert points["probe.point"].to_list() == [1, 2] and points["runs"].to_list() == [2, 2]
    summary = pl.read_csv(out / "summary.csv")
    assert "probe.fail_at" not in summary.columns
    assert summary["point"].to_list() == ["probe.point=1", "probe.point=1", "probe.point=2", "probe.point=2"]


class _StopsAfterOne(LocalExecutor):
    """Local workers, as if Ctrl-C came once the first run finished."""

    def run(self, tasks, timeout=None):
        runs = super().run(tasks, timeout)
        try:
            yield next(runs)
            raise KeyboardInterrupt
        finally:
            runs.close()


def test_an_interrupted_sweep_says_what_it_kept_and_leaves_no_earlier_tables(tmp_path, capsys, monkeypatch):
    graph, _ = probe_graph(tmp_path)
    out = tmp_path / "out"
    assert main(sweep_args(graph, out, [1], "--workers", "1")) == 0
    assert (out / "summary.csv").exists() and (out / "points.csv").exists()
    capsys.readouterr()
    monkeypatch.setattr("roundhouse.tools.sweep_cmd.LocalExecutor", _StopsAfterOne)
    assert main(sweep_args(graph, out, [1, 2, 3, 4], "--workers", "1")) == 130
    err = capsys.readouterr().err
    assert f"2 of 4 runs kept in {out / 'results'}; run the same command to resume" in err
    assert err.rstrip().endswith("interrupted")
    # The earlier sweep's tables would call this store complete.
    assert not (out / "summary.csv").exists() and not (out / "points.csv").exists()
    assert stored(out).height == 2


def test_local_workers_start_with_ctrl_c_ignored_and_the_sweep_keeps_its_own_handler():
    executor = LocalExecutor(1)
    before = signal.getsignal(signal.SIGINT)
    slot = executor._start(None)
    try:
        status = Path(f"/proc/{slot.process.pid}/status").read_text()
        ignored = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigIgn:")), 16)
        assert ignored & (1 << (signal.SIGINT - 1))  # from its first instruction: no traceback while it imports
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        slot.conn.send(None)
        slot.process.join(timeout=10)
        if slot.process.is_alive():
            slot.process.kill()
            slot.process.join()


# --- sys.exit() in an element ------------------------------------------------------------------


def test_an_element_calling_sys_exit_fails_its_run_and_not_its_worker(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(graph), "--vary", 'odd.mode="sysexit","none"', "--workers", "1", "--out", str(out)]) == 1
    frame = stored(out)
    errors = dict(zip(frame["odd.mode"], frame["error"]))
    assert "its tick raised SystemExit: 5" in errors['"sysexit"']
    assert errors['"none"'] is None
    assert len(set(frame["worker"])) == 1  # the same worker ran both
    capsys.readouterr()
    assert main(["run", str(graph), "--set", 'odd.mode="sysexit"']) == 2
    assert "its tick raised SystemExit: 5" in capsys.readouterr().err


def test_sys_exit_outside_a_tick_is_the_elements_failure(tmp_path, capsys):
    graph = odd_graph(tmp_path, ELEMENT.replace("self.n = 0", "self.n = 0\n        sys.exit(7)"))
    spec = RunSpec(str(graph))
    with registry.scope():
        row = record_run(spec, compile_spec(spec)[1])
    assert row["status"] == "error" and "element 'odd' (Odd" in row["error"]
    assert "its start raised SystemExit: 7, at " in row["error"] and row["error"].endswith("odd.py:35 (in start)")
    capsys.readouterr()
    assert main(["run", str(graph)]) == 2
    assert "its start raised SystemExit: 7" in capsys.readouterr().err


def test_a_worker_that_exits_by_itself_is_reported_with_its_own_exit_status(tmp_path):
    # Its pipe to the sweep closes a moment before it exits (as when Python shuts down).
    dies = "import os; os.closerange(3, 1024); time.sleep(0.3); os._exit(5)"
    graph = odd_graph(tmp_path, ELEMENT.replace("sys.exit(5)", dies))
    spec = RunSpec(str(graph), ('odd.mode="sysexit"',))
    with registry.scope():
        key = compile_spec(spec)[1]
    rows = list(LocalExecutor(1).run([Task(key, spec)]))
    assert [r["error"] for r in rows] == ["its worker process died (exit status 5)"]


# --- on Dask --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dask_folder(tmp_path_factory):
    """One folder for the element file of every Dask test: a worker lives through several tests,
    and two files defining one class would be refused there."""
    return tmp_path_factory.mktemp("dask")


@pytest.mark.slow
def test_dask_workers_run_an_element_file_as_it_is_now(dask_cluster, dask_folder, tmp_path, capsys):
    cluster, _ = dask_cluster
    graph = odd_graph(dask_folder)
    modes = 'odd.mode="none","a","b","c"'  # (more runs than workers: each worker imports the file)
    args = ["sweep", str(graph), "--vary", modes, "--dask", cluster.scheduler_address]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    (dask_folder / "odd.py").write_text(ELEMENT.replace('self.mode == "raise"', "True"))
    assert main([*args, "--out", str(tmp_path / "two")]) == 1
    frame = stored(tmp_path / "two")
    assert set(frame["status"]) == {"error"}
    assert all("ValueError: MARK" in e for e in frame["error"])
    capsys.readouterr()


@pytest.mark.slow
def test_dask_runs_under_way_stop_when_the_sweep_stops(dask_cluster, dask_folder):
    from roundhouse.runtime.sweep_exec import DaskExecutor

    cluster, _ = dask_cluster
    graph = odd_graph(dask_folder)
    log = dask_folder / "spin.log"
    specs = [RunSpec(str(graph), ('odd.mode="none"',)), RunSpec(str(graph), ('odd.mode="spin"', f'odd.log="{log}"'))]
    with registry.scope():
        tasks = [Task(compile_spec(s)[1], s) for s in specs]
    executor = DaskExecutor(cluster.scheduler_address)
    try:
        runs = executor.run(tasks, timeout=120)
        assert next(runs)["status"] == "ok"  # the quick run; the other spins
        deadline = time.monotonic() + 60
        while not (log.exists() and "spinning" in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "spinning" in log.read_text()
        runs.close()  # as Ctrl-C ends it
        deadline = time.monotonic() + 15
        while "left" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "left" in log.read_text()  # stopped long before its two-minute timeout
    finally:
        executor.close()


@pytest.mark.slow
def test_sys_exit_in_an_element_on_dask_kills_no_worker(dask_cluster, dask_folder, tmp_path):
    cluster, client = dask_cluster
    pids = set(client.run(os.getpid).values())
    graph = odd_graph(dask_folder)
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", 'odd.mode="sysexit"', "--dask", cluster.scheduler_address, "--out", str(out)]
    assert main(args) == 1
    (error,) = stored(out)["error"].to_list()
    assert "its tick raised SystemExit: 5" in error
    assert set(client.run(os.getpid).values()) == pids


def test_one_process_runs_graphs_whose_element_files_define_the_same_class(tmp_path):
    """As a Dask worker does across sweeps: each run's element classes are its own."""
    rows = []
    for folder, mode in (("a", "none"), ("b", "raise")):
        (tmp_path / folder).mkdir()
        text = ELEMENT.replace('default="none"', f'default="{mode}"')
        spec = RunSpec(str(odd_graph(tmp_path / folder, text)))
        with registry.scope():
            key = compile_spec(spec)[1]
        rows.append(record_run(spec, key))
    assert rows[0]["status"] == "ok", rows[0]
    assert rows[1]["status"] == "error" and "ValueError: MARK" in rows[1]["error"], rows[1]
    assert registry.get("Odd") is None  # nothing of theirs is left behind


# --- files named relative to the sweep's folder, on Dask ---------------------------------------


def head_of_trace(path: Path, jobs: int) -> Path:
    path.write_text("\n".join(TRACE.read_text().splitlines()[: jobs + 1]) + "\n")
    return path


@pytest.mark.slow
def test_relative_files_of_vary_and_set_are_read_by_dask_workers_elsewhere(dask_cluster, dask_folder, tmp_path, monkeypatch):
    cluster, _ = dask_cluster
    graph = odd_graph(dask_folder)
    head_of_trace(tmp_path / "a.csv", 3)
    head_of_trace(tmp_path / "b.csv", 4)
    (tmp_path / "c.toml").write_text('name = "c"\n[[group]]\nnodes = 1\ngpus_per_node = 4\ngpu_type = "V100"\n')
    monkeypatch.chdir(tmp_path)  # (the workers' current folder stays the one they started in)
    args = ["sweep", str(graph), "--vary", 'arrivals.path="a.csv","b.csv"', "--vary", 'cluster="c.toml","2x4:V100"']
    assert main([*args, "--set", "arrivals.jobs=3", "--dask", cluster.scheduler_address, "--out", "out"]) == 0
    frame = stored(tmp_path / "out")
    assert frame.height == 4 and set(frame["status"]) == {"ok"} and set(frame["jobs_finished"]) == {3}
    assert sorted(frame["cluster"].to_list()) == ['"2x4:V100"', '"2x4:V100"', '"c.toml"', '"c.toml"']


def test_a_workers_complaint_names_the_option_that_gave_the_value(tmp_path):
    graph = odd_graph(tmp_path)
    gone = tmp_path / "gone"
    for given, said in [
        (Override(f'arrivals.path="{gone}.csv"', flag="--vary"), f'--vary arrivals.path="{gone}.csv": '),
        (Override(f'cluster="{gone}.toml"', flag="--vary"), f"--vary cluster {gone}.toml: cannot read"),
        (Override(f'cluster="{gone}.toml"'), f"--set cluster {gone}.toml: cannot read"),
    ]:
        row = record_run(RunSpec(str(graph), (given,)), "key")
        assert row["status"] == "error" and row["error"].startswith(said), row["error"]


# --- a run's key: the overrides in effect, the modules an element file imports ------------------


def test_a_runs_key_is_that_of_the_overrides_in_effect(tmp_path, monkeypatch):
    graph = odd_graph(tmp_path)

    def key(*overrides):
        return compile_spec(RunSpec(str(graph), overrides))[1]

    assert key("round=5min", 'odd.mode="a"') == key('odd.mode="a"', "round=5min")
    assert key("round=1min", "round=5min") == key("round=5min") != key("round=1min")
    assert key("seed=5", "seed=6") == key("seed=6") != key("seed=5")
    assert key("seed=0") == key()  # the graph's own seed, given or not
    monkeypatch.chdir(TRACE.parent)
    assert key(f'arrivals.path="{TRACE.name}"') == key()  # the graph's own trace, named otherwise


def test_the_same_runs_asked_for_otherwise_are_not_run_again(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    out = tmp_path / "out"

    def sweep(*more: str) -> str:
        assert main(["sweep", str(graph), *more, "--workers", "1", "--out", str(out)]) == 0
        return capsys.readouterr().err

    sweep("--vary", "round=1min,2min", "--vary", 'odd.mode="none","a"')
    assert "4 of 4 runs already in" in sweep("--vary", 'odd.mode="none","a"', "--vary", "round=1min,2min")
    assert stored(out).height == 4
    sweep("--set", "round=3min", "--vary", "seed=0,1")
    assert "2 of 2 runs already in" in sweep("--set", "round=3min", "--seeds", "2")
    sweep("--set", "round=3min", "--set", "seed=5", "--seeds", "2")
    assert "4 of 7 runs already in" in sweep("--set", "round=3min", "--seeds", "7")
    frame = stored(out)
    assert frame.height == 4 + 7 and frame["key"].n_unique() == frame.height


HELPED = ELEMENT.replace(
    "import time\n",
    "import time\nsys.path.insert(0, __import__('os').path.dirname(__file__))\nimport sweepfix_helper\n",
).replace('self.mode == "raise"', 'sweepfix_helper.MODE == "raise"')


def test_a_module_an_element_file_imports_from_its_folder_is_in_the_key_and_runs_as_it_is_now(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "sweepfix_helper", raising=False)
    helper = tmp_path / "sweepfix_helper.py"
    helper.write_text('MODE = "none"\n')
    graph = odd_graph(tmp_path, HELPED)
    spec = RunSpec(str(graph))
    with registry.scope():  # (each run imports the element file afresh, as on a worker)
        key = compile_spec(spec)[1]
    assert record_run(spec, key)["status"] == "ok"
    helper.write_text('MODE = "raise"\n')
    with registry.scope():
        edited = compile_spec(spec)[1]
    assert edited != key
    row = record_run(spec, edited)  # (in this process, which imported the helper as it was)
    assert row["status"] == "error" and "ValueError: MARK" in row["error"], row["error"]
    monkeypatch.delitem(sys.modules, "sweepfix_helper", raising=False)


# --- the metrics sink compared ------------------------------------------------------------------


def test_a_graph_with_two_metrics_sinks_needs_sink(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    graph.write_text(
        graph.read_text().replace(
            "-> Launch -> JobMetrics;", "-> run :: Launch;\nrun -> few :: JobMetrics(track=0..1);\nrun -> all :: JobMetrics;"
        )
    )
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", "round=1min", "--workers", "1", "--out", str(out)]
    err = fails(capsys, *args)
    assert "2 JobMetrics elements (few, all)" in err and "--sink NAME" in err
    assert "'odd' is a Odd, not a JobMetrics" in fails(capsys, *args, "--sink", "odd")
    assert main([*args, "--sink", "few"]) == 0
    assert main([*args, "--sink", "all"]) == 0  # another result: not the one stored
    frame = stored(out)
    assert frame.height == 2 and frame["avg_responsiveness_s"].n_unique() == 2  # (the sinks track other jobs)
    (last,) = pl.read_csv(out / "summary.csv")["key"].to_list()
    assert frame.filter(pl.col("key") == last)["finished_at"].item() == frame["finished_at"].max()


# --- Dask addresses that cannot work ------------------------------------------------------------


def test_a_tls_address_without_dasks_tls_settings_is_refused_at_once(tmp_path):
    from roundhouse.runtime.sweep_exec import DaskExecutor

    started = time.monotonic()
    with pytest.raises(UsageError, match=r"--dask tls://127.0.0.1:1: a TLS connection needs Dask's TLS settings"):
        DaskExecutor("tls://127.0.0.1:1")
    gc.collect()  # (a client left half made would try to close for 20 s here)
    assert time.monotonic() - started < 10


def test_addresses_of_no_other_program_are_refused(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    assert "within one Python process only" in fails(capsys, "sweep", graph, "--vary", "round=1min", "--dask", "inproc://x")
    assert "ucx:// needs UCX" in fails(capsys, "sweep", graph, "--vary", "round=1min", "--dask", "ucx://127.0.0.1:1")


# --- what --out holds -------------------------------------------------------------------------


def test_out_whose_results_or_tables_are_in_the_way_is_refused_before_any_run(tmp_path, capsys):
    graph = odd_graph(tmp_path)
    args = ["sweep", str(graph), "--vary", "round=1min", "--workers", "1", "--out"]
    (tmp_path / "o3").mkdir()
    (tmp_path / "o3" / "results").write_text("")
    err = fails(capsys, *args, tmp_path / "o3")
    assert f"--out {tmp_path / 'o3'}: {tmp_path / 'o3' / 'results'} is a file" in err
    (tmp_path / "o4" / "points.csv").mkdir(parents=True)
    assert f"--out {tmp_path / 'o4' / 'points.csv'}: is a folder" in fails(capsys, *args, tmp_path / "o4")
    assert not (tmp_path / "o4" / "results").exists()


def test_a_damaged_result_file_is_named_on_one_line(tmp_path, capsys, monkeypatch):
    graph = odd_graph(tmp_path)
    out = tmp_path / ("a-long-folder-name-" * 4) / "out"
    (out / "results").mkdir(parents=True)
    damaged = out / "results" / ("0" * 64 + ".parquet")
    damaged.write_bytes(b"not parquet")
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["sweep", str(graph), "--vary", "round=1min", "--workers", "1", "--out", str(out)]) == 0
    assert f"warning: {damaged}: cannot be read (damaged?)" in capsys.readouterr().err
