"""The synthesizer's look-aheads copy the run no more than they need: a quiet decision (nothing
to simulate) makes no copy of it. The choices, the expected outcomes and every job's times are
those of a run that forks at every decision."""

from __future__ import annotations

import contextlib

import polars as pl
import pytest

from roundhouse.runtime import lookahead
from roundhouse.runtime.lookahead import Fork
from roundhouse.runtime.snapshot import ForkError
from tests.conftest import jobs_of
from tests.own_elements import policy_file

# A small cluster at three times its load: a queue most of the run, quiet decisions at its start
# and end (no job waiting, none arriving).
GRAPH = """
round = 5min;
cluster = "2x2:V100";
synth :: Synthesizer(switches=[admit, order], every=4, horizon=2h, workers=1);
arrivals :: PoissonSource(rate=3/h, jobs=24, gpus=single, models=blox, seed=4);
all :: AcceptAll;
a12 :: AcceptThreshold(factor=1.2x);
admit :: ChooseAdmission(candidates=[all, a12]);
fifo :: Fifo;
srtf :: Srtf;
las :: Las(service=wall_seconds, backfill=false);
order :: ChoosePolicy(candidates=[fifo, srtf, las]);
arrivals -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _counting_forks(monkeypatch) -> dict[str, int]:
    seen = {"forks": 0, "quiet": 0}
    fork_engine, of = lookahead.fork_engine, Fork.of.__func__

    def counted(*args, **kwargs):
        seen["forks"] += 1
        return fork_engine(*args, **kwargs)

    def asked(cls, engine, ctx):
        got = of(cls, engine, ctx)
        seen["quiet"] += got.quiet
        return got

    monkeypatch.setattr(lookahead, "fork_engine", counted)
    monkeypatch.setattr(Fork, "of", classmethod(asked))
    return seen


def _copy_every_time(monkeypatch) -> None:
    """As before: every decision forks the run, quiet or not."""

    monkeypatch.setattr(lookahead, "only_if_busy", contextlib.nullcontext)


def test_a_decision_copies_the_run_once_per_look_ahead(run_graph, monkeypatch):
    seen = _counting_forks(monkeypatch)
    result = run_graph(GRAPH)
    counters = result.counters["synth"]
    assert seen["quiet"] > 0 and counters["simulated"] > counters["decisions"] - seen["quiet"] > 0
    # The decision's fork and one copy a look-ahead; none when quiet.
    assert seen["forks"] == counters["decisions"] - seen["quiet"] + counters["simulated"]


def test_the_choices_are_those_of_look_aheads_each_on_a_copy(run_graph, tmp_path, monkeypatch):
    fast = run_graph(GRAPH)
    with monkeypatch.context() as patched:
        seen = _counting_forks(patched)
        _copy_every_time(patched)
        slow = run_graph(GRAPH)
        counters = slow.counters["synth"]
        assert seen["forks"] == counters["decisions"] + counters["simulated"]  # (the old way, really)
    assert fast.counters == slow.counters and fast.counters["synth"]["switches"] >= 1
    for report in ("choices", "decisions"):
        assert fast.reports["synth"][report].equals(slow.reports["synth"][report])
    assert fast.reports["synth"]["decisions"].height > 0
    assert jobs_of(fast, "m") == jobs_of(slow, "m")
    assert pl.DataFrame(list(jobs_of(fast, "m").values())).height == 24


def test_a_fork_not_made_cannot_run():
    quiet = Fork(None, 600.0, 2, quiet=True, arriving=False)
    for run in (lambda: quiet.run(3600.0), quiet.packed):
        with pytest.raises(ForkError, match=r"the fork of round 2 cannot be run: it was not made \(a quiet round"):
            run()


STRAY = policy_file(
    "SpeedStray",
    "Rank by arrival, keeping an attribute it does not declare from its first tick on.",
    """
    setattr(self, "_later", 1)  # (out of sight of the check of its source)
    order = np.argsort(active.arrival_s, kind="stable")
    return Ranking(active.rows[order], active.gpus[order])
    """,
    before="import numpy as np",
    inputs=(("active", "Active", "the active jobs."),),
    outputs=(("ranking", "Ranking", "by arrival."),),
)


def test_a_quiet_decision_refuses_what_a_fork_would(run_graph, tmp_path, monkeypatch):
    """Round 0 decides with the job arriving (a fork, before the element's first tick); round 3,
    with the job running and none waiting, is quiet: no fork is made, but the element's stray
    attribute is refused there as forking would refuse it."""
    (tmp_path / "mine.py").write_text(STRAY)
    text = """require "mine.py";
round = 300s;
synth :: Synthesizer(switches=[order], every=3, horizon=1h, workers=1);
src :: TraceSource(path="trace.csv");
stray :: SpeedStray;
srtf :: Srtf;
order :: ChoosePolicy(candidates=[stray, srtf]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""
    asked = []
    of = Fork.of.__func__
    monkeypatch.setattr(Fork, "of", classmethod(lambda cls, engine, ctx: asked.append(ctx.round_index) or of(cls, engine, ctx)))
    with pytest.raises(
        ForkError,
        match=r"element 'stray' \(SpeedStray; declared at [^)]*graph\.sched:5:1, class defined at [^)]*mine\.py:\d+\) cannot be forked: it holds attribute\(s\) _later",
    ):
        run_graph(text, [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1800.0}], cluster="1x1:V100")
    assert asked == [0, 3]
