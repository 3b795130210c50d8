"""Published experiments, reproduced end to end: `roundhouse reproduce NAME`.

Each module here registers experiments with `@experiment`. An experiment writes its per-run
tables and plots under the folder it is given and returns a Report: the paper's figures beside
ours, with an honest note wherever they differ. `--quick` asks for a smaller version (fewer
seeds, fewer loads, shorter windows) that still shows the effect; the report says so.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import Callable, Iterator
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
    data: tuple[str, ...] = ()  # the folders of the reference data it reads (under data_folder())


EXPERIMENTS: dict[str, Experiment] = {}

# The original projects' reference data, read in place (never copied into the project): beside
# the repository unless `roundhouse reproduce --data` names another folder (an installed wheel
# has no such neighbour).
DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_data = DEFAULT_DATA


def data_folder() -> Path:
    """The folder of reference data the experiments read: DEFAULT_DATA, or `reading_data_from`'s."""
    return _data


@contextlib.contextmanager
def reading_data_from(folder: Path) -> Iterator[None]:
    """Experiments run inside read their reference data from `folder` (absolute: it is written
    into graphs that run in other processes)."""
    global _data
    before, _data = _data, folder
    try:
        yield
    finally:
        _data = before


def experiment(name: str, title: str, paper: str, data: tuple[str, ...] = ()):
    """Register `run(out_dir, quick) -> Report` as the experiment `name`. `out_dir` is absolute
    (it may be handed to processes that start in another folder). `data` lists the folders of
    the reference data it reads, relative to data_folder(): the command checks they exist."""

    def register(run):
        if name in EXPERIMENTS:
            raise ValueError(f"experiment {name} is defined twice")
        EXPERIMENTS[name] = Experiment(name, title, paper, run, data)
        return run

    return register


def load_all() -> dict[str, Experiment]:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return EXPERIMENTS
