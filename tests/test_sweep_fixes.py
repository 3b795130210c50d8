"""Sweeps: what a run's key covers (elastic profiles, cluster files, element files edited in a
long-lived process), what a resumed or interrupted sweep says and leaves, and runs whose
element calls sys.exit() or never ends, on local worker processes and on Dask."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import polars as pl
import pytest

from roundhouse.runtime import registry
from roundhouse.runtime.dsl.loader import element_file_digest, load_element_file
from roundhouse.runtime.sweep import RunSpec, compile_spec, record_run
from roundhouse.runtime.sweep_exec import LocalExecutor, Task
from roundhouse.tools.cli import main
from tests.conftest import REPO
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
    assert row["error"].endswith("its start raised SystemExit: 7")
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
