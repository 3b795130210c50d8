"""The one canonical job schema that every trace reader produces and every consumer relies on.

Readers for the public formats (Philly, Gavel, Tiresias, ...) only rename and convert; all checks
live here, so a bad cell is reported the same way whatever the file format was. Checks are done
column by column with polars (no per-row Python), and the problem reported is the first one in
file order: `traces/x.csv:17: error: column 'gpus': 'four' is not a whole number`.

Columns, in order (name: type, rule):

- `job_id` Int64, unique, >= 0                       (required)
- `arrival_s` Float64, >= 0, at most a century       (required)
- `gpus` Int64, >= 1                                 (required)
- `duration_s` Float64, > 0, at most a century: isolated run time on the reference GPU type,
  consolidated
- `model` String (Gavel's names; aliases such as LSTM or resnet18 are mapped to them)
- `iterations` Float64, > 0
- `batch_size` Int64, >= 1
- `user` String
- `weight` Float64, > 0, default 1.0
- `slo_s` Float64, > 0, at most a century

Every row needs `duration_s`, or both `model` and `iterations` (the simulator derives one from
the other with the profile table).

Row order: every reader returns the jobs sorted by `arrival_s`, and jobs arriving at the same
time by `job_id`, whatever their order in the file; a run admits jobs in this order, so of jobs
arriving together the one with the smaller id is admitted first (and wins ties in `Fifo`,
`Las` and `Srtf`). A file's rows need not be sorted, and sorting them differently changes
nothing. (Philly's reader numbers its jobs in order of submission, so its ids follow the file
where submissions tie.)

Other columns are kept after the canonical ones, so later features can add their own: numbers
become Float64, anything else String. A column whose name is close to a known one but is none
of them (`modle`, `Model`, `users`) is kept too, with a warning on stderr naming the file, the
column and the name it most likely meant. The other formats' readers warn alike of their files'
columns (`warn_near_misses`): Tiresias' of a name close to one of its own or a canonical one;
those of a fixed set of columns (Pollux's, ONES', PAI's with its header, Helios' log) of every
column they leave out.

Optional extra columns the simulator and elements understand (empty cells: not given):

- `tensor_skew` Float64 in [0, 1]: the largest tensor's share of the model (Tiresias Table 6);
  default from `traces/profiles/placement.csv` by model (traces/placement.py)
- `spread_slowdown` Float64 >= 1: how much slower a job known by its duration runs when its
  GPUs span more nodes than it needs; default from the same table
- `loss_start`, `loss_final`, `loss_speed` Float64, all three or none: the job's loss curve
  (traces/losscurves.py), from which the simulator keeps a live `loss` column
- `loss` Float64: the job's current loss, for a trace without loss curves
- `slo_factor` Float64: the SLO as a factor of the job's duration (Gavel's traces)
- `cpus` Float64 >= 0, finite: CPU cores the job asks for, in all (Helios' cpu_num, Alibaba
  PAI's plan_cpu / 100 summed over its instances, Synergy's per-model demand)
- `memory_gb` Float64 >= 0, finite: main memory the job asks for in GB, in all
- `epochs` Float64: for an elastic job (its model an application of the run's elastic
  profile, traces/goodput.py), how many epochs it trains for; stands in for `iterations`.
  An elastic job's work is its `iterations`, else its `epochs`, else what it would do in its
  `duration_s` on its `gpus` at its `batch_size` (as for other jobs), else its application's
  own epochs (traces/prepare.py)
- `max_gpus`, `max_batch_size` Float64: the most GPUs and the largest global batch size a
  plan may resize the job to (empty: no limit; an elastic job's batch limit defaults to its
  application's largest validated batch size)
- `epoch_size` Float64: samples in one of the job's epochs (an elastic job's defaults to its
  application's), for the `batch_jump_penalty` setting
- `local_batch` Float64 >= 1: an elastic job's batch size per GPU, kept as ONES resizes it
  (its global batch is this times its GPUs; empty: its `batch_size`)
- `patience`, `lr`, `max_lr`, `target_acc` Float64: an ONES job's training settings
  (traces/ones.py), kept as a canonical trace written from an ONES trace keeps them; where
  given, refused as the ONES reader refuses them, in its words (traces/trainingsettings.py):
  `patience` a whole number of at least 1, `lr` and `max_lr` above 0 with `max_lr` no lower
  than `lr`, `target_acc` above 0 and at most 1 (a fraction)
- `gpu_type` String: the GPU type the job must run on (Alibaba PAI's task table gives one; empty:
  any type). Its throughput on every other type is 0, so every placer and policy keeps it to
  that type; a type the cluster lacks (case aside), or with fewer GPUs than the job asks for,
  is an error when the run starts (traces/gputypes.py)

A run refuses a job asking for more GPUs than the cluster has, or, on a cluster of several GPU
types and with no elastic profile, than its largest type has (a placer puts a job on GPUs of one
type) (traces/prepare.py). An elastic job's `gpus` is only where its scheduler starts it: asking
for more than the cluster has, it asks for all of the cluster's, and its `cpus` and `memory_gb`
shrink with it (as much per GPU as its trace asks). A job's `cpus` and `memory_gb`
are what it would like: a demand beyond what its machines have runs (the allocators that read them cap each at its machines' room).

These are numbers whatever the file holds: a cell that is not one is an error naming its row.

Columns named like the simulator's own job-table columns (`status`, `done`, `run_s`, `finish_s`,
...: `runtime.world.OWN_COLUMNS`) are refused, since they would overwrite the run's state; the
readers of public formats rename theirs (Philly's `status` is kept as `philly_status`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from roundhouse.errors import TraceError, did_you_mean, print_warning
from roundhouse.traces.jobs import OWN_COLUMNS
from roundhouse.traces.losscurves import LOSS_COLUMNS, initial_loss
from roundhouse.traces.trainingsettings import TRAINING_SETTINGS, setting_problems

if TYPE_CHECKING:
    from roundhouse.traces.goodput import ElasticProfile

CANONICAL_COLUMNS: dict[str, type[pl.DataType]] = {
    "job_id": pl.Int64,
    "arrival_s": pl.Float64,
    "gpus": pl.Int64,
    "duration_s": pl.Float64,
    "model": pl.String,
    "iterations": pl.Float64,
    "batch_size": pl.Int64,
    "user": pl.String,
    "weight": pl.Float64,
    "slo_s": pl.Float64,
}
REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "arrival_s", "gpus")
DEFAULT_WEIGHT = 1.0
PLACEMENT_COLUMNS: tuple[str, ...] = ("tensor_skew", "spread_slowdown")  # traces/placement.py
# A job's CPU and memory demand (all its GPUs together); checked against the machines at run time.
RESOURCE_COLUMNS: tuple[str, ...] = ("cpus", "memory_gb")
# Elastic jobs' columns (traces/goodput.py; limits that plans resizing a job must respect).
ELASTIC_COLUMNS = ("epochs", "epoch_size", "max_gpus", "max_batch_size", "local_batch")
# Optional columns that the simulator and elements do arithmetic on: always Float64.
NUMERIC_EXTRAS: frozenset[str] = frozenset(
    (
        *PLACEMENT_COLUMNS,
        *LOSS_COLUMNS,
        *RESOURCE_COLUMNS,
        "loss",
        "slo_factor",
        *ELASTIC_COLUMNS,
        "iteration_time_s",
        *TRAINING_SETTINGS,
    )
)

# Every column name a trace may use to say something the simulator or an element reads (the
# live backend runs a job's `command`, docs/live.md). A column whose name is close to one of
# these but is none of them is most likely a misspelling: it is kept, and a warning names it.
KNOWN_COLUMNS: frozenset[str] = frozenset((*CANONICAL_COLUMNS, *NUMERIC_EXTRAS, "command", "gpu_type"))
# How close a name must be to a known one to be taken for a misspelling of it (difflib's ratio,
# case aside): 'modle' and 'model' are 0.8 apart, 'users' and 'user' 0.89; 'node' and 'model'
# (0.67), both plausible columns, are not close enough.
NEAR_MISS_CUTOFF = 0.8
# What writers add to the path validate is given for a frame being written (traces/canonical.py).
BEING_WRITTEN = " (jobs being written)"

# (column, lower bound, bound is inclusive, sentence). Nulls pass; `_REQUIRED_VALUES` catches them.
_BOUNDS: tuple[tuple[str, float, bool, str], ...] = (
    ("job_id", 0, True, "must be 0 or more"),
    ("arrival_s", 0, True, "must be 0 or more"),
    ("gpus", 1, True, "must be at least 1"),
    ("duration_s", 0, False, "must be greater than 0"),
    ("iterations", 0, False, "must be greater than 0"),
    ("batch_size", 1, True, "must be at least 1"),
    ("weight", 0, False, "must be greater than 0"),
    ("slo_s", 0, False, "must be greater than 0"),
)
_FINITE = ("arrival_s", "duration_s", "iterations", "weight", "slo_s")
# The longest time a trace may give (a century, as runtime.element.MAX_SECONDS, which the
# generators and TraceSource use; the traces package cannot import the runtime's). A run would
# take years of quiet rounds to reach a later arrival or finish a longer job, if it ever did.
MAX_SECONDS = 100 * 365 * 86400.0
_TIMES = ("arrival_s", "duration_s", "slo_s")

# The same for optional numbers: (lower bound, bound is inclusive, sentence); finite too.
_EXTRA_BOUNDS: dict[str, tuple[float, bool, str]] = {
    **{name: (0.0, True, "must be 0 or more") for name in RESOURCE_COLUMNS},
    "slo_factor": (0.0, False, "must be greater than 0"),
    # An elastic job's work and limits (traces/goodput.py): no work, or a cap of no GPU, is no job.
    "epochs": (0.0, False, "must be greater than 0"),
    "epoch_size": (0.0, False, "must be greater than 0"),
    "max_gpus": (1.0, True, "must be at least 1"),
    "max_batch_size": (1.0, True, "must be at least 1"),
    "local_batch": (1.0, True, "must be at least 1"),
    # Dally's traces' time an iteration takes (traces/helios.py, traces/generators.py).
    "iteration_time_s": (0.0, False, "must be greater than 0"),
}

# A text cell of an extra column counts as a number only in the plain forms that writers produce.
# An exponent needs its sign, so hex-like ids such as Philly's virtual cluster `6214e9` stay text.
_NUMBER_TEXT = r"(?i)^[+-]?(\d+\.?\d*|\.\d+)(e[+-]\d+)?$|^[+-]?(nan|inf|infinity)$"

INT64_LIMIT = 2.0**63  # the first float no 64-bit integer holds


def validate(
    df: pl.DataFrame,
    path: str,
    row_numbers: Sequence[int] | np.ndarray | None = None,
    *,
    source_names: Mapping[str, str] | None = None,
    elastic: ElasticProfile | None = None,
    text_columns: Collection[str] = (),
) -> pl.DataFrame:
    """Check `df` against the canonical schema and return it typed, complete and sorted (by
    `arrival_s`, then `job_id`: the file's own order is not kept; see the module docstring).

    `df` may hold raw text (CSV read without inference) or typed columns (Parquet, readers).
    `row_numbers[i]` is how the user finds row i in `path` (the line for CSV, the record for
    JSON/Parquet); by default rows are numbered from 1. `source_names` maps canonical column
    names to the names the file itself uses (Tiresias calls `gpus` `num_gpu`), so that errors
    name the column the user can see. `elastic` is the elastic profile of the run the trace is
    for, if it has one: a job whose model is one of its applications needs no work column (it
    trains for the application's own epochs). `text_columns` names extra columns of text that
    stay text even where every cell reads as a number (a command such as `7`): otherwise such a
    column is numbers, and a reader that validates a piece of the file at a time could type it
    one way in one piece and the other in the next. Raises `TraceError` for the first problem
    in file order.
    """
    path = str(path)
    names = dict(source_names or {})

    def shown(column: str) -> str:
        return names.get(column, column)

    rows = _row_numbers(df.height, row_numbers)
    _check_header(df, path, names, elastic is not None)
    if source_names is None and not path.endswith(BEING_WRITTEN):  # (the file's names are the schema's)
        warn_near_misses(df.columns, path)

    # Every problem is (row index, column order, phase, column, message). The first in file
    # order is reported, and in a row a failed conversion (phase 0) comes before the rest,
    # which may follow from it (a cell that is not a number leaves the row with no work
    # column): by row, then conversions first, then column order. Row -1: whole column.
    problems: list[tuple[int, int, int, str, str]] = []
    columns: dict[str, pl.Series] = {}
    for order, (name, dtype) in enumerate(CANONICAL_COLUMNS.items()):
        if name in df.columns:
            series, problem = _cast(df.get_column(name), dtype)
            if problem is not None:
                problems.append((problem[0], order, 0, shown(name), problem[1]))
        else:
            series = null_column(name, dtype, df.height)
        columns[name] = series.alias(name)
    extras = []
    for name in df.columns:
        if name in NUMERIC_EXTRAS:
            series, problem = _cast(df.get_column(name), pl.Float64)
            if problem is not None:
                problems.append((problem[0], len(CANONICAL_COLUMNS), 0, shown(name), problem[1]))
            elif name in _EXTRA_BOUNDS:
                problems += _extra_problems(series, name, shown(name))
            extras.append(series.alias(name))
        elif name not in CANONICAL_COLUMNS:
            series, complaint = _cast_extra(df.get_column(name), as_text=name in text_columns)
            if complaint is not None:
                problems.append((-1, len(CANONICAL_COLUMNS), 0, name, complaint))
            extras.append(series)

    problems += _training_setting_problems(df, extras, shown)

    frame = pl.DataFrame(list(columns.values()))
    frame = frame.with_columns(pl.col("weight").fill_null(DEFAULT_WEIGHT), canonical_model_names(frame.get_column("model")))
    epochs = [e for e in extras if e.name == "epochs"]  # elastic jobs' alternative to iterations
    problems += _value_problems(frame.hstack(epochs) if epochs else frame, shown, elastic)
    problems += _batch_limit_problems(frame, extras, shown)
    repeated, first_use = _duplicate_ids(frame, shown("job_id"))
    problems += repeated
    if problems:
        first = min(problems, key=lambda p: (p[0], p[2] != 0, *p[1:]))
        index, _, _, column, message = first
        also = int(rows[first_use]) if repeated and first == repeated[0] else None
        raise TraceError(path, message, row=int(rows[index]) if index >= 0 else None, column=column, also=also)

    if extras:
        frame = frame.hstack(extras)
        # For their checks, while rows are the file's: a bad curve or placement value is refused
        # by every reader, and named by its line.
        initial_loss(frame, path, rows)
        if any(name in frame.columns for name in PLACEMENT_COLUMNS):
            from roundhouse.traces.placement import check_columns

            empty = null_column("empty", pl.Float64, frame.height)
            skew, slowdown = (frame.get_column(c) if c in frame.columns else empty for c in PLACEMENT_COLUMNS)
            check_columns(path, skew, slowdown, lines=rows)
    return frame.sort(["arrival_s", "job_id"], maintain_order=True)


def near_misses(columns: Sequence[str], known: Collection[str] = KNOWN_COLUMNS) -> list[tuple[str, str]]:
    """(column, the known column it is most likely a misspelling of) for each of `columns` that
    is not one of `known` but is close to one (`NEAR_MISS_CUTOFF`, case aside): a trace's extra
    columns are kept whatever their names, so a misspelt optional column would otherwise be
    kept unread without a word."""
    return [(name, hit) for name, hit in _closest(columns, known) if hit is not None and name not in OWN_COLUMNS]


def _closest(columns: Sequence[str], known: Collection[str]) -> list[tuple[str, str | None]]:
    """Each of `columns` not in `known`, with the known column it is close to, if any."""
    by_lower = {k.lower(): k for k in sorted(known)}
    found = []
    for name in columns:
        if name not in known:
            hits = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=NEAR_MISS_CUTOFF)
            found.append((name, by_lower[hits[0]] if hits else None))
    return found


def missing_hint(missing: Sequence[str], columns: Sequence[str], known: Collection[str]) -> str:
    """For a reader's message about the `missing` columns of a fixed set (`known`): the columns
    found but not known that are most likely them misspelt ("; did you mean 'num_gpu' for
    num_gpus?"), or "" if none is close."""
    unknown = {name.lower(): name for name in columns if name not in known}
    pairs = []
    for wanted in missing:
        hits = difflib.get_close_matches(wanted.lower(), list(unknown), n=1, cutoff=NEAR_MISS_CUTOFF)
        if hits:
            pairs.append(f"'{unknown.pop(hits[0])}' for {wanted}")
    return f"; did you mean {' and '.join(pairs)}?" if pairs else ""


# (path, what) pairs already warned about in this process: a run reads a trace's header before
# its jobs, and a sweep reads one trace for many runs.
_WARNED: set[tuple[str, str]] = set()


def warn_once(path: str, what: str, message: str) -> None:
    """`warning: path: message` on stderr, the first time this process meets `what` in `path`."""
    if (path, what) in _WARNED:
        return
    _WARNED.add((path, what))
    print_warning(f"warning: {path}: {message}")


def warn_near_misses(columns: Sequence[str], path: str, known: Collection[str] = KNOWN_COLUMNS, fixed: str = "") -> None:
    """On stderr, once per file and column, the columns of a trace its reader does not read. A
    format that keeps other columns as extras (canonical traces, Tiresias'): those close to one
    of `known` (`near_misses`), kept but most likely misspelt. A format of a fixed set of
    columns (`fixed` names its files, "a Pollux workload"): every column not in `known`, which
    its reader leaves out, with the known one it is close to, if any."""
    if not fixed:
        for name, hit in near_misses(columns, known):
            message = f"column '{name}' is not a column Roundhouse reads: it is kept as an extra column, unused"
            warn_once(path, name, f"{message}; did you mean '{hit}'?")
        return
    for name, close in _closest(columns, known):
        guess = f"; did you mean '{close}'?" if close else ""
        warn_once(path, name, f"column '{name}' is not a column of {fixed}: it is left out, unread{guess}")


def columns_with_values(frame: pl.DataFrame) -> list[str]:
    """The columns of a validated trace that say something about its jobs: a value in some row
    (the weight, only where it is not the default). What a writer must keep or say it drops."""
    held = []
    for name in frame.columns:
        column = frame.get_column(name)
        if name == "weight":
            if (column != DEFAULT_WEIGHT).any():
                held.append(name)
        elif column.null_count() < column.len():
            held.append(name)
    return held


def empty_trace() -> pl.DataFrame:
    """A valid trace with no jobs (what a header-only file reads as)."""
    return pl.DataFrame(schema=CANONICAL_COLUMNS)


def null_column(name: str, dtype, n: int) -> pl.Series:
    """A column of n empty cells (made in constant time, for a trace of one job or of millions)."""
    return pl.Series(name, [None], dtype=dtype).new_from_index(0, n)


def cast_column(
    series: pl.Series, dtype: type[pl.DataType], path: str, row_numbers: Sequence[int] | np.ndarray | None, column: str
) -> pl.Series:
    """Convert one column to `dtype`, raising `TraceError` at the first cell that is not empty but
    will not convert. Used by readers whose own columns are not canonical (Gavel, profiles)."""
    out, problem = _cast(series, dtype)
    if problem is not None:
        rows = _row_numbers(series.len(), row_numbers)
        row = int(rows[problem[0]]) if problem[0] >= 0 else None  # (-1: the whole column)
        raise TraceError(path, problem[1], row=row, column=column)
    return out


def typed_columns(frame: pl.DataFrame, columns: Mapping[str, type[pl.DataType]], path: str, lines) -> pl.DataFrame:
    """Exactly `columns`, each cast to its type: a missing column or a cell that will not convert
    raises `TraceError` naming the file (and row). `lines`: the file line of each row, or None."""
    found = ", ".join(f"'{c}'" for c in frame.columns) or "none"
    for name in columns:
        if name not in frame.columns:
            hint = did_you_mean(name, frame.columns)
            raise TraceError(path, f"missing column '{name}'; columns found: {found}" + (f"; {hint}" if hint else ""))
    rows = np.arange(1, frame.height + 1) if lines is None else np.asarray(lines)
    return pl.DataFrame([cast_column(frame.get_column(n), t, path, rows, n).alias(n) for n, t in columns.items()])


def canonical_model_names(models: pl.Series) -> pl.Series:
    """Map known model aliases (LSTM, resnet18, Recoder, ...) to Gavel's names; keep unknown names."""
    from roundhouse.traces.profiles import canonical_model

    uniques = models.drop_nulls().unique().to_list()
    mapping = {name: canonical_model(name) or name for name in uniques}
    return models.replace_strict(mapping, default=None, return_dtype=pl.String) if mapping else models


# --- helpers -------------------------------------------------------------------------------


def _row_numbers(height: int, row_numbers) -> np.ndarray:
    if row_numbers is None:
        return np.arange(1, height + 1, dtype=np.int64)
    rows = np.asarray(row_numbers, dtype=np.int64)
    if rows.shape != (height,):
        raise ValueError(f"row_numbers has {rows.shape} entries for {height} rows")
    return rows


def _check_header(df: pl.DataFrame, path: str, names: Mapping[str, str], elastic: bool = False) -> None:
    found = list(df.columns)
    found_text = ", ".join(f"'{c}'" for c in found) if found else "none"
    _check_own_columns(path, found)
    for required in REQUIRED_COLUMNS:
        if required not in df.columns:
            _missing_column(path, names.get(required, required), found, found_text)
    # With an elastic profile a model alone may do (its rows are checked one by one).
    has_work = "iterations" in df.columns or "epochs" in df.columns or elastic
    if "duration_s" not in df.columns and not ("model" in df.columns and has_work):
        wanted = names.get("duration_s", "duration_s")
        either = f"'{wanted}' (or both '{names.get('model', 'model')}' and '{names.get('iterations', 'iterations')}')"
        hint = did_you_mean(wanted, found)
        raise TraceError(path, f"missing column {either}; columns found: {found_text}" + (f"; {hint}" if hint else ""))


def _check_own_columns(path: str, found: list[str]) -> None:
    """Refuse columns that would overwrite the simulator's own job-table columns (status, done,
    run_s, ...) when the jobs are added: the one check every trace reader and submission passes."""
    own = [c for c in found if c in OWN_COLUMNS]
    if not own:
        return
    message = "is a column the simulator keeps itself for each job, so a trace cannot set it; rename or drop it"
    if len(own) > 1:  # most likely a run's results (jobs.csv) given as a trace
        listed = ", ".join(f"'{c}'" for c in own[1:])
        message += (
            f" (so are {listed}: results of a run, such as its jobs.csv, are not a trace; "
            "keep only the jobs' own columns such as job_id, arrival_s, gpus, duration_s, model, batch_size)"
        )
    raise TraceError(path, message, column=own[0])


def _missing_column(path: str, wanted: str, found: list[str], found_text: str) -> None:
    hint = _separator_hint(found) or _quoted_hint(wanted, found) or did_you_mean(wanted, found)
    raise TraceError(path, f"missing column '{wanted}'; columns found: {found_text}" + (f"; {hint}" if hint else ""))


def _separator_hint(found: list[str]) -> str:
    """A header read as one column holding another separator: the file is not comma-separated."""
    if len(found) != 1:
        return ""
    for separator, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
        if separator in found[0]:
            return f"the header is one column, its names separated by {name}: a trace is comma-separated; save it with commas"
    return ""


def _quoted_hint(wanted: str, found: list[str]) -> str:
    """A name whose quote marks were read as part of it: in CSV a quote opens a quoted value only
    as a value's first character, so `, "arrival_s"` (a space before the quote) keeps them."""
    for name in found:
        if name != wanted and name.strip().strip('"').strip() == wanted:
            return (
                f"'{name}' holds quote marks, read as part of the name since a space comes before the "
                "opening quote; write the header without that space (or without the quotes)"
            )
    return ""


def _cast(series: pl.Series, dtype: type[pl.DataType]) -> tuple[pl.Series, tuple[int, str] | None]:
    """Convert `series` to `dtype` without raising; return it and (row index, message) of the
    first cell that held something but did not convert."""
    source = series.dtype
    if source == pl.String:
        text = series.str.strip_chars()
        text = pl.select(pl.when(text.str.len_bytes() > 0).then(text)).to_series()
        if dtype == pl.String:
            return text, None
        if dtype == pl.Int64:
            out = _text_to_int(text)
        else:
            out = text.cast(pl.Float64, strict=False)
        bad = text.is_not_null() & out.is_null()
        if bad.any():
            index = int(bad.arg_true()[0])
            return out, (index, f"{_quote(text[index])} {_not_converted(text[index], dtype)}")
        # (Text such as 1e400 reads as infinity: said as written, not as the "inf" it became.)
        infinite = out.is_infinite()
        overflow = (
            infinite & ~text.str.strip_chars_start("+-").str.to_lowercase().str.starts_with("inf") if infinite.any() else infinite
        )
        if overflow.any():
            index = int(overflow.arg_true()[0])
            return out, (index, f"{_quote(text[index])} is out of range for a number (beyond ±1.8e308)")
        return out, None
    if dtype == pl.String:
        if source in (pl.Null, pl.Categorical) or isinstance(source, pl.Enum) or source.is_numeric():
            return series.cast(pl.String), None
        return pl.Series(series.name, [None] * series.len(), dtype=pl.String), (-1, f"holds {source} values, expected text")
    if source == pl.Null:
        return series.cast(dtype), None
    if not source.is_numeric():
        # (a Boolean column too: true is no count of GPUs, nor any other number a trace gives)
        what = "true/false (Boolean)" if source == pl.Boolean else str(source)
        return pl.Series(series.name, [None] * series.len(), dtype=dtype), (-1, f"holds {what} values, expected numbers")
    if dtype == pl.Int64:
        if source.is_integer():
            out = series.cast(pl.Int64, strict=False)
            bad = series.is_not_null() & out.is_null()
        else:
            values = series.cast(pl.Float64)
            whole = values.is_finite() & (values == values.floor())
            fits = whole & (values.abs() < INT64_LIMIT)
            out = pl.select(pl.when(fits).then(values)).to_series().cast(pl.Int64)
            bad = values.is_not_null() & ~fits
        if bad.any():
            index = int(bad.arg_true()[0])
            value = series[index]
            # (a whole number past Int64's range, 1e30 GPUs, is too large, not a fraction)
            too_large = source.is_integer() or bool(whole[index])
            what = "is not a whole number"
            if too_large:
                what = "is too large (at most 2^63 - 1)" if value > 0 else "is too small (at least -2^63)"
            return out, (index, f"{_show(value)} {what}")
        return out, None
    return series.cast(pl.Float64), None


def _not_converted(text: str, dtype: type[pl.DataType]) -> str:
    """Why a text cell is not a value of `dtype`: a whole number past Int64's range says so."""
    if dtype != pl.Int64:
        return "is not a number"
    try:
        value = float(text)
    except ValueError:
        return "is not a whole number"
    if math.isfinite(value) and value == math.floor(value) and abs(value) >= INT64_LIMIT:
        return "is too large (at most 2^63 - 1)" if value > 0 else "is too small (at least -2^63)"
    return "is not a whole number"


def _text_to_int(text: pl.Series) -> pl.Series:
    """Whole numbers from text: `3`, `+3`, `3.0` and `3e2` are; `3.5` and `1e30` (beyond Int64) are not."""
    direct = text.cast(pl.Int64, strict=False)
    values = text.cast(pl.Float64, strict=False)
    whole = values.is_finite() & (values == values.floor()) & (values.abs() < INT64_LIMIT)
    via_float = pl.select(pl.when(whole).then(values)).to_series().cast(pl.Int64)
    return direct.fill_null(via_float)


_NOT_KEPT_BY_A_FLOAT = r"^[+-]?0\d|^[+-]?\d{16,}$"


def _cast_extra(series: pl.Series, as_text: bool = False) -> tuple[pl.Series, str | None]:
    """Keep a non-canonical column: numbers as Float64, everything else as text. Numbers that
    a Float64 would change are text too: an identifier with leading zeros (`007`), or a whole
    number of more digits than a Float64 holds exactly (a 64-bit id). With `as_text`, a column
    of text stays text, numbers or not."""
    source = series.dtype
    if source == pl.String:
        text = series.str.strip_chars()
        text = pl.select(pl.when(text.str.len_bytes() > 0).then(text)).to_series().alias(series.name)
        if as_text:
            return text, None
        # An all-empty column counts as numbers: nulls that arithmetic can use.
        given = text.drop_nulls()
        if given.str.contains(_NUMBER_TEXT).all() and not given.str.contains(_NOT_KEPT_BY_A_FLOAT).any():
            return text.cast(pl.Float64, strict=False), None
        return text, None
    if source.is_numeric() or source == pl.Boolean or source == pl.Null:
        return series.cast(pl.Float64), None
    if source == pl.Categorical or isinstance(source, pl.Enum):
        return series.cast(pl.String), None
    try:
        return series.cast(pl.String), None
    except pl.exceptions.PolarsError:
        return series, f"holds {source} values, which a trace cannot keep (use numbers or text)"


def _value_problems(
    frame: pl.DataFrame, shown: Callable[[str], str], elastic: ElasticProfile | None = None
) -> list[tuple[int, int, int, str, str]]:
    """Range, finiteness and completeness checks on the typed frame, first offending row of each
    (a job of an application of `elastic`, the run's elastic profile, needs no work column)."""
    order = {name: i for i, name in enumerate(CANONICAL_COLUMNS)}
    checks: list[tuple[str, pl.Expr, str]] = []
    for name in REQUIRED_COLUMNS:
        checks.append((name, pl.col(name).is_null(), "has no value (every job needs one)"))
    for name in _FINITE:
        checks.append((name, pl.col(name).is_nan() | pl.col(name).is_infinite(), "must be a finite number"))
    for name, bound, inclusive, sentence in _BOUNDS:
        low = pl.col(name) < bound if inclusive else pl.col(name) <= bound
        checks.append((name, low, sentence))  # polars orders NaN above every number
    for name in _TIMES:  # (NaN and infinity have their own sentence, above)
        late = pl.col(name).is_finite() & (pl.col(name) > MAX_SECONDS)
        checks.append((name, late, f"must be at most {MAX_SECONDS:g} s (a century)"))
    no_work = pl.col("iterations").is_null()
    if "epochs" in frame.columns:  # elastic jobs (traces/goodput.py) may give epochs instead
        no_work = no_work & pl.col("epochs").is_null()
    if elastic is not None:  # or nothing: they train for their application's epochs
        models = frame.get_column("model").drop_nulls().unique().to_list()
        applications = [m for m in models if elastic.row(m) >= 0]
        no_work = no_work & ~pl.col("model").is_in(applications)
    checks.append(("duration_s", pl.col("duration_s").is_null() & (pl.col("model").is_null() | no_work), ""))
    flags = frame.select([expr.fill_null(False).alias(f"c{i}") for i, (_, expr, _) in enumerate(checks)])
    problems = []
    for i, (name, _, sentence) in enumerate(checks):
        hits = flags.get_column(f"c{i}")
        if not hits.any():
            continue
        index = int(hits.arg_true()[0])
        value = frame.get_column(name)[index]
        if sentence == "":
            message = (
                f"no value, and then the job needs both {shown('model')} and {shown('iterations')} "
                "(every job needs a duration, or a model and a number of iterations"
                + (", or a model that is an application of the elastic profile)" if elastic is not None else ")")
            )
        elif "no value" in sentence:
            message = sentence
        else:
            message = f"{sentence}, got {_show(value)}"
        problems.append((index, order[name], 1, shown(name), message))
    return problems


def _batch_limit_problems(
    frame: pl.DataFrame, extras: list[pl.Series], shown: Callable[[str], str]
) -> list[tuple[int, int, int, str, str]]:
    """An elastic job's batch sizes against each other: its `local_batch` within its
    `max_batch_size` (ONES starts a job on one GPU at its local batch, and every resize of it
    from there would break the limit, stopping the run midway), and its global batch its local
    one times its GPUs: refused here, on the job's row. A global batch above the limit is not
    refused: it is what the job asked for, not what it is started with (ONES keeps its plans
    within the limit; the ONES reader's cap, base batch x max_lr / lr, may be below it)."""
    given = {e.name: e for e in extras if e.name in ("local_batch", "max_batch_size")}
    if not given:
        return []
    n = frame.height
    local = given.get("local_batch", null_column("local_batch", pl.Float64, n))
    limit = given.get("max_batch_size", null_column("max_batch_size", pl.Float64, n))
    batch = frame.get_column("batch_size").cast(pl.Float64)
    gpus = frame.get_column("gpus").cast(pl.Float64)
    at = len(CANONICAL_COLUMNS)
    checks = (
        ("local_batch", local > limit, lambda i: f"{_show(local[i])} is above its max_batch_size {_show(limit[i])}"),
        (
            "batch_size",
            batch != local * gpus,
            lambda i: (
                f"{batch[i]:g} is not its local_batch {_show(local[i])} times its {int(gpus[i])} GPU(s) "
                f"(an elastic job's global batch is its batch per GPU times its GPUs)"
            ),
        ),
    )
    problems = []
    for order, (column, bad, message) in enumerate(checks):
        hits = bad.fill_null(False)  # (a value not given, or not a number: its own check says so)
        if hits.any():
            i = int(hits.arg_true()[0])
            problems.append((i, at, 2 + order, shown(column), message(i)))  # (in the order above, on one row)
    return problems


def _training_setting_problems(
    df: pl.DataFrame, extras: list[pl.Series], shown: Callable[[str], str]
) -> list[tuple[int, int, int, str, str]]:
    """ONES' training settings (`lr`, `max_lr`, `target_acc`, `patience`) where the trace gives
    them, refused as the ONES reader refuses them (traces/trainingsettings.py), each cell shown
    as the file holds it. A cell that is no number has its conversion's own problem."""
    values = {e.name: e for e in extras if e.name in TRAINING_SETTINGS}
    found = setting_problems(values, {name: df.get_column(name) for name in values})
    return [(i, len(CANONICAL_COLUMNS), 1, shown(column), message) for i, column, message in found]


def _extra_problems(series: pl.Series, name: str, shown: str) -> list[tuple[int, int, int, str, str]]:
    """An optional number's range (`_EXTRA_BOUNDS`): finite, and at or above its bound (empty:
    not given)."""
    bound, inclusive, sentence = _EXTRA_BOUNDS[name]
    low = series < bound if inclusive else series <= bound
    bad = (series.is_nan() | series.is_infinite() | low).fill_null(False)
    if not bad.any():
        return []
    index = int(bad.arg_true()[0])
    value = series[index]
    message = sentence if math.isfinite(value) else "must be a finite number"
    return [(index, len(CANONICAL_COLUMNS), 1, shown, f"{message}, got {_show(value)}")]


def _duplicate_ids(frame: pl.DataFrame, column: str) -> tuple[list[tuple[int, int, int, str, str]], int]:
    """The second use of a job id, in file order, and the index of the row of its first use (the
    error names it as `also`, so that a reader can turn both into lines the same way)."""
    ids = frame.get_column("job_id")
    repeated = ids.is_not_null() & ~ids.is_first_distinct()
    if not repeated.any():
        return [], -1
    second = int(repeated.arg_true()[0])
    job_id = ids[second]
    first = int((ids == job_id).arg_true()[0])
    order = list(CANONICAL_COLUMNS).index("job_id")
    return [(second, order, 1, column, f"job id {job_id} is used twice")], first


def _quote(text: str) -> str:
    if len(text) > 40:
        text = text[:37] + "..."
    return repr(text)


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
