"""Many simulations at once: one process per run, as many at a time as there are cores.

A sweep is a list of RunSpecs (a graph file, `--set` overrides, a cluster, a time limit and
labels to carry along). Each run compiles its graph afresh, so runs share nothing; results come
back in the order of the specs, whatever order they finish in.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import attrs
import polars as pl

from roundhouse.errors import RoundhouseError

# The sink whose report has a per-run "summary" and a "jobs" table; a sweep compares runs by it.
METRICS_SINK = "JobMetrics"


@attrs.frozen
class RunSpec:
    graph: str
    overrides: tuple[str, ...] = ()
    cluster: str | None = None
    until: float | None = None
    labels: dict[str, Any] = attrs.field(factory=dict)


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


def check_sweepable(graph) -> None:
    """Refuse, before running anything, a graph whose runs would report nothing to compare."""
    if not graph.by_class(METRICS_SINK):
        raise RoundhouseError(
            f"{graph.path}: the graph has no {METRICS_SINK} element, so its runs would report nothing to compare; "
            f"add e.g. 'report :: {METRICS_SINK};' after the launcher"
        )


def run_one(spec: RunSpec) -> RunOutcome:
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    graph = compile_file(spec.graph, spec.overrides)
    result = simulate(graph, spec.cluster, until=spec.until)
    return RunOutcome(spec, result.rounds, result.wall_s, result.reports)


def run_all(specs: list[RunSpec], workers: int | None = None) -> list[RunOutcome]:
    workers = workers or os.cpu_count() or 1
    if workers == 1 or len(specs) <= 1:
        return [run_one(s) for s in specs]
    # Fresh interpreters, not forks: forking a process whose polars thread pool has started can
    # deadlock the child.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(specs)), mp_context=context) as pool:
        return list(pool.map(run_one, specs))


def summaries(outcomes: list[RunOutcome], sink: str | None = None) -> pl.DataFrame:
    return pl.DataFrame([o.summary(sink) for o in outcomes])
