"""Published experiments, reproduced end to end: `roundhouse reproduce NAME`.

Each module here registers experiments with `@experiment`. An experiment writes its per-run
tables and plots under the folder it is given and returns a Report: the paper's figures beside
ours, with an honest note wherever they differ. `--quick` asks for a smaller version (fewer
seeds, fewer loads, shorter windows) that still shows the effect; the report says so.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import attrs
import polars as pl

from roundhouse.errors import RoundhouseError


class ExperimentFailed(RoundhouseError):
    """An experiment could not finish (a run it starts failed): the command prints the message."""


@attrs.frozen
class Comparison:
    """One claim: what is measured, the paper's figure, ours, and a sentence on any gap."""

    what: str
    paper: str
    ours: str
    note: str = ""


@attrs.define
class Report:
    comparisons: list[Comparison] = attrs.field(factory=list)
    tables: dict[str, pl.DataFrame] = attrs.field(factory=dict)  # written as CSV
    figures: list[Path] = attrs.field(factory=list)  # PNGs the experiment wrote
    notes: list[str] = attrs.field(factory=list)


@attrs.frozen
class Experiment:
    name: str
    title: str
    paper: str
    run: Callable[[Path, bool], Report]


EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str, title: str, paper: str):
    """Register `run(out_dir, quick) -> Report` as the experiment `name`. `out_dir` is absolute
    (it may be handed to processes that start in another folder)."""

    def register(run):
        if name in EXPERIMENTS:
            raise ValueError(f"experiment {name} is defined twice")
        EXPERIMENTS[name] = Experiment(name, title, paper, run)
        return run

    return register


def load_all() -> dict[str, Experiment]:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return EXPERIMENTS
