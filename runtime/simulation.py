"""`Simulation`: a graph run in the simulator a round at a time, for notebooks and for tools
that look ahead (the synthesizer, `roundhouse whatif`). docs/simulation-api.md shows it in use.

    sim = Simulation("graphs/las.sched", cluster="8x4:V100")
    sim.run_until(3600 * 24)
    other = sim.fork()          # an independent copy, between two rounds
    sim.run(); other.run()      # each gives what running `sim` on would have
    sim.save("day1.snap"); again = Simulation.load("day1.snap")
    sim.write("results/")       # a results folder, as `roundhouse run --out` writes
"""

from __future__ import annotations

import contextlib
import copy
import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from roundhouse.errors import ClusterError, RoundhouseError, TraceError, UsageError, did_you_mean, shown_error
from roundhouse.runtime import registry, snapshot, user_modules
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster, spec_file
from roundhouse.runtime.compiler import CompiledGraph, Override, compile_file
from roundhouse.runtime.engine import Engine, RunResult
from roundhouse.runtime.files import first_missing, remove_made, results_folder, writing
from roundhouse.runtime.results_files import write_results
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world
from roundhouse.runtime.snapshot_paths import A_SNAPSHOT, file_kind, saved_state_kind
from roundhouse.runtime.useless_runs import warn_before_simulation
from roundhouse.runtime.values import FilePath, describe
from roundhouse.runtime.world import World

if TYPE_CHECKING:
    import polars as pl

# Columns of `Simulation.jobs()`: each job's spec, where it is, and its times.
JOB_COLUMNS = (
    "job_id",
    "arrival_s",
    "gpus",
    "status",
    "first_start_s",
    "finish_s",
    "service",
    "done",
    "work",
    "preemptions",
)


# What only a graph's text holds, never a file's path as people write them: a line break, the
# end of a statement, a connection, a declaration.
_TEXT_MARKS = ("\n", ";", "->", "::")


def _graph_source(graph: str | Path) -> tuple[str, str | None]:
    """(path, text): a `.sched` file's path, or text (a str with a newline, `;`, `->` or `::`
    that names no file), compiled as if it were a file in the current folder. Both paths are
    absolute, so that a snapshot loads from any folder with the relative paths in its graph
    meaning what they did."""
    if not isinstance(graph, (str, Path)):
        raise UsageError(f"graph: expected a .sched path or a graph's text, got {type(graph).__name__}")
    if isinstance(graph, str) and not graph.strip():
        raise UsageError("graph: expected a .sched path or a graph's text, got an empty string")
    if isinstance(graph, Path) or not any(mark in graph for mark in _TEXT_MARKS) or _names_file(graph):
        _refuse_what_is_no_graph_file(graph)
        return str(Path(graph).resolve()), None  # (a snapshot loads from any folder)
    return str(Path.cwd() / _TEXT_GRAPH), graph


def _refuse_what_is_no_graph_file(graph: str | Path) -> None:
    """A UsageError for a path where a graph's file goes that names a run's saved state (a
    snapshot: `Simulation.load`; a journal: `roundhouse whatif`), or a pipe, which gives its
    text once (a simulation keeps the text for its snapshots), rather than the compiler's
    complaint of text that is not UTF-8, or of no file at the pipe's whole path."""
    try:
        kind = file_kind(Path(graph))
    except (OSError, ValueError):
        kind = None  # (compiling it says why it cannot be read)
    if kind:
        raise UsageError(
            f"graph: {graph} is {kind}, not a file, and a simulation keeps its graph's text for its snapshots: "
            "give the graph's file, or the graph's text itself (a str)"
        )
    what = saved_state_kind(graph)
    if what == A_SNAPSHOT:
        raise UsageError(f"graph: {graph} is {what}, not a .sched graph: load it with Simulation.load({str(graph)!r})")
    if what:
        raise UsageError(
            f"graph: {graph} is {what}, not a .sched graph: `roundhouse whatif {graph}` simulates from a live scheduler's journal"
        )


# The file name a graph given as text is compiled under (it names no file).
_TEXT_GRAPH = "<simulation>.sched"


def _names_file(text: str) -> bool:
    try:
        return "\n" not in text and Path(text).is_file()
    except (OSError, ValueError):  # (too long for a path, a NUL in it)
        return False


class Simulation:
    """A graph in the simulator, run a round at a time; forkable, and saved to and loaded from
    snapshot files.

    `graph`: a `.sched` path or the text of a graph (a str with a newline, `;`, `->` or `::`
    that names no file). `trace`: replaces the path of the graph's one `TraceSource` (as
    `--trace`); a graph with none, or with several (which would all read the same jobs), is
    refused with a `UsageError` (give each its own path in `overrides`, `'name.path="t.csv"'`).
    `cluster`: a spec (`"8x4:V100"`, a `.toml` file) or a `Cluster`; default the graph's
    `cluster` setting. `overrides`: `--set` texts (`"admit.factor=1.2"`). Keyword settings
    are graph settings (`seed=3`, `round="1min"`). `until`: stop at this time (seconds), as
    `--until`."""

    _engine: Engine
    _header: dict[str, Any]
    _result: RunResult | None
    _failure: str | None  # (set once a round fails: see `_go_on`)

    def __init__(
        self,
        graph: str | Path,
        trace: str | Path | None = None,
        cluster: str | Path | Cluster | None = None,
        overrides: Sequence[str] = (),
        until: float | None = None,
        **settings: Any,
    ):
        _build(self, graph, trace, cluster, overrides, until, settings)

    @classmethod
    def _of(cls, engine: Engine, header: dict[str, Any]) -> Simulation:
        sim = object.__new__(cls)
        sim._engine, sim._header, sim._result, sim._failure = engine, dict(header), None, None
        return sim

    # --- running ---
    @property
    def now(self) -> float:
        """The clock: the next round's boundary, in seconds since the run began."""
        return self._engine.backend.now

    @property
    def rounds(self) -> int:
        """Rounds run so far."""
        return self._engine.rounds

    @property
    def done(self) -> bool:
        """True once the run has stopped (every job finished, a sink's goal met, `until`)."""
        return bool(self._engine.stop_reason)

    @property
    def stop_reason(self) -> str:
        return self._engine.stop_reason

    def step(self) -> bool:
        """Run one round: the clock moves on by one round, no further (rounds that event
        skipping would pass in one go pass one at a time, with the same results); returns True
        while the run goes on."""
        if self.done:
            return False
        self._go_on("step")
        self.run_until(self.now + float(self.graph.settings.round))
        return not self.done

    def run_until(self, t: float) -> Simulation:
        """Run rounds until the clock reaches `t` seconds (or the run stops); `t` infinite: until
        the run stops, as `run()`, but returning the simulation and leaving it open (not ended)."""
        end = _time_argument("t", t)
        self._go_on("run_until")
        if end is not None and end < self.now - 1e-9:  # (else nothing would run, without a word)
            raise UsageError(
                f"t: {t!r} is before the clock ({self.now:g} s): a simulation runs forward only; "
                f"run_until(sim.now + {t!r}) runs on for that long, and a fork or snapshot made earlier goes back"
            )
        engine = self._engine
        engine.pause_at(end)
        try:
            while not self.done and (end is None or self.now < end - 1e-9):
                self._step()
        finally:
            engine.pause_at(None)
        return self

    def run(self) -> RunResult:
        """Run to the end; returns the run's result (reports by sink, counters)."""
        if self._result is None:
            self._go_on("run")
        while not self.done:
            self._step()
        if self._result is None:
            try:
                self._result = self._engine.end()
            except BaseException as err:
                self._failure = f"its end failed, and is left half done: {_said(err)}"
                raise
        return self._result

    def _step(self) -> None:
        """One step of the engine; a failure in it (an element raising, a plan refused, an
        interrupt) is remembered: the round it stopped in is left half done."""
        try:
            self._engine.step()
        except BaseException as err:
            self._failure = f"its round at t={self.now:g}s failed: {_said(err)}; the round it failed in is left half done"
            raise

    def _go_on(self, action: str) -> None:
        """Refuse to go on from a failed round: some of its elements ticked and others did not,
        so running on (or forking, saving, or ending a fork for a result) would give what no run
        gives, without a word."""
        if self._failure is not None:
            raise UsageError(
                f"{action}: this simulation cannot go on: {self._failure}. "
                "Build the simulation again (or load a snapshot, or use a fork, made before the failure); "
                "its jobs() and world_now() still show the world as it was left"
            )

    # --- forking and snapshots ---
    def fork(self) -> Simulation:
        """An independent copy of this simulation as it stands (between two rounds): running
        both on gives each exactly what running this one on would have. Its elements' arguments
        are copies of their own. A ForkError names an element whose state is not declared."""
        if self._result is not None:
            raise UsageError("this simulation has ended (run() was called): fork it before it ends")
        self._go_on("fork")
        engine = snapshot.fork_engine(self._engine)
        _own_arguments(engine.graph)
        return Simulation._of(engine, self._header)

    def save(self, path: str | Path) -> Path:
        """Write the simulation's whole state to a snapshot file (runtime/snapshot.py)."""
        from roundhouse import __version__

        if self._result is not None:
            raise UsageError("this simulation has ended (run() was called): save it before it ends")
        self._go_on("save")
        _file_argument("path", path, "the snapshot file to write, such as run.snap")
        snapshot.save(self._engine, path, {**self._header, "roundhouse": __version__})
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> Simulation:
        """A simulation from a snapshot file, ready to run on; a SnapshotError names the file
        and what is wrong with it (not a snapshot, corrupt, a newer format)."""
        _file_argument("path", path, "a snapshot file written by Simulation.save")
        header, payload = snapshot.read_header(path)
        snapshot.check_code(path, header)  # (before its code is imported to rebuild the graph)
        try:
            compiled, code = _snapshot_graph(header, [])
        except RoundhouseError as err:
            raise snapshot.SnapshotError(_cannot_rebuild(path, err, header)) from None
        except (KeyError, TypeError, ValueError):
            raise snapshot.SnapshotError(
                f"snapshot {path}: line 1: the header lacks the graph's path, text or overrides"
            ) from None
        if "code" in header and code != header["code"]:
            changed = sorted(set(code.items()) ^ set(header["code"].items()))[0][0]
            raise snapshot.SnapshotError(
                f"snapshot {path}: the code its graph runs is not the code the snapshot was saved with: {changed} differs"
            )
        if compiled.key() != header.get("graph_key"):
            raise snapshot.SnapshotError(
                f"snapshot {path}: the graph {header['graph_path']} (or a file it imports or requires) is not the one "
                "the snapshot was saved with: its elements, arguments or settings differ"
            )
        cluster, offset = snapshot.load_cluster(path, payload)
        profile = load_profile(compiled)
        world = new_world(compiled, cluster, profile)
        fresh = _engine(compiled, world, header.get("until"))
        engine = snapshot.restore(path, payload, offset, fresh)
        # (The checksum covers the state, not which header it came with: a state put after
        # another snapshot's header would run under a graph it was not saved with.)
        state = {"now_s": engine.backend.now, "rounds": engine.rounds, "jobs": len(engine.world.jobs)}
        differ = [
            f"{key} {header[key]!r} in the header, {value!r} in the state"
            for key, value in state.items()
            if key in header and header[key] != value
        ]
        if differ:
            raise snapshot.SnapshotError(f"snapshot {path}: its header and its state disagree: {'; '.join(differ)}")
        return cls._of(engine, header)

    # --- results ---
    @property
    def graph(self) -> CompiledGraph:
        return self._engine.graph

    @property
    def world(self) -> World:
        """The world state (read it; the engine is its only writer)."""
        return self._engine.world

    def world_now(self) -> World:
        """A copy of the world as of the clock. (Between two rounds the simulator has already
        computed the last round's progress and completions, which `world` learns only at the
        next round's start; here they are folded in.) This simulation is not changed, and its
        elements need not be forkable: they are not copied. The copy says the time it is as of
        (`as_of`, the clock) and where its last round began (`last_round_s`, one of this
        graph's rounds before the clock), which `simulate_ahead` reads."""
        books = snapshot.copy_books(self._engine)
        books.fold_in()
        books.world.as_of = self.now
        # (The clock is the boundary after the last round ticked or passed: idle rounds skipped
        # before it brought no arrival.)
        books.world.last_round_s = self.now - float(self.graph.settings.round)
        return books.world

    def jobs(self, columns: Sequence[str] = JOB_COLUMNS) -> pl.DataFrame:
        """Every job seen so far, one row each, with its times (NaN: not yet), as of the clock:
        the last round's progress and completions are in it (`world_now`), as in `summary()`
        and `result()`."""
        if isinstance(columns, str):
            raise UsageError(f'columns: expected a list of column names, such as ["{columns}"]')
        if not isinstance(columns, Sequence):
            raise UsageError(f'columns: expected a list of column names, such as ["status"], got {type(columns).__name__}')
        if not columns:  # (a frame of no columns has no rows either)
            raise UsageError('columns: name at least one column, such as ["status"]; or leave it out for the default ones')
        twice = [c for i, c in enumerate(columns) if c in columns[:i]]
        if twice:  # (a frame holds a column once: it would be given once, without a word)
            raise UsageError(f"columns: {twice[0]!r} is named twice; name each column once")
        table = self._engine.world.jobs
        unknown = [c for c in columns if not isinstance(c, str) or not table.has_column(c)]
        if unknown:
            hint = did_you_mean(str(unknown[0]), table.names)
            raise UsageError(
                f"columns: the job table has no column {unknown[0]!r}"
                + (f" ({hint})" if hint else "")
                + f"; it has {', '.join(table.names)}"
            )
        world = self._engine.world if self.done else self.world_now()  # (a stopped run has no round after its last)
        return world.jobs.frame(columns=list(columns))

    def result(self) -> RunResult:
        """The run's result: at its end, the final one; before, that of a fork ended now, as a
        run given `until` the clock ends (its round at the clock ticked, so the last round's
        progress and completions are counted). The simulation itself goes on unchanged. Before
        the end, as a fork, it needs every element forkable (a ForkError names one that is not)."""
        if self._result is not None:
            return self._result
        self._go_on("result")
        try:
            engine = snapshot.fork_engine(self._engine)
        except snapshot.ForkError as err:
            raise snapshot.ForkError(
                f"a result or summary before the run ends is that of a fork of it, ended now: {err}"
            ) from None
        if not self.done:
            engine.look_ahead(engine.backend.now)
            while not engine.step():
                pass
        return engine.end()

    def summary(self) -> dict[str, Any]:
        """The first metrics sink's summary (average JCT, makespan, utilisation, ...), as
        `roundhouse run` prints it; empty if the graph has no such sink. Before the end, that of
        a fork ended now (`result`): it needs every element forkable."""
        if self._result is None:
            self._go_on("summary")
        for report in self.result().reports.values():
            if isinstance(report, dict) and "summary" in report:
                return dict(report["summary"])
        return {}

    def write(self, folder: str | Path) -> Path:
        """Write a results folder, as `roundhouse run --out` does (jobs.csv, summary.json, run.json),
        for `roundhouse report` and `plot`: of `result()` (before the end, a fork ended now)."""
        return _write(self, folder)

    def __repr__(self) -> str:
        state = f"stopped: {self.stop_reason}" if self.done else "failed" if self._failure else "running"
        if state == "running" and self._engine.until is not None and self.now >= self._engine.until - 1e-9:
            state = "running: its last round, at its time limit, is left to run"  # (run_until(until))
        return f"Simulation({Path(self._header['graph_path']).name}, t={self.now:g}s, {self.rounds} rounds, {len(self.world.jobs)} jobs, {state})"


def _build(
    sim: Simulation,
    graph: str | Path,
    trace: str | Path | None,
    cluster: str | Path | Cluster | None,
    overrides: Sequence[str],
    until: float | None,
    settings: dict[str, Any],
    command: _Command | None = None,
) -> None:
    """`Simulation.__init__`; with `command`, for `roundhouse run --snapshot` (`for_command`)."""
    path, text = _graph_source(graph)
    overrides = _override_texts(overrides)
    if cluster is not None and not isinstance(cluster, (str, Path, Cluster)):
        raise UsageError(f'cluster: expected a spec such as "8x4:V100", a .toml path or a Cluster, got {type(cluster).__name__}')
    if trace is not None and not isinstance(trace, (str, Path)):
        raise UsageError(f"trace: expected the path of a trace file, got {type(trace).__name__}")
    cluster = str(cluster) if isinstance(cluster, Path) else cluster  # (a spec is text: a .toml path reads as one)
    until = _time_argument("until", until, optional=True)
    # (A keyword setting's problem is said as the keyword's, not as a --set's.)
    keywords = [Override(f"{k}={_setting_text(k, v)}", flag="keyword setting") for k, v in settings.items()]
    sets = [*overrides, *(o.text for o in keywords)]
    _refuse_repeats(sets, len(overrides))
    compiled, code = _compile(path, text, [*overrides, *keywords], trace, cluster)
    if command is None:  # (a command has printed them already)
        # (what `roundhouse run` warns of, as Python warnings naming the line that built the simulation)
        warn_before_simulation(compiled, cluster, stacklevel=4)
    sim._header = {
        "graph_path": path,
        # kept in snapshots: a graph file edited later does not change a saved run
        "graph_text": Path(path).read_text() if text is None else text,
        "overrides": _whole_paths(compiled, sets),
        "trace": None if trace is None else str(Path(trace).resolve()),
        "cluster": None if cluster is None else _cluster_spec(cluster),  # (its graph's setting: `_cluster_spec`)
        "until": until,
        "code": code,
    }
    profile = load_profile(compiled)
    world = new_world(compiled, _cluster(compiled, cluster, profile), profile)
    sim._engine = _engine(compiled, world, until, command)
    if command is not None and command.explain_to is not None and world.explain is not None:
        world.explain.write_as_it_goes(command.explain_to, world)
    sim._engine.begin()
    sim._result = None
    sim._failure = None


@attrs.frozen
class _Command:
    """What `roundhouse run` adds to a simulation it saves (`for_command`): its progress line's
    hook, and the file its record of why each job waited or ran is written to as it goes."""

    on_round: Callable[[Any], None] | None = None
    explain_to: Path | None = None


def for_command(
    graph: str,
    trace: str | None,
    cluster: str | None,
    overrides: Sequence[str],
    on_round: Callable[[Any], None] | None = None,
    explain_to: Path | None = None,
) -> Simulation:
    """The `Simulation` of `roundhouse run --until T --snapshot FILE` (tools/run_cmd.py): built
    from the command's graph, `--trace`, `--cluster` and `--set` texts as the API builds one, so
    that its snapshot is the one `Simulation(...).run_until(T).save(FILE)` writes (its header
    names no time limit: loaded, it runs on to the end). With `explain_to` it keeps the record
    of why each job waited or ran, written there as the run goes; the record is the run's
    output, no part of its state, and is left out of its snapshots (runtime/snapshot.py). The
    command has checked the graph and printed its warnings."""
    sim = object.__new__(Simulation)
    _build(sim, graph, trace, cluster, overrides, None, {}, _Command(on_round, explain_to))
    return sim


def save_for_command(sim: Simulation, path: str | Path) -> Path:
    """`Simulation.save` of a simulation of `for_command`: its progress line's hook, no part of
    its state, is left out, as a simulation built in Python has none (the same bytes)."""
    engine = sim._engine
    hook, engine.on_round = engine.on_round, None
    try:
        return sim.save(path)
    finally:
        engine.on_round = hook


def end_at_clock(sim: Simulation) -> RunResult:
    """The simulation ended where its clock is, as a run given that time as its `until` ends:
    the round at the clock ticks, and the run stops in it (`roundhouse run --until --snapshot`,
    once it has saved). A simulation stopped already ends where it stopped."""
    if not sim.done:
        sim._engine.look_ahead(sim.now)
    return sim.run()


def _write(sim: Simulation, folder: str | Path) -> Path:
    """`Simulation.write`: the folder checked as `--out` is (a sweep's results in it refused)
    before the result is made; the graph's text and trace as the simulation was built with."""
    _file_argument("folder", folder, "a folder for the results, such as results/")
    if sim._result is None:  # (said as the write's, not as the result's it would make)
        sim._go_on("write")
    created = first_missing(folder)
    out = results_folder(folder, "folder", "run")
    try:
        result = sim.result()
        with writing(out):
            write_results(out, sim.graph, result.world.cluster, result, sim._header["trace"], sim._header["graph_text"])
    except BaseException:  # (as `roundhouse run --out`: a folder made for results not written goes)
        if created is not None:
            remove_made(out, created)
        raise
    return out


def _said(err: BaseException) -> str:
    """An exception in one line: its kind and its message's first line."""
    # (Without the `error: ` a command's line begins with: here it follows the exception's kind.)
    text = str(err).strip().split("\n", 1)[0].removeprefix("error: ")
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _override_texts(overrides: Any) -> list[str]:
    """`overrides` as a list of `--set` texts: any iterable of str is taken once (a generator's
    texts would otherwise be used up by checking them); None, one str or anything else is refused."""
    expected = 'overrides: expected a list of --set texts, such as ["admit.factor=1.2x"]'
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Iterable):
        raise UsageError(f"{expected}, got {overrides!r}")
    if isinstance(overrides, Mapping):  # (iterating it would give its names alone, without their values)
        raise UsageError(
            f"{expected}, got a {type(overrides).__name__}: give each entry as one text, such as {_as_texts(overrides)}"
        )
    texts = list(overrides)
    for text in texts:
        if not isinstance(text, str):
            raise UsageError(f"{expected}, got an item {text!r} ({type(text).__name__})")
    return texts


def _as_texts(overrides: Mapping) -> str:
    """A mapping's first entry as the `--set` text it stands for, in a list (or the form of one)."""
    try:
        name, value = next(iter(overrides.items()))
        return str([f"{name}={_setting_text(str(name), value)}"])
    except (StopIteration, UsageError):
        return "['element.field=value']"


def _refuse_repeats(sets: list[str], given: int) -> None:
    """A name set twice (the first `given` texts are `overrides`, the rest keyword settings) is
    refused, as two `--set`s of one name are: the last would win without a word."""
    first: dict[str, int] = {}
    for i, text in enumerate(sets):
        target = Override(text).target
        if target in first:
            j = first[target]
            where = "overrides" if i < given else "keyword settings" if j >= given else "overrides and keyword settings"
            raise UsageError(f"{where}: {target} is set twice ({sets[j]!r} and {text!r}); keep one")
        first[target] = i


def _cluster(compiled: CompiledGraph, cluster: str | Cluster | None, profile) -> Cluster:
    """The cluster, a problem with the `cluster` argument said as the argument's (not as `--cluster`'s)."""
    if cluster is None and compiled.settings.cluster is None:  # (the engine's message names --cluster)
        raise UsageError(
            f'cluster: {compiled.path} sets no cluster: give one, such as cluster="32x4:V100" or a .toml path, '
            'or set cluster = "..." in the graph'
        )
    try:
        return load_cluster(compiled, cluster, profile)
    except ClusterError as err:
        if cluster is None or err.path is None:
            raise
        raise UsageError(f"cluster: {err.path}: {err.message}") from None
    except UsageError as err:
        if cluster is None or not str(err).startswith("--cluster: "):
            raise
        raise UsageError(f"cluster: {str(err).removeprefix('--cluster: ')}") from None


def _setting_text(name: str, value: Any) -> str:
    """A Python value as `.sched` text for the keyword setting `name`: a number (numpy's too), a
    bool, a str or a path (a UsageError naming the keyword for anything else)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    # (numpy's numbers as Python's: the repr of np.float64(5.0) is no .sched number)
    if isinstance(value, numbers.Integral):
        value = int(value)
    elif isinstance(value, numbers.Real):
        value = float(value)
    if (isinstance(value, float) and not math.isfinite(value)) or not isinstance(value, (int, float, str, Path)):
        raise UsageError(
            f'{name}: a graph setting given as a keyword takes a number, true/false or a str (such as seed=3, round="5min"), got {value!r}'
        )
    if isinstance(value, Path):
        return describe(str(value))
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str) and any(c.isdigit() for c in value[:1]):
        return value  # a duration or rate as written: "5min", "8/h"
    return describe(str(value))


def _time_argument(name: str, value, optional: bool = False) -> float | None:
    """A time in seconds given to the API: a real number (numpy's too) of 0 or more, infinity
    meaning no bound (None, as None itself is where `optional`). NaN and negative times are refused."""
    if value is None and optional:
        return None
    seconds = _seconds(value)
    if not seconds >= 0:
        hint = " (to run to the end, call run(), or run_until(math.inf))" if value is None else ""
        raise UsageError(f"{name}: expected seconds, a number of 0 or more, got {value!r}{hint}")
    return None if seconds == math.inf else seconds


def _seconds(value) -> float:
    """`value` as a float if it is a real number (an integer too large for one: infinite), NaN if not."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return math.nan
    number: Any = value  # (numbers.Real declares no comparison with an int)
    try:
        return float(number)
    except OverflowError:  # (an integer beyond floats)
        return math.inf if number > 0 else -math.inf


def _file_argument(name: str, value, what: str) -> None:
    if not isinstance(value, (str, Path)) or not str(value):
        raise UsageError(f"{name}: expected {what}, got {value!r}")


def _own_arguments(graph: CompiledGraph) -> None:
    """Give each element copies of its arguments (a fork's: they are shared with the original
    until then), so that one changed in place, such as a list's item, changes one simulation."""
    memo: dict[int, Any] = {}
    for el in graph.elements.values():
        held = el.__dict__
        for field in attrs.fields(type(el)):
            if field.name in held:
                held[field.name] = copy.deepcopy(held[field.name], memo)


def _whole_paths(compiled: CompiledGraph, sets: list[str]) -> list[str]:
    """The `--set` texts, each that gives a file path written relative to the current folder
    given instead as the whole path the graph was compiled with: a snapshot's overrides then
    mean the same from any folder."""
    out = []
    for text in sets:
        o = Override(text)
        element, _, field = o.target.rpartition(".")
        holder = compiled.elements.get(element) if element else compiled.settings
        value = getattr(holder, field, None) if holder is not None else None
        whole = describe(str(value))
        out.append(f"{o.target}={whole}" if isinstance(value, FilePath) and whole != o.value_text else text)
    return out


def _cannot_rebuild(path: str | Path, err: RoundhouseError, header: dict[str, Any]) -> str:
    """A snapshot's graph that does not compile now: the compiler's message, and for a class it
    does not know, where that class must come from; for a file it does not find, where the
    snapshot looks for its graph's files."""
    message = f"snapshot {path}: cannot rebuild its graph: {err}"
    unknown = re.search(r"unknown element (?:or )?class '([^']+)'", str(err))
    if unknown:
        message += (
            f"\n  hint: element class {unknown[1]} must be defined (run the code that defines it) or required by "
            "the graph before the snapshot is loaded"
        )
    moved = _moved_graph_hint(err, header)
    return message + (f"\n  hint: {moved}" if moved else "")


# How the compiler says a file a graph names is not there (an argument's path, an import, a
# `require`, a cluster's .toml).
_NO_FILE = re.compile(r"names no file|no such file|cluster spec not found")


def _moved_graph_hint(err: RoundhouseError, header: dict[str, Any]) -> str | None:
    """For a snapshot's graph that names a file not there, when the graph itself is no longer
    where it was saved from (its folder moved): where the snapshot expects its graph's files.
    A snapshot holds its graph's text, not the files it names, and their relative paths
    resolve from the folder the graph was in (so that it loads from any current folder)."""
    graph = Path(str(header.get("graph_path", "")))
    if not graph.is_absolute() or not _NO_FILE.search(str(err)) or graph.is_file():
        return None
    if graph.name == _TEXT_GRAPH:  # (a graph given as text: no file was ever there)
        if graph.parent.is_dir():
            return None
        where = f"{graph.parent}/, the folder it was made in, which is no longer there (moved?)"
    else:
        where = f"{graph.parent}/, the folder of its graph {graph}, which is no longer there (moved?)"
    return (
        "the snapshot expects its graph's files where they were when it was saved: its graph's relative paths "
        f"resolve from {where}; put them back there to load it"
    )


def graph_of_snapshot(header: dict[str, Any], overrides: list[str]) -> CompiledGraph:
    """The graph a snapshot was saved with (its text, `--set` texts and trace), with more
    `overrides`, which replace what those set. A file its graph names that is not there, its
    graph's folder moved since it was saved, is a SnapshotError that says where it is expected."""
    try:
        return _snapshot_graph(header, overrides)[0]
    except RoundhouseError as err:
        moved = _moved_graph_hint(err, header)
        if moved is None:
            raise
        raise snapshot.SnapshotError(f"{shown_error(err)}\n  hint: {moved}") from None


def _snapshot_graph(header: dict[str, Any], overrides: list[str]) -> tuple[CompiledGraph, dict[str, str]]:
    return _compile(
        header["graph_path"], header["graph_text"], header["overrides"], header.get("trace"), header.get("cluster"), overrides
    )


def _compile(
    path: str,
    text: str | None,
    overrides: Sequence[str | Override],
    trace: str | Path | None,
    cluster: str | Cluster | None = None,
    then: Sequence[str] = (),
) -> tuple[CompiledGraph, dict[str, str]]:
    """The graph with `overrides` (each name once), `trace` replacing its one TraceSource's path,
    and then `then` (a snapshot's graph changed for `whatif`: these replace what the others set);
    and the code it runs: the Python files it requires and the user's modules they import, by
    whole path, with the SHA-256 of each as imported (a snapshot records them).
    The element files it requires are its own: their classes are forgotten after, so that the
    next graph may require another file defining classes of the same names (a notebook
    comparing two versions of a policy). Those and the modules they import are imported again
    if they changed since they were last imported."""
    required: list[str] = []
    with own_elements():
        compiled = _compile_in_scope(path, text, overrides, trace, cluster, then, required)
        return compiled, _code(required)


@contextlib.contextmanager
def own_elements() -> Iterator[None]:
    """Around compiling one of several graphs in one process (a notebook's simulations, the two
    sides of `roundhouse whatif`): the element files it requires are its own, their classes
    forgotten at the end, so that another graph may require another file defining classes of
    the same names (two versions of a policy). The compiled graph keeps its elements. A file
    required again unchanged is known again, not imported anew; the user's modules that changed
    since they were imported are imported again."""
    user_modules.forget_changed_modules()
    with registry.scope(remember=True):
        yield


def _code(required: list[str]) -> dict[str, str]:
    """The digests of the code a graph runs (`_compile`), while its element files are known."""
    from roundhouse.runtime.dsl.loader import element_file_digest

    code = {file: element_file_digest(file) or user_modules.file_digest(file) for file in required}
    return {**code, **user_modules.seen_digests(required)}


def _compile_in_scope(
    path: str,
    text: str | None,
    overrides: Sequence[str | Override],
    trace: str | Path | None,
    cluster: str | Cluster | None,
    then: Sequence[str],
    required: list[str],
) -> CompiledGraph:
    sets = [o if isinstance(o, Override) else Override(o) for o in overrides]
    first = {o.target: o for o in sets}
    if cluster is not None and "cluster" in first:
        raise UsageError(
            f"cluster: the cluster is given twice ({cluster!r} and {first['cluster'].text!r} in overrides); keep one"
        )
    if cluster is not None:
        spec = _cluster_spec(cluster)
        sets.append(Override(f"cluster={describe(spec)}", flag="cluster argument"))
    if trace is not None:
        from roundhouse.runtime.dsl.loader import load
        from roundhouse.runtime.sweep import replaced_sources
        from roundhouse.traces.csvtext import check_trace_file

        sources = replaced_sources(load(path, text), path, "trace")
        replaced = [o for o in sets if o.target in {f"{name}.path" for name in sources}]
        if replaced:
            raise UsageError(f"trace: it replaces {replaced[0].target}, also given in overrides ({replaced[0].text!r}); keep one")
        try:
            check_trace_file(trace)  # (before the graph is built, which would blame an override)
        except TraceError as err:
            raise UsageError(f"trace: {err.path}: {err.message}") from None
        except UsageError as err:  # (an empty path names no file to start the message with)
            raise UsageError(f"trace: {err}") from None
        quoted = describe(str(Path(trace).resolve()))
        sets += [Override(f"{name}.path={quoted}") for name in sources]
    return compile_file(path, [*sets, *(Override(o) for o in then)], text=text, required=required)


def _cluster_spec(cluster: str | Cluster) -> str:
    """The `cluster` argument as the graph's `cluster` setting: the graph a simulation runs says
    the cluster it runs on, not its file's (`print(sim.graph)`, its settings and key; a
    snapshot's header keeps it, so a loaded one's graph says it too). A spec file by its whole
    path, so that it means the same from any folder; a `Cluster` read from a spec file by that
    file's, as long as the file still reads as that cluster; else by the shorthand of its
    groups, when that is the same cluster node by node; else (built in Python, or its file
    changed since) by its spec text (`ClusterSpec.spec_text`), which reads back as it; else,
    for one no spec file writes (a value no spec file takes), as the object it is,
    `Cluster(...)`, which names no file's cluster."""
    if isinstance(cluster, Cluster):
        # (getattr: a cluster pickled in a snapshot from before clusters kept their file)
        file = getattr(cluster.spec, "file", None)
        if file is not None and _reads_as(file, cluster):
            return file
        shorthand = ",".join(
            f"{g.nodes}x{g.gpus_per_node}:{g.gpu_type}" + (f"@{g.topology}" if g.topology else "") for g in cluster.spec.groups
        )
        if _reads_as(shorthand, cluster):
            return shorthand
        text = cluster.spec.spec_text()
        if text is not None and _reads_as(text, cluster):
            return text
        # (Its description without the tiers' links, whose "GB/s" would read back as a path.)
        return f"Cluster({cluster.describe().split(';')[0]})"
    file = spec_file(cluster, Path.cwd())
    return cluster.strip() if file is None else str(file.resolve())


def _reads_as(spec: str, cluster: Cluster) -> bool:
    """Whether `spec` (a shorthand or a spec file) reads as `cluster`, node by node."""
    try:
        return Cluster.parse(spec).fingerprint() == cluster.fingerprint()
    except (RoundhouseError, OSError):
        return False


def _engine(compiled: CompiledGraph, world: World, until: float | None, command: _Command | None = None) -> Engine:
    settings = compiled.settings
    backend = Simulator.for_graph(world, settings)
    if command is None:
        return Engine(compiled, world, backend, until=until)
    return Engine(compiled, world, backend, until=until, on_round=command.on_round, explain=command.explain_to is not None)
