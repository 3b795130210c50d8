"""The elastic policies' objectives recomputed from their formulas, independently of the
elements, on small runs: Pollux's fitness (goodput at the best batch over goodput on a fair
share, restart penalty, power mean)."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.policies import pollux as pollux_element

POLLUX_GRAPH = """
round = 60s;
cluster = "2x4:V100";
elastic_profile = "pollux";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> sched :: Pollux(seed=0, population=20, generations=10) -> PolluxAgent -> Launch -> JobMetrics;
"""


def _pollux_fitness(elastic, app, best, base, age, restarts, n_nodes, n_gpus, p=-1.0, delay=30.0) -> float:
    """Pollux's fitness of allocation `best` (jobs x machines), from its simulator's formulas:
    speedup = goodput at the best batch on (machines, GPUs) / goodput at the best batch on a
    fair share, ceil(C / J) GPUs on ceil(K / C) machines; x K / C; x max(age - restarts x
    delay, 0) / (age + delay) for a job whose allocation changes; power mean of speedup + 0.001."""
    n = len(app)
    speedups = []
    for j in range(n):
        a = np.array([app[j]])
        k, r = int((best[j] > 0).sum()), int(best[j].sum())
        good = elastic.best_batch(a, k, r)[1][0] if r else 0.0
        fair_r = min(int(np.ceil(n_gpus / n)), int(elastic.apps[app[j]].max_batch // elastic.apps[app[j]].min_local))
        fair = elastic.best_batch(a, int(np.ceil(n_nodes / n_gpus)), fair_r)[1][0]
        s = good / fair * n_nodes / n_gpus
        if (best[j] != base[j]).any():
            s *= max(age[j] - restarts[j] * delay, 0.0) / (age[j] + delay)
        speedups.append(s)
    return float(np.mean((np.array(speedups) + 1e-3) ** p) ** (1 / p))


def test_pollux_fitness_is_the_fair_share_speedup_of_the_notes(run_graph, monkeypatch):
    """The fair share a job's speedup is measured against is ceil(C / J) GPUs, whatever the
    exploration cap allows the job so far: jobs that have run on few GPUs are not counted as
    already at their fair share (which made a new job on one GPU look as well served as one
    holding a fair share)."""
    caught = []
    search = pollux_element.search.search
    limits = pollux_element.Pollux._limits

    def spy(start, rng, **kw):
        pop, score = search(start, rng, **kw)
        caught.append({"best": pop[0].copy(), "base": kw["base"].copy(), "score": float(score[0])})
        return pop, score

    def spy_limits(self, ctx, jobs, app, elastic, *args, **kw):
        if not args and not kw:  # the search's own call: note the round's jobs
            caught.append(
                {
                    "app": app.copy(),
                    "elastic": elastic,
                    "age": ctx.now - jobs.arrival_s,
                    "restarts": np.maximum(jobs.column("launches") - 1, 0) + jobs.column("resizes"),
                }
            )
        return limits(self, ctx, jobs, app, elastic, *args, **kw)

    monkeypatch.setattr(pollux_element.search, "search", spy)
    monkeypatch.setattr(pollux_element.Pollux, "_limits", spy_limits)
    jobs = [
        dict(job_id=i, arrival_s=90.0 * i, gpus=1, model=m, batch_size=b, epochs=e, max_gpus=64.0)
        for i, (m, b, e) in enumerate([("cifar10", 128, 3.0), ("imagenet", 200, 1.0), ("cifar10", 128, 2.0)])
    ]
    run_graph(POLLUX_GRAPH, jobs, until=600.0)
    rounds = [{**caught[i], **caught[i + 1]} for i in range(0, len(caught), 2)]
    checked = 0
    for r in rounds:
        expect = _pollux_fitness(r["elastic"], r["app"].tolist(), r["best"], r["base"], r["age"], r["restarts"], 2, 8)
        assert r["score"] == pytest.approx(expect, rel=1e-9)
        checked += r["best"].any()
    assert checked >= 5  # rounds that gave some job GPUs
