"""A run's results folder (`roundhouse run --out`, `Simulation.write`): the sinks' tables and
summaries (jobs.csv, summary.json) and what was run (run.json), as `roundhouse report` and
`roundhouse plot` read them."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.dsl.loader import read_source
from roundhouse.runtime.files import RUN_FILE_NAMES, RUN_FILE_PATTERNS


def write_results(out: Path, graph, cluster, result, trace: str | None = None, graph_text: str | None = None) -> None:
    """One folder per run: the sinks' tables and summaries (with one sink, jobs.csv and
    summary.json; with several, each under its element's name, as other elements' reports
    always are: see `file_stem`), and what was run (no wall times,
    so that the same inputs give byte-identical files); `trace`, the run's --trace, if given;
    `graph_text`, the graph's text as run, where it is not its file's now (a `Simulation`'s). Every file is written whole beside the
    earlier run's before any replaces it, and the earlier run's files this run does not write
    are removed: a write that fails leaves the earlier results as they were, and a folder never
    holds two runs' files."""
    from roundhouse.runtime.explain import FILE_NAME

    out.mkdir(parents=True, exist_ok=True)
    earlier = _files_of_earlier_run(out)
    writes = []  # (file name, how to write it), run.json last: it says which files are the run's
    # The sink's files keep their plain names when it is the only sink that reports: another
    # element's report (a placer's timeline) is written under that element's name beside them.
    elements = getattr(graph, "elements", {})
    sinks = [name for name in result.reports if getattr(elements.get(name), "category", "sink") == "sink"]
    plain = set(result.reports) if len(result.reports) == 1 else set(sinks) if len(sinks) == 1 else set()
    reported: dict[str, dict[str, str]] = {}  # element -> its report's name -> the file
    for element, report in result.reports.items():
        for key, value in report.items():
            stem = key if element in plain else f"{file_stem(element)}-{key}"
            if hasattr(value, "write_csv"):
                writes.append((f"{stem}.csv", value.write_csv))
            else:
                # In the report's own order, which `report` shows as `run` prints it (the same
                # run gives the same order, so the same bytes).
                text = _report_json(element, key, value)
                writes.append((f"{stem}.json", lambda path, text=text: path.write_text(text)))
            reported.setdefault(element, {})[key] = writes[-1][0]
    record = result.world.explain
    files = sorted([name for name, _ in writes] + ["run.json"] + ([FILE_NAME] if record is not None else []))
    run_info = {
        "graph": str(graph.path),
        # The path is as `run` was given it, relative to where it was started: `report` draws
        # this text, so that it never draws another file found under that name from elsewhere.
        "graph_text": _graph_text(graph.path) if graph_text is None else graph_text,
        "cluster": cluster.describe(),
        # (the cluster the run used, which --cluster may have given in place of the graph's own)
        "settings": {k: (float(v) if isinstance(v, float) else v) for k, v in _settings(graph).items() if k != "cluster"},
        # Every element's arguments as the run used them: the graph's, a --set's, a --trace's path.
        "arguments": _arguments(graph),
        "rounds": result.rounds,
        "skipped_rounds": result.skipped_rounds,
        "passed_rounds": result.passed_rounds,
        "end_s": result.end_s,
        "stop_reason": result.stop_reason,
        "counters": result.counters,
        "files": files,
        # What each element reported (a file each), and the GPU time every job held: `report`
        # and `plot` read them (a tracked sink's jobs.csv holds only some of the jobs).
        "reports": reported,
        "busy_gpu_s": float(result.world.busy_gpu_s),
    }
    if trace is not None:  # (by its whole path, as the run read it: `report` draws the graph with it)
        run_info["trace"] = str(Path(trace).resolve())
    # Keys in name order, but `reports` in the order `run` printed them: the graph's order of
    # the elements, and each one's own order of what it reported.
    text = (
        json.dumps(
            {k: v if k == "reports" else _sorted(_finite(v)) for k, v in sorted(run_info.items())},
            indent=2,
            default=_plain_or_text,
            allow_nan=False,
        )
        + "\n"
    )
    writes.append(("run.json", lambda path: path.write_text(text)))
    parts = [out / f".{name}.partial" for name, _ in writes]
    try:
        for name in files:  # (what a rename cannot replace, found before anything is written)
            if (out / name).is_dir():
                raise IsADirectoryError(errno.EISDIR, "a folder stands where the file goes", str(out / name))
        for part, (_, write) in zip(parts, writes):
            write(part)
        if record is not None:
            record.write(out / FILE_NAME, result.world)  # (renamed into place once whole)
        for part, (name, _) in zip(parts, writes):
            os.replace(part, out / name)
    except BaseException:
        if record is not None:
            record.abandon_file()  # (the record written as the run went: no part of it left)
        raise
    finally:
        for part in parts:
            part.unlink(missing_ok=True)
    for name in sorted(earlier - set(files)):
        (out / name).unlink(missing_ok=True)


def _report_json(element: str, key: str, value) -> str:
    """A report as JSON; numpy's numbers and arrays (an element of one's own may report them) as
    numbers and lists. Anything else JSON has no form for is an error naming the report: NaN and
    infinity included, which JSON has no number for (writing them as null would make them read
    as a figure over nothing, as the sinks' own null is, and an infinity would be lost)."""
    try:
        return json.dumps(value, indent=2, default=_plain, allow_nan=False) + "\n"
    except (TypeError, ValueError) as err:
        where = _not_finite(value)
        why = (
            f"{where[0]} is {where[1]}, which JSON has no number for (report None for a figure that has no value)"
            if where is not None
            else str(err)
        )
        raise RoundhouseError(f"element '{element}' reported '{key}', which cannot be written as JSON: {why}") from None


def _not_finite(value, path: str = "") -> tuple[str, str] | None:
    """Where in a report the first NaN or infinity is ("'rho' > 'max'", or "the value itself"),
    and what it is; None if it holds none."""
    import numpy as np

    if isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    if isinstance(value, float):
        return None if np.isfinite(value) else (path or "the value itself", str(value))
    if isinstance(value, dict):
        items = ((repr(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"item {i}", v) for i, v in enumerate(value))
    else:
        return None
    for name, item in items:
        found = _not_finite(item, f"{path} > {name}" if path else name)
        if found is not None:
            return found
    return None


def _finite(value):
    """`value` with every number that is not finite (NaN, infinity) as None, for run.json: JSON
    has no number for them, and run.json describes the run (its counters and arguments as they
    ended), so a gauge that an element left at infinity must not cost the run's results."""
    import numpy as np

    if isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _plain(value):
    """A numpy value as the plain Python one JSON writes (`json.dumps`' default)."""
    import numpy as np

    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a number, text, list or dict")


def _plain_or_text(value):
    """run.json's default: numpy's numbers (counters of one's own elements) as numbers, else text."""
    try:
        return _plain(value)
    except TypeError:
        return str(value)


def file_stem(element: str) -> str:
    """What an element's files are named after: its name, with the `/` of an element inside a
    compound (`s/m`) made a `.` (`s.m-jobs.csv`), which no element's own name holds."""
    return element.replace("/", ".")


def _sorted(value):
    """`value` with every dict's keys in name order, as json.dumps(sort_keys=True) writes them."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items(), key=lambda item: item[0])}
    if isinstance(value, list | tuple):
        return [_sorted(v) for v in value]
    return value


def _files_of_earlier_run(out: Path) -> set[str]:
    """The files an earlier run wrote in `out`: as its run.json lists them, else (a run.json
    that cannot be read) by the names a run writes. Without a run.json no run wrote there
    (`results_folder` refuses a folder that holds such files then): nothing is an earlier run's."""
    if not (out / "run.json").exists():
        return set()
    try:
        listed = json.loads((out / "run.json").read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if isinstance(listed, list) and all(isinstance(name, str) and Path(name).name == name for name in listed):
        return set(listed)
    return {name for name in RUN_FILE_NAMES if (out / name).is_file()} | {
        path.name for pattern in RUN_FILE_PATTERNS for path in out.glob(pattern)
    }


def _graph_text(path) -> str | None:
    """The text of the graph's file as the results are written; None when it cannot be read
    any more (removed while the run went on): that must not cost the run's results."""
    try:
        return read_source(Path(path))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _arguments(graph) -> dict[str, dict]:
    """Each element's arguments (its attrs fields), by element name, values as JSON holds them."""
    import attrs

    return {
        name: {f.name: getattr(element, f.name) for f in attrs.fields(type(element))}
        for name, element in getattr(graph, "elements", {}).items()
        if attrs.has(type(element))
    }


def _settings(graph) -> dict:
    """The graph's settings as the run used them; a built-in elastic profile by its name (the
    setting holds it joined to the graph's folder, where no such folder is)."""
    import attrs

    from roundhouse.runtime.simulate import built_in_elastic

    settings = attrs.asdict(graph.settings)
    built_in = built_in_elastic(graph)
    if built_in is not None:
        settings["elastic_profile"] = built_in
    return settings
