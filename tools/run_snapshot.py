"""`roundhouse run GRAPH --until TIME --snapshot FILE`: the run saved at --until as a simulation's
snapshot (`Simulation.save`'s file, runtime/snapshot.py), for `roundhouse whatif FILE` and
`Simulation.load`. What could stop the save is checked before the run, not found after it."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from roundhouse.errors import UsageError
from roundhouse.runtime.files import RUN_FILE_NAMES, RUN_FILE_PATTERNS, write_problem
from roundhouse.runtime.snapshot import SnapshotError, unforkable_elements
from roundhouse.runtime.snapshot_paths import target_to_write
from roundhouse.runtime.useless_runs import live_only_warnings

if TYPE_CHECKING:
    from collections.abc import Callable

    from roundhouse.runtime.engine import RunResult


def refuse_snapshot_without_until(path: str, written: str | None, until: float | None) -> None:
    """--snapshot needs a time to save at: a run without --until (or --until inf) runs until it
    ends, and a run that has ended cannot be saved (it has no next round to go on from)."""
    if not path.strip():
        raise UsageError("--snapshot: the file name is empty (often an unset shell variable); give one such as run.snap")
    if until is None:
        given = "without --until" if written is None else f"with --until {written}"
        raise UsageError(
            f"--snapshot {path}: needs --until: the snapshot is the run's state at that time, from which it goes on "
            f"(such as --until 24h); {given} the run goes until every job has finished, and a run that has ended "
            "cannot be saved"
        )


def refuse_unsavable_graph(path: str, graph) -> None:
    """A graph no snapshot of which is worth making or can be made: one whose only sources take
    jobs submitted live (simulated, it ends in its first round with no job), or one with an
    element whose state a save cannot write (it declares none)."""
    if live_only_warnings(graph):
        sources = sorted(name for name, el in graph.elements.items() if el.category == "source")
        raise UsageError(
            f"--snapshot {path}: the graph's only source(s) ({', '.join(sources)}) bring jobs submitted live, and "
            "nobody submits to a simulation: it ends in its first round with no job, leaving nothing to save; to "
            "simulate from a live scheduler's state, serve the graph with --journal and give `roundhouse whatif` "
            "the journal"
        )
    unforkable = unforkable_elements(graph)
    if unforkable:
        name, cls, why = unforkable[0]
        raise UsageError(f"--snapshot {path}: element '{name}' ({cls}) cannot be saved: {why}")


def check_snapshot_file(path: str, out: Path | None) -> None:
    """The file the snapshot goes to, checked as a save checks it (a folder, a folder not there,
    a pipe or device, a file that is not a snapshot: `target_to_write`) and writable, before
    the run; and not one of the files the run writes in its `--out` folder `out`."""
    try:
        target = target_to_write(path)
    except SnapshotError as err:
        raise UsageError(_as_option(str(err), path)) from None
    if out is not None and target.parent.resolve() == out.resolve() and _a_results_file(target.name):
        raise UsageError(
            f"--snapshot {path}: is one of the files the run writes in its --out folder; give another name, such as "
            f"{target.parent / 'run.snap'}"
        )
    problem = write_problem(target)
    if problem is not None:
        raise UsageError(f"--snapshot {path}: cannot be written ({problem.strerror})")


def _a_results_file(name: str) -> bool:
    """Whether a run's results folder has a file of this name (runtime/files.py's names)."""
    return name == "run.json" or name in RUN_FILE_NAMES or any(fnmatch(name, p) for p in RUN_FILE_PATTERNS)


def _as_option(message: str, path: str) -> str:
    """A save's message (`snapshot PATH: ...`) as the option's (`--snapshot PATH: ...`)."""
    return "--" + message if message.startswith(f"snapshot {path}") else f"--snapshot {path}: {message}"


def run_and_save(args, until: float, on_round: Callable | None, record: Path | None) -> tuple[RunResult, str]:
    """The run of `roundhouse run`, as a `Simulation` (runtime/simulation.py `for_command`):
    run to --until, saved there, then ended there as a run given --until ends (its round at the
    limit ticks). Returns the result, and why no snapshot was written if the run had ended
    before --until ("" when it was written)."""
    from roundhouse.runtime.simulation import end_at_clock, for_command, save_for_command

    sim = for_command(args.graph, args.trace, args.cluster, args.overrides, on_round, record)
    sim.run_until(until)
    ended = ""
    if sim.done:  # (stopped before the limit: there is no run left to save)
        ended = (
            f"--snapshot {args.snapshot}: no snapshot written: the run ended at t={sim.now:g}s ({sim.now / 3600:.2f} h), "
            f"before --until {args.until} ({sim.stop_reason}), and a run that has ended cannot be saved (its results "
            "are printed and written as without --snapshot); give an earlier --until to save it while it runs"
        )
    else:
        try:
            save_for_command(sim, args.snapshot)
        except SnapshotError as err:
            raise UsageError(_as_option(str(err), args.snapshot)) from None
    return end_at_clock(sim), ended
