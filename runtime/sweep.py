"""Many simulations at once: one process per run, as many at a time as there are cores.

A sweep is a list of RunSpecs (a graph file, `--set` overrides, a trace file for its
TraceSources, a cluster, a time limit and labels to carry along). Each run compiles its graph
afresh, so runs share nothing; results come back in the order of the specs, whatever order
they finish in.

`roundhouse sweep` goes further (runtime/sweep_exec.py): each run has a key, a content hash of
everything its result depends on (`run_key`), and is recorded as one row whatever happens to it
(`record_run`), so that results can be stored as they come and a sweep resumed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import polars as pl

from roundhouse.errors import ERROR_FORM, RoundhouseError, UsageError, shown_text
from roundhouse.runtime import registry
from roundhouse.runtime.cluster import names_a_file, spec_file
from roundhouse.runtime.run_watchdog import RunStopped, RunTimeout, Watchdog
from roundhouse.runtime.settings import BUILT_IN_ELASTIC
from roundhouse.runtime.user_modules import file_digest, forget_changed_modules, helper_modules

if TYPE_CHECKING:
    from roundhouse.runtime.compiler import Override

# The sink whose report has a per-run "summary" and a "jobs" table; a sweep compares runs by it.
METRICS_SINK = "JobMetrics"


@attrs.frozen
class RunSpec:
    """One run: `overrides`, as texts (`--set` ones) or Overrides (which name the option that
    gave them in messages); `trace`, a trace file (by its whole path: a Dask worker's current
    folder is not the sweep's) to read in place of every TraceSource's own, as `--trace` does;
    `sink`, the metrics sink whose summary is the run's result (None: the graph's only one);
    `fixed`, what the run was given for every run of its sweep (`--set`, `--cluster`, `--trace`:
    the names they set and their values as given), recorded with it to label it truly."""

    graph: str
    overrides: tuple[str | Override, ...] = ()
    cluster: str | None = None
    until: float | None = None
    labels: dict[str, Any] = attrs.field(factory=dict)
    trace: str | None = None
    sink: str | None = None
    fixed: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class RunOutcome:
    spec: RunSpec
    rounds: int
    wall_s: float
    reports: dict[str, dict]

    def summary(self, sink: str | None = None) -> dict:
        """The (named or only) metrics sink's summary, with the run's labels."""
        name = sink or self._sink_with("summary")
        return {**self.spec.labels, **self.reports[name]["summary"]}

    def jobs(self, sink: str | None = None) -> pl.DataFrame:
        name = sink or self._sink_with("jobs")
        frame = self.reports[name]["jobs"]
        return frame.with_columns(**{k: pl.lit(v) for k, v in self.spec.labels.items()})

    def _sink_with(self, key: str) -> str:
        name = next((n for n, r in self.reports.items() if key in r), None)
        if name is None:
            raise RoundhouseError(f"{self.spec.graph}: no sink reported '{key}' (a sweep needs a {METRICS_SINK} element)")
        return name


def check_sweepable(graph, sink: str | None = None) -> None:
    """Refuse, before running anything, a graph whose runs would report nothing to compare, or
    would be compared by a metrics sink picked silently among several (`sink`: the one named)."""
    sinks = [el.name for el in graph.by_class(METRICS_SINK)]
    listed = ", ".join(sinks) or "none"
    if sink is not None:
        if sink not in graph.elements:
            raise UsageError(f"--sink {sink}: the graph has no element '{sink}' (its {METRICS_SINK} elements: {listed})")
        if sink not in sinks:
            kind = type(graph.elements[sink]).__name__
            raise UsageError(f"--sink {sink}: '{sink}' is a {kind}, not a {METRICS_SINK} (its {METRICS_SINK} elements: {listed})")
        return
    if not sinks:
        raise RoundhouseError(
            f"{graph.path}: the graph has no {METRICS_SINK} element, so its runs would report nothing to compare; "
            f"add e.g. 'report :: {METRICS_SINK};' after the launcher"
        )
    if len(sinks) > 1:
        raise UsageError(
            f"{graph.path}: the graph has {len(sinks)} {METRICS_SINK} elements ({listed}); "
            f"give --sink NAME to say which one's summary the sweep compares runs by"
        )


def run_one(spec: RunSpec) -> RunOutcome:
    from roundhouse.runtime.simulate import simulate

    graph, _ = _compile(spec)
    result = simulate(graph, spec.cluster, until=spec.until)
    return RunOutcome(spec, result.rounds, result.wall_s, result.reports)


def run_all(specs: list[RunSpec], workers: int | None = None) -> list[RunOutcome]:
    """Run every spec, `workers` at a time in worker processes, and return their outcomes in
    the order of the specs; a run's exception is raised here. Interrupted (Ctrl-C, or SIGTERM
    as the command line raises it), it stops at once: its worker processes are ended, not
    waited for, and the interrupt is raised on."""
    workers = workers or os.cpu_count() or 1
    if workers == 1 or len(specs) <= 1:
        return [run_one(s) for s in specs]
    # Fresh interpreters, not forks: forking a process whose polars thread pool has started can
    # deadlock the child. They ignore Ctrl-C (which reaches the whole process group): a worker
    # would take it for its run's failure, send it back and go on to its next run, while this
    # process waited for it; this process ends them instead.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(specs)), mp_context=context, initializer=_pool_worker_start, initargs=(os.getpid(),)
    )
    try:
        # (The workers start as runs are handed out: a new interpreter takes an ignored SIGINT
        # as ignored from its first instruction, before it could ignore it itself.)
        with _interrupts_ignored():
            futures = [pool.submit(run_one, spec) for spec in specs]
        outcomes = [future.result() for future in futures]
    except BaseException:
        _end_pool(pool)
        raise
    pool.shutdown(wait=True)
    return outcomes


def _pool_worker_start(parent: int) -> None:
    """A `run_all` worker ignores Ctrl-C, and ends when the process that started it is gone."""
    from roundhouse.runtime.sweep_exec import _watch_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """SIGINT ignored while this lasts (in the main thread only, where signals are set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# How long an ended worker process may take to go before it is killed.
_END_GRACE_S = 1.0


def _end_pool(pool: ProcessPoolExecutor) -> None:
    """Stop `pool` without waiting for its runs: runs not started are dropped, and its worker
    processes are ended (terminated, then killed if they linger). (Before Python 3.14's
    `terminate_workers`, a ProcessPoolExecutor's processes are reached only by its `_processes`.)"""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    deadline = time.monotonic() + _END_GRACE_S
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()


def summaries(outcomes: list[RunOutcome], sink: str | None = None) -> pl.DataFrame:
    return pl.DataFrame([o.summary(sink) for o in outcomes])


# --- runs of a sweep: keyed by their inputs, timed out, recorded whatever happens -------------

# Bump when what goes into a run's key changes, so that old results are not taken for new ones.
# (Not bumped when overrides began to be keyed by their values as compiled: a value written the
# usual way keeps the text it had, so its key is as it was; one written otherwise, `300s` for
# `5min`, gets a new key, whose run is done again once. No old key can name another value.)
KEY_SCHEME = 2


def _graph_files(flat) -> list[str]:
    """The `.sched` files a graph is read from and the Python files they require, in load order."""
    from roundhouse.runtime.dsl import ast
    from roundhouse.runtime.dsl.loader import read_source
    from roundhouse.runtime.dsl.parser import parse

    files: list[str] = []
    for path in flat.files:
        files.append(path)
        for st in parse(read_source(Path(path)), path).statements:
            if isinstance(st, ast.Require):
                files.append(str(Path(path).parent / st.path))
    return files


def _source_digest(path: str) -> str:
    """A graph file's digest; for a required Python file, that of the text this process
    imported (which a long-lived worker may have imported before the file changed)."""
    from roundhouse.runtime.dsl.loader import element_file_digest

    imported = element_file_digest(path) if path.endswith(".py") else None
    return imported or file_digest(path)


def _folder_digest(folder: Path) -> str:
    """A folder's files: their paths within it, in order, and their contents."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_digest(path)}\0".encode())
    return digest.hexdigest()


def _cluster_identity(graph, cluster: str | None) -> str:
    """The cluster a run uses, as text: a spec file's contents (by digest), else the shorthand.
    The file is found as `load_cluster` finds it: a spec written in the graph relative to the
    graph's folder, one given with --cluster, --set or --vary relative to the current folder."""
    spec = cluster if cluster is not None else graph.settings.cluster
    if spec is None:
        return ""
    if cluster is None and graph.setting_locations.get("cluster") is not None:
        file = spec_file(spec, Path(graph.path).parent)
        where = "setting 'cluster'"
    else:
        text = spec.strip()
        file = Path(text) if text.endswith(".toml") or names_a_file(text) else None
        where = "--cluster" if cluster is not None else graph.setting_flags.get("cluster", "--set cluster")
    if file is None:
        return "spec:" + spec
    try:
        return "file:" + file_digest(file)
    except OSError as err:
        raise RoundhouseError(f"{where} {spec}: cannot read {file.resolve()}: {err.strerror or err}") from None


def _elastic_identity(graph) -> str:
    """The elastic profile a run uses, found as `load_elastic` finds it: a folder's files, or a
    built-in profile by its name (its data ships with this version of Roundhouse)."""
    from roundhouse import __version__

    path = Path(graph.settings.elastic_profile)
    name = path.name.lower()
    if name in BUILT_IN_ELASTIC and not path.exists():
        return f"built-in:{name}:{__version__}"
    return "folder:" + _folder_digest(path) if path.is_dir() else "file:" + file_digest(path)


def run_key(graph, flat, spec: RunSpec) -> str:
    """A content hash of everything a run's result depends on: the graph's files (imports and
    required Python files included, and the user's modules those import from their folders),
    every data file its arguments and settings name (traces, profiles), the cluster, the
    overrides that take effect, the seed, the metrics sink, the time limit and Roundhouse's
    version. Equal keys mean the same run, wherever the files lie and in whatever order the
    overrides were given; a changed byte in any input gives a new key."""
    from roundhouse import __version__
    from roundhouse.runtime.values import FilePath

    data = {}
    for name, el in graph.elements.items():
        for field in attrs.fields(type(el)):
            value = getattr(el, field.name, None)
            if isinstance(value, FilePath):
                data[f"{name}.{field.name}"] = file_digest(Path(value))
    for field in attrs.fields(type(graph.settings)):
        value = getattr(graph.settings, field.name)
        if field.name == "elastic_profile" and value is not None:  # (a folder, or a name built in)
            data[f"setting {field.name}"] = _elastic_identity(graph)
        elif isinstance(value, FilePath):
            data[f"setting {field.name}"] = file_digest(Path(value))
    files = _graph_files(flat)
    modules = helper_modules(f for f in files if f.endswith(".py"))
    identity = {
        "scheme": KEY_SCHEME,
        "roundhouse": __version__,
        "graph": [_source_digest(f) for f in files],
        "modules": {name: file_digest(path) for name, path in modules.items()},
        "data": data,
        "cluster": _cluster_identity(graph, spec.cluster),
        "overrides": keyed_overrides(graph, spec.overrides),
        "seed": int(graph.settings.seed),
        "sink": spec.sink or metrics_sink(graph),
        "until": spec.until,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def metrics_sink(graph) -> str | None:
    """The graph's (first) JobMetrics element, whose summary a run reports when no --sink names
    one (`check_sweepable` refuses a graph with several), or None if it has none."""
    return next((el.name for el in graph.by_class(METRICS_SINK)), None)


def keyed_overrides(graph, overrides: Iterable[str | Override]) -> list[str]:
    """The overrides as a run's key holds them: for each target, the value it has in the
    compiled graph (the last one given takes effect), so that two spellings of one value
    (`round=5min` and `round=300s`) are one run; sorted by target. A value `key_text` cannot
    write is keyed by its text as given, spaces trimmed. Left out are those keyed otherwise:
    the seed (as the graph's seed, however it was given), the cluster, and a file path (by the
    file's contents, with the graph's other files)."""
    from roundhouse.runtime.values import FilePath

    last: dict[str, str] = {}
    for o in overrides:
        target, _, value = (o if isinstance(o, str) else o.text).partition("=")
        last[target.strip()] = value.strip()
    keyed = []
    for target, text in sorted(last.items()):
        value = compiled_value(graph, target)
        if target in ("seed", "cluster") or isinstance(value, FilePath):
            continue
        written = key_text(value)
        keyed.append(f"{target}={text if written is None else written}")
    return keyed


def key_text(value: Any) -> str | None:
    """A compiled value as a run's key holds it: as a `.sched` file would write it, the way
    `describe` does (`5min`, `4/h`, `1.2x`, `"text"`, `3000..4000`, `[1, 2]`), where that text
    reads back as exactly this value, and otherwise with every digit of the number (`0.1s`
    written as `0.1s`, a rate too fine for `/h` in `/s`). Two values have one text only if they
    are equal (a number as a number: `1` and `1.0` are one), and a value written the usual way
    has the text it was given, so a store's runs keyed by their values as written before
    values were keyed as compiled keep their keys. None for a value of another kind (none, an
    element, an object), which the key holds as written."""
    from roundhouse.runtime.values import (
        Duration,
        ElementRef,
        IdRange,
        Multiplier,
        Rate,
        describe,
        duration_from_text,
        rate_from_text,
    )

    def exact(written: Callable[[], str], read: Callable[[str], float], fallback: str) -> str:
        if not math.isfinite(value):  # (a value `describe` cannot write, nor `read` read back)
            return fallback
        text = written()
        return text if read(text) == value else fallback

    if isinstance(value, bool):
        return describe(value)
    if isinstance(value, Duration):
        return exact(lambda: describe(value), duration_from_text, f"{float(value)!r}s")
    if isinstance(value, Rate):
        return exact(lambda: describe(value), rate_from_text, f"{float(value)!r}/s")
    if isinstance(value, Multiplier):
        return exact(lambda: describe(value), lambda t: float(t.removesuffix("x")), f"{float(value)!r}x")
    if isinstance(value, float):
        return exact(lambda: describe(value), float, repr(float(value)))
    if isinstance(value, (int, str, IdRange, ElementRef)):
        return describe(value) if isinstance(value, str) else str(value)
    if isinstance(value, (list, tuple)):
        items = [key_text(item) for item in value]
        return None if any(item is None for item in items) else "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
    return None


def compiled_value(graph, target: str) -> Any:
    """The value an override's target (`element.field` or a setting) has in a compiled graph;
    None if it names nothing."""
    element, dot, field = target.rpartition(".")
    if dot:
        return getattr(graph.elements.get(element), field, None)
    return getattr(graph.settings, target, None)


def compile_spec(spec: RunSpec):
    """The compiled graph of a run and its key."""
    graph, flat = _compile(spec)
    return graph, run_key(graph, flat, spec)


def _compile(spec: RunSpec):
    """The compiled graph of a run, and the graph as loaded."""
    from roundhouse.runtime.compiler import Override, compile_graph
    from roundhouse.runtime.dsl.loader import load

    flat = load(spec.graph)
    given = [o if isinstance(o, Override) else Override(o) for o in spec.overrides]
    return compile_graph(flat, given + trace_overrides(flat, spec.trace)), flat


def replaced_sources(flat, graph, label: str) -> list[str]:
    """The TraceSource a trace given for the whole graph replaces (`label`: the option or
    argument that gave it): there must be one, and only one (several would all read the same
    jobs, each job arriving once per source)."""
    sources = [d.name for d in flat.decls.values() if d.class_name == "TraceSource"]
    if not sources:
        # (Say where its jobs come from instead, and how to run them from a trace after all.)
        others = [f"{d.name} ({d.class_name})" for d in flat.decls.values() if d.class_name.endswith("Source")]
        how = ""
        if others:
            name = others[0].split(" ", 1)[0]
            how = (
                f"; its jobs come from {', '.join(others)}: to run it on a trace, copy the graph and declare "
                f'`{name} :: TraceSource(path="FILE");` in its place'
            )
        raise UsageError(f"{label}: {graph} has no TraceSource element whose trace it could replace{how}")
    if len(sources) > 1:
        raise UsageError(
            f"{label}: {graph} has {len(sources)} TraceSource elements ({', '.join(sources)}), which would all read the "
            f"same jobs; give each its own trace instead ({sources[0]}.path=...)"
        )
    return sources


def trace_overrides(flat, trace: str | None) -> list:
    """The overrides that make `trace` (None: none) the path of every TraceSource of the loaded
    graph `flat`. (The trace's contents are in the run's key with every file the graph names.)"""
    from roundhouse.runtime.compiler import Override
    from roundhouse.runtime.values import describe

    if trace is None:
        return []
    quoted = describe(trace)  # (as a .sched string: quotes and backslashes escaped, the rest as it is)
    return [Override(f"{d.name}.path={quoted}") for d in flat.decls.values() if d.class_name == "TraceSource"]


# The columns every recorded run has; labels (one per varied name) and the metrics sink's
# summary come beside them. `set` holds what the run's sweep fixed for every run (RunSpec.fixed)
# as a JSON object: a name a run did not vary had that value, or else the graph's own. `trace`:
# the trace given with --trace, by its whole path (`report` draws the graph with it), or None.
RUN_COLUMNS = (
    "key",
    "status",
    "error",
    "traceback",
    "graph",
    "trace",
    "point",
    "set",
    "seed",
    "rounds",
    "run_s",
    "worker",
    "finished_at",
)


def label_columns(stored: pl.DataFrame) -> list[str]:
    """The stored columns that hold some run's grid point values: those its `point` names, as
    `name=value` (a sweep stores its varied values as text)."""
    if "point" not in stored.columns:
        return []
    found = []
    for name, dtype in stored.schema.items():
        if name in RUN_COLUMNS or dtype != pl.String:
            continue
        if stored.select(pl.col("point").str.contains(pl.lit(f"{name}=") + pl.col(name), literal=True).any()).item():
            found.append(name)
    return found


def fixed_text(fixed: dict[str, str]) -> str:
    """What a sweep fixed for every run, as its rows' `set` column holds it."""
    return json.dumps(fixed, sort_keys=True)


def point_text(labels: dict[str, Any]) -> str:
    """A grid point as one string (the varied names and values, without the seed)."""
    return " ".join(f"{k}={v}" for k, v in labels.items() if k != "seed") or "(one point)"


def record_run(
    spec: RunSpec,
    key: str,
    timeout: float | None = None,
    sink: str | None = None,
    stopped: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run one spec and return its row for the results store; never raises for the run's own
    failures: an error or a timeout is recorded with its message (status 'error' or 'timeout').
    With `stopped`, the run ends early once `stopped()` says that its sweep was interrupted.

    The run's key is computed again here from the files as this process sees them: a worker
    that sees other files (a graph edited during the sweep, another copy on a cluster node)
    records an error instead of a result under a key that does not describe it."""
    import traceback

    from roundhouse.runtime.simulate import simulate

    row = base_row(spec, key, worker=worker_name())
    started = time.perf_counter()
    metrics: dict[str, Any] = {}
    sink = sink or spec.sink
    graph = None

    def attempt() -> None:
        nonlocal graph, metrics
        # (Its element files' classes are forgotten after it: a Dask worker runs other
        # sweeps' graphs next, whose files may define classes of the same names; and the
        # modules they import that changed since are imported again, as they are now.)
        forget_changed_modules()
        with registry.scope():
            graph, seen_key = compile_spec(spec)
            row["seed"] = int(graph.settings.seed)
            if seen_key != key:
                raise RoundhouseError(
                    f"{spec.graph}: the graph or one of its files differs here ({row['worker']}) from what the sweep "
                    "was started with (was it edited during the sweep, or do the nodes have different copies?)"
                )
            result = simulate(graph, spec.cluster, until=spec.until)
        # (The JobMetrics element its key names: another sink may report a summary too.)
        outcome = RunOutcome(spec, result.rounds, result.wall_s, result.reports)
        name = sink or metrics_sink(graph) or outcome._sink_with("summary")
        metrics = dict(outcome.reports[name]["summary"])
        row["rounds"] = result.rounds

    try:
        fired = Watchdog(timeout, stopped).run(attempt)
        if fired is not None:  # (delivered, and dropped where it landed: the run is past its time all the same)
            metrics = {}
            row["rounds"] = None
            raise fired
    except RunTimeout:
        row.update(status="timeout", error=f"timed out after {timeout:g} s")
    except RunStopped:
        row.update(status="error", error="stopped: the sweep was interrupted")
    except SystemExit as err:  # the user's code called sys.exit(): its run failed, its worker goes on
        row.update(status="error", error=f"it called sys.exit({err.code!r})", traceback=traceback.format_exc())
    except RoundhouseError as err:
        row.update(status="error", error=_run_error(err, spec, graph), traceback=getattr(err, "detail", "") or None)
    except Exception as err:  # a run's failure is its result; the sweep goes on
        row.update(status="error", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc())
    row["run_s"] = time.perf_counter() - started
    row["finished_at"] = datetime.now(UTC)
    return {**row, **metrics}


def _run_error(err: RoundhouseError, spec: RunSpec, graph) -> str:
    """A run's error as its row holds it: without the error's own "error:" (the command line
    prints the row's status, "error", before it), and naming the option (--vary, --set, --trace)
    that gave the file it is about, if one did (`graph`: the run's, once compiled)."""
    text = str(err)
    form = ERROR_FORM.match(text)
    if form:
        text = (form.group(1) or "") + text[form.end() :]
    given = _option_of(getattr(err, "path", None), spec, graph)
    return shown_text(f"{given}: {text}" if given else text)  # (as the command line prints an error)


def _option_of(path: str | None, spec: RunSpec, graph) -> str | None:
    """The option that gave the run the file `path` (as it was given), if one did."""
    from roundhouse.runtime.values import FilePath

    if not isinstance(path, str) or graph is None:
        return None
    try:
        file = Path(path).resolve()
        if spec.trace is not None and Path(spec.trace).resolve() == file:
            return f"--trace {spec.trace}"
        for o in spec.overrides:
            if isinstance(o, str) or not isinstance(compiled_value(graph, o.target), FilePath):
                continue
            if Path(str(compiled_value(graph, o.target))).resolve() == file:
                shown = spec.labels.get(o.target) if o.flag == "--vary" else spec.fixed.get(o.target)
                return f"{o.flag} {o.target}={o.value_text if shown is None else shown}"
    except (OSError, ValueError):  # (a path that cannot be resolved names no option)
        return None
    return None


def worker_name(pid: int | None = None) -> str:
    """A process as a run's row names the worker that ran it: host:process id (by default,
    this process)."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}"


def base_row(spec: RunSpec, key: str, status: str = "ok", error: str | None = None, *, worker: str | None) -> dict[str, Any]:
    """A run's row without metrics: what is recorded of a run that failed before reporting any.
    `worker`: what ran it (`worker_name`), None if that is not known."""
    return {
        "key": key,
        "status": status,
        "error": error,
        "traceback": None,
        "graph": spec.graph,
        "trace": spec.trace,
        "point": point_text(spec.labels),
        "set": fixed_text(spec.fixed),
        "seed": spec.labels.get("seed"),
        "rounds": None,
        "run_s": None,
        "worker": worker,
        "finished_at": datetime.now(UTC),
        **{k: str(v) for k, v in spec.labels.items() if k != "seed"},
    }
