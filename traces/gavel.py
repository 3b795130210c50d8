"""Gavel's `.trace` files (stanford-futuredata/gavel, `scheduler/traces/`): TAB-separated, no header.

Two layouts exist, told apart by the number of fields:

- 10 fields (current, `utils.parse_trace`): job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time;
- 7 fields (older, the Philly-derived `traces/msr/`): job_type, command, num_steps_arg,
  needs_data_dir, total_steps, arrival_time, scale_factor.

Mapping to the canonical schema: `job_type` such as `ResNet-18 (batch size 64)` gives model and
batch_size (A3C and CycleGAN name no batch size and get the profile's default); total_steps →
iterations, scale_factor → gpus, priority_weight → weight, arrival_time → arrival_s, and job_id
is the line order from 0, as in Gavel's simulator. Gavel's SLO is -1 for none and otherwise a
factor of the job's duration, so it is kept as the extra column `slo_factor` (null for -1);
command, working_directory, num_steps_arg and needs_data_dir are kept as extra columns too, so
a Gavel trace converts back to an equivalent one. Gavel traces carry no duration: the
simulator derives it from iterations and the profile table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import data_lines
from roundhouse.traces.linepieces import PIECE_BYTES, FirstError, Piece, pieces
from roundhouse.traces.profiles import REFERENCE_GPU_TYPE, ProfileTable
from roundhouse.traces.schema import INT64_LIMIT, cast_column, columns_with_values, validate

COLUMNS_10: tuple[str, ...] = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)
COLUMNS_7: tuple[str, ...] = (
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time",
    "scale_factor",
)
LAYOUTS = {10: COLUMNS_10, 7: COLUMNS_7}
# Error messages name Gavel's columns, not ours.
SOURCE_NAMES = {
    "arrival_s": "arrival_time",
    "gpus": "scale_factor",
    "iterations": "total_steps",
    "weight": "priority_weight",
    "model": "job_type",
    "batch_size": "job_type",
    "duration_s": "total_steps",
    "slo_factor": "SLO",
}
# Gavel's columns of text, kept as they are: text even where a cell, or every cell, is a number
# (a command `7`), so the pieces of a file read a piece at a time type them alike.
TEXT_COLUMNS = ("command", "working_directory", "num_steps_arg")
# Gavel's job types for these models carry no "(batch size N)".
UNBATCHED_MODELS = frozenset({"A3C", "CycleGAN"})
_JOB_TYPE = r"^(.*?)\s*\(batch size\s*(\d+)\)$"

# How Gavel launches each model on a physical cluster (its `job_table.py`, MIT licence), used
# when we write a trace for jobs that carry no command: (working_directory, command with the
# batch size as {bs}, num_steps_arg, needs_data_dir).
COMMANDS: dict[str, tuple[str, str, str, int]] = {
    "ResNet-18": ("image_classification/cifar10", "python3 main.py --data_dir=%s/cifar10 --batch_size {bs}", "--num_steps", 1),
    "ResNet-50": (
        "image_classification/imagenet",
        "python3 main.py -j 8 -a resnet50 -b {bs} %s/imagenet/",
        "--num_minibatches",
        1,
    ),
    "Transformer": (
        "translation",
        "python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size {bs} -proj_share_weight",
        "-step",
        1,
    ),
    "LM": ("language_modeling", "python main.py --cuda --data %s/wikitext2 --batch_size {bs}", "--steps", 1),
    "Recommendation": ("recommendation", "python3 train.py --data_dir %s/ml-20m/pro_sg/ --batch_size {bs}", "-n", 1),
    "A3C": ("rl", "python3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True", "--max-steps", 0),
    "CycleGAN": ("cyclegan", "python3 cyclegan.py --dataset_path %s/monet2photo --decay_epoch 0", "--n_steps", 1),
}
_UNKNOWN_COMMAND = (".", "python3 main.py --batch_size {bs}", "--num_steps", 1)


def read(path: str | Path, profile: ProfileTable | None = None, piece_bytes: int | None = PIECE_BYTES) -> pl.DataFrame:
    """A Gavel trace (either layout) as a canonical frame; errors name the line and Gavel's column.
    The file is read `piece_bytes` at a time (whole lines; None: at once), each piece parsed
    and checked before the next is read: a large trace's text and fields are never all held."""
    path = str(path)
    profile = profile or ProfileTable.load()
    parser = _Parser(path, profile)
    for piece in pieces(path, piece_bytes):
        parser.add(piece)
    return parser.frame()


# The reader's checks in the order a whole-file read makes them (linepieces.FirstError): the
# first line's field count, every line's, a batch size too large, each column's values (one
# rank each, from _BATCH + 1), then the schema's checks.
_WIDTH, _COUNT, _BATCH = 0, 1, 2
_VALID = _BATCH + 1
_CASTS: dict[int, tuple[tuple[str, type[pl.DataType]], ...]] = {
    width: tuple(
        (name, pl.Int64 if name == "scale_factor" else pl.Float64)
        for name in ("arrival_time", "scale_factor", "total_steps", "priority_weight", "SLO", "needs_data_dir")
        if name in names
    )
    for width, names in LAYOUTS.items()
}


class _Parser:
    """A Gavel trace's lines, parsed a piece at a time into typed columns; `frame` joins them."""

    def __init__(self, path: str, profile: ProfileTable):
        self.path = path
        self.profile = profile
        self.width: int | None = None  # the first line's fields, which every line must have
        self.first = FirstError()
        self.parts: list[pl.DataFrame] = []
        self.jobs = 0

    def add(self, piece: Piece) -> None:
        lines, numbers = data_lines(piece.text, comment=None)
        if lines.len() == 0:
            return
        numbers = numbers + (piece.first_line - 1)
        fields = lines.str.split("\t")
        del lines
        counts = fields.list.len().to_numpy()
        if self.width is None:
            self.width = int(counts[0])
            if self.width not in LAYOUTS:
                message = (
                    f"has {self.width} tab-separated field{'s' if self.width != 1 else ''}"
                    f"{_trailing_tab(fields[0], LAYOUTS)}; a Gavel trace line has 10 (or 7 in the older layout)"
                )
                self.first.note(_WIDTH, TraceError(self.path, message, row=int(numbers[0])))
        if self.width not in LAYOUTS or not self.first.wants(_COUNT):
            return
        wrong = np.flatnonzero(counts != self.width)
        if wrong.size:
            i = int(wrong[0])
            message = (
                f"has {counts[i]} tab-separated fields{_trailing_tab(fields[i], (self.width,))}, "
                f"but the first line has {self.width}"
            )
            self.first.note(_COUNT, TraceError(self.path, message, row=int(numbers[i])))
            return
        part = self._typed(fields, numbers) if self.first.wants(_BATCH) else None
        if part is not None and self.first.error is None:
            self.parts.append(part)
        self.jobs += len(numbers)

    def _typed(self, fields: pl.Series, numbers: np.ndarray) -> pl.DataFrame | None:
        """The piece's canonical columns, or None when a check failed (noted in `first`)."""
        path, profile, width = self.path, self.profile, self.width
        assert width is not None
        names = LAYOUTS[width]
        raw = pl.DataFrame([fields.list.get(i).alias(name) for i, name in enumerate(names)])
        job_type = raw.get_column("job_type").str.strip_chars()
        # (The pattern is matched once per distinct job type, a few dozen, not once per line.)
        kinds = job_type.drop_nulls().unique()
        parts = kinds.str.extract_groups(_JOB_TYPE)
        model_of = dict(zip(kinds.to_list(), parts.struct.field("1").fill_null(kinds).to_list()))
        batch_of = dict(zip(kinds.to_list(), parts.struct.field("2").to_list()))
        model = job_type.replace_strict(model_of, default=None, return_dtype=pl.String)
        model = model.replace_strict(
            {m: profile.canonical_model(m) or m for m in model.drop_nulls().unique().to_list()},
            default=None,
            return_dtype=pl.String,
        )
        defaults = {m: profile.default_batch_size(m) for m in model.drop_nulls().unique().to_list()}
        given = job_type.replace_strict(batch_of, default=None, return_dtype=pl.String)
        batch = given.cast(pl.Int64, strict=False)
        too_big = given.is_not_null() & batch.is_null()  # digits beyond Int64
        if too_big.any():
            i = int(too_big.arg_true()[0])
            error = TraceError(path, f"batch size {given[i]} is too large", row=int(numbers[i]), column="job_type")
            self.first.note(_BATCH, error)
        batch = batch.fill_null(model.replace_strict(defaults, default=None, return_dtype=pl.Int64))
        typed: dict[str, pl.Series] = {}
        for rank, (name, dtype) in enumerate(_CASTS[width], start=_BATCH + 1):
            if self.first.wants(rank):
                try:
                    typed[name] = _field(raw.get_column(name), dtype, path, numbers, name)
                except TraceError as err:
                    self.first.note(rank, err)
        if self.first.error is not None:
            return None
        columns = {
            "job_id": pl.Series(np.arange(self.jobs, self.jobs + len(numbers), dtype=np.int64)),
            "arrival_s": typed["arrival_time"],
            "gpus": typed["scale_factor"],
            "model": model,
            "iterations": typed["total_steps"],
            "batch_size": batch,
        }
        if width == 10:
            columns["weight"] = typed["priority_weight"]
            slo = typed["SLO"]
            # Only -1 says "none"; any other factor is checked as given (0, -0.5, nan are refused).
            columns["slo_factor"] = pl.select(pl.when(slo != -1).then(slo)).to_series()
        columns["command"] = raw.get_column("command")
        if width == 10:
            columns["working_directory"] = raw.get_column("working_directory")
        columns["num_steps_arg"] = raw.get_column("num_steps_arg")
        columns["needs_data_dir"] = typed["needs_data_dir"]
        # Validated here, a piece at a time: the schema's checks are each row's own, and it
        # names a row's first problem, as it would among all rows (Gavel's job ids, the line
        # order, are never used twice).
        try:
            frame = pl.DataFrame([v.alias(k) for k, v in columns.items()])
            return validate(frame, path, numbers, source_names=SOURCE_NAMES, text_columns=TEXT_COLUMNS)
        except TraceError as err:
            self.first.note(_VALID + len(_CASTS[width]), err)
            return None

    def frame(self) -> pl.DataFrame:
        """The trace, sorted as `validate` sorts it, once every piece has been added. (Every
        piece's columns have the same types: each is cast to its own, and the text columns are
        text whatever they hold, `TEXT_COLUMNS`.)"""
        self.first.raise_if_any()
        if self.jobs == 0:
            raise TraceError(self.path, "is empty (a Gavel trace has one job per line)")
        parts, self.parts = self.parts, []
        # Each part is sorted by arrival, then job id; the parts' ids ascend, so if their
        # arrivals do too (a trace in arrival order) they are in order as they are, and
        # sorting them again would only copy them.
        in_order = all(a["arrival_s"][-1] <= b["arrival_s"][0] for a, b in zip(parts, parts[1:]))
        frame = pl.concat(parts, rechunk=False)
        del parts
        return frame if in_order else frame.sort(["arrival_s", "job_id"], maintain_order=True)


# Fields Gavel's own reader (`utils.parse_trace`) converts with float() or int(), so that an
# empty one stops it: empty here is an error too, not "no weight" or "no SLO".
_NEEDED = {"priority_weight": "a priority weight (1 is the usual)", "SLO": "an SLO factor (-1 for none)"}


def _field(text: pl.Series, dtype: type[pl.DataType], path: str, numbers: np.ndarray, name: str) -> pl.Series:
    """One numeric field of a piece's lines, typed; a TraceError names the first line whose
    field does not convert, is empty where Gavel needs a number (`_NEEDED`, needs_data_dir), or
    (needs_data_dir, Gavel's bool(int(...))) is not 0 or 1. Problems of one field share one
    rank (linepieces.FirstError), so the first line with any of them is the one named."""
    problems: list[TraceError] = []
    try:
        typed = cast_column(text, dtype, path, numbers, name)
    except TraceError as err:
        problems.append(err)
        typed = text.str.strip_chars().cast(dtype, strict=False)
    if name in _NEEDED or name == "needs_data_dir":
        empty = text.str.strip_chars().str.len_bytes() == 0
        if empty.any():
            what = _NEEDED.get(name, "0 or 1 (whether the job's command takes a data directory)")
            at = int(numbers[int(empty.arg_true()[0])])
            problems.append(TraceError(path, f"has no value: every line of a Gavel trace gives {what}", row=at, column=name))
    if name == "needs_data_dir":
        wrong = typed.is_not_null() & ~typed.is_in([0.0, 1.0]).fill_null(False)
        if wrong.any():
            i = int(wrong.arg_true()[0])
            problems.append(
                TraceError(
                    path,
                    f"must be 0 or 1 (whether the job's command takes a data directory), got {text[i].strip()}",
                    row=int(numbers[i]),
                    column=name,
                )
            )
    if name == "total_steps":
        partial = (typed.is_finite() & (typed.round(0) != typed)).fill_null(False)
        if partial.any():
            i = int(partial.arg_true()[0])
            problems.append(
                TraceError(
                    path,
                    f"must be a whole number of steps (Gavel reads it with int()), got {text[i].strip()}",
                    row=int(numbers[i]),
                    column=name,
                )
            )
    if problems:
        raise min(problems, key=lambda err: err.row or 0)
    return typed


def _trailing_tab(fields: pl.Series, widths) -> str:
    """A hint for a line with one field too many, the last one empty (a tab at the line's end)."""
    if len(fields) - 1 in widths and not fields[-1].strip():
        return " (the last one empty: a tab at the end of the line?)"
    return ""


def job_type(model: str, batch_size: int | None) -> str:
    """Gavel's name for a job type, e.g. `ResNet-18 (batch size 64)` or `A3C`."""
    if model in UNBATCHED_MODELS or batch_size is None:
        return model
    return f"{model} (batch size {batch_size})"


# What a Gavel trace's ten fields carry: every other column is left out of it (and said to be).
CARRIED = frozenset(
    ("job_id", "arrival_s", "gpus", "duration_s", "iterations", "model", "batch_size", "weight", "slo_s", "slo_factor")
    + ("command", "working_directory", "num_steps_arg", "needs_data_dir")
)


def write(df: pl.DataFrame, path: str | Path, profile: ProfileTable | None = None) -> list[str]:
    """Write jobs as a 10-field Gavel trace; returns, in words, what the format could not keep.

    Every job needs a model. total_steps is the job's `iterations`, or, for a job that has only a
    duration, duration × its isolated V100 throughput (as Gavel's own generator computes it).
    Missing commands are filled from Gavel's job table. Job ids are not written: Gavel numbers
    jobs by line.
    """
    path = str(path)
    profile = profile or ProfileTable.load()
    frame = validate(df, f"{path} (jobs being written)", text_columns=TEXT_COLUMNS)
    if frame.height == 0:  # an empty file is not a Gavel trace: `read` refuses it
        raise TraceError(path, "no jobs to write: a Gavel trace needs at least one job")
    missing = frame.get_column("model").is_null()
    if missing.any():
        job = frame["job_id"][int(missing.arg_true()[0])]
        raise TraceError(path, f"job {job} has no model, and a Gavel trace names a job type for every job", column="model")
    _check_text(frame, path)
    rates = _rates(frame, profile)
    steps = _steps(frame, rates, profile, path)
    slo = _slo_factor(frame, steps, rates)
    fallback = _fallback(frame, profile)

    def given(name: str) -> pl.Expr:
        if name not in frame.columns:
            return pl.col(f"_{name}")
        return pl.col(name).cast(fallback.schema[f"_{name}"]).fill_null(pl.col(f"_{name}"))

    # Whole-frame checks and numbers first (nothing is written if one fails), then the text,
    # formatted and written a chunk of lines at a time.
    own = [c for c in ("command", "working_directory", "num_steps_arg", "needs_data_dir") if c in frame.columns]
    fields = frame.select("model", "batch_size", "gpus", "weight", "arrival_s", *own)
    fields = fields.with_columns(_total_steps=steps, _SLO=slo, _key=_pair_key(frame)).join(
        fallback, on="_key", how="left", maintain_order="left"
    )
    needs = int64_column(
        fields.select(given("needs_data_dir")).to_series(), path, frame["job_id"], "needs_data_dir", "needs_data_dir"
    )
    wrong = ~needs.is_in([0, 1]).fill_null(False)
    if wrong.any():  # (what we write must read back: `_field` refuses it)
        i = int(wrong.arg_true()[0])
        raise TraceError(
            path,
            f"job {frame['job_id'][i]}: needs_data_dir must be 0 or 1 in a Gavel trace, got {needs[i]}",
            column="needs_data_dir",
        )
    fields = fields.with_columns(_needs=needs)
    unbatched = pl.col("model").is_in(list(UNBATCHED_MODELS)) | pl.col("batch_size").is_null()
    line = pl.concat_str(
        [
            pl.when(unbatched)
            .then(pl.col("model"))
            .otherwise(pl.format("{} (batch size {})", pl.col("model"), pl.col("batch_size"))),
            given("command"),
            given("working_directory"),
            given("num_steps_arg"),
            pl.col("_needs").cast(pl.String),
            pl.col("_total_steps").cast(pl.String),
            pl.col("gpus").cast(pl.String),
            pl.col("weight").cast(pl.String),
            pl.col("_SLO").cast(pl.String).fill_null("-1"),
            pl.col("arrival_s").cast(pl.String),
        ],
        separator="\t",
    )
    with open(path, "w", encoding="utf-8", newline="") as out:
        for first in range(0, fields.height, _CHUNK):
            text = fields.slice(first, _CHUNK).select(line).to_series()
            out.write("".join(t + "\n" for t in text.to_list()))
    notes = []
    dropped = [c for c in columns_with_values(frame) if c not in CARRIED]
    if dropped:
        notes.append(f"left out, as a Gavel trace has no field for them: {', '.join(dropped)}")
    if not frame.get_column("job_id").equals(pl.Series("job_id", range(frame.height)), check_dtypes=False):
        notes.append("job ids not kept: read back, the jobs are numbered 0, 1, 2, ... in arrival order")
    if (frame.get_column("iterations").drop_nulls() % 1 != 0).any():
        notes.append("iterations rounded to whole steps")
    lost = frame.get_column("slo_s").is_not_null() & slo.is_null()
    if lost.any():
        jobs = ", ".join(str(j) for j in frame.get_column("job_id").filter(lost).head(5).to_list())
        more = f" and {int(lost.sum()) - 5:,} more" if lost.sum() > 5 else ""
        notes.append(
            f"slo_s left out for job(s) {jobs}{more}: a Gavel trace keeps an SLO as a factor of the job's duration, "
            f"and they have no duration_s, nor a V100 throughput in {profile.source} to derive one from their iterations"
        )
    return notes


_CHUNK = 100_000  # lines formatted and written at a time


def _pair_key(frame: pl.DataFrame) -> pl.Series:
    """A text key per job for its (model, batch size), null batch sizes included."""
    key = pl.col("model") + "\x1f" + pl.col("batch_size").cast(pl.String).fill_null("")
    return frame.select(key.alias("_key")).to_series()


def _fallback(frame: pl.DataFrame, profile: ProfileTable) -> pl.DataFrame:
    """Gavel's job-table launch fields for each distinct (model, batch size) of `frame`, by
    `_pair_key`: its working directory, command (the batch size, else the model's default, in
    it), num_steps_arg and needs_data_dir."""
    pairs = frame.select("model", "batch_size").unique(maintain_order=True)
    rows = []
    for model, batch in pairs.iter_rows():
        directory, command, steps_arg, data_dir = COMMANDS.get(model, _UNKNOWN_COMMAND)
        size = batch if batch is not None else profile.default_batch_size(model) or ""
        rows.append((directory, command.format(bs=size), steps_arg, float(data_dir)))
    table = pl.DataFrame(
        rows,
        schema={
            "_working_directory": pl.String,
            "_command": pl.String,
            "_num_steps_arg": pl.String,
            "_needs_data_dir": pl.Float64,
        },
        orient="row",
    )
    return table.with_columns(_key=_pair_key(pairs))


def _rates(frame: pl.DataFrame, profile: ProfileTable) -> np.ndarray:
    """Each job's isolated V100 throughput (0 where the profile has none), looked up once per
    distinct (model, batch size, GPUs)."""
    keys = ["model", "batch_size", "gpus"]
    distinct = frame.select(keys).unique(maintain_order=True)
    distinct = distinct.with_columns(
        _rate=pl.Series(profile.rates(distinct["model"], distinct["batch_size"], REFERENCE_GPU_TYPE, distinct["gpus"]))
    )
    joined = frame.select(keys).join(distinct, on=keys, how="left", nulls_equal=True, maintain_order="left")
    return joined.get_column("_rate").to_numpy()


def int64_column(values: pl.Series, path: str, job_ids: pl.Series, field: str, source: str | pl.Series) -> pl.Series:
    """`values` rounded to whole numbers for the written field `field`. A value no 64-bit integer
    holds is an error naming the job and the column it came from (`source`: one name for all
    rows, or each row's), where the cast would fail with a bare polars error."""
    rounded = values.round()
    over = (rounded.is_not_null() & ~(rounded.abs() < INT64_LIMIT)).fill_null(False)
    if over.any():
        i = int(over.arg_true()[0])
        column = source if isinstance(source, str) else source[i]
        raise TraceError(
            path,
            f"job {job_ids[i]}: {values[i]:g} is too large to write as {field}, a whole number of at most 2^63 - 1",
            column=column,
        )
    return rounded.cast(pl.Int64)


def _steps(frame: pl.DataFrame, rates: np.ndarray, profile: ProfileTable, path: str) -> pl.Series:
    """Each job's total_steps: its iterations, else its duration at its V100 throughput `rates`."""
    iterations = frame.get_column("iterations")
    derived = frame.get_column("duration_s").to_numpy() * rates
    from_duration = pl.Series(derived)
    needed = iterations.is_null() & ~pl.Series(derived > 0)  # (numpy's comparison: NaN is not above 0)
    if needed.any():
        i = int(needed.arg_true()[0])
        row = frame.row(i, named=True)
        raise TraceError(
            path,
            f"job {row['job_id']} has no iterations, and {profile.source} has no V100 throughput for "
            f"{_model_text(row)} on {row['gpus']} GPU(s) to derive them from its duration",
            column="iterations",
        )
    # A job's duration is kept only as steps at its throughput: without one, read back it would
    # have no duration, and its speed would come from elsewhere (or be unknown).
    lost = frame.get_column("duration_s").is_not_null() & ~pl.Series(rates > 0)
    if lost.any():
        row = frame.row(int(lost.arg_true()[0]), named=True)
        raise TraceError(
            path,
            f"job {row['job_id']}: a Gavel trace keeps steps, not durations, and {profile.source} has no V100 "
            f"throughput for {_model_text(row)} on {row['gpus']} GPU(s) to keep its "
            "duration_s as steps; write the trace as canonical CSV or Parquet instead",
            column="duration_s",
        )
    steps = iterations.fill_null(from_duration).round().clip(lower_bound=1)
    source = pl.select(pl.when(iterations.is_null()).then(pl.lit("duration_s")).otherwise(pl.lit("iterations"))).to_series()
    return int64_column(steps, path, frame["job_id"], "total_steps", source)


def _check_text(frame: pl.DataFrame, path: str) -> None:
    """Refuse a tab, newline or carriage return inside a text field: the file's fields are
    tab-separated and its jobs one a line, so it would not read back (in Gavel either)."""
    for name in ("model", "command", "working_directory", "num_steps_arg"):
        if name not in frame.columns or frame.schema[name] != pl.String:
            continue
        bad = frame.get_column(name).str.contains(r"[\t\n\r]").fill_null(False)
        if bad.any():
            i = int(bad.arg_true()[0])
            raise TraceError(
                path,
                f"job {frame['job_id'][i]}: {frame[name][i]!r} holds a tab or line break, which a Gavel trace "
                "cannot (it separates fields with tabs and jobs with lines)",
                column=name,
            )


def _model_text(row: dict) -> str:
    batch = row["batch_size"]
    return row["model"] if batch is None else f"{row['model']} (batch size {batch})"


def _slo_factor(frame: pl.DataFrame, steps: pl.Series, rates: np.ndarray) -> pl.Series:
    """Gavel's SLO factor: the `slo_factor` column if there is one, else slo_s over the job's
    duration: its duration_s, or (without one) its steps at its V100 throughput `rates`, the
    isolated duration the simulator derives when reading it back. Null where neither is known."""
    known = pl.Series(rates > 0)  # (numpy's comparison: NaN is not above 0)
    isolated = pl.select(pl.when(known).then(steps.cast(pl.Float64) / pl.Series(rates))).to_series()
    derived = frame.get_column("slo_s") / frame.get_column("duration_s").fill_null(isolated)
    if "slo_factor" in frame.columns:
        return frame.get_column("slo_factor").fill_null(derived)
    return derived
