"""The figures of a run or a sweep: JCT CDF, a metric against load with confidence bands, GPUs
busy over time, and a per-job Gantt chart (matplotlib, drawn off-screen)."""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import UsageError, first_line, print_warning, shown_text
from roundhouse.runtime.values import duration_from_text, rate_from_text
from roundhouse.tools.outputs import RunFolder, SweepFolder
from roundhouse.tools.outputs.stdout_result import plural
from roundhouse.tools.outputs.whole_file import write_whole

if TYPE_CHECKING:  # matplotlib loads on the first figure: every command registers this module's kinds
    from matplotlib.figure import Figure

P = ParamSpec("P")

KINDS = ("jct-cdf", "load", "utilisation", "gantt")
RUN_KINDS = ("jct-cdf", "utilisation", "gantt")
FILE_FORMATS = ("png", "svg")

# Fixed ids and no dates in the files: the same folder gives byte-identical figures. Text is
# drawn as written: a `$` in a graph's, a folder's or a value's name is no TeX formula.
_RC = {"svg.hashsalt": "roundhouse", "font.size": 9, "text.parse_math": False}
_METADATA = {"png": {"Software": None}, "svg": {"Date": None}}


def _plain_text(draw: Callable[P, Figure]) -> Callable[P, Figure]:
    """`draw` with matplotlib's settings for these figures in force while it makes the figure's
    texts (each text keeps whether it is parsed as a formula from when it is made)."""

    @functools.wraps(draw)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> Figure:
        import matplotlib

        with matplotlib.rc_context(_RC):
            return draw(*args, **kwargs)

    return drawn


def check_kind(kind: str) -> None:
    """Refuse a kind that does not exist, naming the one meant when it is one written in another
    case, or spelt as `utilization` (the summary's metric) is."""
    if kind in KINDS:
        return
    meant = kind.strip().lower().replace("utilization", "utilisation")
    if meant in KINDS:
        raise UsageError(f"--kind {kind}: unknown kind; did you mean {meant}? (the kinds: {', '.join(KINDS)})")
    raise UsageError(f"--kind {kind}: unknown kind; choose {', '.join(KINDS[:-1])} or {KINDS[-1]}")


def figure(folder: RunFolder | SweepFolder, kind: str, metric: str = "avg_jct_s", x: str | None = None) -> Figure:
    check_kind(kind)
    if isinstance(folder, SweepFolder):
        if kind != "load":
            raise UsageError(
                f"--kind {kind}: {folder.path} is a sweep, which keeps one summary per run and no per-job table; "
                f"draw {kind} from a run's folder, or use --kind load"
            )
        return load_figure(folder, metric, x)
    if kind == "load":
        raise UsageError(f"--kind load: {folder.path} is one run; a metric against load needs a sweep's folder")
    if folder.jobs.height == 0:
        raise UsageError(f"{folder.path}: the run has no jobs (its jobs.csv has no rows); nothing to draw")
    return {"jct-cdf": jct_cdf_figure, "utilisation": utilisation_figure, "gantt": gantt_figure}[kind](folder)


def file_format(out: Path) -> str:
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FILE_FORMATS:
        raise UsageError(f"-o {out}: cannot tell the format; end the name in .png or .svg")
    return fmt


def save(fig: Figure, out: Path) -> None:
    write_whole(out, figure_bytes(fig, file_format(out)))


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buffer, format=fmt, dpi=110, metadata=_METADATA[fmt])
    return buffer.getvalue()


def _new_figure(width: float = 7.0, height: float = 4.0) -> tuple[Figure, object]:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def _time_unit(span_s: float) -> tuple[str, float]:
    """Hours for spans of hours, else minutes or seconds (as the run's printed summary)."""
    return ("h", 3600.0) if span_s >= 7200 else ("min", 60.0) if span_s >= 120 else ("s", 1.0)


def _title(folder: RunFolder, what: str) -> str:
    graph = Path(folder.graph).name if folder.graph else folder.path.name
    return shown_text(f"{what} · {graph}" + (f" · {folder.sink}" if folder.sink else ""))


def _incomplete(run: RunFolder) -> list[str]:
    """A figure's note on a jobs file that lacks jobs its summary counts."""
    return [f"incomplete: {run.incomplete}"] if run.incomplete else []


def _set_title(ax, title: str, notes: list[str]) -> None:
    """The title, and each note on a line of its own below it (beside the title, a long note
    and a long title would run into each other)."""
    from matplotlib.textpath import TextToPath

    heading = ax.set_title(shown_text(title), loc="left")
    # Each note's lines as wide as the figure holds right of the axis' labels, as measured in
    # the title's font (a fixed count of characters runs past a narrow figure's edge, cut off).
    room = ax.figure.get_figwidth() * 72 - 60
    measure = TextToPath().get_text_width_height_descent
    lines = [title]
    for note in notes:
        line = ""
        for word in note.split(" "):
            longer = f"{line} {word}" if line else word
            if line and measure(shown_text(longer), heading.get_fontproperties(), ismath=False)[0] > room:
                lines.append(line)
                longer = word
            line = longer
        lines.append(line)
    heading.set_text(shown_text("\n".join(lines)))


# --- runs -----------------------------------------------------------------------------------


@_plain_text
def jct_cdf_figure(run: RunFolder) -> Figure:
    jct = np.sort(run.jobs["jct_s"].drop_nulls().drop_nans().to_numpy())
    if not len(jct):
        raise UsageError(f"{run.path}: no job finished in this run; there is no JCT to draw")
    unit, size = _time_unit(float(jct[-1]))
    fig, ax = _new_figure()
    share = np.arange(1, len(jct) + 1) / len(jct)
    ax.step(
        np.concatenate(([0.0], jct / size)),
        np.concatenate(([0.0], share)),
        where="post",
        label=plural(len(jct), "finished job"),
    )
    ax.axvline(float(np.mean(jct)) / size, color="grey", linestyle="--", linewidth=1, label="average")
    ax.set_xlabel(f"job completion time ({unit})")
    ax.set_ylabel("share of finished jobs")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.legend(loc="lower right")
    if run.incomplete:
        _set_title(ax, _title(run, "JCT CDF"), _incomplete(run))
    else:
        ax.set_title(_title(run, "JCT CDF"))
    return fig


def busy_gpus(jobs: pl.DataFrame, end_s: float, capacity: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """GPUs held over time, as a step function: busy[i] GPUs from times[i] until times[i + 1].

    A job holds its GPUs from its first start to its finish (to `end_s` if it had not
    finished); a job never started holds nothing. jobs.csv does not say when a preempted job
    was suspended, nor when an elastic one (Pollux, ONES) grew or shrank, only the GPU time it
    held in all (`service_gpu_s`; without it, its requested `gpus` times `run_s`): a job that
    did not hold its requested GPUs throughout counts that GPU time spread evenly over its
    span, so that the area under the curve is the GPU time held. Given the cluster's
    `capacity`, GPU time so spread above it is drawn in the nearest later (else earlier) time
    with GPUs free: the curve never exceeds the cluster, and its area stays the same."""
    start, stop, gpus, _ = drawn_gpus(jobs, end_s)
    edges = np.concatenate((start, stop))
    change = np.concatenate((gpus, -gpus))
    order = np.argsort(edges, kind="stable")
    times, first = np.unique(edges[order], return_index=True)
    if not len(times):
        return times, np.zeros(0)
    busy = np.cumsum(np.add.reduceat(change[order], first))
    if capacity:
        busy = _within(times, busy, float(capacity))
    return times, busy


def drawn_gpus(jobs: pl.DataFrame, end_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Of each job that started: its first start, its finish (or `end_s`), the GPUs drawn for it
    over that span, and whether they are its GPU time spread (it did not hold its requested GPUs
    throughout: preempted or resized)."""
    started = jobs.filter(pl.col("first_start_s").is_not_null() & pl.col("first_start_s").is_not_nan())
    start = started["first_start_s"].to_numpy().astype(float)
    stop = started["finish_s"].fill_nan(None).fill_null(end_s).to_numpy().astype(float)
    stop = np.maximum(stop, start)
    gpus = started["gpus"].to_numpy().astype(float)
    span = stop - start
    held = gpus * started["run_s"].fill_nan(None).fill_null(0.0).to_numpy().astype(float)
    if "service_gpu_s" in started.columns:  # (what a resized job held, which `gpus` does not say)
        service = started["service_gpu_s"].cast(pl.Float64).fill_nan(None).fill_null(np.nan).to_numpy().astype(float)
        held = np.where(np.isnan(service), held, service)
    # Within rounding of its requested GPUs over the whole span, a job is drawn with them.
    whole = np.abs(held - gpus * span) <= 1e-9 * np.maximum(1.0, gpus * span)
    spread = ~whole & (span > 0)
    gpus = np.where(spread, np.maximum(held, 0.0) / np.where(span > 0, span, 1.0), gpus)
    return start, stop, gpus, spread


def _within(times: np.ndarray, busy: np.ndarray, capacity: float) -> np.ndarray:
    """`busy` with what exceeds `capacity` moved into the nearest later steps with room, and
    what passes the last step back into the nearest earlier ones. The jobs really held no more
    than the cluster within the span, so everything finds room."""
    widths = np.diff(times)
    busy = busy.copy()
    if not len(widths) or busy[:-1].max() <= capacity:
        return busy
    carry = 0.0  # GPU-seconds still to place
    for i in [*range(len(widths)), *reversed(range(len(widths)))]:
        if widths[i] <= 0:
            continue
        if busy[i] > capacity:
            carry += (busy[i] - capacity) * widths[i]
            busy[i] = capacity
        elif carry > 0:
            moved = min(carry, (capacity - busy[i]) * widths[i])
            busy[i] += moved / widths[i]
            carry -= moved
    return busy


def recorded_busy_gpus(
    record: pl.DataFrame, jobs: pl.DataFrame, end_s: float, busy_gpu_s: float | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """GPUs held over time by every job of the run, exactly, from its explanation record
    (explain.parquet): a job holds the GPUs of its launch until its next change that leaves it
    not running. None when the record does not account for the GPU time held: a resize, which
    the record does not hold, changes a running job's GPUs. Each job of jobs.csv must have held
    its `run_s` with its `gpus`; when jobs.csv holds only some jobs (a sink that tracks a
    range), the record's jobs together must have held the run's `busy_gpu_s` (run.json)."""
    # (Words compared as they are held, categories: cast to text, a long record's millions of rows
    # would each be spelled out. Each job's changes are put together, in the order recorded, so
    # that its previous and next change are the rows beside it: a window per job is far slower.)
    changes = (
        record.filter(pl.col("state") != "note")
        .select(
            "t_s",
            "job_id",
            pl.when(pl.col("reason") == "launched")
            .then(pl.col("b"))
            .when(pl.col("state") == "running")
            .then(None)
            .otherwise(0)
            .alias("held"),
        )
        .sort("job_id", maintain_order=True)
    )
    first = (pl.col("job_id") != pl.col("job_id").shift(1)).fill_null(True)
    last = (pl.col("job_id") != pl.col("job_id").shift(-1)).fill_null(True)
    # A running job's change that names no GPUs keeps those it held (none before its first launch).
    changes = changes.with_columns(
        pl.when(first & pl.col("held").is_null()).then(0).otherwise(pl.col("held")).forward_fill().alias("held")
    )
    changes = changes.with_columns(
        (pl.col("held") - pl.when(first).then(0).otherwise(pl.col("held").shift(1))).alias("change"),
        (pl.when(last).then(end_s).otherwise(pl.col("t_s").shift(-1)) - pl.col("t_s")).alias("span"),
    )
    per_job = changes.group_by(pl.col("job_id").cast(pl.Float64)).agg((pl.col("held") * pl.col("span")).sum().alias("gpu_s"))
    expected = jobs.select(
        pl.col("job_id").cast(pl.Float64), (pl.col("gpus") * pl.col("run_s").fill_nan(None).fill_null(0.0)).alias("expected")
    )
    close = lambda a, b: abs(a - b) <= 1e-6 * np.maximum(1.0, b)  # noqa: E731
    both = expected.join(per_job, on="job_id", how="left").with_columns(pl.col("gpu_s").fill_null(0.0))
    if both.height != jobs.height or not close(both["gpu_s"].to_numpy(), both["expected"].to_numpy()).all():
        return None
    others = per_job.join(expected, on="job_id", how="anti")
    if others.height and (busy_gpu_s is None or not close(float(per_job["gpu_s"].sum()), busy_gpu_s)):
        return None  # (jobs jobs.csv does not list, whose GPU time nothing confirms)
    steps = changes.filter(pl.col("change") != 0)
    if not steps.height:
        return np.zeros(0), np.zeros(0)
    by_time = steps.group_by("t_s").agg(pl.col("change").sum()).sort("t_s")
    return by_time["t_s"].to_numpy().astype(float), np.cumsum(by_time["change"].to_numpy().astype(float))


def _record(run: RunFolder) -> pl.DataFrame | None:
    """The run's explanation record, if it has one that reads; a damaged one is named and left
    out (the curve is then drawn from jobs.csv)."""
    from roundhouse.runtime.explain import FILE_NAME

    path = run.path / FILE_NAME
    if not path.is_file():
        listed = run.info.get("files")
        if isinstance(listed, list) and FILE_NAME in listed:  # (the run kept one: removed or moved since)
            print_warning(f"warning: {path}: missing, though run.json lists it; GPUs held are drawn from jobs.csv")
        return None
    columns = ["t_s", "job_id", "state", "reason", "b"]
    try:
        record = pl.read_parquet(path, columns=columns, glob=False)  # (a folder may be named with [ or *)
    except pl.exceptions.ColumnNotFoundError:  # (a Parquet file, but not the record a run writes)
        missing = [c for c in columns if c not in pl.scan_parquet(path, glob=False).collect_schema()]
        print_warning(
            f"warning: {path}: no column {', '.join(repr(c) for c in missing)} (not a record `roundhouse run` wrote?); "
            "GPUs held are drawn from jobs.csv"
        )
        return None
    except (pl.exceptions.PolarsError, OSError) as err:
        print_warning(f"warning: {path}: cannot be read as Parquet ({first_line(err)}); GPUs held are drawn from jobs.csv")
        return None
    words = (pl.String, pl.Categorical, pl.Enum)
    for name, dtype in record.schema.items():
        numeric = name in ("t_s", "job_id", "b")
        if not (dtype.is_numeric() if numeric else dtype in words):
            print_warning(
                f"warning: {path}: column {name!r} holds {dtype}, not {'numbers' if numeric else 'words'} "
                "(damaged?); GPUs held are drawn from jobs.csv"
            )
            return None
    return record


def _lasted(run: RunFolder) -> float:
    """How long the run lasted, refused when it lasted no time (nothing to draw against time)."""
    if run.end_s <= 0 and not (run.jobs["finish_s"].fill_nan(None).drop_nulls() > 0).any():
        raise UsageError(f"{run.path}: the run lasted 0 s (it stopped where it started); there is no time to draw")
    return run.end_s


@_plain_text
def utilisation_figure(run: RunFolder) -> Figure:
    _lasted(run)
    record = _record(run)
    exact = None if record is None else recorded_busy_gpus(record, run.jobs, run.end_s, run.busy_gpu_s)
    times, busy = exact if exact is not None else busy_gpus(run.jobs, run.end_s)
    if not len(times):
        raise UsageError(f"{run.path}: no job started in this run; no GPU was ever busy")
    # jobs.csv of a sink that tracks a range holds only some jobs: drawn from it, the curve is theirs.
    only_tracked = exact is None and _holds_only_some(run, record)
    end = max(run.end_s, float(times[-1]))
    if end <= 0:
        raise UsageError(f"{run.path}: the run lasted 0 s (it stopped where it started); there is no time to draw")
    twice = None if only_tracked else _counted_twice(run, times, busy, end)
    if twice is not None:  # (space sharing: a GPU two jobs share, held by each, counted once)
        busy = np.minimum(busy, float(run.cluster_gpus or 0))
        twice = float((np.diff(np.append(times, end)) * busy).sum()) - float(run.busy_gpu_s or 0.0)
    elif exact is None and run.cluster_gpus:
        busy = _within(times, busy, float(run.cluster_gpus))
    unit, size = _time_unit(end)
    fig, ax = _new_figure(8.0, 3.6)
    t = np.concatenate((times, [end])) / size
    b = np.concatenate((busy, [busy[-1]]))
    ax.fill_between(t, b, step="post", alpha=0.35, linewidth=0)
    ax.step(t, b, where="post", linewidth=1, label="GPUs held by the tracked jobs" if only_tracked else "GPUs held")
    capacity = run.cluster_gpus
    if capacity:
        ax.axhline(capacity, color="black", linewidth=1, linestyle=":", label=f"cluster: {plural(capacity, 'GPU')}")
        measured = run.summary.get("utilization")
        if measured is not None and not only_tracked:  # (the run's, not the tracked jobs' curve's)
            # Drawn over the span it was measured on, from the first arrival to the run's end:
            # there, the curve's average is the line.
            first = _first_arrival(run, capacity, measured)
            label = f"measured average: {measured:.1%}" + (" (from the first arrival)" if first > 0 else "")
            level = [measured * capacity] * 2
            ax.plot([first / size, end / size], level, color="grey", linewidth=1, linestyle="--", label=label)
    spread = int(drawn_gpus(run.jobs, run.end_s)[3].sum())
    notes = _incomplete(run)
    if only_tracked:
        notes.append(f"only the {run.jobs.height:,} jobs {run.jobs_name} tracks")
    if spread and exact is None:
        notes.append(f"{plural(spread, 'preempted or resized job')}: their GPU time spread over first start to finish")
    if twice is not None:
        notes.append(
            "jobs shared GPUs: a shared GPU counted once"
            if twice <= 1e-6 * max(1.0, run.busy_gpu_s or 0.0)
            else "jobs shared GPUs: a shared GPU counted once where the cluster was full, else once for each job "
            f"(the curve holds {twice / 3600:.3g} GPU-h more than the {(run.busy_gpu_s or 0.0) / 3600:.3g} GPU-h the run held)"
        )
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("busy GPUs")
    ax.set_xlim(0, end / size)
    ax.set_ylim(0, max(capacity or 0, float(busy.max())) * 1.25 or 1.0)
    ax.legend(loc="upper right", fontsize=7, ncols=3)
    _set_title(ax, _title(run, "GPU utilisation"), notes)
    return fig


def _counted_twice(run: RunFolder, times: np.ndarray, busy: np.ndarray, end: float) -> float | None:
    """The GPU time the curve holds beyond the GPU time the run held (run.json's `busy_gpu_s`,
    in which a GPU two jobs share under space sharing counts once), or None when it holds no
    more: each job's own GPU time counts a shared GPU for each of its jobs."""
    if not run.cluster_gpus or run.busy_gpu_s is None or not len(times):
        return None
    beyond = float((np.diff(np.append(times, end)) * busy).sum()) - run.busy_gpu_s
    return beyond if beyond > 1e-6 * max(1.0, run.busy_gpu_s) else None


def _first_arrival(run: RunFolder, capacity: int, measured: float) -> float:
    """When the run's measured utilization began: at its first job's arrival (JobMetrics
    measures GPU time held over the cluster's GPU time from then to the run's end). That is
    the span the run's GPU time (run.json) fills at the measured rate, which holds also when
    jobs.csv lists only some jobs; without it, the earliest arrival jobs.csv lists."""
    if run.busy_gpu_s is not None and measured > 0:
        first = run.end_s - run.busy_gpu_s / (capacity * measured)
    else:
        first = float(run.jobs["arrival_s"].min() or 0.0)
    # (Within rounding of the start, it is the start.)
    return 0.0 if first <= 1e-9 * max(run.end_s, 1.0) else min(first, run.end_s)


def _holds_only_some(run: RunFolder, record: pl.DataFrame | None) -> bool:
    """Whether jobs.csv lists only some of the run's jobs: the record names others, or the GPU
    time its jobs held falls short of the run's (run.json)."""
    if record is not None:
        recorded = record["job_id"].unique().to_numpy().astype(float)
        return not np.isin(recorded, run.jobs["job_id"].to_numpy().astype(float)).all()
    if run.busy_gpu_s is None or "service_gpu_s" not in run.jobs.columns:
        return False
    held = float(run.jobs["service_gpu_s"].cast(pl.Float64).fill_nan(None).fill_null(0.0).sum())
    return held < run.busy_gpu_s * (1 - 1e-6) - 1e-6


@_plain_text
def gantt_figure(run: RunFolder) -> Figure:
    """One row per job, in arrival order: a thin line while it waited, a bar from its first
    start to its finish, coloured by its GPU count."""
    jobs = run.jobs.sort(["arrival_s", "job_id"])
    n = jobs.height
    end = max(_lasted(run), float(np.nanmax(jobs["finish_s"].fill_null(np.nan).to_numpy(), initial=0.0)))
    unit, size = _time_unit(end)
    fig, ax = _new_figure(8.0, min(12.0, 2.0 + 0.18 * n))
    rows = np.arange(n)
    arrival = jobs["arrival_s"].to_numpy().astype(float)
    first = jobs["first_start_s"].fill_nan(None).to_numpy().astype(float)
    finish = jobs["finish_s"].fill_nan(None).fill_null(end).to_numpy().astype(float)
    started = ~np.isnan(first)
    waited_until = np.where(started, first, end)
    _hlines(ax, rows, arrival / size, waited_until / size, color="#bbbbbb", linewidth=1, label="waiting")
    width = float(np.clip(300 / max(n, 1), 0.8, 8.0))
    gpus = jobs["gpus"].to_numpy().astype(int)
    sizes = np.unique(gpus[started])
    import matplotlib

    colours = matplotlib.colormaps["viridis"](np.linspace(0.1, 0.85, max(len(sizes), 1)))
    preempted = jobs["preemptions"].fill_null(0).to_numpy() > 0
    for colour, g in zip(colours, sizes):
        label = plural(int(g), "GPU")
        for lighter in (False, True):
            pick = started & (gpus == g) & (preempted == lighter)
            if pick.any():
                alpha = 0.45 if lighter else 1.0
                _hlines(
                    ax,
                    rows[pick],
                    first[pick] / size,
                    finish[pick] / size,
                    color=colour,
                    alpha=alpha,
                    linewidth=width,
                    label=label,
                )
                label = None
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("job (in arrival order)")
    ax.set_xlim(0, end / size)
    ax.set_ylim(n - 0.5, -0.5)
    ids = [str(int(j)) for j in jobs["job_id"].to_list()]
    if n <= 30:
        ax.set_yticks(rows, ids)
    else:  # (some rows, each labelled with its job's id, not its place in the order)
        from matplotlib.ticker import FuncFormatter, MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: ids[int(v)] if float(v).is_integer() and 0 <= v < n else ""))
    # (beside the chart: inside, it would hide the bars of the first jobs, which run at its top right)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    notes = _incomplete(run)
    if preempted.any():
        notes.append(f"lighter: {plural(int(preempted.sum()), 'preempted job')}, holding GPUs part of the bar")
    _set_title(ax, _title(run, "Jobs over time"), notes)
    return fig


def _hlines(ax, y: np.ndarray, start: np.ndarray, end: np.ndarray, **style) -> None:
    """A line at each height `y` from `start` to `end`, as `ax.hlines` draws them, from one
    array of segments (hlines makes a masked array of each: seconds for 100,000 jobs)."""
    from matplotlib.collections import LineCollection

    segments = np.stack([np.column_stack([start, y]), np.column_stack([end, y])], axis=1)
    ax.add_collection(LineCollection(segments, **style), autolim=False)


# --- sweeps ---------------------------------------------------------------------------------


def is_seed(label: str) -> bool:
    return label == "seed" or label.endswith(".seed")


@attrs.frozen
class Axis:
    name: str
    positions: dict[str, float]  # each value as written -> where it is drawn
    unit: str  # "" when the values are plain numbers or categories
    categorical: bool


def x_axis(name: str, values: list[str]) -> Axis:
    """Where to draw each value of a varied name: plain numbers, rates (per hour), durations
    (seconds) and multipliers on a number line; anything else one step apart in order."""
    distinct = list(dict.fromkeys(values))
    readers = (
        ("", float),
        ("per hour", lambda v: rate_from_text(v) * 3600.0),
        ("s", duration_from_text),
        ("x", lambda v: float(v.removesuffix("x")) if v.endswith("x") else float("nan")),
    )
    for unit, read in readers:
        try:
            numbers = [float(read(v)) for v in distinct]
        except ValueError:
            continue
        if all(math.isfinite(v) for v in numbers):
            return Axis(name, dict(zip(distinct, numbers)), unit, False)
    return Axis(name, {v: float(i) for i, v in enumerate(distinct)}, "", True)


def _axis_of(table: pl.DataFrame, name: str) -> Axis:
    """Where each value of the varied `name` sits, as the sweep's runs (in the order it ran
    them) give them."""
    return x_axis(name, table[name].cast(pl.String).drop_nulls().to_list())


def metric_bands(sweep: SweepFolder, metric: str = "avg_jct_s", x: str | None = None) -> tuple[pl.DataFrame, Axis]:
    """The metric's mean, and a 95% confidence interval of that mean over seeds, at each value
    of `x`, one series per combination of the other varied names, the interval cut to the values
    the metric can take. Columns: series, x, position, mean, low, high, runs."""
    from scipy import stats

    table = sweep.table
    if table.height == 0 and not sweep.failed and sweep.incomplete:  # (none of its runs is stored)
        raise UsageError(f"{sweep.path}: {'; '.join([sweep.incomplete, *sweep.notes])}; there is no run to draw")
    if table.height == 0:  # (before the options: they cannot be checked against no runs)
        raise UsageError(
            f"{sweep.source}: no run of the sweep finished ({sweep.failed} failed); nothing to draw "
            "(`roundhouse sweep` prints each failed run's error)"
        )
    varied = [label for label in sweep.labels if not is_seed(label)]
    if x is None:
        if not varied:
            seeds = [label for label in sweep.labels if is_seed(label) and label in table.columns]
            what = "nothing but the seed" if any(table[label].n_unique() > 1 for label in seeds) else "nothing (one run)"
            raise UsageError(f"{sweep.source}: the sweep varies {what}; there is no axis to draw against")
        x = varied[0]
    # Each option is checked against what the sweep recorded: its labels, and the rest measured.
    metrics = sweep.metrics
    if x not in sweep.labels:
        why = (
            f"a metric, not a name the sweep varied (draw it with --metric {x})"
            if x in metrics
            else "not a name the sweep varied"
        )
        raise UsageError(f"--x {x}: {why}; it varied {', '.join(sweep.labels) or 'nothing'}")
    if metric not in metrics:
        why = (
            f"a name the sweep varied, not a metric (draw against it with --x {metric})"
            if metric in sweep.labels
            else f"not a metric of {sweep.source}"
        )
        raise UsageError(f"--metric {metric}: {why}; its metrics are {', '.join(metrics) or 'none'}")
    others = [label for label in varied if label != x]
    # Each line's place among the others: by its values as an axis would place them (numbers by
    # value, words in the order the sweep ran them), not by its text ("16/h" before "4/h").
    places = [
        pl.col(o).cast(pl.String).replace_strict(_axis_of(table, o).positions, default=None, return_dtype=pl.Float64)
        for o in others
    ]
    data = table.select(
        *(place.alias(f"__place{i}") for i, place in enumerate(places)),
        pl.col(x).cast(pl.String).alias("x"),
        (
            pl.concat_str([pl.format(f"{o}={{}}", pl.col(o).cast(pl.String)) for o in others], separator=", ")
            if others
            else pl.lit("")
        )
        .fill_null("")
        .alias("series"),
        pl.col(metric).cast(pl.Float64).fill_nan(None).alias("value"),
    ).drop_nulls(["x", "value"])
    if data.height == 0:
        raise UsageError(f"{sweep.source}: no finished run has a value of {metric}; nothing to draw")
    axis = x_axis(x, data["x"].to_list())
    order = data.select("series", *(f"__place{i}" for i in range(len(places)))).unique("series", maintain_order=True)
    rank = order.sort(order.columns[1:], nulls_last=True, maintain_order=True)["series"].to_list()
    grouped = (
        data.group_by(["series", "x"], maintain_order=True)
        .agg(pl.col("value").mean().alias("mean"), pl.col("value").std(ddof=1).alias("sd"), pl.len().alias("runs"))
        .with_columns(pl.col("x").replace_strict(axis.positions, return_dtype=pl.Float64).alias("position"))
    )
    runs = grouped["runs"].to_numpy()
    t = stats.t.ppf(0.975, np.maximum(runs - 1, 1))
    half = np.where(runs > 1, t * grouped["sd"].fill_null(0.0).to_numpy() / np.sqrt(runs), 0.0)
    mean = grouped["mean"].to_numpy()
    # Student's interval over a few seeds can reach past what the metric can be (a utilization
    # below 0% or above 100%, a negative JCT); the band stops where the metric's values do.
    floor = 0.0 if float(data["value"].min()) >= 0 else -np.inf  # (every sweep metric counts or times)
    ceiling = 1.0 if metric.endswith("utilization") and float(data["value"].max()) <= 1 else np.inf
    low, high = np.maximum(mean - half, floor), np.minimum(mean + half, ceiling)
    return (
        grouped.with_columns(pl.Series("low", low), pl.Series("high", high))
        .select("series", "x", "position", "mean", "low", "high", "runs")
        .sort([pl.col("series").replace_strict({s: i for i, s in enumerate(rank)}, return_dtype=pl.Int64), "position"]),
        axis,
    )


@_plain_text
def load_figure(sweep: SweepFolder, metric: str = "avg_jct_s", x: str | None = None) -> Figure:
    bands, axis = metric_bands(sweep, metric, x)
    scale, unit, named = 1.0, "", metric
    if metric.endswith("_s"):
        unit, scale = _time_unit(float(bands["high"].max()))
        # (the column's name says seconds; the axis is drawn in `unit`, which the label names)
        unit, named = f" ({unit})", metric.removesuffix("_s")
    elif metric == "utilization":
        scale, unit = 0.01, " (%)"
    fig, ax = _new_figure()
    for (series,), part in bands.group_by(["series"], maintain_order=True):
        pos = part["position"].to_numpy()
        line = ax.plot(pos, part["mean"].to_numpy() / scale, marker="o", label=shown_text(series) or None)[0]
        low, high = part["low"].to_numpy() / scale, part["high"].to_numpy() / scale
        if (part["runs"] > 1).any() and len(pos) == 1:  # (a band one point wide is not seen: a bar)
            mean = part["mean"].to_numpy() / scale
            ax.errorbar(pos, mean, yerr=[mean - low, high - mean], fmt="none", capsize=4, alpha=0.5, color=line.get_color())
        elif (part["runs"] > 1).any():
            ax.fill_between(pos, low, high, alpha=0.2, color=line.get_color())
    ticks = dict(zip(bands["position"].to_list(), bands["x"].to_list()))
    if axis.categorical or len(ticks) <= 12:
        ax.set_xticks(list(ticks), [shown_text(v) for v in ticks.values()])
    ax.set_xlabel(axis.name + (f" ({axis.unit})" if axis.unit and not axis.categorical and len(ticks) > 12 else ""))
    ax.set_ylabel(named + unit)
    most = int(bands["runs"].max())
    title = f"{metric} against {axis.name}" + (f" · mean of up to {most} seeds, 95% band" if most > 1 else "")
    _set_title(ax, title, [f"incomplete: {sweep.incomplete}"] if sweep.incomplete else [])
    if bands["series"].n_unique() > 1:
        ax.legend(fontsize=7)
    return fig
