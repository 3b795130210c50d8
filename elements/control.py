"""Control: elements that choose, while the run goes on, which of several candidate elements
acts (switches), and the synthesizer that decides by simulating each choice ahead."""

from __future__ import annotations

import ast
import functools
import itertools
import numbers
import os
import pickle
import sys
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
import polars as pl

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.element_failures import ElementFailure, argument_error, call_element
from roundhouse.runtime.explain import CANDIDATE
from roundhouse.runtime.output_checks import check_emitted
from roundhouse.runtime.types import Active, Jobs, Ranking
from roundhouse.runtime.values import Duration, ElementRef, at_most, describe, format_duration, one_of, positive
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext
    from roundhouse.runtime.lookahead import Fork, Outlook
    from roundhouse.runtime.snapshot import Shared


_NO_ROWS = np.empty(0, dtype=np.int64)
_NO_ROWS.setflags(write=False)


def _one_or_more(instance, attribute, value) -> None:
    if not value:
        raise ValueError("must name at least one element")
    names = [v.name for v in value]
    if len(set(names)) != len(names):
        raise ValueError(f"names an element twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")


class _Switch(Element):
    """What the two switches share: candidates ticked in turn, one at a time."""

    holds = ("candidates",)
    state: ClassVar[tuple[str, ...] | None] = ("_selected", "_pending")
    candidates: list[ElementRef]

    def start(self, ctx: RoundContext) -> None:
        self._selected = 0
        self._pending: int | None = None
        self.counters.update(selected=0, switches=0)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.candidates]

    def select(self, index: int) -> None:
        """Make candidate `index` (counted from 0, in the order the graph lists them) act from
        this round on (a synthesizer's decision, or one by hand between rounds)."""
        n = len(self.candidates)
        if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < n:
            raise IndexError(
                f"{type(self).__name__} '{self.name}' has {n} candidate{'s' if n != 1 else ''} "
                f"({', '.join(f'{k}: {name}' for k, name in enumerate(self.names))}): select one by its "
                f"index, 0 to {n - 1}, not {index!r}"
            )
        index = int(index)
        self._pending = None if index == self._selected else index

    @property
    def selected(self) -> int:
        return self._selected if self._pending is None else self._pending

    def quiet_until(self, ctx: RoundContext) -> float | None:
        """Event skipping: as quiet as the candidate acting now (a synthesizer's decision
        comes at a round it does not skip), asked as that candidate (a failure names it)."""
        chosen = self._candidate(self._selected)
        quiet = getattr(chosen, "quiet_until", None)  # (the engine's skipping asks)
        return self._as_candidate(ctx, chosen, "quiet_until", quiet, ctx) if quiet is not None else None

    def reference_problem(self, field: str, peer: Element) -> str | None:
        """What is wrong with an element an argument names, or None (the compiler asks, and
        reports it where the argument names it; a switch naming itself, it reports as such)."""
        if field == "candidates" and isinstance(peer, _Switch) and peer is not self:
            return (
                f"'{peer.name}' ({type(peer).__name__}) cannot be a candidate of a switch: give this switch its "
                "candidates directly (a switch among them would be recorded, and weighed by a Synthesizer, as one "
                "candidate, whichever of its own acts)"
            )
        return None

    def interchangeable(self, arriving: bool) -> bool:
        """Whether, from now on and with no arrivals after this round's (a look-ahead), every
        candidate would act as the selected one does (the synthesizer then simulates one)."""
        return False

    def _candidate(self, index: int) -> Element:
        return self.peers[self.candidates[index].name]

    def _tick_candidate(self, ctx: RoundContext, **inputs: Any) -> Any:
        """The candidate acting now, ticked as the engine ticks an element: what it raises, or
        an output of another type than its port's, is reported naming it, not the switch."""
        chosen = self._candidate(self._selected)
        out = self._as_candidate(ctx, chosen, "tick", chosen.tick, ctx, **inputs)
        port = chosen.outputs[0]  # (the compiler checked its ports are the switch's)
        if type(out) is not port.type:
            check_emitted(chosen, ctx, port.name, out, port.type)  # type: ignore[arg-type]
        return out

    def _as_candidate(self, ctx: RoundContext, chosen: Element, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        ctx_any: Any = ctx
        ctx_any.element = chosen  # (its generator and messages are its own)
        try:
            return call_element(chosen, f"{what} (as a candidate of switch '{self.name}')", ctx, fn, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            ctx_any.element = self


@element
class ChooseAdmission(_Switch):
    """Pass arriving jobs through one of several admission gates, the one selected now.

    A synthesizer selects the gate. On a switch the gate that stops hands the jobs it still holds
    to the one that starts (they come before this round's arrivals), which takes over the jobs
    admitted so far and not finished (a load limit counts them). Gates not selected are not
    ticked.

    Ports:
        jobs: arriving jobs (several sources may connect).
        admitted: the selected gate's admitted jobs.
    Arguments:
        candidates: the admission gates to choose from, by name (the first acts at the start; none a switch itself).
    Counters:
        selected: index of the gate acting now.
        switches: times the gate changed.
    Cost: the selected candidate's cost, plus O(a + k) over the admitted, unfinished jobs a (kept
        for a gate that takes over) and the jobs k admitted, in a round in which jobs are admitted
        or finish; O(h) over the held jobs h when the candidate changes.
    See also: ChoosePolicy, Synthesizer, AcceptThreshold
    Paper: Blox (EuroSys'24) §5.2, admission policies of the automatic scheduler synthesizer.
    """

    category = "control"
    inputs = (In("jobs", Jobs, multi=True),)
    outputs = (Out("admitted", Jobs),)
    state = ("_selected", "_pending", "_admitted")

    candidates: list[ElementRef] = attrs.field(validator=_one_or_more)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self._admitted = np.zeros(0, dtype=np.int64)
        for index in range(len(self.candidates)):
            why = self.reference_problem("candidates", self._candidate(index))
            if why is not None:  # (the compiler reports it first, at its place in the graph)
                raise TypeError(why)

    def reference_problem(self, field: str, peer: Element) -> str | None:
        """What is wrong with an element an argument names, or None (the compiler asks, and
        reports it where the argument names it)."""
        nested = super().reference_problem(field, peer)
        if nested is not None or peer is self:  # (naming itself: the compiler says so, alone)
            return nested
        gate = [p.type for p in peer.inputs] == [Jobs] and [p.type for p in peer.outputs] == [Jobs]
        # (an element with other ports: the compiler says so, comparing them with the switch's)
        if field == "candidates" and gate and not (hasattr(peer, "hand_over") and hasattr(peer, "take_over")):
            return (
                f"'{peer.name}' ({type(peer).__name__}) cannot be a candidate of a ChooseAdmission: a gate it switches "
                "off hands the jobs it holds to the next (methods hand_over and take_over, which AcceptAll and "
                "AcceptThreshold have)"
            )
        return None

    def tick(self, ctx: RoundContext, jobs: Jobs) -> Jobs:
        if len(ctx.events.finished) and len(self._admitted):
            self._admitted = self._admitted[ctx.jobs.column("status")[self._admitted] != FINISHED]
        if self._pending is not None:
            old = self._candidate(self._selected)
            held = self._as_candidate(ctx, old, "hand_over", old.hand_over)  # type: ignore[attr-defined]
            self._selected, self._pending = self._pending, None
            new = self._candidate(self._selected)
            self._as_candidate(ctx, new, "take_over", new.take_over, self._admitted)  # type: ignore[attr-defined]
            self.counters["switches"] += 1
            if len(held):
                jobs = ctx.jobs.view(np.concatenate([held, jobs.rows]), Jobs)
        self.counters["selected"] = self._selected
        admitted = self._tick_candidate(ctx, jobs=jobs)
        if len(admitted):
            self._admitted = np.concatenate([self._admitted, admitted.rows])
        return admitted

    def interchangeable(self, arriving: bool) -> bool:
        """With no job arriving this round and none held back by the selected gate, no gate has
        a job to admit or hold before the horizon: each admits nothing, as the selected one."""
        gate = self._candidate(self._selected)
        return not arriving and self._pending is None and getattr(gate, "holding", lambda: -1)() == 0


@element
class ChoosePolicy(_Switch):
    """Rank the pool's jobs with one of several policies, the one selected now.

    A synthesizer selects the policy. Policies not selected are not ticked: one that keeps
    state of its own finds it as it left it when selected again.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the selected policy's ranking.
    Arguments:
        candidates: the policies to choose from, by name (the first acts at the start; none a switch itself).
    Counters:
        selected: index of the policy acting now.
        switches: times the policy changed.
    Cost: O(1) besides the selected candidate's own cost.
    See also: ChooseAdmission, Synthesizer, Fifo, Srtf, Las
    Paper: Blox (EuroSys'24) §5.2, scheduling policies of the automatic scheduler synthesizer.
    """

    category = "control"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    candidates: list[ElementRef] = attrs.field(validator=_one_or_more)

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        if self._pending is not None:
            # (The policy that stops acting is told, in the first round it is not ticked: Themis
            # then settles the rounds skipping passed while it acted, which its ticks would have
            # had, and no later ones.)
            old = self._candidate(self._selected)
            stopped = getattr(old, "stopped_acting", None)
            if stopped is not None:
                self._as_candidate(ctx, old, "stopped_acting", stopped, ctx)
            self._selected, self._pending = self._pending, None
            self.counters["switches"] += 1
        self.counters["selected"] = self._selected
        if ctx.explaining:  # (the placers it feeds are recorded as following the candidate acting)
            ctx.explain(CANDIDATE, _NO_ROWS, self._selected)
        return self._tick_candidate(ctx, active=active)


METRICS = ("jct", "responsiveness", "both")


@element
class Synthesizer(Element):
    """Every few rounds, simulate every combination of its switches' candidates ahead from now,
    and switch to the one that serves the metric best.

    Every `every` rounds (Blox: ten rounds of five minutes), from round 0 (rounds counted by the
    clock: a run started from a forked world decides at the next such round), it forks the state
    at the round's start (world, clock, every element) and, for each combination of the
    candidates of the switches it names (three admission gates times three policies: nine),
    simulates the jobs now in the system over `horizon`, without new arrivals, in a pool of
    `workers` processes. Where it cannot start processes, it simulates them one after another in
    its own (as `workers=1`): inside a daemon process (a sweep's local or Dask worker), under a
    main script that a started process would run again (one without an
    `if __name__ == "__main__":` guard), or when the state cannot be sent to a started process
    (it holds what cannot be pickled, or an element's class is defined in an interactive
    session, a notebook or `python -c`, which a started process cannot import, or in a file the
    graph requires that has changed since the run read it; the started processes import the
    files the graph requires). The choices are the same either way. It then selects the best
    combination in the switches, from this round on; a tie keeps the one running, and among
    combinations tied for the best, the one that changes the fewest switches' candidates (the
    first of those). It ticks first in its round, and a graph has one. Metrics, smaller is better: `jct`, the mean time the jobs spend in the
    system within the horizon (the area under the number of jobs in the system, whose sum
    average JCT is); `responsiveness`, the mean wait of the jobs not yet started; `both`, each
    divided by the best combination's value or one round's length, whichever is larger, summed
    (divided by the best wait alone, a combination where nobody waits would outweigh any
    difference in JCT). Its report `choices` says which combination ran from when (one selected
    by hand between decisions, from the next decision), `decisions` what each one was expected
    to give.

    Ports:
        none
    Arguments:
        switches: the ChooseAdmission and ChoosePolicy elements whose candidates it combines
            (checked with the graph).
        every: rounds between decisions.
        horizon: how far ahead each combination is simulated (at least one round: a shorter
            look-ahead sees only the round it decides in, where the combinations score alike).
        metric: jct, responsiveness or both.
        workers: processes simulating combinations at once (1: one after another, in this one;
            also where it cannot start processes, see above).
    Counters:
        decisions: decisions made.
        switches: times the combination changed.
        simulated: look-ahead simulations run.
        choice: index of the combination running now.
    Cost: O(1) between decisions; at a decision, O(J) over the job table to find whether a job
    waits or arrives, and if one does, forking the world (O(J)) plus one look-ahead simulation
    per combination over the horizon, spread over `workers` (combinations whose gates have
    nothing to admit before the horizon: one for all); if none does, nothing more.
    See also: ChooseAdmission, ChoosePolicy
    Paper: Blox (EuroSys'24) §5.2 and Appendix A, the automatic scheduler synthesizer.
    """

    category = "control"
    state = ("_frozen", "_choice", "_choices", "_decisions")
    forks_world = True  # (so `roundhouse check` asks every element of its graph to be forkable)

    switches: list[ElementRef] = attrs.field(validator=_one_or_more)
    every: int = attrs.field(default=10, validator=positive)
    horizon: Duration = attrs.field(default=Duration(12 * 3600.0), validator=positive)
    metric: str = attrs.field(default="jct", validator=one_of(*METRICS))
    workers: int = attrs.field(default=2, validator=[positive, at_most(64)])

    def start(self, ctx: RoundContext) -> None:
        self._frozen = False  # (set in its own look-ahead copies: they do not decide again)
        self._choice = 0
        self._choices: list[tuple[int, float, int]] = []
        self._decisions: list[dict[str, Any]] = []
        self.counters.update(decisions=0, switches=0, simulated=0, choice=0)
        if float(self.horizon) < ctx.round_s:  # (the round is the run's, known only now)
            raise argument_error(
                self,
                "horizon",
                f"argument 'horizon' of Synthesizer '{self.name}' must be at least one round "
                f"({format_duration(ctx.round_s)}), got {describe(self.horizon)}: a shorter look-ahead sees only "
                "the round it decides in, where every combination scores alike",
                hint=f"horizon={format_duration(ctx.round_s)} or more",
            )
        for ref in self.switches:
            why = self.reference_problem("switches", self.peers[ref.name])
            if why is not None:  # (the compiler reports it first, at its place in the graph)
                raise TypeError(why)

    @staticmethod
    def reference_problem(field: str, peer: Element) -> str | None:
        """What is wrong with an element an argument names, or None (the compiler asks, and
        reports it where the argument names it)."""
        if field == "switches" and not isinstance(peer, _Switch):
            return f"'{peer.name}' ({type(peer).__name__}) is not a switch: a Synthesizer's switches are ChooseAdmission and ChoosePolicy elements"
        return None

    @property
    def combinations(self) -> list[tuple[int, ...]]:
        sizes = [len(self.peers[ref.name].candidates) for ref in self.switches]  # type: ignore[attr-defined]
        return list(itertools.product(*(range(n) for n in sizes)))

    def label(self, combination: tuple[int, ...]) -> str:
        return "+".join(self.peers[ref.name].candidates[i].name for ref, i in zip(self.switches, combination))  # type: ignore[attr-defined]

    def tick(self, ctx: RoundContext) -> None:
        if self._frozen or ctx.round_index % self.every:
            return
        combos = self.combinations
        # The combination acting now, as the switches have it (a candidate selected by hand
        # between decisions, say, through a Simulation's graph, is the one running).
        acting_now = combos.index(tuple(self.peers[ref.name].selected for ref in self.switches))  # type: ignore[attr-defined]
        if not self._choices or acting_now != self._choice:
            self._choices.append((ctx.round_index, ctx.now, acting_now))
            self._choice = acting_now
        fork = self._look_ahead_fork(ctx) if len(combos) > 1 else None
        # With no job waiting and none arriving now, every combination runs the same jobs
        # until the next arrival: nothing to simulate.
        if fork is not None and not fork.quiet:
            # Combinations that differ only in switches whose candidates would act alike give
            # the same look-ahead: each is simulated once, under the candidate acting now.
            alike = [self.peers[ref.name].interchangeable(fork.arriving) for ref in self.switches]  # type: ignore[attr-defined]
            acting = combos[self._choice]
            keys = [tuple(a if same else c for c, a, same in zip(combo, acting, alike)) for combo in combos]
            distinct = list(dict.fromkeys(keys))
            simulated = dict(zip(distinct, _simulate_all(self, fork, distinct)))
            outlooks = [simulated[k] for k in keys]
            self.counters["simulated"] += len(distinct)
            best = self._best(outlooks, float(ctx.round_s), combos)
            self._record(ctx, combos, outlooks, best)
            if best != self._choice:
                self._choice = best
                self.counters["switches"] += 1
                self._choices.append((ctx.round_index, ctx.now, best))
                for ref, index in zip(self.switches, combos[best]):
                    self.peers[ref.name].select(index)  # type: ignore[attr-defined]
        self.counters["decisions"] += 1
        self.counters["choice"] = self._choice

    def _look_ahead_fork(self, ctx: RoundContext):
        """The run forked for this decision's look-aheads, without the choices and decisions
        recorded so far: the look-aheads' copies of this synthesizer are frozen and report
        nothing, and copied into each of them the records made a decision cost more the longer
        the run had gone."""
        from roundhouse.runtime.lookahead import only_if_busy

        kept = self._choices, self._decisions
        self._choices, self._decisions = [], []
        try:
            with only_if_busy():  # (a quiet round simulates nothing: no copy of the run)
                return ctx.fork()
        finally:
            self._choices, self._decisions = kept

    def quiet_until(self, ctx: RoundContext) -> float | None:
        """Event skipping: nothing changes until its next decision round, which is not skipped.
        Counted in rounds from this one (a run need not start on its clock's round grid: a
        what-if run starts where the world was forked), and half a round early, so that the
        clock's rounding cannot pass that round."""
        if self._frozen:
            return float("inf")
        rounds = self.every - ctx.round_index % self.every  # (to the next round whose index `tick` decides in)
        return ctx.now + (rounds - 0.5) * ctx.round_s

    def _best(self, outlooks: list[Outlook], round_s: float, combos: list[tuple[int, ...]] | None = None) -> int:
        jct = np.array([o.time_in_system_s for o in outlooks])
        wait = np.array([o.wait_s for o in outlooks])
        if self.metric == "jct":
            score = jct
        elif self.metric == "responsiveness":
            score = wait
        else:
            # Each relative to the best, but on a scale of at least one round: a mean wait of
            # seconds against none is no real difference, and must not outweigh the JCT.
            score = jct / max(jct.min(), round_s) + wait / max(wait.min(), round_s)
        # Within rounding of the best, the running combination stays; else, among the best, the
        # one that keeps the most switches' candidates acting now (no switch changes without a
        # difference in the metric), the first of those.
        near = score <= score.min() * (1 + 1e-9) + 1e-9
        if near[self._choice]:
            return self._choice
        combos = self.combinations if combos is None else combos
        acting = combos[self._choice]
        tied = near.nonzero()[0]
        kept = [sum(a == b for a, b in zip(combos[i], acting)) for i in tied]
        return int(tied[int(np.argmax(kept))])

    def _record(self, ctx: RoundContext, combos, outlooks, best: int) -> None:
        for i, (combo, o) in enumerate(zip(combos, outlooks)):
            self._decisions.append(
                {
                    "round": ctx.round_index,
                    "time_s": ctx.now,
                    "combination": self.label(combo),
                    "jobs": o.jobs,
                    "finished": o.finished,
                    "time_in_system_s": o.time_in_system_s,
                    "wait_s": o.wait_s,
                    "chosen": i == best,
                }
            )

    def finish(self, ctx: RoundContext) -> dict[str, Any]:
        _close_pool(self)
        if self._frozen:
            return {}
        combos = self.combinations
        choices = pl.DataFrame(
            [{"round": r, "time_s": t, "combination": self.label(combos[c]), "until_s": None} for r, t, c in self._choices],
            schema={"round": pl.Int64, "time_s": pl.Float64, "combination": pl.String, "until_s": pl.Float64},
        )
        if choices.height:
            choices = choices.with_columns(until_s=pl.col("time_s").shift(-1).fill_null(ctx.now))
        decisions = pl.DataFrame(
            self._decisions,
            schema={
                "round": pl.Int64,
                "time_s": pl.Float64,
                "combination": pl.String,
                "jobs": pl.Int64,
                "finished": pl.Int64,
                "time_in_system_s": pl.Float64,
                "wait_s": pl.Float64,
                "chosen": pl.Boolean,
            },
        )
        return {"choices": choices, "decisions": decisions}


# --- look-ahead runs, in this process or a pool ---------------------------------------------


@attrs.define
class _Pool:
    """A synthesizer's pool of processes, with the shared objects they were given when they
    started (`install`): held here, they stay the ones that later forks refer to."""

    executor: Any
    shared: Shared
    # The modules of files the graph requires that its processes imported when they started.
    modules: frozenset[str]
    # Shuts the processes down when the synthesizer is freed unfinished (an abandoned run or
    # fork); detached when `finish` shuts them down itself.
    on_free: weakref.finalize


# Per synthesizer, kept out of its state (a pool cannot be forked; a fork starts its own) and
# freed with it: an abandoned run or fork leaves no processes behind.
_POOLS: weakref.WeakKeyDictionary[Synthesizer, _Pool] = weakref.WeakKeyDictionary()


def _simulate_all(synth: Synthesizer, fork: Fork, combos: list[tuple[int, ...]]) -> list[Outlook]:
    switches = [ref.name for ref in synth.switches]
    tasks = [(fork, float(synth.horizon), synth.name, switches, combo) for combo in combos]
    workers = min(synth.workers, len(combos), os.cpu_count() or 1)
    pool = _POOLS.get(synth)
    if workers <= 1 or (pool is None and not can_start_processes()):
        return [_simulate(*t) for t in tasks]
    # What cannot be sent to a started process (state that copies but does not pickle, or refers
    # to what a started process cannot import): the same look-aheads, in this one.
    try:
        packed = fork.packed()
        shared = packed.shared
        assert not isinstance(shared, str)  # (a fork made in this process)
        blob = shared.blob()
    except (pickle.PicklingError, TypeError, AttributeError):
        return [_simulate(*t) for t in tasks]
    if not main_importable() and (_names_main(packed.data) or _names_main(blob)):
        return [_simulate(*t) for t in tasks]
    modules = _required_modules(packed.data, blob)
    if modules is None:
        return [_simulate(*t) for t in tasks]
    # (its processes do not hold what this fork refers to, or have not imported its classes)
    if pool is not None and (pool.shared is not shared or not {name for name, _ in modules} <= pool.modules):
        _close_pool(synth)
        pool = None
    if pool is None:
        pool = _start_pool(synth, shared, workers, modules)
    return list(pool.executor.map(_simulate, *zip(*tasks)))


def main_importable() -> bool:
    """Whether a spawned process imports this one's main module again, so that a class defined
    in it (an element's, or that of a value in its state) can be sent to it: by its module name
    (`python -m NAME`, except a package's `__main__`) or by its file (a script). An interactive
    session's, a notebook's or `python -c`'s main is not imported again."""
    return _main_file_imported_again() is not None


def _main_file_imported_again() -> str | None:
    """The file a spawned process runs again as its main module (None: it imports no main)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:  # `python -m NAME`: a child imports NAME, except a package's __main__
        return None if spec.name == "__main__" or spec.name.endswith(".__main__") else getattr(spec, "origin", None)
    return getattr(main, "__file__", None)


def _names_main(pickled: bytes) -> bool:
    """Whether pickled bytes may refer to something defined in the main module: a pickle names
    the module of each class or function it refers to, as text, so one that never spells
    `__main__` refers to nothing there (one that spells it otherwise, say in a job's name, only
    makes the look-aheads run in this process)."""
    return b"__main__" in pickled


def _required_modules(*pickled: bytes) -> list[tuple[str, str]] | None:
    """The modules of element files a graph requires (runtime/dsl/loader.py imports each under
    a name of its own, made of its path and its text's digest) that pickled bytes refer to, as
    (name, file), for a started process to import under the same names. None when one's file
    has changed since (a started process would import the new text, under another name)."""
    from roundhouse.runtime.user_modules import file_digest

    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith(_REQUIRED_PREFIX) or not any(name.encode() in p for p in pickled):
            continue
        path = getattr(module, "__file__", None)
        try:
            current = file_digest(path) if isinstance(path, str) else ""
        except OSError:
            return None
        if not current or not name.endswith("_" + current[:16]):
            return None
        found.append((name, str(path)))
    return found


_REQUIRED_PREFIX = "roundhouse_user_"


def _start_pool(synth: Synthesizer, shared: Shared, workers: int, modules: list[tuple[str, str]] | None = None) -> _Pool:
    """A pool of `workers` spawned processes, each holding `shared` and having imported the
    graph's required files `modules` (`_required_modules`)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    modules = modules or []

    # Spawned, not forked: a live scheduler's sockets and threads stay in this process.
    executor = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(shared.key, shared.blob(), os.getpid(), modules),
    )
    # Not waiting: the synthesizer may be freed by the garbage collector in any thread.
    on_free = weakref.finalize(synth, executor.shutdown, wait=False, cancel_futures=True)
    pool = _POOLS[synth] = _Pool(executor, shared, frozenset(name for name, _ in modules), on_free)
    return pool


def _start_worker(key: str, blob: bytes, parent_pid: int, modules: list[tuple[str, str]]) -> None:
    """A pool process's start: the element files the graph requires (under the names they have
    in the parent), the shared objects (`install`), and a watch that ends the process when its
    parent dies. (A parent killed outright, SIGKILL, cannot shut its pool down; the processes
    would wait for work forever, and keep multiprocessing's resource tracker alive.)"""
    import threading

    from roundhouse.runtime.dsl.loader import load_element_file
    from roundhouse.runtime.snapshot import install

    threading.Thread(target=_exit_with_parent, args=(parent_pid,), name="parent-watch", daemon=True).start()
    for name, path in modules:
        problem = load_element_file(Path(path))
        if problem is not None or name not in sys.modules:
            raise ImportError(f"a look-ahead process could not import {path} as the run did: {problem or 'it has changed'}")
    install(key, blob)


def _exit_with_parent(parent_pid: int) -> None:
    """Wait until the parent process is gone, then end this one at once: its pipe to the parent
    reads as closed (its sentinel), or, where there is none, its parent is another process."""
    import multiprocessing
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    while os.getppid() == parent_pid:
        if parent is not None and wait([parent.sentinel], timeout=1.0):
            break
        if parent is None:
            time.sleep(1.0)
    os._exit(1)


def can_start_processes() -> bool:
    """Whether a spawned pool can start here: not in a daemon process (which may have no
    children: a sweep's local and Dask workers are daemons), and not under a main module that a
    spawned child would run again from the top (it would start the run again, and fail)."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return False
    path = _main_file_imported_again()
    return path is None or _guarded(os.path.abspath(path))  # (None: interactive, `python -c`, a notebook)


@functools.cache
def _guarded(path: str) -> bool:
    """Whether the script at `path` runs its work only under `if __name__ == "__main__":`: at its
    top level, besides the guard, only imports, definitions and constants (what a child that
    imports it again may run). Anything else, or a script that cannot be read, counts as not."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return False

    def is_guard(node: ast.stmt) -> bool:
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            return False
        sides = [node.test.left, *node.test.comparators]
        names = {s.id for s in sides if isinstance(s, ast.Name)}
        texts = {s.value for s in sides if isinstance(s, ast.Constant)}
        return len(sides) == 2 and names == {"__name__"} and texts == {"__main__"}

    def harmless(node: ast.stmt) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return True
        value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
        return value is not None and all(
            isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.Load, ast.UnaryOp, ast.USub)) for n in ast.walk(value)
        )

    guards = [node for node in tree.body if is_guard(node)]
    return bool(guards) and all(harmless(node) for node in tree.body if node not in guards)


def _simulate(fork: Fork, horizon_s: float, synth: str, switches: list[str], combo: tuple[int, ...]) -> Outlook:
    chosen: list[str] = []

    def adjust(graph) -> None:
        graph.elements[synth]._frozen = True
        for name, index in zip(switches, combo):
            graph.elements[name].select(index)
            chosen.append(graph.elements[name].candidates[index].name)

    try:
        return fork.run(horizon_s, adjust)
    except ElementFailure as err:  # (its round is one the look-ahead simulated, not one the run reached)
        failure = ElementFailure(
            f"{err} [in a look-ahead of synthesizer '{synth}' from round {fork.round_index} "
            f"(t={format_duration(fork.now)}), simulating {'+'.join(chosen)}]"
        )
        failure.detail = err.detail
        raise failure from err


def _close_pool(synth: Synthesizer) -> None:
    pool = _POOLS.pop(synth, None)
    if pool is not None:
        pool.on_free.detach()
        pool.executor.shutdown()
