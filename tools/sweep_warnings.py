"""What `check` and `run` warn of (runtime/useless_runs.py), for a sweep: each run's graph looked
at, since a --vary may change what is warned of (a source's `jobs`, a sink's `track`), and each
warning said once, in the parent process, naming the runs it applies to by their varied values.
A warning of every run is said as `run` says it."""

from __future__ import annotations

import math

from roundhouse.errors import print_warning
from roundhouse.runtime.useless_runs import live_only_warnings, warning_inputs, warnings_before_run

# The most points a warning names one by one (a grid's points that no shorter phrase covers).
NAMED_AT_MOST = 10


class SweepWarnings:
    """The warnings of a sweep's runs, gathered as they are planned (`add`), then said (`say`)."""

    def __init__(self, cluster: str | None = None) -> None:
        self._cluster = cluster  # (the sweep's --cluster, every run's cluster; None: each graph's own)
        self._by_inputs: dict[tuple, list[str]] = {}  # graphs read alike: warned of alike, looked at once
        self._runs: dict[str, list[dict]] = {}  # warning -> the labels of each run it applies to
        self._values: dict[str, dict[str, None]] = {}  # each label's values in grid order
        self._count = 0

    def add(self, graph, labels: dict) -> None:
        """A run's graph, and its labels (its varied values and seed)."""
        key = warning_inputs(graph)
        warnings = self._by_inputs.get(key)
        if warnings is None:
            # (a sweep's runs are simulated: a graph fed only live is warned of, as `run` warns of it)
            warnings = self._by_inputs[key] = warnings_before_run(graph, self._cluster) + live_only_warnings(graph)
        for name, value in labels.items():
            self._values.setdefault(name, {})[str(value)] = None
        for warning in warnings:
            self._runs.setdefault(warning, []).append(labels)
        self._count += 1

    def lines(self) -> list[str]:
        """Each warning once: as `run` says it if every run has it, else naming its runs."""
        out = []
        for warning, runs in self._runs.items():
            if len(runs) == self._count:
                out.append(warning)
                continue
            head, sep, rest = warning.partition("warning: ")
            out.append(f"{head}{sep}with {runs_named(runs, self._values)}: {rest}")
        return out

    def say(self) -> None:
        for line in self.lines():
            print_warning(line)


def runs_named(runs: list[dict], values: dict[str, dict[str, None]]) -> str:
    """Some of a sweep's runs (their labels), by their varied values: a label every value of
    which is among them is left out (the seed, when all of a point's seeds are); a grid's
    corner (every combination of some values) is named value list by value list
    (`src.jobs=10,20 round=5min`); other runs point by point."""
    shown = [name for name in values if len(values[name]) > 1]  # (a label of one value says nothing)
    seeds = {}
    for labels in runs:
        seeds.setdefault(_point(labels, shown, "seed"), set()).add(str(labels.get("seed")))
    if "seed" in shown and all(len(s) == len(values["seed"]) for s in seeds.values()):
        shown.remove("seed")  # (every seed of each of its points)
    points = list(dict.fromkeys(_point(labels, shown) for labels in runs))
    present = {name: [v for v in values[name] if any(dict(p)[name] == v for p in points)] for name in shown}
    if len(points) == math.prod(len(v) for v in present.values()):
        parts = [f"{name}={','.join(vs)}" for name, vs in present.items() if len(vs) < len(values[name])]
        return " ".join(parts)
    named = [" ".join(f"{n}={v}" for n, v in point) for point in points[:NAMED_AT_MOST]]
    if len(points) > NAMED_AT_MOST:
        named.append(f"and {len(points) - NAMED_AT_MOST:,} more points")
    return "; ".join(named)


def _point(labels: dict, names: list[str], leaving: str | None = None) -> tuple[tuple[str, str], ...]:
    return tuple((n, str(labels[n])) for n in names if n != leaving and n in labels)
