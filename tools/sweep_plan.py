"""What `roundhouse sweep` runs: its grid of values read and checked, and every run compiled,
before anything runs or is written (docs/sweeps.md)."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import attrs

from roundhouse.errors import ClusterError, UsageError, print_warning
from roundhouse.runtime.cluster import names_a_file
from roundhouse.runtime.compiler import Override, compile_graph
from roundhouse.runtime.dsl.loader import load
from roundhouse.runtime.simulate import load_cluster, load_pairs, load_profile
from roundhouse.runtime.sweep import (
    RunSpec,
    check_sweepable,
    compiled_value,
    run_key,
)
from roundhouse.runtime.values import INT64_MAX, ElementRef, FilePath, IdRange, describe
from roundhouse.tools.common import overrides, seconds
from roundhouse.tools.outputs.console import forgiving
from roundhouse.tools.outputs.stdout_result import plural
from roundhouse.tools.results import check_traces, trace_overrides
from roundhouse.tools.sweep_warnings import SweepWarnings
from roundhouse.traces import readonce

# The longest --timeout: a week of wall-clock time for one run is as good as no limit, and the
# waits that enforce it cannot count past about 24 days (a C int of milliseconds).
MAX_TIMEOUT_S = 7 * 86400.0


def plan(args) -> tuple[tuple[str, ...], list[tuple[str, RunSpec]], float | None]:
    """The sweep's grid checked and its runs compiled, before anything runs or is written: the
    names varied, the runs (key and spec), and the wall-clock limit of one run."""
    grid = read_grid(args.vary, args.seeds)
    count = _refuse_too_many_runs(grid, args.seeds)
    until = seconds(args.until, "--until", endless=True)
    timeout = _timeout(args.timeout)
    if args.dask is not None and args.workers is not None:
        raise UsageError("--workers: counts local worker processes; a Dask cluster has the workers it has")
    names = tuple(n for n, _ in grid)
    _refuse_fixed_and_varied(args.overrides, names)
    _refuse_cluster_and_varied(args.cluster, names)
    _refuse_cluster_and_set(args.cluster, overrides(args.overrides))
    if count >= ANNOUNCE_RUNS:
        # (Compiling them takes a while, with nothing else said until the first run starts.)
        print(
            f"checking the sweep's {plural(count, 'run')} before any starts (a few milliseconds each)",
            file=forgiving(sys.stderr),
            flush=True,
        )
    return names, plan_runs(args, grid, until), timeout


# The most runs one sweep may have. Every run is compiled and keyed before any starts (a few
# milliseconds each: 100,000 take minutes, with nothing said meanwhile), is held in memory
# until the sweep ends, and is one file in the results store; and 100,000 runs of even a few
# seconds each keep a machine of a few cores busy for days. A larger study is several sweeps that write to
# one --out: they share its results store.
MAX_RUNS = 100_000
# From how many runs a sweep says how many it is compiling, before it does (seconds of silence).
ANNOUNCE_RUNS = 1_000


def _refuse_too_many_runs(grid: list[tuple[str, list[str]]], seeds: int) -> int:
    """The grid's number of runs; more than MAX_RUNS refused before any is planned, naming its
    size and the options that make it (planned, it would only seem to hang)."""
    points = math.prod(len(values) for _, values in grid)
    runs = points * seeds
    if runs <= MAX_RUNS:
        return runs
    made = [f"--vary {name}: {plural(len(values), 'value')}" for name, values in grid]
    if seeds > 1:
        made.append(f"--seeds {seeds}")
    factors = [*(len(values) for _, values in grid), *([seeds] if seeds > 1 else [])]
    sizes = " × ".join(f"{n:,}" for n in factors) + " = " if len(factors) > 1 else ""
    raise UsageError(
        f"{', '.join(made)}: the sweep would have {sizes}{runs:,} runs, more than one sweep may have ({MAX_RUNS:,}); "
        "give fewer values or seeds, or split the grid into several sweeps with one --out (they share its results store)"
    )


def split_values(text: str) -> list[str]:
    """Split on commas that are not inside [brackets] or "quotes" (in which a backslash escapes
    the character after it, a quote or a backslash, as in a `.sched` file)."""
    out, depth, quoted, escaped, current = [], 0, False, False, ""
    for ch in text:
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif not quoted and ch == "[":
            depth += 1
        elif not quoted and ch == "]":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    out.append(current.strip())
    return out


def read_grid(items: list[str], seeds: int) -> list[tuple[str, list[str]]]:
    grid: list[tuple[str, list[str]]] = []
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name.strip() or not values.strip():
            raise UsageError(f"--vary {item}: write --vary element.field=v1,v2 or --vary setting=v1,v2")
        name, listed = name.strip(), split_values(values)
        empty = [i for i, v in enumerate(listed, 1) if not v]
        if empty:  # (a value left out between commas, or a comma at either end)
            raise UsageError(f"--vary {name}: value {empty[0]} is empty (in '{values.strip()}'); list values as v1,v2")
        if any(name == other for other, _ in grid):
            raise UsageError(f"--vary {item}: {name} is varied twice; list all its values in one --vary {name}=v1,v2")
        seen: set[str] = set()  # (a set: a long list of values is checked in one pass)
        twice = None
        for value in listed:
            if value in seen:
                twice = value
                break
            seen.add(value)
        if twice is not None:
            raise UsageError(f"--vary {item}: the value {twice} is given twice (each run of a point is a seed: --seeds N)")
        grid.append((name, listed))
    if seeds > 1 and any(name == "seed" for name, _ in grid):
        raise UsageError("--seeds: give either --seeds or --vary seed=..., not both")
    return grid


def _refuse_fixed_and_varied(fixed: list[str], varied: tuple[str, ...]) -> None:
    """A name both fixed and varied would silently take the varied values: say so instead."""
    for text in fixed:
        name = text.partition("=")[0].strip()
        if name in varied:
            raise UsageError(
                f"--set {text} and --vary {name}=...: {name} is both fixed and varied; "
                f"keep one (--set for one value in every run, --vary for several)"
            )


def _refuse_cluster_and_set(cluster: str | None, fixed: list[Override]) -> None:
    """--cluster would replace the cluster given with --set without a word (as run refuses)."""
    for o in fixed:
        if cluster is not None and o.target == "cluster":
            raise UsageError(f"--cluster {cluster} and {o.label}: the cluster is given twice; keep one")


def _timeout(text: str | None) -> float | None:
    """--timeout in seconds: more than 0 and at most MAX_TIMEOUT_S."""
    if text is None:
        return None
    value = seconds(text, "--timeout", positive=True)
    if value is None or not 0 < value <= MAX_TIMEOUT_S:  # (also refuses inf and nan)
        raise UsageError(f"--timeout {text}: must be more than 0 and at most {MAX_TIMEOUT_S:g}s (a week)")
    return value


def _refuse_cluster_and_varied(cluster: str | None, varied: tuple[str, ...]) -> None:
    """--cluster sets every run's cluster, over the `cluster` setting: varying that too would
    run every point on the one cluster, labelled as another."""
    if cluster is not None and "cluster" in varied:
        raise UsageError(
            f"--cluster {cluster} and --vary cluster=...: the cluster is both fixed and varied; "
            "keep one (--cluster for one cluster in every run, --vary cluster for several)"
        )


def _run_cluster(cluster: str | None) -> str | None:
    """--cluster as each run reads it: a spec file by its whole path (a Dask worker's current
    folder is not this one), a shorthand as given."""
    if cluster is None or not (cluster.strip().endswith(".toml") or names_a_file(cluster.strip())):
        return cluster
    return str(Path(cluster.strip()).resolve())


def _whole_paths(graph, given: list[Override]) -> list[Override]:
    """The overrides as a run applies them, wherever it runs: a file named relative to this
    folder (a trace, a profile, a cluster spec file) by its whole path, as --trace and --cluster
    are (a Dask worker's current folder is not this one); of a target given twice, the last
    value, which alone takes effect. Each keeps the option that gave it, for messages."""
    last = {o.target: o for o in given}
    out = []
    for target, o in last.items():
        value = compiled_value(graph, target)
        if isinstance(value, FilePath):
            o = Override(f"{target}={describe(str(value))}", flag=o.flag)
        elif target == "cluster" and isinstance(value, str) and _run_cluster(value) != value:
            o = Override(f"{target}={describe(_run_cluster(value))}", flag=o.flag)
        out.append(o)
    return out


def _check_cluster(graph, cluster: str | None, given: list[Override]) -> None:
    """The run's cluster, loaded: a spec file's problem names the option that gave the file
    (`--cluster`, or the `--set` or `--vary` of `cluster` among `given`), as others' do; so
    does a throughput profile's, which the cluster's GPU types are checked against."""
    profile = load_profile(graph)  # (its problem named where the setting was given)
    try:
        load_cluster(graph, cluster, profile)
    except ClusterError as err:
        named = [o.label for o in given if o.target == "cluster"]
        flag = f"--cluster {cluster}" if cluster is not None else (named[-1] if named else None)
        if flag is None:
            raise
        raise UsageError(f"{flag}: {err.path}: {err.message}" if err.path else f"{flag}: {err.message}") from None


# What `_plain` gives for a value it does not compare (an element, say): never the same as another.
_UNCOMPARED = object()


def _plain(value: object) -> object:
    """A value as compiled, in a form two values of one argument or setting compare by: a
    number, text (a file's path, whole), a range, an element's name, or a list of these;
    `_UNCOMPARED` for anything else."""
    if isinstance(value, (bool, int, float, str, IdRange, ElementRef)):
        return value
    if isinstance(value, (list, tuple)):
        items = tuple(_plain(item) for item in value)
        return _UNCOMPARED if any(item is _UNCOMPARED for item in items) else ("list", items)
    return _UNCOMPARED


def _refuse_same_values(graph, grid, combo, compiled: list[dict[object, str]]) -> None:
    """Two values of one --vary that compile to the same value (`5min` and `300s`, seeds `1` and
    `01`) would be one point twice: run twice, or one run counted twice in its point's mean and
    confidence interval. Refused, naming both (`compiled`: what each --vary's values so far gave)."""
    for (name, values), text, seen in zip(grid, combo, compiled):
        given = compiled_value(graph, name)
        value = _plain(given)
        # (None: the value none, or a name the compiled graph holds otherwise: not compared.)
        if value is None or value is _UNCOMPARED or (isinstance(value, float) and math.isnan(value)):
            continue
        first = seen.setdefault(value, text)
        if first != text:
            also = " (each run of a point is a seed: --seeds N)" if name == "seed" else ""
            raise UsageError(
                f"--vary {name}={','.join(values)}: {first} and {text} are the same value ({describe(given)}); "
                f"give each value once{also}"
            )


def _warn_of_own_seeds(graph, grid, seeds: int) -> None:
    """Runs of several seeds (--seeds, --vary seed) differ only in what derives from the graph's
    seed: an element that sets its own seed draws the same in every one of them, so its share of
    the spread between seeds is missing from the confidence intervals. Say so, naming each."""
    if seeds < 2 and not any(name == "seed" for name, _ in grid):
        return
    varied = {name for name, _ in grid}
    for name, el in graph.elements.items():
        own = getattr(el, "seed", None)
        if "seed" not in attrs.fields_dict(type(el)) or own is None or f"{name}.seed" in varied:
            continue
        option = f"--seeds {seeds}" if seeds > 1 else "--vary seed"
        print_warning(
            f"warning: {option}: element '{name}' ({type(el).__name__}) sets its own seed ({own}), which the graph's "
            f"seed does not change: it draws the same in every seed's run (to vary it: --vary {name}.seed=...)"
        )


def _refuse_seeds_past_largest(first: int, seeds: int, fixed: list[Override]) -> None:
    """Seeds first..first+seeds-1 must all be seeds; else say so here, naming where the first
    came from, rather than as a `--set seed=` of a value nobody gave."""
    last = first + seeds - 1
    if last <= INT64_MAX:
        return
    given = [o for o in fixed if o.target == "seed"]
    source = given[-1].label if given else "the graph's seed"
    raise UsageError(
        f"--seeds {seeds}: the seeds would run from {first} ({source}) to {last}, but the largest seed is "
        f"{INT64_MAX}; start from a smaller seed or give fewer seeds"
    )


def plan_runs(args, grid, until: float | None) -> list[tuple[str, RunSpec]]:
    """Every run of the sweep with its key, in grid order (seeds innermost). Every combination
    is compiled and its cluster checked before any run starts, so a bad grid value is reported
    where it was given, and nothing runs."""
    graph_path = str(Path(args.graph).resolve())
    flat = load(args.graph)
    fixed = overrides(args.overrides)
    # (A --vary of a path --trace replaces would label every run with a trace it did not read.)
    named = [*fixed, *(Override(f"{n}={','.join(values)}", flag="--vary") for n, values in grid)]
    traced = trace_overrides(flat, args.graph, named, args.trace)
    trace = str(Path(args.trace).resolve()) if args.trace is not None else None
    # (A setting two imported files set differently is decided by a --vary of it, in every run.)
    decided = [Override(f"{n}={values[0]}", flag="--vary") for n, values in grid if n in flat.setting_clashes]
    base = compile_graph(flat, fixed + traced + decided)
    check_traces(base, args.trace)
    check_sweepable(base, args.sink)
    _warn_of_own_seeds(base, grid, args.seeds)
    first_seed = int(base.settings.seed)
    _refuse_seeds_past_largest(first_seed, args.seeds, fixed)
    cluster = _run_cluster(args.cluster)
    # What every run is given besides its point, as given (each run's row records it: a store
    # that several sweeps wrote labels a run that did not vary a name by what it had).
    given_fixed = {o.target: o.value_text for o in fixed if o.target != "seed"}
    given_fixed |= {o.target: str(args.trace) for o in traced}
    if args.cluster is not None:
        given_fixed["cluster"] = args.cluster
    runs = []
    pair_profiles: set[str] = set()  # (each pair profile read once, however many runs give it)
    compiled: list[dict[object, str]] = [{} for _ in grid]  # per --vary: each value as compiled, and its text
    # (What `check` and `run` warn of, of each run's graph, said once each when all are planned:
    # the worker processes say nothing of it.)
    warnings = SweepWarnings(args.cluster)
    for combo in itertools.product(*(values for _, values in grid)):
        varied = [Override(f"{n}={v}", flag="--vary") for (n, _), v in zip(grid, combo)]
        labels = {n: v for (n, _), v in zip(grid, combo)}
        for i in range(args.seeds):
            seeded = [Override(f"seed={first_seed + i}")] if "seed" not in labels else []
            # (In the order a run applies them: its overrides, then the trace.)
            graph = compile_graph(flat, [*fixed, *varied, *seeded, *traced])
            _refuse_same_values(graph, grid, combo, compiled)
            _check_cluster(graph, args.cluster, [*fixed, *varied])
            warnings.add(graph, {**labels, "seed": int(graph.settings.seed)})
            readonce.clear()  # (the runs read their traces where they run: keep none here)
            if graph.settings.pair_profile is not None and str(graph.settings.pair_profile) not in pair_profiles:
                load_pairs(graph)  # (a bad file is said where the setting was given, before any run starts)
                pair_profiles.add(str(graph.settings.pair_profile))
            given = tuple(_whole_paths(graph, [*fixed, *varied, *seeded]))
            labels_seed = {**labels, "seed": int(graph.settings.seed)}
            spec = RunSpec(graph_path, given, cluster, until, labels_seed, trace, args.sink, given_fixed)
            runs.append((run_key(graph, flat, spec), spec))
    warnings.say()
    return runs
