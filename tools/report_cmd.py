"""`roundhouse report RUN_OR_SWEEP -o report.html`: one self-contained HTML page of a run or a
sweep: its graph drawn by Graphviz, its summary table and its plots, every image embedded as a
data URI so that the page loads nothing from anywhere."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import polars as pl

from roundhouse.errors import RoundhouseError, UsageError, shown_text
from roundhouse.runtime.compiler import compile_graph
from roundhouse.runtime.dsl.loader import load, read_source
from roundhouse.runtime.sweep import trace_overrides
from roundhouse.tools.graph_drawing import draw
from roundhouse.tools.outputs import RunFolder, SweepFolder, open_folder
from roundhouse.tools.outputs.output_place import refuse_extension_alone, refuse_unwritable_place
from roundhouse.tools.outputs.stdout_result import count_text, plural
from roundhouse.tools.outputs.whole_file import output_file, write_whole
from roundhouse.tools.plots import RUN_KINDS, figure, figure_bytes, is_seed, x_axis
from roundhouse.tools.results import in_units, in_units_of_table, objectives, summary_rows

# The metrics a sweep's report draws against its first varied name, when the sweep has them.
SWEEP_METRICS = ("avg_jct_s", "p99_jct_s", "avg_responsiveness_s", "utilization")
SWEEP_COLUMNS = ("jobs_finished", "avg_jct_s", "p99_jct_s", "avg_responsiveness_s", "utilization", "preemptions")
CAPTIONS = {
    "jct-cdf": "Job completion times of the finished jobs.",
    "utilisation": "GPUs held over time, from each job's first start to its finish (a preempted or resized "
    "job's GPU time spread over that span when the run's record does not say when it held what; a GPU two "
    "jobs share counted once).",
    "gantt": "Each job in arrival order: grey while it waited, a bar from its first start to its finish, "
    "coloured by the GPUs it requested.",
}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1000px; padding: 0 1em; color: #222; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; margin-top: 1.6em; }
.facts { color: #555; margin: 0 0 1em 0; }
table { border-collapse: collapse; font-size: 0.9em; } div.table { overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.7em; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; text-align: left; }
h3 { font-size: 1em; margin: 1em 0 0.3em 0; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; box-sizing: border-box; }
figcaption { color: #555; font-size: 0.9em; }
.note { background: #fff8e0; border-left: 4px solid #e0b000; padding: 0.4em 0.8em; }
"""


def register(sub) -> None:
    p = sub.add_parser("report", help="write one self-contained HTML page of a run's or a sweep's output folder")
    p.add_argument("folder", metavar="RUN_OR_SWEEP", help="a folder written by `run --out` or `sweep --out`")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.set_defaults(handler=report)


def report(args) -> int:
    out = output_file(args.output)
    refuse_extension_alone(out, args.output, ("html", "htm"), "report")
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"-o {args.output}: a report is an HTML page; end the name in .html")
    refuse_unwritable_place(out)  # (before the run is read and its figures drawn)
    folder = open_folder(args.folder)
    page = run_page(folder) if isinstance(folder, RunFolder) else sweep_page(folder)
    write_whole(out, page.encode("utf-8"))
    return 0


def run_page(run: RunFolder) -> str:
    """The page of a run: its graph, its summaries and its plots. A run with no jobs (a trace
    with none, none arriving before --until) has its graph and summaries shown, and a sentence
    in place of the plots, which need jobs; a jobs table emptied of the jobs its summary counts
    is refused, as other damaged files are."""
    tracked = run.summary.get("jobs_tracked")
    if run.jobs.height == 0 and tracked:
        raise UsageError(
            f"{run.path / run.jobs_name}: no rows, but {run.summary_name} counts {count_text(tracked)} jobs "
            "(the file was cut short?); there is nothing to report from it"
        )
    info = run.info
    facts = [
        f"cluster: {info.get('cluster', '—')}",
        f"{count_text(info.get('rounds'))} round{'' if info.get('rounds') == 1 else 's'}",
        f"ran to {in_units(run.end_s)(run.end_s)}",
        f"stopped: {info.get('stop_reason', '—')}",
    ]
    plots = []
    if run.incomplete:
        facts.append("incomplete")
        plots.append(_note(f"Incomplete: {run.incomplete}; the plots show only those jobs."))
    reports = run.reports()
    if len([r for r in reports if r[1]]) > 1:
        plots.append(f"<p>From {_escaped(run.sink or 'the sink')}'s per-job table ({_escaped(run.jobs_name)}).</p>")
    if run.jobs.height == 0:
        facts.append("no jobs")
        plots.append(_note(_no_jobs(run)))
    for kind in RUN_KINDS if run.jobs.height else ():
        try:
            plots.append(_figure_html(figure(run, kind), CAPTIONS[kind]))
        except UsageError as err:  # e.g. no job finished: the other plots still tell something
            plots.append(_note(str(err)))
    name = Path(run.graph).name if run.graph else run.path.name
    return _page(f"Run of {name}", facts, _run_graph_html(run), _summaries_html(run, name, reports), plots)


def _no_jobs(run: RunFolder) -> str:
    """Why a run's page has no plots: its jobs table has no job, because the run had none, or
    none of those its sink tracks (`JobMetrics(track=...)`, as run.json records its arguments)."""
    reports, arguments = run.info.get("reports"), run.info.get("arguments")
    sinks = (
        [e for e, files in reports.items() if isinstance(files, dict) and files.get("jobs") == run.jobs_name]
        if isinstance(reports, dict)
        else []
    )
    given = arguments.get(sinks[0]) if sinks and isinstance(arguments, dict) else None
    track = given.get("track") if isinstance(given, dict) else None
    if track is not None:
        return (
            f"The run had no job of those {sinks[0]} tracks (track={track}): its {run.jobs_name} has no rows, "
            "so there is no JCT, utilisation or timeline to plot."
        )
    return f"The run had no jobs: its {run.jobs_name} has no rows, so there is no JCT, utilisation or timeline to plot."


def _summaries_html(run: RunFolder, name: str, reports: list[tuple[str, dict, dict]]) -> str:
    """Every sink's summary and every objective an element reported, as `roundhouse run` prints
    them, each under the title run gives it."""
    parts = []
    for element, summary, objectives_of in reports:  # (run prints an element's objectives before its summary)
        for key, rows in objectives(objectives_of):
            parts.append(f"<h3>{_escaped(f'{element} · {key}')}</h3>\n{_table(['metric', 'value'], rows)}")
        if summary:
            title = " · ".join(x for x in (name, element, str(run.info.get("cluster") or "")) if x)
            parts.append(f"<h3>{_escaped(title)}</h3>\n{_table(['metric', 'value'], summary_rows(summary))}")
    if not parts:
        return _note(f"{run.path / run.summary_name}: not there; the run's summary cannot be shown.")
    return "\n".join(parts)


def sweep_page(sweep: SweepFolder) -> str:
    table = sweep.table
    columns = [*sweep.labels, *(c for c in SWEEP_COLUMNS if c in table.columns)]
    show = in_units_of_table({c: table[c].to_list() for c in columns if c not in sweep.labels})
    # The runs by the values varied, as a plot places them: numbers by value, words as the sweep ran them.
    order = [
        pl.col(n).cast(pl.String).replace_strict(x_axis(n, table[n].cast(pl.String).to_list()).positions, default=None)
        for n in sweep.labels
    ]
    if order and table.height:
        table = table.with_columns(pl.col(n).cast(pl.String) for n in sweep.labels).sort(order, nulls_last=True)
    rows = []
    for row in table.select(columns).iter_rows(named=True):
        rows.append(tuple(_cell(c, row[c], show) for c in columns))
    facts = [f"{plural(table.height, 'run')} finished", f"read from {sweep.source.name}"]
    if sweep.failed:
        facts.append(f"{plural(sweep.failed, 'run')} failed (left out)")
    if sweep.unreadable:
        names = ", ".join(p.name for p in sweep.unreadable)
        facts.append(f"{plural(len(sweep.unreadable), 'damaged file')} of the results store left out ({names})")
    # Varied words and rates ("las", "8/h") read as text; seeds and other plain numbers as numbers.
    words = {i for i, c in enumerate(sweep.labels) if not all(_is_number(row[i]) for row in rows)}
    summary = _table(columns, rows, text=words)
    if sweep.incomplete:
        facts.append("incomplete")
        summary = _note(f"Incomplete: {sweep.incomplete}; the tables and plots show only those runs.") + summary
    for note in reversed(sweep.notes):  # (runs of the store left out of the tables and plots)
        summary = _note(f"{note[0].upper()}{note[1:]}.") + summary
    if sweep.failures.height:  # (each with its own error, as `roundhouse sweep` printed it)
        failures = [tuple("—" if v is None else v for v in row) for row in sweep.failures.iter_rows()]
        summary += f"\n<h3>Failed runs</h3>\n{_table(sweep.failures.columns, failures, text={0, 2, 3})}"
    plots = []
    # (Every run failed: the figures would each say so, or, without the metrics' columns, be left out.)
    there = [m for m in SWEEP_METRICS if m in table.columns] if table.height else []
    if not table.height and not sweep.failed and sweep.incomplete:  # (said above the summary)
        plots.append(_note("No run of the sweep is in its results store: there is nothing to plot."))
    elif not table.height:
        plots.append(
            _note(
                f"No run of the sweep finished ({sweep.failed:,} failed, each listed above with its error): "
                "there is nothing to plot."
            )
        )
    # A metric no run has a value of (JCTs when no job finished) is left out, said once for all.
    valueless = [m for m in there if not _has_values(table[m])]
    if valueless:
        plots.append(_note(f"Not drawn: no finished run has a value of {_listed(valueless)}."))
    notes: set[str] = set()
    # (Drawn against the first name the sweep varied, as `plot --kind load` draws by default.)
    against = next((n for n in sweep.labels if not is_seed(n)), "load")
    for metric in (m for m in there if m not in valueless):
        try:
            plots.append(
                _figure_html(figure(sweep, "load", metric), f"{metric} against {against}; bands are 95% intervals over seeds.")
            )
        except UsageError as err:  # (one that stops every figure, no axis to draw against, is said once)
            if str(err) not in notes:
                notes.add(str(err))
                plots.append(_note(str(err)))
    graph = _graph_html(sweep.graph, sweep.trace) if sweep.graph else _note("The sweep's folder does not record its graph.")
    title = f"Sweep of {Path(sweep.graph).name}" if sweep.graph else f"Sweep in {sweep.path.name}"
    return _page(title, facts, graph, summary, plots)


def _has_values(column: pl.Series) -> bool:
    values = column.cast(pl.Float64, strict=False)
    return bool((values.is_not_null() & values.is_not_nan()).any())


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _cell(column: str, value, show) -> str:
    if value is None:
        return "—"
    if column == "utilization":
        return f"{value:.1%}"
    if column.endswith("_s") and isinstance(value, int | float):
        return show(value)
    return count_text(value) if isinstance(value, int | float) else str(value)


def _run_graph_html(run: RunFolder) -> str:
    """The graph the run read, from the text run.json keeps of it; a run written before
    run.json kept it has only the path, and its file is drawn as it reads now."""
    graph, text = run.graph, run.info.get("graph_text")
    if not graph:
        return _note("run.json names no graph.")
    trace = run.info.get("trace")
    if trace is not None and not isinstance(trace, str):
        return _note(f"{run.path / 'run.json'}: 'trace' should be a string; the graph is not drawn.")
    if text is None:
        return _graph_html(graph, trace)
    if not isinstance(text, str):
        return _note(f"{run.path / 'run.json'}: 'graph_text' should be a string; the graph is not drawn.")
    # The files the graph names are read relative to its folder, and compiling checks that they
    # are there. A relative path is relative to the folder the run was started in, which run.json
    # does not name: the graph is read from each folder where that path names the file the run
    # read, found where `report` is run, at the run's folder or above it (`--out` is usually
    # given from there), until one compiles. Failing any, it is read from where `report` is run.
    which = "as the run read it" + _with_trace(trace)
    found = _folders_holding(run.path, graph, text)
    failed: tuple[Path, RoundhouseError] | None = None
    for folder in found:
        try:
            return _drawn(graph, _compiled(folder / graph, text, trace), which)
        except RoundhouseError as err:
            failed = failed or (folder, err)
    if failed is not None:
        return _note(f"The graph {graph} could not be drawn (read from {failed[0]}, where its file is): {failed[1]}")
    try:
        compiled = _compiled(Path(graph), text, trace)
    except RoundhouseError as err:
        return _note(f"The graph {graph} could not be drawn{_looked_for(graph)}: {err}")
    return _drawn(graph, compiled, which)


def _with_trace(trace: str | None) -> str:
    """What a caption adds of a --trace, which replaced the path of the graph's TraceSource."""
    return ", its TraceSource's path the trace given with --trace" if trace else ""


def _compiled(path: Path, text: str | None, trace: str | None):
    """The graph of `text` (None: the file's text now), read as the file `path`, with `trace`
    (the --trace of the run or sweep, if given) as the path of its TraceSource, as it gave it."""
    flat = load(path, text)
    return compile_graph(flat, trace_overrides(flat, trace))


def _folders_holding(run_folder: Path, graph: str, text: str) -> list[Path]:
    """The folders among the working folder, `run_folder` and those above it in which the
    relative path `graph` names a file holding `text` (the run's graph as the run read it),
    the working folder first, then the nearest; none for an absolute path."""
    if Path(graph).is_absolute():
        return []
    try:
        here = [Path.cwd()]
    except OSError:  # (the working folder was removed)
        here = []
    whole = run_folder.resolve()
    found: list[Path] = []
    for folder in dict.fromkeys([*here, whole, *whole.parents]):  # (each once, in order)
        try:  # (a file only: reading a pipe found under the graph's name would wait for ever)
            if (folder / graph).is_file() and read_source(folder / graph) == text:
                found.append(folder)
        except (OSError, UnicodeDecodeError, ValueError):  # (no such file, or none the run could have read)
            continue
    return found


def _graph_html(graph: str, trace: str | None = None) -> str:
    """A graph's file as Graphviz draws it, with `trace` (the --trace it was run with, if one
    was) as its TraceSource's path, or a note saying why it is not drawn (the report is still
    worth having without it)."""
    path = Path(graph)
    if not path.is_file():
        return _note(f"The graph {graph} is not found{_looked_for(graph)}.")
    try:
        compiled = _compiled(path, None, trace)
    except RoundhouseError as err:
        return _note(f"The graph {graph} could not be drawn: {err}")
    return _drawn(graph, compiled, "as the file reads now, which may differ from what was run" + _with_trace(trace))


def _looked_for(graph: str) -> str:
    """For a relative path, where `report` looked for the graph and where it should have."""
    if Path(graph).is_absolute():
        return ""
    return f" (looked for from {Path.cwd()}; the path is relative to the folder the run was started in)"


def _drawn(graph: str, compiled, which: str) -> str:
    try:
        svg = draw(compiled, "svg")
    except RoundhouseError as err:
        return _note(f"The graph {graph} could not be drawn: {err}")
    return (
        f'<figure><img alt="the graph {_escaped(Path(graph).name)}" src="{_data_uri(svg, "image/svg+xml")}">'
        f"<figcaption>{_escaped(graph)}, {which} (values given with --set are not shown).</figcaption></figure>"
    )


def _figure_html(fig, caption: str) -> str:
    return (
        f'<figure class="plot"><img alt="{_escaped(caption)}" src="{_data_uri(figure_bytes(fig, "png"), "image/png")}">'
        f"<figcaption>{_escaped(caption)}</figcaption></figure>"
    )


def _data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _escaped(text: str) -> str:
    """Text for the page: markup characters escaped, and a control character (a graph's file
    may be named with one) written as its escape, which HTML would otherwise not show."""
    return html.escape(shown_text(text))


def _note(text: str) -> str:
    return f'<p class="note">{_escaped(text)}</p>'


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text == "—"  # (no value: it does not make a column of numbers text)
    return True


def _table(header, rows, text: set[int] | frozenset[int] = frozenset({0})) -> str:
    """A table whose columns numbered in `text` hold text (left-aligned) and whose others hold
    values (right-aligned, as numbers are)."""
    head = "".join(f"<th>{_escaped(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="{"" if i in text else "n"}">{_escaped(str(v))}</td>' for i, v in enumerate(row)) + "</tr>"
        for row in rows
    )
    # (in a box of its own that scrolls: a sweep's many varied names would widen the page)
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _page(title: str, facts: list[str], graph: str, summary: str, plots: list[str]) -> str:
    esc = _escaped
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n"
        f'<p class="facts">{" · ".join(esc(f) for f in facts)}</p>\n'
        f"<h2>Graph</h2>\n{graph}\n"
        f"<h2>Summary</h2>\n{summary}\n"
        f"<h2>Plots</h2>\n{''.join(plots)}\n"
        "</body></html>\n"
    )
