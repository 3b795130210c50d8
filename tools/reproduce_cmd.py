"""`roundhouse reproduce NAME...`: run published experiments and set our numbers beside theirs."""

from __future__ import annotations

import json
import shutil
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from roundhouse.errors import RoundhouseError, UsageError, did_you_mean
from roundhouse.runtime.files import make_folder, refuse_control_characters, writing
from roundhouse.tools.deferred_interrupts import deferred_interrupts

if TYPE_CHECKING:
    from rich.console import Console

    from roundhouse.tools.reproductions import Experiment

# Rich, the console and the experiments' modules are imported by the command, not with this
# module: the command line imports this module to build its parser, where a Ctrl-C is not yet
# caught, and would print Python's traceback rather than "interrupted".

# What marks a folder as one experiment's output (`--out/NAME`): which experiment, what else was
# in the folder when it ran (kept), and, once it is over, what it wrote (what a rerun removes).
MARK = "reproduction.json"
DEFAULT_OUT = "runs/reproduce"


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="reproduce a published experiment (paper's numbers beside ours)")
    p.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments (with NAMEs, those)")
    # (--out and --data default to None, so that one given without an experiment to run is told)
    p.add_argument("--out", help=f"folder for tables and plots (default: {DEFAULT_OUT})")
    p.add_argument("--quick", action="store_true", help="a smaller version that still shows the effect")
    p.add_argument(
        "--data",
        metavar="FOLDER",
        help="the original projects' reference data (gavel/, ones/, pollux/), read in place "
        "(default: ../shared/data beside the project)",
    )
    p.set_defaults(handler=reproduce)


def reproduce(args) -> int:
    from rich.table import Table

    from roundhouse.tools.outputs.console import stdout_console
    from roundhouse.tools.outputs.stdout_result import result_console, text_of, write_result
    from roundhouse.tools.reproductions import DEFAULT_DATA, load_all, reading_data_from

    experiments = load_all()
    console = stdout_console()
    args.names = list(dict.fromkeys(args.names))  # (a name given twice runs once: its folder is one)
    for name in args.names:
        if name not in experiments:
            raise UsageError(f"no experiment '{name}'; {_near_misses(name, experiments)}")
    listing = args.list or not args.names  # (with names, --list lists those)
    if listing:
        _refuse_run_options(args)
        table = Table(title="experiments")
        for col in ("name", "what", "paper"):
            table.add_column(col)
        for e in experiments.values():
            if not args.names or e.name in args.names:
                table.add_row(e.name, e.title, e.paper)
        # (the list is the command's one result: written whole, or an error)
        result = result_console()
        result.print(table)
        write_result(text_of(result), "the list of experiments")
        return 0
    if args.data is not None and not any(experiments[name].data for name in args.names):
        # (as an option given with --list: taken silently, it would seem to have been read)
        readers = ", ".join(e.name for e in experiments.values() if e.data)
        verb = "reads" if len(args.names) == 1 else "read"
        raise UsageError(f"--data has no effect: {', '.join(args.names)} {verb} no reference data (those that do: {readers})")
    args.out = DEFAULT_OUT if args.out is None else args.out
    args.data = str(DEFAULT_DATA) if args.data is None else args.data
    if not args.out.strip():
        raise UsageError("--out: the folder name is empty")
    if not args.data.strip():
        raise UsageError("--data: the folder name is empty")
    data = Path(args.data)
    for name in args.names:  # (all before any runs: a missing folder is found in seconds, not hours)
        _check_data(experiments[name], data)
        _check_out(Path(args.out) / name, name)
    with reading_data_from(data.resolve()):  # (absolute: graphs that name its files run elsewhere)
        for done, name in enumerate(args.names):
            try:
                _reproduce(experiments[name], args, console)
            except BaseException:  # (stopped or failed: the ones after it never started)
                if args.names[done + 1 :]:
                    console.print(f"not run: {', '.join(args.names[done + 1 :])}", highlight=False)
                raise
    return 0


def _near_misses(name: str, experiments) -> str:
    """What to say after "no experiment NAME": the names it begins (a paper's name, "blox",
    begins all of its experiments'), names run together with commas, else the closest names."""
    parts = [p.strip() for p in name.split(",") if p.strip()]
    if len(parts) > 1 and all(p in experiments for p in parts):
        return f"give the names separated by spaces: {' '.join(parts)}"
    family = [e for e in experiments if e.lower().startswith(name.lower())] if name else []
    if family:
        return "did you mean " + " or ".join(f"'{e}'" for e in family) + "?"
    return did_you_mean(name, experiments) or "--list shows them"


def _refuse_run_options(args) -> None:
    """Options that only shape a run, given when nothing runs (no NAME, or --list): a usage
    error naming the first, rather than a list printed as if the option had been read."""
    given = [
        option
        for option, value in (("--quick", args.quick), ("--out", args.out), ("--data", args.data))
        if value not in (None, False)
    ]
    if not given:
        return
    if args.names:
        raise UsageError(f"{given[0]} has no effect with --list, which runs nothing; leave out --list to run {args.names[0]}")
    raise UsageError(f"{given[0]} needs an experiment NAME; --list shows them")


def _reproduce(e: Experiment, args, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from roundhouse.tools.outputs.stdout_result import result_console, text_of

    shown = make_folder(str(Path(args.out) / e.name), "--out")  # messages name it as the user wrote it
    out = shown.resolve()  # experiments hand it to processes that start in other folders
    with writing(shown):
        others = _clear(out, shown, e.name)
        _mark(out, e.name, args.quick, others)
    # The heading and, once the experiment has run, its comparison with the paper are kept in no
    # file: they are the command's answer, written whole or an error (a full disk is found
    # before the experiment runs; the comparison's results are written, and marked, first).
    answer = f"{e.name}'s comparison with the paper"
    heading = result_console()
    # (escaped: "[quick]", or a bracket in a title, would be taken for Rich's markup and dropped)
    heading.print(f"[bold]{escape(e.name)}[/bold]: {escape(f'{e.title} ({e.paper})')}" + (r" \[quick]" if args.quick else ""))
    _answer(text_of(heading), answer)
    try:
        report = _run(e, out, shown, args.quick)  # writes its figures into `out`
        with writing(shown):
            for table_name, frame in report.tables.items():
                frame.write_csv(out / f"{table_name}.csv")
    except KeyboardInterrupt:  # (Ctrl-C, or SIGTERM: what it wrote so far would pass for results)
        # (a second Ctrl-C waits for the cleanup: stopped half-way, it would leave part of the
        # results under a mark that does not say the run was interrupted)
        with deferred_interrupts():
            with writing(shown):
                _remove(out, {p.name for p in out.iterdir()} - others - {MARK})
                _mark(out, e.name, args.quick, others, set(), interrupted=True)
            console.print(
                f"{e.name}: stopped; removed what it had written to {shown}/ ({MARK} says so)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        raise
    except BaseException:  # (a failed run too: its failure.txt goes with the next run)
        with writing(shown):
            _mark(out, e.name, args.quick, others, {p.name for p in out.iterdir()} - others - {MARK})
        raise
    with writing(shown):
        _mark(out, e.name, args.quick, others, {p.name for p in out.iterdir()} - others - {MARK})
    table = Table(title=f"{e.name}: paper vs Roundhouse")
    for col in ("what", "paper", "ours", "note"):
        table.add_column(col, overflow="fold")  # (a long word, a path, wraps rather than being cut)
    for c in report.comparisons:
        table.add_row(c.what, c.paper, c.ours, c.note)
    result = result_console()
    result.print(table)
    for note in report.notes:
        result.print(f"note: {note}", highlight=False)
    line = wrote_line(report, {p.name for p in out.iterdir()} - others - {MARK}, out, shown)
    if line:
        result.print(line, highlight=False)
    _answer(text_of(result), answer)


def _answer(text: str, what: str) -> None:
    """`text`, part of the command's answer, on standard output: a full disk is an error
    (tools/outputs/stdout_result.py); a reader that left (`| head`) is not, and the experiments
    go on, their output dropped, as the rest of what the command says."""
    from roundhouse.tools.outputs.standard_output import silence_stdout
    from roundhouse.tools.outputs.stdout_result import write_result

    try:
        write_result(text, what)
    except BrokenPipeError:
        silence_stdout()


def wrote_line(report, wrote: set[str], out: Path, shown: Path) -> str:
    """The run's last line: its plots and tables first (what a reader opens), then everything
    else it left in the folder (the graphs it ran, traces, profiles), folders with a slash, so
    that the line names all that the folder's mark lists as written."""
    named = [f.name for f in report.figures] + [f"{t}.csv" for t in report.tables]
    rest = [e + "/" if (out / e).is_dir() else e for e in sorted(wrote - set(named))]
    if not named and not rest:
        return ""
    line = f"wrote {', '.join(named or rest)} to {shown}/"
    return line + (f"; also {', '.join(rest)}" if named and rest else "")


def _check_data(e: Experiment, data: Path) -> None:
    """A message, before anything runs, if a folder of reference data the experiment reads is missing."""
    for sub in e.data:
        if not (data / sub).is_dir():
            raise UsageError(
                f"experiment {e.name} reads reference data from {data / sub}, which is not a folder; "
                f"give the folder that holds {Path(sub).parts[0]}/ with --data FOLDER"
            )


def _check_out(out: Path, name: str) -> None:
    """Refuse, before any experiment runs, a folder `--out/NAME` that a later one of the
    command's experiments could not write into (a file, or another run's output), rather than
    after the ones before it have run, perhaps for hours."""
    refuse_control_characters(out, "--out", "folder")
    if out.is_dir():
        try:
            _earlier(out, out, name)
        except OSError as err:  # (a folder that cannot be listed)
            raise UsageError(f"--out {out}: cannot read the folder: {err.strerror}") from None
    elif out.exists() or out.is_symlink():
        raise UsageError(f"--out {out}: exists and is not a folder")


def _clear(out: Path, shown: Path, name: str) -> set[str]:
    """Remove from `out` what an earlier run of experiment `name` wrote there, so that none of it
    stays beside the new results (a stale failure.txt, a full run's graphs after a quick run);
    return what is left, which is not the experiment's."""
    present = {p.name for p in out.iterdir()} - {MARK}
    earlier = _earlier(out, shown, name)
    if earlier is None:
        return set()
    others, wrote = earlier
    # What the earlier run wrote; if it was stopped before it could say, all it did not find there.
    ours = present & wrote if wrote is not None else present - others
    _remove(out, ours)
    return present - ours


def _earlier(out: Path, shown: Path, name: str) -> tuple[set[str], set[str] | None] | None:
    """What the mark of an earlier run of experiment `name` in folder `out` says (others,
    wrote), or None for a folder with nothing in it. As `run --out` refuses another command's
    results, a folder that is not this experiment's output (no MARK of it) is refused unless it
    is empty: nothing but what the experiment wrote is ever removed."""
    mark = out / MARK
    present = {p.name for p in out.iterdir()} - {MARK}
    if not mark.is_file():
        if present:
            listed = ", ".join(sorted(present)[:3]) + (", ..." if len(present) > 3 else "")
            raise UsageError(
                f"--out {shown}: holds files that `roundhouse reproduce {name}` did not write ({listed}; no {MARK}); "
                "give another folder, or remove them first"
            )
        return None
    earlier = _read_mark(mark, name)
    if earlier is None:
        owner = _marked_experiment(mark)
        if owner is not None and owner != name:
            raise UsageError(
                f"--out {shown}: holds the output of experiment '{owner}' (so says its {MARK}), not of {name}; "
                "give another folder, or remove it first"
            )
        raise UsageError(f"--out {shown}: its {MARK} is not one of experiment {name}; give another folder, or remove it first")
    return earlier


def _remove(out: Path, entries: set[str]) -> None:
    """Remove the files and folders named `entries` from `out`."""
    for entry in sorted(entries):
        path = out / entry
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _mark(
    out: Path, name: str, quick: bool, others: set[str], wrote: set[str] | None = None, *, interrupted: bool = False
) -> None:
    """Write the folder's MARK. `interrupted`: the run was stopped (Ctrl-C), and what it had
    written was removed: the folder holds none of its results."""
    fields: dict[str, object] = {"experiment": name, "quick": quick, "others": sorted(others)}
    if wrote is not None:
        fields["wrote"] = sorted(wrote)
    if interrupted:
        fields["interrupted"] = True
    (out / MARK).write_text(json.dumps(fields, indent=2) + "\n")


def _read_mark(mark: Path, name: str) -> tuple[set[str], set[str] | None] | None:
    """A mark's (others, wrote), or None if it is not a mark of experiment `name`."""
    try:
        found = json.loads(mark.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("experiment") != name:
        return None
    names = [found.get("others", []), found.get("wrote", [])]
    if not all(isinstance(n, list) and all(isinstance(x, str) for x in n) for n in names):
        return None
    return set(names[0]), (set(names[1]) if "wrote" in found else None)


def _marked_experiment(mark: Path) -> str | None:
    """The experiment a mark names (None if it names none a message can show: unreadable, or
    not a name), so that a folder another experiment ran in is refused naming it."""
    try:
        found = json.loads(mark.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    owner = found.get("experiment") if isinstance(found, dict) else None
    if not isinstance(owner, str) or not owner.strip() or len(owner) > 200 or not owner.isprintable():
        return None
    return owner


def _run(e: Experiment, out: Path, shown: Path, quick: bool):
    """Run one experiment; a failure is a message (exit status 2), with any Python detail in a file."""
    from roundhouse.tools.reproductions import ExperimentFailed

    try:
        return e.run(out, quick)
    except ExperimentFailed as err:
        raise ExperimentFailed(f"error: experiment {e.name} failed: {err}") from None
    except RoundhouseError:
        raise
    except OSError as err:  # (a file it reads or writes: which one the error says, not which way)
        where = f"{err.filename}: " if err.filename else ""
        raise ExperimentFailed(f"error: experiment {e.name} failed: {where}{err.strerror or err}") from None
    except Exception as err:
        detail = shown / "failure.txt"
        with writing(detail):
            detail.write_text(traceback.format_exc())
        raise ExperimentFailed(
            f"error: experiment {e.name} failed: {type(err).__name__}: {err}\n  the Python detail is in {detail}"
        ) from None
