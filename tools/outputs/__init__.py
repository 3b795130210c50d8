"""Reading what a run or a sweep wrote with --out, for plots and reports.

A run's folder (`roundhouse run GRAPH --out DIR`) holds run.json, and its JobMetrics sink's
jobs.csv and summary.json (`ELEMENT-jobs.csv` and `ELEMENT-summary.json` when the graph has
several sinks). A sweep's folder (`roundhouse sweep --out DIR`) holds summary.csv, one row per
run in the order the sweep ran them, and a results/ store of Parquet files with the same columns
(a `status` other than "ok", or an `error`, marking runs that failed). Each run's `point` says
what the sweep varied ("name=value ..."), beside its `seed`: those are the labels, and every
other numeric column is something measured."""

from __future__ import annotations

from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.explain import FILE_NAME as EXPLAIN_FILE
from roundhouse.runtime.explain_file import part_of
from roundhouse.runtime.files import holds_a_sweep
from roundhouse.tools.outputs.run_folder import JOB_COLUMNS, RunFolder, open_run, read_summary
from roundhouse.tools.outputs.sweep_folder import NOT_RECORDED, NOT_VARIED, SweepFolder, open_sweep
from roundhouse.tools.reproduce_cmd import MARK as REPRODUCTION_MARK

__all__ = ["JOB_COLUMNS", "NOT_RECORDED", "NOT_VARIED", "RunFolder", "SweepFolder", "open_folder", "read_summary"]


def open_folder(text: str) -> RunFolder | SweepFolder:
    path = Path(text)
    if not path.exists():
        raise UsageError(f"{text}: no such folder")
    if not path.is_dir():
        raise UsageError(f"{text}: not a folder (give the folder a run or a sweep wrote with --out)")
    if (path / "run.json").is_file():
        return open_run(path)
    if holds_a_sweep(path):
        return open_sweep(path)
    if part_of(path / EXPLAIN_FILE).is_file():  # (a run writes its record first, run.json at its end)
        raise UsageError(
            f"{text}: a run's folder with no run.json yet: its run is still going, or was killed before it "
            f"ended (it holds only {part_of(path / EXPLAIN_FILE).name}); ask again once a run has ended there"
        )
    if (path / REPRODUCTION_MARK).is_file():
        raise UsageError(
            f"{text}: a reproduction's folder ({REPRODUCTION_MARK}, as `roundhouse reproduce` writes), whose "
            "tables and plots are there already; plot or report the folder of a run or a sweep"
        )
    raise UsageError(
        f"{text}: neither a run's folder (no run.json, as `roundhouse run GRAPH --out DIR` writes) "
        "nor a sweep's (no results/ or summary.csv, as `roundhouse sweep --out DIR` writes)"
    )
