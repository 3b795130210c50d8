"""A job's training settings as ONES' trace gives them (traces/ones.py): `patience`, `lr`,
`max_lr`, `target_acc`. The ONES reader refuses a value no job can mean, and a canonical trace
that carries these columns (one written from an ONES trace, say) is refused the same way, in
the same words, by this one check (traces/schema.py)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from roundhouse.traces.csvtext import NUMBER_KINDS

# Each setting's kind of number (csvtext.NUMBER_KINDS): the patience is a count of epochs, the
# rates and the target need not be whole.
SETTING_KINDS: dict[str, str] = {"patience": "count", "lr": "amount", "max_lr": "amount", "target_acc": "amount"}
TRAINING_SETTINGS: tuple[str, ...] = tuple(SETTING_KINDS)


def setting_problems(values: Mapping[str, pl.Series], cells: Mapping[str, pl.Series]) -> list[tuple[int, str, str]]:
    """(row index, column, message) of the first bad row for each check, in check order: each
    setting a finite number of its kind; a target accuracy at most 1, since no job reaches more
    (accuracy is a fraction: the artifact's targets are 0.25 to 0.9); and a largest learning
    rate no lower than the base one, from which the artifact's rule (lr = base lr x GPUs, at
    most max_lr) would shrink the job's batch below what it asked for on one GPU.

    `values[c]` is setting c's column as Float64 (null: not given, which passes), `cells[c]`
    the same column as the file holds it, shown in messages; a setting absent from both is not
    checked."""
    problems = []

    def first(column: str, bad: pl.Series, why) -> None:
        hits = bad.fill_null(False)
        if hits.any():
            i = int(hits.arg_true()[0])
            problems.append((i, column, f"{_cell(cells[column][i])!r} {why(i)}"))

    for column, kind in SETTING_KINDS.items():
        if column in values:
            value = values[column]
            fails, words = NUMBER_KINDS[kind]
            first(column, ~value.is_finite() | fails(value), lambda i, words=words: f"is not {words}")
    if "target_acc" in values:
        first(
            "target_acc",
            values["target_acc"] > 1,
            lambda i: "is above 1: the target accuracy is a fraction (0.55 for 55%)",
        )
    if "max_lr" in values and "lr" in values:
        first(
            "max_lr",
            values["max_lr"] < values["lr"],
            lambda i: f"is below lr {_cell(cells['lr'][i])!r}: max_lr is the largest the job's learning rate grows to",
        )
    return problems


def _cell(value: object) -> object:
    """A cell as a message shows it: text without the spaces around it."""
    return value.strip() if isinstance(value, str) else value
