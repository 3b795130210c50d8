"""`roundhouse trace`: look at, convert and generate job traces.

    roundhouse trace describe FILE [--format F]
    roundhouse trace convert IN OUT [--from F] [--to canonical|gavel|tiresias]
    roundhouse trace generate -o OUT --jobs N --rate 8/h --seed S [--gpus philly|single]
                              [--models none|blox] [--start-id ID] [--format canonical|gavel|tiresias|philly]
                              [--workload philly|tiresias|dally-batch|dally-poisson|synergy|ones|pollux]
                              [--loss none|blox]

`--workload dally-batch` puts every job at time 0 and takes no --rate. Each workload is written
only in the formats that can hold its jobs (WORKLOAD_FORMATS), and an output's extension must not
name another format than the one written (FORMAT_EXTENSIONS): both are checked before anything
is drawn.

Formats only read (Philly, Helios, PAI, Pollux, ONES) are not written: `convert --to` one of
them says so (`generate --format philly` writes a synthetic Philly log). Where a trace gives
dates rather than seconds (Helios' `cluster_log.csv`, PAI's task table), arrivals count from
the first job kept: a record skipped (no GPU asked for, never ran) does not move them.

A trace is written to a file beside the output and moved onto it once whole, so that a write
that fails or is interrupted leaves no part-written trace (cut at a line's end, a trace still
reads, with jobs missing) and an existing output as it was.

Values are checked here and reported as `UsageError` sentences (exit status 2) rather than
argparse's usage dumps, so that every mistake reads the same way.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.errors import TraceError, UsageError, did_you_mean
from roundhouse.runtime.element import MAX_JOB_ID, MAX_JOBS, MAX_RATE, MAX_SECONDS
from roundhouse.runtime.files import write_problem
from roundhouse.runtime.values import describe, rate_from_text
from roundhouse.tools.common import MOST_DIGITS, whole
from roundhouse.tools.outputs.stdout_result import plural, result_console, text_of, write_result
from roundhouse.tools.outputs.whole_file import whole_file
from roundhouse.traces.tiresias import needs_duration

GENERATE_FORMATS = ("canonical", "gavel", "tiresias", "philly")
GPU_CHOICES = ("philly", "single")
MODEL_CHOICES = ("none", "blox")
WORKLOAD_CHOICES = ("philly", "tiresias", "dally-batch", "dally-poisson", "synergy", "ones", "pollux")
LOSS_CHOICES = ("none", "blox")
# The formats each workload's jobs can be written in. Gavel's keeps a job's work as steps at its
# model's V100 throughput, and Tiresias' needs a duration (or a throughput to derive one): the
# shipped profile (gavel.csv) has throughputs for Blox's models only, so only --workload philly
# writes Gavel's, and the workloads whose jobs give epochs, not durations, write neither.
WORKLOAD_FORMATS: dict[str, tuple[str, ...]] = {
    "philly": ("canonical", "gavel", "tiresias", "philly"),
    "tiresias": ("canonical", "tiresias"),
    "dally-batch": ("canonical", "tiresias"),
    "dally-poisson": ("canonical", "tiresias"),
    "synergy": ("canonical", "tiresias"),
    "ones": ("canonical",),
    "pollux": ("canonical",),
}
_CANNOT_WRITE = {
    "gavel": "a Gavel trace keeps each job's work as steps at its model's V100 throughput, and gavel.csv "
    "has none for some of this workload's models",
    "tiresias": needs_duration("these jobs", "give their work in epochs", "models"),
    "philly": "--format philly writes a synthetic Philly cluster_job_log of its own (Philly submissions, "
    "durations and GPU counts, no models)",
}
# The extensions each written format takes, and what a file with one of them holds when read
# back with format detection (traces/formats.py); an extension not listed is not checked.
FORMAT_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "canonical": (".csv", ".parquet", ".pq"),
    "gavel": (".trace",),
    "tiresias": (".csv",),
    "philly": (".json",),
}
_EXTENSION_HOLDS = {
    ".csv": "holds comma-separated values (a canonical or Tiresias trace)",
    ".parquet": "holds a canonical trace",
    ".pq": "holds a canonical trace",
    ".trace": "is read as a Gavel trace",
    ".json": "is read as a Philly cluster_job_log (or a Helios job list)",
}
# The format `convert --to auto` writes for each extension (as traces/formats.py `write_trace`).
_CONVERT_EXTENSIONS = {".csv": "canonical", ".parquet": "canonical", ".pq": "canonical", ".trace": "gavel"}
_WRITES = {"canonical": "CSV", "gavel": "a tab-separated Gavel trace", "tiresias": "a Tiresias CSV", "philly": "JSON"}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "trace",
        help="describe, convert and generate job traces",
        description="Describe, convert and generate job traces (canonical CSV/Parquet, Gavel, Tiresias, Philly, "
        "Helios and Dally, Alibaba PAI, Pollux, ONES).",
    )
    actions = parser.add_subparsers(dest="trace_command", metavar="ACTION")
    actions.required = True

    describe = actions.add_parser("describe", help="summarise a trace: jobs, arrivals, GPUs, durations, models")
    describe.add_argument("file", help="trace file (any supported format)")
    describe.add_argument(
        "--format", default="auto", help="canonical, gavel, tiresias, philly, helios, pai, pollux or ones (default: detect)"
    )
    describe.set_defaults(handler=describe_command)

    convert = actions.add_parser("convert", help="convert a trace from one format to another")
    convert.add_argument("input", help="trace to read")
    convert.add_argument("output", help="file to write")
    convert.add_argument("--from", dest="source_format", default="auto", help="format of INPUT (default: detect)")
    convert.add_argument(
        "--to", dest="target_format", default="auto", help="canonical, gavel or tiresias (default: from OUTPUT's extension)"
    )
    convert.set_defaults(handler=convert_command)

    generate = actions.add_parser("generate", help="generate a synthetic trace (Poisson arrivals, Philly distributions)")
    generate.add_argument("-o", "--output", required=True, help="file to write")
    generate.add_argument(
        "--jobs",
        required=True,
        help="number of jobs (with --format philly, of records: some 15%% of them jobs that never ran, which readers skip)",
    )
    generate.add_argument(
        "--rate", help="arrival rate, e.g. 8/h or 0.5/min (every workload but dally-batch, whose jobs all arrive at 0)"
    )
    generate.add_argument("--seed", required=True, help="random seed (same seed, same trace)")
    generate.add_argument("--gpus", default="philly", help="philly (1/2/4/8 GPUs) or single (default: philly)")
    generate.add_argument("--models", default="none", help="none (durations only) or blox (Blox's models) (default: none)")
    generate.add_argument(
        "--start-id",
        default="0",
        help="first job id (default: 0; not with --format philly, whose log numbers its own, or gavel, which keeps no ids)",
    )
    generate.add_argument(
        "--workload",
        default="philly",
        help="philly (Philly durations and GPU counts), tiresias (Tiresias' testbed mix of GPU counts, "
        "models and 2 min-2 h durations), dally-batch or dally-poisson (Dally's six models and GPU-demand "
        "mix, all at time 0 or Poisson arrivals), synergy (Philly durations and GPU counts, Synergy's "
        "image/language/speech models 20/70/10 with CPU and memory demands), ones (ONES' ten model/dataset "
        "pairs, equally many of each, with the columns its elastic jobs need), pollux (Pollux's six applications in its workload 6's "
        "mix, a GPU count and batch size each) (default: philly)",
    )
    generate.add_argument(
        "--loss",
        default="none",
        help="none or blox (loss curves: 75%% of jobs converge at 40%% of their work; not with --format gavel or philly) "
        "(default: none)",
    )
    generate.add_argument(
        "--format",
        default="auto",
        help="canonical (.csv, .parquet), gavel (.trace; --workload philly with --models blox only), tiresias "
        "(.csv; not --workload ones or pollux) or philly (.json, a synthetic cluster_job_log; --workload philly "
        "only); default: from the extension",
    )
    generate.set_defaults(handler=generate_command)


# --- describe ---------------------------------------------------------------------------


def describe_command(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    from roundhouse.traces.formats import check_format, file_columns, load_trace

    loaded = load_trace(args.file, check_format(args.format, flag="--format"))
    columns = file_columns(args.file, loaded.format)
    # (as Text, not markup: a file's name, columns and models are the trace's, and `[/b]` in
    # one would be taken for a tag)
    table = Table(title=Text(args.file), show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in summary_rows(loaded.frame, loaded.format, columns, loaded.skipped, loaded.skipped_what):
        table.add_row(what, Text(value))
    console = result_console()  # (the description is the command's one result: written whole, or an error)
    console.print(table)
    write_result(text_of(console), f"the description of {args.file}")
    return 0


def summary_rows(
    df: pl.DataFrame, format: str, columns, skipped: int = 0, skipped_what: str = "jobs that never ran"
) -> list[tuple[str, str]]:
    """The facts `describe` prints, as (label, text) rows; `columns` are the file's own."""
    rows = [("format", format), ("jobs", f"{df.height:,}")]
    if skipped:
        rows.append(("skipped records", f"{skipped:,} ({skipped_what})"))
    if df.height == 0:
        rows.append(("columns", ", ".join(columns)))
        return rows
    arrivals = df.get_column("arrival_s").to_numpy()
    first, last = float(arrivals.min()), float(arrivals.max())
    span = last - first
    rows.append(("arrivals", f"{_human(first)} to {_human(last)} (span {_human(span)})"))
    rows.append(("jobs/hour", f"{(df.height - 1) / span * 3600:.3g}" if span > 0 else "all arrive together"))
    counts = df.group_by("gpus").len().sort("gpus")
    rows.append(
        (
            "GPUs per job",
            ", ".join(f"{g:,}: {n:,} ({_share(n, df.height)})" for g, n in counts.rows()),
        )
    )
    # A trace gives durations, iterations or both (an elastic job epochs); what it does not give
    # is not mentioned.
    for label, name, show in (
        ("duration", "duration_s", _human),
        ("iterations", "iterations", _count),
        ("epochs", "epochs", lambda v: f"{v:,.4g}"),
    ):
        if name in df.columns and df.get_column(name).drop_nulls().len():
            rows.append((label, _quantiles(df.get_column(name), show)))
    models = df.get_column("model").drop_nulls()
    if models.len():
        by_model = models.value_counts(sort=True, name="n").sort(["n", "model"], descending=[True, False])
        text = ", ".join(f"{m} {n:,}" for m, n in by_model.rows())
        missing = df.height - models.len()
        rows.append(("models", text + (f"; {missing:,} without" if missing else "")))
    else:
        rows.append(("models", "none given"))
    rows.append(("columns", ", ".join(columns)))
    return rows


def _count(value: float) -> str:
    """A count of iterations, its digits grouped; past what a float holds exactly to the unit,
    in 4 significant digits (1e+30, not the float's 31 digits of noise)."""
    return f"{value:,.0f}" if abs(value) < 2.0**53 else f"{value:.4g}"


def _share(count: int, total: int) -> str:
    """`count` of `total` as a whole percentage; a share that rounds to 0% but is not none is
    "<1%" (and one that rounds to 100% but is not all, ">99%"), so that no count reads as none or all."""
    percent = round(100 * count / total)
    if percent == 0 and count:
        return "<1%"
    if percent == 100 and count < total:
        return ">99%"
    return f"{percent}%"


def _quantiles(column: pl.Series, show) -> str:
    values = column.drop_nulls()
    q = np.quantile(values.to_numpy(), [0.1, 0.5, 0.9])
    text = f"p10 {show(q[0])}, median {show(q[1])}, p90 {show(q[2])}, max {show(float(values.to_numpy().max()))}"
    if values.len() < column.len():
        text += f" ({column.len() - values.len():,} jobs without)"
    return text


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(seconds) >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"


# --- convert ----------------------------------------------------------------------------


def convert_command(args: argparse.Namespace) -> int:
    from roundhouse.traces.formats import FORMATS, check_format, check_write_format, load_trace, write_trace

    source = check_format(args.source_format, FORMATS, flag="--from")
    target = args.target_format
    # (A format convert only reads that `generate` writes: say where one comes from.)
    made = f"trace generate --format {target} writes a synthetic one" if target in GENERATE_FORMATS else ""
    target = check_write_format(target, "convert", made, flag="--to")
    _check_output(args.output, "OUTPUT")
    _check_not_input(args.input, args.output)
    if target == "auto":  # (said before the input is read: a large one takes a while)
        target = _CONVERT_EXTENSIONS.get(Path(args.output).suffix.lower(), "")
        if not target:
            raise UsageError(
                f"cannot tell which format to write '{args.output}' in from its extension; use .csv or .parquet "
                "(canonical) or .trace (gavel), or name the format with --to"
            )
    else:
        _check_extension(args.output, target, "OUTPUT", "--to")
    loaded = load_trace(args.input, source)
    with whole_file(args.output) as path:
        lost = write_trace(loaded.frame, path, target)
    skipped = plural(loaded.skipped, "record")
    note = f" ({skipped} skipped: {loaded.skipped_what})" if loaded.skipped else ""
    _say_written(args.output, f"wrote {plural(loaded.frame.height, 'job')} to {args.output}{note}")
    _say_lost(lost)
    return 0


def _say_written(output: str, said: str) -> None:
    """What was written, on standard output, unless the trace went there (-o /dev/stdout): then
    on standard error, so as not to end the trace with a line that is no job."""
    try:
        written, stdout = os.stat(output), os.fstat(sys.stdout.fileno())
        onto_stdout = (written.st_dev, written.st_ino) == (stdout.st_dev, stdout.st_ino)
    except (OSError, ValueError, AttributeError):  # (no such file, or a stdout with no descriptor)
        onto_stdout = False
    print(said, file=sys.stderr if onto_stdout else sys.stdout)


def _say_lost(lost: list[str]) -> None:
    for what in lost:
        print(f"note: {what}", file=sys.stderr)


# --- generate ---------------------------------------------------------------------------


def generate_command(args: argparse.Namespace) -> int:
    from roundhouse.traces import philly
    from roundhouse.traces.canonical import PARQUET_SUFFIXES
    from roundhouse.traces.formats import write_trace

    jobs = _whole(args.jobs, "--jobs", minimum=1, maximum=MAX_JOBS)
    seed = _whole(args.seed, "--seed", minimum=0)
    start_id = _whole(
        args.start_id,
        "--start-id",
        minimum=0,
        maximum=MAX_JOB_ID - (jobs - 1),
        why=f"so that the ids of {jobs:,} jobs fit in 64 bits",
    )
    workload = _choice(args.workload, "--workload", WORKLOAD_CHOICES)
    _check_output(args.output)
    if workload == "dally-batch":
        if args.rate is not None:
            raise UsageError("--workload dally-batch puts every job at time 0: leave out --rate")
        rate = None
    elif args.rate is None:
        raise UsageError(f"--workload {workload} needs --rate (jobs per unit of time, e.g. 8/h)")
    else:
        rate = _rate(args.rate, jobs)
    gpus = _choice(args.gpus, "--gpus", GPU_CHOICES)
    models = _choice(args.models, "--models", MODEL_CHOICES)
    format = args.format
    if format == "auto":
        suffix = Path(args.output).suffix.lower()
        format = {".json": "philly", ".trace": "gavel", ".csv": "canonical"}.get(suffix, "")
        format = format or ("canonical" if suffix in PARQUET_SUFFIXES else "")
        if not format:
            raise UsageError(
                f"cannot tell which format to write '{args.output}' in from its extension; use .csv or .parquet "
                "(canonical), .trace (gavel) or .json (philly), or name the format with --format"
            )
    format = _choice(format, "--format", GENERATE_FORMATS)
    _check_workload_format(workload, format, args.format == "auto", args.output)

    loss = _choice(args.loss, "--loss", LOSS_CHOICES)
    named = f"--format {format}" if args.format != "auto" else f"-o '{args.output}' (by its extension, --format {format})"
    if format == "gavel" and workload == "philly" and models == "none":
        raise UsageError("--format gavel needs --models blox: every line of a Gavel trace names a model")
    if format == "gavel":
        # (a Gavel trace has no field for either: the file would be the same without them)
        given = [flag for flag, other in (("--start-id", start_id != 0), ("--loss", loss != "none")) if other]
        if given:
            raise UsageError(
                f"{named} writes a Gavel trace, which has no job ids (read back, its jobs are numbered 0, 1, 2, ...) "
                f"and no loss curves: leave out {_and(given)}, or write canonical CSV or Parquet"
            )
    if format == "philly":
        others = (("--gpus", gpus != "philly"), ("--models", models != "none"), ("--start-id", start_id != 0))
        given = [flag for flag, other in (*others, ("--loss", loss != "none")) if other]
        if given:
            raise UsageError(
                f"{named} writes a synthetic cluster_job_log, which has Philly GPU counts, "
                f"no models, no loss curves and its own job ids: leave out {_and(given)}"
            )
    # (Last of the checks on the arguments: a mistake in the others is the one to name first.)
    _check_extension(args.output, format, "-o", "--format")
    if format == "philly":
        assert rate is not None  # (only dally-batch has none)
        log = philly.SyntheticLog(jobs, rate, seed)  # (draws the submissions only)
        _check_span(log.span_s, args, jobs)
        with whole_file(args.output) as path:
            written = log.write(path)
        _say_written(
            args.output,
            f"wrote {plural(written, 'record')} to {args.output} (some {log.never_ran:.0%} of them jobs that never ran, which readers skip)",
        )
        return 0
    try:
        frame = _generated_frame(args, workload, jobs, rate, seed, gpus, models, start_id, loss, format)
    except TraceError as err:
        if err.column != "arrival_s":  # (the generators check their frames: only a span too long gets here)
            raise
        raise UsageError(_too_long(args, jobs, f"an arrival time {err.message}")) from None
    arrivals = frame["arrival_s"].to_numpy()
    _check_span(float(arrivals.max() - arrivals.min()), args, jobs)
    with whole_file(args.output) as path:
        lost = write_trace(frame, path, format)
    _say_written(args.output, f"wrote {plural(frame.height, 'job')} to {args.output}")
    _say_lost(lost)
    return 0


def _generated_frame(args, workload, jobs, rate, seed, gpus, models, start_id, loss, format) -> pl.DataFrame:
    """The jobs of `workload` as a canonical frame (any workload but Philly's synthetic log)."""
    from roundhouse.traces.generators import generate

    if workload in ("dally-batch", "dally-poisson", "synergy"):
        from roundhouse.traces.generators import dally_workload, synergy_philly

        own = "--gpus, " if workload != "synergy" else ""
        if (gpus != "philly" and workload != "synergy") or models != "none" or loss != "none":
            raise UsageError(
                f"--workload {workload} has its own models{' and GPU counts' if own else ''}: leave out {own}--models and --loss"
            )
        if workload == "synergy":
            frame = synergy_philly(jobs, rate, seed, gpus=gpus)
        else:
            frame = dally_workload(jobs, seed, rate)
    elif workload == "ones":
        from roundhouse.traces import ones

        if gpus != "philly" or models != "none" or loss != "none":
            raise UsageError("--workload ones has its own GPU counts and models: leave out --gpus, --models and --loss")
        frame = ones.generate(jobs, 1.0 / rate, seed)
    elif workload == "pollux":
        from roundhouse.traces import pollux

        if gpus != "philly" or models != "none" or loss != "none":
            raise UsageError("--workload pollux has its own GPU counts and models: leave out --gpus, --models and --loss")
        frame = pollux.generate(jobs, 1.0 / rate, seed)
    elif workload == "tiresias":
        from roundhouse.traces.generators import tiresias_testbed

        if gpus != "philly" or models != "none" or loss != "none":
            raise UsageError(
                "--workload tiresias has its own GPU counts and models (Tiresias' testbed mix): leave out --gpus, --models and --loss"
            )
        frame = tiresias_testbed(jobs, rate, seed)
    else:
        return generate(jobs, rate, seed, gpus=gpus, models=models, start_id=start_id, loss=loss)
    return _numbered_from(frame, start_id)


def _numbered_from(frame: pl.DataFrame, start_id: int) -> pl.DataFrame:
    """A workload's jobs with ids from `start_id` on (its generator numbers them from 0), so
    that two generated traces can feed one graph under distinct ids; a Pollux job's name, its
    application and number, follows its id."""
    if start_id == 0:
        return frame
    frame = frame.with_columns(pl.col("job_id") + start_id)
    if "name" in frame.columns:  # (`APPLICATION-N`: the application's name, then the job's number)
        frame = frame.with_columns(name=pl.col("name").str.replace(r"-\d+$", "-") + pl.col("job_id").cast(pl.String))
    return frame


def _check_output(output: str, label: str = "-o") -> None:
    """Refuse, before anything is drawn or read, an output that cannot be written: a folder, a
    file in a folder that does not exist, or one that cannot be written there (a million jobs
    take a while to draw)."""
    if not output:
        raise UsageError(f"{label} '' names no file: name a file to write")
    if output == "-":  # (not standard output, as elsewhere it would be: it would write a file named '-')
        raise UsageError(
            f"{label} '-': a trace is written to a file; name one (for standard output, /dev/stdout with the format named)"
        )
    if output.endswith(("/", os.sep)):  # (Path drops the slash: `t.csv/` would write, or replace, t.csv)
        raise UsageError(f"{label} '{output}' names a folder (it ends in a slash): name a file to write")
    path = Path(output)
    if path.is_dir():
        raise UsageError(f"{label} '{output}' is a folder: name a file to write")
    folder = path.parent
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise UsageError(f"{label} '{output}': the folder '{folder}' {what}")
    cannot = write_problem(path)
    if cannot is not None:
        raise UsageError(f"{label} '{output}': cannot write there ({cannot.strerror})")


def _check_not_input(source: str, output: str) -> None:
    """Refuse an output that is the input file (by another name, or a link to it): converted in
    place, it would be replaced by what the target format keeps of it."""
    try:
        same = os.path.samefile(source, output)
    except OSError:  # (no output yet; a missing input is its reader's to report)
        return
    if same:
        raise UsageError(f"OUTPUT '{output}' is the input file: converting onto it would replace it; name another file to write")


def _check_workload_format(workload: str, format: str, from_extension: bool, output: str) -> None:
    """Refuse, before anything is drawn, a format the workload's jobs cannot be written in."""
    if format in WORKLOAD_FORMATS[workload]:
        return
    named = f"{format} (the format of -o '{output}', by its extension)" if from_extension else f"--format {format}"
    writable = [f"{f} ({_or(FORMAT_EXTENSIONS[f])})" for f in WORKLOAD_FORMATS[workload]]
    raise UsageError(
        f"--workload {workload} cannot be written as {named}: {_CANNOT_WRITE[format]}; "
        f"--workload {workload} can be written as {_or(writable)}"
    )


def _check_extension(output: str, format: str, label: str, flag: str) -> None:
    """Refuse an output whose extension says another format than the one written (read back,
    format detection would take it for that other one); an extension no format uses is left be."""
    suffix = Path(output).suffix.lower()
    if suffix not in _EXTENSION_HOLDS or suffix in FORMAT_EXTENSIONS[format]:
        return
    takes = f"{flag} {format} takes {_or(FORMAT_EXTENSIONS[format])}"
    if format == "philly":
        takes += " or none (as Philly's own cluster_job_log)"
    if suffix in (".parquet", ".pq"):
        raise UsageError(f"{label} '{output}': a {format} trace is text; a {suffix} file holds a canonical trace ({takes})")
    raise UsageError(
        f"{label} '{output}': {flag} {format} writes {_WRITES[format]}, but a {suffix} file {_EXTENSION_HOLDS[suffix]}; {takes}"
    )


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def _or(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" or {items[-1]}"


def _check_span(span_s: float, args: argparse.Namespace, jobs: int) -> None:
    """Refuse arrivals that span more than MAX_SECONDS, which no trace reader accepts: `_rate`
    checks the average span, but the draws of a rate near the limit may, by chance, go further."""
    if span_s > float(MAX_SECONDS):
        raise UsageError(_too_long(args, jobs, f"these span {span_s / (365 * 86400):.3g} years"))


def _too_long(args: argparse.Namespace, jobs: int, what: str) -> str:
    return (
        f"--rate '{args.rate}' is too low for {jobs:,} jobs with --seed {args.seed}: their arrivals may span at most "
        f"{float(MAX_SECONDS) / (365 * 86400):g} years, and {what}; use a faster rate, fewer jobs or another seed"
    )


def _whole(text: str, flag: str, minimum: int, maximum: int | None = None, why: str = "") -> int:
    """A whole number given for `flag` (read as tools/common.py `whole` reads one), in its bounds."""
    try:
        value = whole(text)
    except argparse.ArgumentTypeError:
        written = text.strip()
        negative = written.startswith("-")
        digits = written[1:] if written[:1] in ("+", "-") else written
        if not (digits.isascii() and digits.isdigit()):
            raise UsageError(f"{flag} must be a whole number, got '{_shown(text)}'") from None
        # (Digits, too many to read: said without them, as Python would not show them whole.)
        digits = digits.lstrip("0")
        if negative:
            most = f"{minimum} or more"
        else:
            most = f"at most {maximum:,}" if maximum is not None else f"of at most {MOST_DIGITS:,} digits"
        what = "a negative whole number" if negative else "a whole number"
        raise UsageError(f"{flag} must be {most}, got {what} of {len(digits):,} digits") from None
    if value < minimum:
        raise UsageError(f"{flag} must be {minimum} or more, got {value}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{flag} must be at most {maximum:,}" + (f" ({why})" if why else "") + f", got {value:,}")
    return value


def _shown(text: str, most: int = 60) -> str:
    """`text` as a message shows it: cut short in the middle if it is long."""
    return text if len(text) <= most else f"{text[: most // 2]}...{text[-most // 4 :]} ({len(text):,} characters)"


def _rate(text: str, jobs: int) -> float:
    """The arrival rate in jobs per second: more than 0, at most MAX_RATE, and high enough that
    the jobs arrive within MAX_SECONDS (beyond it, times overflow Philly's dates and int64 seconds)."""
    try:
        rate = float(rate_from_text(text))
    except ValueError as err:
        raise UsageError(f"--rate: {err}") from None
    if not rate > 0:
        raise UsageError(f"--rate must be more than 0 jobs per unit of time, got '{text}'")
    if rate > MAX_RATE:
        raise UsageError(f"--rate must be at most {describe(MAX_RATE)}, got '{text}'")
    gaps = jobs - 1  # (the first job arrives at 0; compared as a product: a vanishing rate's span is no number)
    if gaps > float(MAX_SECONDS) * rate:
        raise UsageError(
            f"--rate '{text}' is too low: {jobs:,} jobs would take {_years(gaps / rate)} to arrive "
            f"(at most {MAX_SECONDS / (365 * 86400):g} years)"
        )
    return rate


def _years(seconds: float) -> str:
    years = seconds / (365 * 86400)
    return f"about {years:.3g} years" if math.isfinite(years) else "endless years"


def _choice(value: str, flag: str, choices: tuple[str, ...]) -> str:
    if value in choices:
        return value
    hint = did_you_mean(value, choices)
    raise UsageError(f"{flag} must be one of {', '.join(choices)}, got '{value}'" + (f" ({hint})" if hint else ""))
