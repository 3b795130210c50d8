"""A simulation that stalls: jobs wait, none runs and no more will arrive, round after round.
The engine counts such idle rounds (`count_idle`, and `pass_quiet` for the rounds it passes
without a tick); after STALL_ROUNDS of them in a row the run stops with a message naming the
largest waiting job and what it is measured against (`stall_message`). Rounds in which jobs
hold GPUs but none progresses (each waits all round for GPUs a checkpoint holds, or for a
resize: a policy that swaps gangs every round under a checkpoint longer than the round) are
counted too (`count_stuck`), and STALL_ROUNDS of them in a row stop the run as well. When every waiting job
asks more GPUs than it could ever be given (runtime/certain_stalls.py), the stall is certain
and the run stops at the first idle round: the rounds counted are for an element that may be
waiting for something (a timer, a job's wait growing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.certain_stalls import measured_against, never_fit
from roundhouse.runtime.graph_sources import exhausted
from roundhouse.runtime.types import Ranking

if TYPE_CHECKING:
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.element import Element
    from roundhouse.runtime.engine import Engine
    from roundhouse.runtime.world import World

# Rounds with jobs waiting, none running and no arrivals before the run is declared stalled.
STALL_ROUNDS = 2000


class StalledError(RoundhouseError):
    """Jobs wait, nothing runs, and nothing will change: the graph cannot make progress.
    `certain`: found at once (no waiting job can ever be placed), not after STALL_ROUNDS.
    `stuck`: jobs held GPUs all along, but none progressed (`count_stuck`)."""

    def __init__(self, message: str, certain: bool = False, stuck: bool = False):
        super().__init__(message)
        self.certain = certain
        self.stuck = stuck


def count_idle(engine: Engine, ctx: Round, values: dict[tuple[str, str], object]) -> None:
    """After the round `ctx` (its port values `values`): in a simulation in which jobs wait,
    none runs and no more will arrive, the round counts as idle, and what each placer was asked
    in it is kept (`stall_message` names it); STALL_ROUNDS idle rounds in a row and the run has
    stalled, or at the first when no waiting job can ever be placed (`never_fit`). A live cluster can change (nodes join), so only a simulation can stall for good."""
    world = engine.world
    if engine._can_stall and len(world.running_rows) == 0 and world.unfinished > 0 and exhausted(engine._sources):
        engine._idle_rounds += 1
        engine._asked = [(el, got) for el, key in placer_inputs(engine._wiring) if isinstance(got := values.get(key), Ranking)]
        # (Not when the run's time limit comes first: it ends there as it did, with its results.)
        before_limit = engine.until is None or ctx.now + STALL_ROUNDS * ctx.round_s < engine.until
        certain = engine._idle_rounds == 1 and before_limit and never_fit(world, engine._asked)
        if certain or engine._idle_rounds >= STALL_ROUNDS:
            rankers = ranked_by(engine._wiring)
            raise StalledError(stall_message(world, ctx.now, engine._order, engine._asked, rankers, certain), certain)
    else:
        engine._idle_rounds = 0


def count_stuck(engine: Engine, ctx: Round) -> None:
    """After the round `ctx` is advanced: in a simulation whose jobs held GPUs all round
    without progressing (the simulator's `moved`), no more arriving, the round counts as stuck;
    STALL_ROUNDS such rounds in a row and the run has stalled. Rounds passed without a tick
    between two stuck ones (in which jobs progress) start the count again."""
    if not engine._can_stall or getattr(engine.backend, "moved", True) or not exhausted(engine._sources):
        return
    count, last = getattr(engine, "_stuck", (0, -1))  # (an engine from an older snapshot has none)
    count = count + 1 if last == engine._rounds - 1 else 1
    engine._stuck = (count, engine._rounds)
    if count >= STALL_ROUNDS:
        raise StalledError(stuck_message(engine, ctx.now + ctx.round_s), stuck=True)


def stuck_message(engine: Engine, now: float) -> str:
    """Why jobs that hold GPUs make no progress: the longest a suspended job's checkpoint keeps
    its GPUs, or a resize's pause, against the round."""
    settings, world = engine.graph.settings, engine.world
    running = world.running_rows
    held = int(world.jobs.column("held")[running].max()) if len(running) else 0
    checkpoint = float(settings.checkpoint) + float(settings.checkpoint_per_gpu) * held
    if checkpoint > float(settings.round):
        why = (
            f"a suspended job's checkpoint keeps its GPUs past the round's end ({checkpoint:g} s for {held} GPUs: "
            f"checkpoint {float(settings.checkpoint):g} s and checkpoint_per_gpu {float(settings.checkpoint_per_gpu):g} s "
            f"a GPU, against a round of {float(settings.round):g} s), so each job launched waits all round and is "
            "suspended again at its end. Give a checkpoint that fits in a round, longer rounds, or a policy that keeps "
            "a job's GPUs for more than one round"
        )
    else:
        why = (
            f"each waits all round for its GPUs or a resize's pause (resize_restart {float(settings.resize_restart):g} s, "
            f"resize_in_place {float(settings.resize_in_place):g} s, against a round of {float(settings.round):g} s), and "
            "is moved again at its end. Give pauses that fit in a round, or longer rounds"
        )
    waiting = int((world.jobs.column("status") == 0).sum())
    return (
        f"run stalled at t={now:g}s: {len(running)} job(s) hold GPUs and {waiting} wait, but none has progressed for "
        f"{STALL_ROUNDS} rounds and no more jobs will arrive: {why}."
    )


def ranked_by(wiring) -> dict[str, list[str]]:
    """For each placer (by name), the elements whose rankings it is given: where a job no
    placer was asked to place was left out."""
    out: dict[str, list[str]] = {}
    for el, (source, _) in placer_inputs(wiring):
        out.setdefault(el.name, []).append(source)
    return out


def placer_inputs(wiring) -> list[tuple[Element, tuple[str, str]]]:
    """(placer, key of a port value) for each source of each placer's ranking input, in tick
    order: where the rankings the placers are asked to place come from."""
    return [
        (el, key)
        for el, inputs, _, _ in wiring
        if el.category == "placement"
        for _, _, port_type, sources in inputs
        if port_type is Ranking
        for key in sources
    ]


def stall_message(
    world: World,
    now: float,
    elements: Sequence[Element] = (),
    asked: Sequence[tuple[Element, Ranking]] = (),
    rankers: dict[str, list[str]] | None = None,
    certain: bool = False,
) -> str:
    """Why a simulation cannot make progress, naming the largest waiting job and what it is
    measured against: the cluster's GPUs, or on a cluster of several GPU types the largest
    type's (a placer puts a job on GPUs of one type); and an element of `elements` that counts
    waiting jobs it cannot start (`unschedulable`: Pollux, jobs of no elastic application).

    A job's GPUs are those a placer was last asked for it (`asked`: each placer and the ranking
    it was given in the last round ticked), which a policy may choose (Optimus does), else those
    its trace asks for, and the message says which; a job no placer was asked to place is said
    to be left out of the rankings the placers were given, by the elements that made them
    (`rankers`: by placer, from `ranked_by`). `certain`: no waiting job can ever be placed
    (`never_fit`), and the job is measured against the GPUs it could be given."""
    cols = world.jobs
    status = cols.column("status")
    waiting = (status == 0).nonzero()[0]
    trace = cols.column("gpus")[waiting]
    counts, by = _asked_counts(len(cols), waiting, asked)
    gpus = np.where(counts >= 0, counts, trace)
    detail = ""
    if len(waiting):
        at = int(np.argmax(gpus))
        biggest, want = int(waiting[at]), int(gpus[at])
        if counts[at] < 0:
            source = " (the count its trace asks for" + (f": {_left_out(asked, rankers)})" if asked else ")")
        elif want != trace[at]:
            placer = asked[by[at]][0]
            source = (
                f" (what placer '{placer.name}' ({type(placer).__name__}) was last asked for it; its trace asks for {trace[at]})"
            )
        else:
            source = ""
        cluster = world.cluster
        of = f"of {cluster.n_gpus}"
        if certain:
            of = measured_against(world, biggest, asked[by[at]][1] if by[at] >= 0 else None)
        elif len(cluster.gpu_types) > 1:
            largest = int(np.argmax(cluster.gpus_by_type))
            of = f"of one type, and the largest type, {cluster.gpu_types[largest]}, has {cluster.gpus_by_type[largest]}"
        detail = f"; the largest waiting job ({cols.column('job_id')[biggest]}) wants {want} GPUs{source} {of}"
    idle = (
        "none runs and no more jobs will arrive, and none can ever be placed"
        if certain
        else (f"none has run for {STALL_ROUNDS} rounds and no more jobs will arrive")
    )
    return f"run stalled at t={now:g}s: {len(waiting)} job(s) wait, {idle}{detail}.{_unschedulable(world, waiting, elements)} Check the placer and admission arguments."


def _left_out(asked: Sequence[tuple[Element, Ranking]], rankers: dict[str, list[str]] | None) -> str:
    """That no placer was asked to place a job, and by whose rankings it was left out."""
    names = sorted({name for el, _ in asked for name in (rankers or {}).get(el.name, ())})
    if not names:
        return "no placer was asked to place it"
    whose = ", ".join(f"'{n}'" for n in names)
    return f"no placer was asked to place it: the ranking{'s' if len(names) > 1 else ''} of {whose} left it out"


def _asked_counts(n: int, waiting: np.ndarray, asked: Sequence[tuple[Element, Ranking]]) -> tuple[np.ndarray, np.ndarray]:
    """For each waiting job: the most GPUs a placer of `asked` was asked for it (-1: none was
    asked to place it), and which entry of `asked` asked that."""
    count = np.full(n, -1, dtype=np.int64)
    by = np.full(n, -1, dtype=np.int64)
    for k, (_, ranking) in enumerate(asked):
        rows, gpus = np.asarray(ranking.rows, dtype=np.int64), np.asarray(ranking.gpus, dtype=np.int64)
        inside = (rows >= 0) & (rows < n)
        rows, gpus = rows[inside], gpus[inside]
        more = gpus > count[rows]
        count[rows[more]], by[rows[more]] = gpus[more], k
    return count[waiting], by[waiting]


def _unschedulable(world: World, waiting: np.ndarray, elements) -> str:
    """What an element that counts waiting jobs it cannot start says of them: Pollux starts only
    jobs of its elastic profile's applications."""
    for el in elements:
        count = (el.counters or {}).get("unschedulable", 0)
        if not count or not world.jobs.has_column("elastic_model") or not len(waiting):
            continue
        outside = waiting[world.jobs.column("elastic_model")[waiting] < 0]
        if not len(outside):
            continue
        first, jobs = int(outside[0]), world.jobs
        model = jobs.column("model")[first] if jobs.has_column("model") else None
        named = f"job {jobs.column('job_id')[first]}" + (f", model {model}" if model is not None else "")
        if world.throughput.elastic is None:  # (no profile: there is no application to be of)
            return (
                f" Element '{el.name}' ({type(el).__name__}) cannot start {count} waiting job(s) ({named}): it starts only"
                ' elastic jobs, and the graph sets no elastic_profile (give one, e.g. elastic_profile = "pollux").'
            )
        return (
            f" Element '{el.name}' ({type(el).__name__}) cannot start {count} waiting job(s), of no application"
            f" of the elastic profile ({named})."
        )
    return ""
