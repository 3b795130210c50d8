"""Run a compiled graph in the simulator: the one entry point the command line, the
reproductions and the tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from roundhouse.errors import ClusterError, RoundhouseError, SchedError, TraceError, UsageError
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster, spec_file
from roundhouse.runtime.cluster_types import cluster_gpu_types, gpu_types
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.engine import Engine, RunResult
from roundhouse.runtime.settings import BUILT_IN_ELASTIC
from roundhouse.runtime.world import World


def load_cluster(graph: CompiledGraph, cluster: str | Cluster | None, profile=None) -> Cluster:
    """The cluster given on the command line (`--cluster`), else the graph's `cluster` setting.

    Its GPU types must be ones the graph can run on (`cluster_gpu_types`); a problem is reported
    where the spec was given: the flag, `--set cluster`, or the setting's place in the graph."""
    if isinstance(cluster, Cluster):
        return cluster
    profile = profile or load_profile(graph)
    known = gpu_types(graph, profile)
    if cluster is not None:
        return _from_flag("--cluster", cluster, graph, known, profile)
    spec = graph.settings.cluster
    if spec is None:
        raise ClusterError(
            'no cluster: give --cluster (e.g. --cluster 32x4:V100) or set cluster = "..." in the graph', graph.path
        )
    location = graph.setting_locations.get("cluster")
    if location is None:  # given with --set: relative to the current folder, as other --set paths
        return _from_flag(graph.setting_flags.get("cluster", "--set cluster"), spec, graph, known, profile)
    # A spec file named in the graph is relative to the graph's folder.
    file = spec_file(spec, Path(graph.path).parent)
    text = spec if file is None else str(file)
    try:
        return Cluster.parse(text, cluster_gpu_types(graph, text, known, profile))
    except ClusterError as err:
        where = f"{err.path}: " if err.path else ""
        raise SchedError(f"setting 'cluster': {where}{err.message}", location) from None


def _from_flag(flag: str, spec: str, graph: CompiledGraph, known: tuple[str, ...], profile) -> Cluster:
    try:
        return Cluster.parse(spec, cluster_gpu_types(graph, spec, known, profile))
    except ClusterError as err:
        if err.path is not None:  # the spec file's own message names it
            raise
        raise UsageError(f"{flag}: {err.message}") from None


def load_profile(graph: CompiledGraph):
    """The graph's throughput profile (the shipped one when it names none). A bad file is
    reported where the setting was given, as `load_pairs` does."""
    from roundhouse.traces.profiles import ProfileTable

    if graph.settings.profile is None:
        return ProfileTable.load(None)
    try:
        return ProfileTable.load(graph.settings.profile)
    except RoundhouseError as err:
        raise setting_error(graph, "profile", err) from None


def load_elastic(graph: CompiledGraph):
    """The graph's elastic profile (traces/goodput.py), or None. "ones" or "pollux" alone names
    a built-in profile (traces/ones.py, traces/pollux.py) unless a folder of that name is there."""
    if graph.settings.elastic_profile is None:
        return None
    from pathlib import Path

    from roundhouse.errors import TraceError
    from roundhouse.traces.goodput import ElasticProfile

    path = Path(graph.settings.elastic_profile)
    name = built_in_elastic(graph)
    if name is not None:
        from roundhouse.traces import ones, pollux

        return ones.profile() if name == "ones" else pollux.profile()
    if path.name.lower() in BUILT_IN_ELASTIC and not path.exists():
        raise TraceError(
            str(path), f'no such folder (the built-in profile is named "{path.name.lower()}" alone, without a folder)'
        )
    try:
        return ElasticProfile.load_pollux(path)
    except TraceError as err:
        if path.name.lower() not in BUILT_IN_ELASTIC or err.path != str(path):
            raise
        # (a folder of that name beside the graph, an output folder say, hides the built-in one)
        raise TraceError(
            err.path,
            f'{err.message}: this folder is read in place of the built-in profile "{path.name.lower()}"; '
            "to use that one, rename or move the folder",
        ) from None


def built_in_elastic(graph: CompiledGraph) -> str | None:
    """The built-in elastic profile the graph's `elastic_profile` names ("ones", "pollux"), or
    None: a folder, or no profile."""
    import os
    from pathlib import Path

    if graph.settings.elastic_profile is None:
        return None
    path = Path(graph.settings.elastic_profile)
    name = path.name.lower()
    if name not in BUILT_IN_ELASTIC or path.exists():
        return None
    # The setting was resolved against the folder of the file that wrote it (the current one
    # for --set): a bare name is that folder joined with the name; any other was written out.
    written = graph.setting_locations.get("elastic_profile")
    base = Path(os.path.normpath(Path(written.path).parent)) if written is not None else Path.cwd()
    return name if path.parent == base else None


def load_pairs(graph: CompiledGraph):
    """The graph's `pair_profile`, read and checked; None when it gives none (the shipped Gavel
    table, read only when two jobs first share GPUs). A bad file is reported where the setting
    was given (its line in the graph, or the `--set`/`--vary` that gave it), before a run starts,
    not when a solver first pairs two jobs."""
    if graph.settings.pair_profile is None:
        return None
    from roundhouse.traces.pairs import PairTable

    try:
        return PairTable.load(graph.settings.pair_profile)
    except RoundhouseError as err:
        raise setting_error(graph, "pair_profile", err) from None


def setting_error(graph: CompiledGraph, name: str, err: RoundhouseError) -> RoundhouseError:
    """A problem with the file a setting names, said where the setting was given: at its value in
    the graph (`setting 'pair_profile': p.csv:3: column 'gpus': ...`), or at the command-line
    option that gave it."""
    if isinstance(err, TraceError):
        where = err.path if err.row is None else f"{err.path}:{err.row}"
        what = f"column '{err.column}': {err.message}" if err.column else err.message
        text = f"{where}: {what}"
    else:
        text = getattr(err, "message", None) or str(err)
    location = graph.setting_locations.get(name)
    if location is None:
        return UsageError(f"{graph.setting_flags.get(name, f'--set {name}')}: {text}")
    return SchedError(f"setting '{name}': {text}", location)


def new_world(graph: CompiledGraph, cluster: Cluster, profile) -> World:
    """A world for the graph: its cluster, profiles (throughput, pairs, elastic) and settings."""
    settings = graph.settings
    world = World(cluster, profile, settings.reference_gpu, load_pairs(graph), load_elastic(graph))
    world.batch_jump_penalty = float(settings.batch_jump_penalty)
    world.reference_at = graph.setting_locations.get("reference_gpu") or graph.setting_flags.get("reference_gpu")
    return world


def new_engine(
    graph: CompiledGraph,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    profile=None,
    explain: bool = False,
) -> Engine:
    """The graph's engine on a new world and simulator, before its first round (`Engine.begin`
    starts its elements)."""
    profile = profile or load_profile(graph)
    world = new_world(graph, load_cluster(graph, cluster, profile), profile)
    return Engine(graph, world, Simulator.for_graph(world, graph.settings), until=until, on_round=on_round, explain=explain)


def simulate(
    graph: CompiledGraph,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    profile=None,
    explain: bool = False,
    explain_to: Path | None = None,
) -> RunResult:
    """Simulate the graph; with `explain`, the world records why each job is where it is
    (runtime/explain.py), as `result.world.explain`, and with `explain_to` as well writes the
    record to that file as the run goes (`result.world.explain.write` to it finishes it)."""
    cluster = _check_arguments(graph, cluster, until, on_round, explain, explain_to)
    if explain_to is not None and not explain:  # (no record is kept, so none would be written)
        raise UsageError(f"explain_to: {explain_to} is written only when the run keeps a record: give explain=True as well")
    engine = new_engine(graph, cluster, until, on_round, profile, explain)
    world = engine.world
    if explain_to is not None and world.explain is not None:
        world.explain.write_as_it_goes(explain_to, world)
    return engine.run()


def _check_arguments(graph, cluster, until, on_round, explain, explain_to) -> str | Cluster | None:
    """`simulate`'s arguments as a caller from Python may give them wrong: a UsageError naming the
    argument, not a failure deep in the engine. A cluster given as a path is taken as its text."""
    import numpy as np

    from roundhouse.runtime.simulation import _time_argument

    if not isinstance(graph, CompiledGraph):
        hint = (
            " (compile it first: simulate(compile_file(PATH)), from roundhouse.runtime.compiler; or run it with "
            "roundhouse.Simulation(PATH).run())"
            if isinstance(graph, (str, Path))
            else ""
        )
        raise UsageError(f"graph: expected a compiled graph, got {type(graph).__name__}{hint}")
    if isinstance(cluster, Path):
        cluster = str(cluster)
    if cluster is not None and not isinstance(cluster, (str, Cluster)):
        raise UsageError(f'cluster: expected a spec such as "8x4:V100", a .toml path or a Cluster, got {type(cluster).__name__}')
    _time_argument("until", until, optional=True)
    if on_round is not None and not callable(on_round):
        raise UsageError(f"on_round: expected a function of each round, or None, got {type(on_round).__name__}")
    if not isinstance(explain, (bool, np.bool_)):
        raise UsageError(f"explain: expected True or False, got {explain!r}")
    if explain_to is not None and (not isinstance(explain_to, (str, Path)) or not str(explain_to)):
        raise UsageError(f"explain_to: expected the path of a file to write, got {explain_to!r}")
    if explain_to is not None:  # (before the run: its thread would find out at the first block, or at the end)
        from roundhouse.runtime.files import write_problem

        if Path(explain_to).is_dir():
            raise UsageError(f"explain_to: {explain_to}: is a folder; give the path of a file to write")
        problem = write_problem(Path(explain_to))
        if problem is not None:
            raise UsageError(f"explain_to: {explain_to}: cannot be written ({problem.strerror})")
    return cluster
