"""How a live run ends. At its time limit (`--until`) the running jobs are checkpointed: every
attempt still running is revoked as a preemption (two-phase: only rank 0 is told, and every
worker checkpoints the same iteration), and the scheduler serves messages until their exits are
in, journaled and acknowledged, or a bound passes. A rerun of `serve` with the same journal then
requeues them and resumes each from its checkpoint. With `--stop-agents`, every agent is then
asked to shut down. Both happen before the run is summed up, and the world is then told what
happened meanwhile (`end_run`): a summary counts the jobs that stopped waiting, as a rerun's
takeover finds them (the explanation record says `run_ended`), and those done while it waited
finished.
The run's last round sends nothing new when its jobs would be revoked at once, at the limit or
at a stop with `--stop-agents`: neither its launches nor its in-place resizes
(`last_round_sends_nothing`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.backends.live.attempts import Attempt, Attempts
from roundhouse.runtime.backends.live.nodes import Nodes
from roundhouse.runtime.backends.live.resizes import LiveResize
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.types import Events
from roundhouse.runtime.values import format_duration
from roundhouse.runtime.world import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.backends.live.backend import LiveBackend

log = logging.getLogger("roundhouse.scheduler")


def end_run(backend: LiveBackend) -> np.ndarray:
    """The run's end, after its last round and before it is summed up: at its time limit its
    running jobs checkpoint (`checkpoint_running`); with `--stop-agents` its agents are told
    to stop (`stop_agents`), and checkpoint the jobs they still run. The world is then told
    what happened meanwhile (`tell_the_world`): the jobs that finished or failed while the end
    waited, and those whose attempts ended otherwise (checkpointed, or withheld in the last
    round: `withhold`), which wait again, as the journal says and a rerun's takeover finds
    them. Returns the rows of those (the world has them waiting already)."""
    if backend.at_limit:
        backend.checkpoint_running()
    backend.stop_agents()
    backend.ended = True  # (`close` does not tell the agents again)
    events = tell_the_world(backend)
    backend.end_events = events
    return events.requeued


def tell_the_world(backend: LiveBackend) -> Events:
    """What the run's end changed, into the world's books and its explanation record, as a
    poll's events are: the jobs done or failed for good while it waited, with the iterations
    they reached, and the jobs the world still runs whose attempts have ended since, requeued.
    The run's books close at its end: a job done after it counts as finished at the end (as a
    poll counts a report at its round's time; the log says when it came), so that its JCT, its
    run time and its GPU time (which the utilizations read over the run's span) agree, as every
    job's are counted up to the end. Returns those events, for the elements that count
    completions (the engine's `observe_completions`)."""
    world, news, current = backend.world, backend.news, backend.attempts.current
    t = backend.clock.now
    status = world.jobs.column("status")
    ended = [(row, x) for row, x in news.finished + news.failed if status[row] != FINISHED]
    told = {row for row, _ in news.finished + news.failed}  # (a job done meanwhile is not requeued)
    requeued = [
        row for row in world.running_rows.tolist() if row not in told and (att := current.get(row)) is not None and att.ended
    ]
    progress = backend.reports.since_last_poll(t, world.running_rows)  # (the iterations reached)
    world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s, block=progress.block)
    events = Events(
        time=t,
        finished=[row for row, _ in ended],
        finished_at=[min(max(x, 0.0), t) for _, x in ended],  # (as a poll's)
        failed=[row for row, _ in news.failed if row in {r for r, _ in ended}],
        requeued=requeued,
    )
    failed = np.isin(events.finished, events.failed)
    world.apply_failed(events.finished[failed], events.finished_at[failed])
    world.apply_finished(events.finished[~failed], events.finished_at[~failed])
    world.apply_requeued(events.requeued)
    if world.explain is not None:
        world.explain.run_ended(events)
    backend.reports.polled([row for row, _ in ended])
    news.clear()
    if ended:
        log.info(
            "%d job(s) ended (done, or failed for good) while the run's end waited for them: %s; "
            "counted finished at the run's end",
            len(ended),
            ", ".join(f"job {world.jobs.column('job_id')[row]} at t={x:.1f}s" for row, x in ended[:10])
            + (" ..." if len(ended) > 10 else ""),
        )
    return events


def checkpoint_running(
    attempts: Attempts, server: Server, duties: Callable[[], None], wait_s: float, interrupted: Callable[[], bool]
) -> list[Attempt]:
    """Revoke every attempt still running and wait (at most `wait_s`, or until `interrupted()`)
    for all of them to end; returns those that did not."""
    ending = list(attempts.live.values())
    if not ending:
        return []
    log.info("checkpointing the %d running job(s): revoked, as a preemption", len({att.job_id for att in ending}))
    for att in ending:
        if not att.revoked:  # (one a plan suspended is checkpointing already)
            attempts.revoke(att)
    server.flush()
    left = lambda: [att for att in ending if not att.ended]  # noqa: E731
    server.serve(time.time() + wait_s, lambda: not left() or interrupted(), duties)
    server.flush()
    within = "before the scheduler was stopped again" if left() and interrupted() else f"within {wait_s:.0f}s"
    for att in left():
        log.warning(
            "job %d attempt %d did not stop %s; `roundhouse serve` with the same --journal takes it back",
            att.job_id,
            att.n,
            within,
        )
    stopped = [att for att in ending if att.ended and not _done(att)]  # (a job done meanwhile is said at the end)
    if stopped:
        log.info("%d attempt(s) stopped (%s); %s", len(stopped), _where(stopped), _RESUMED)
    return left()


@attrs.frozen
class LastRound:
    """Why the run's last round sends nothing new, as the journal (`reason`) and the log
    (`when`, and what a rerun does: `later`) say it."""

    reason: str
    when: str
    later: str


def last_round_sends_nothing(at_limit: bool, until: float | None, stop_requested: str, stop_agents: bool) -> LastRound | None:
    """Whether the round being applied, the run's last, sends nothing new: its jobs would be
    revoked as soon as started, at the time limit (`checkpoint_running`) or at a stop whose
    agents are told to stop (`--stop-agents`: they checkpoint every job they run). At a stop
    without it the jobs keep running, and a rerun takes them back: that round sends."""
    if at_limit:
        limit = format_duration(until or 0.0)
        return LastRound(
            f"the run reached its time limit ({limit})", "at the time limit", "a rerun with a later --until starts them"
        )
    if stop_requested and stop_agents:
        told = f"{stop_requested} and its agents are told to stop"
        return LastRound(f"the run was {told}", told, "a rerun starts them")
    return None


def withhold(books: Attempts, launches: list[Attempt], resized: list[LiveResize], last: LastRound) -> None:
    """The run's last round sends nothing new (`last_round_sends_nothing`). Each launch is
    journaled as the plan made it, and ends at once, as preempted where it would have started:
    a rerun takes the job up as it would a job checkpointed there. An in-place resize is
    neither journaled nor sent: the job checkpoints in the shape it runs in. (A resize by
    checkpoint and restart is a revoke, sent as the run's end would send it, and a launch.)"""
    for att in launches:
        books.withhold(att, f"not launched: {last.reason}")
    _say_withheld(last.when, "launch(es)", [att.job_id for att in launches], last.later)
    _say_withheld(
        last.when, "resize(s)", [r.att.job_id for r in resized if r.in_place], "they checkpoint in the shape they run in"
    )


def _say_withheld(when: str, what: str, job_ids: list[int], then: str) -> None:
    if not job_ids:
        return
    ids = sorted(set(job_ids))
    shown = ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
    log.info("%s: %d %s not sent (job(s) %s); %s", when, len(job_ids), what, shown, then)


def stop_agents(
    nodes: Nodes,
    server: Server,
    timeout_s: float,
    attempts: Attempts,
    wait_s: float,
    interrupted: Callable[[], bool] = lambda: False,
) -> None:
    """Ask every connected agent to shut down and wait for each to answer, asking again every
    half second (a message can be lost with a connection), for at most `timeout_s`; say which
    did not answer. An agent checkpoints the jobs it still runs as it stops: their exits are
    then awaited (at most `wait_s`) and journaled, so that a rerun resumes them from there.
    Either wait ends early once `interrupted()` (the scheduler was asked to stop again)."""
    running = [att for att in attempts.live.values() if not att.ended]
    gone: set[str] = set()  # connections the socket no longer has: nobody there to answer
    asked = {n.name for n in nodes.ask_to_stop("the scheduler's run ended", gone)}
    deadline = time.time() + timeout_s
    silent = lambda: sorted(n for n in asked if not nodes.by_name[n].stopping and n not in gone)  # noqa: E731
    while silent() and time.time() < deadline and not interrupted():
        server.serve(min(deadline, time.time() + 0.5), lambda: not silent() or interrupted(), lambda: None)
        asked |= {n.name for n in nodes.ask_to_stop("the scheduler's run ended", gone)}
    unreachable = sorted(n.name for n in nodes.slots if n is not None and n.online and n.identity is None)
    if silent() or unreachable or gone:
        log.warning(
            "asked %d agent(s) to stop; no answer from %s",
            len(asked),
            ", ".join(
                silent()
                + [f"{n} (its connection is gone)" for n in sorted(gone)]
                + [
                    f"{n} (not connected: it has not registered again since its connection dropped or the restart)"
                    for n in unreachable
                ]
            ),
        )
    elif asked:
        log.info("asked %d agent(s) to stop; every one answered: %s", len(asked), ", ".join(sorted(asked)))
    else:
        log.info("no agent to ask to stop: none is connected")
    # (an attempt with a worker on a node whose connection is gone, or that is not connected,
    # has nobody to report its end)
    cut_off = gone | set(unreachable)
    reachable = [att for att in running if not {nodes.name_at(int(s)) for s in att.slots} & cut_off]
    waiting = [att for att in reachable if not att.ended]
    if waiting and not interrupted():
        log.info(
            "waiting (at most %.0fs) for %d job(s) to checkpoint as their agents stop: %s",
            wait_s,
            len({att.job_id for att in waiting}),
            ", ".join(str(att.job_id) for att in waiting[:10]) + (" ..." if len(waiting) > 10 else ""),
        )
        server.serve(time.time() + wait_s, lambda: all(att.ended for att in waiting) or interrupted(), lambda: None)
        server.flush()
    # (every job running on a reachable node when the agents were asked: one whose exit came
    # while another agent had not answered yet checkpointed as its agent stopped too)
    kept = [att for att in reachable if att.ended and att.checkpoint_iteration and not _done(att)]
    if kept:
        log.info("%d job(s) checkpointed as their agents stopped (%s); %s", len(kept), _where(kept), _RESUMED)


_RESUMED = "`roundhouse serve` with the same --journal resumes them"


def _done(att: Attempt) -> bool:
    """Whether an ended attempt's job completed its work (rank 0 says so), not checkpointed."""
    return att.exits.get(0, {}).get("outcome") == "done"


def _where(stopped: list[Attempt]) -> str:
    """Where checkpointed attempts stopped (the first ten)."""
    shown = ", ".join(f"job {att.job_id} {_point(att)}" for att in stopped[:10])
    return shown + (" ..." if len(stopped) > 10 else "")


def _point(att: Attempt) -> str:
    """Where a stopped attempt's job resumes: its checkpoint, or, when it wrote none (revoked
    before it started, say), where the attempt itself started."""
    if att.checkpoint_iteration is not None:
        return f"at iteration {att.checkpoint_iteration}"
    return f"with no checkpoint of its own (it resumes at iteration {att.start_iteration})"
