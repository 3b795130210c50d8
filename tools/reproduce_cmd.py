"""`roundhouse reproduce NAME...`: run published experiments and set our numbers beside theirs."""

from __future__ import annotations

import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

from roundhouse.errors import RoundhouseError, UsageError, did_you_mean
from roundhouse.runtime.files import make_folder, writing
from roundhouse.tools.reproductions import ExperimentFailed, load_all


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="reproduce a published experiment (paper's numbers beside ours)")
    p.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments (with NAMEs, those)")
    p.add_argument("--out", default="runs/reproduce", help="folder for tables and plots (default: runs/reproduce)")
    p.add_argument("--quick", action="store_true", help="a smaller version that still shows the effect")
    p.set_defaults(handler=reproduce)


def reproduce(args) -> int:
    experiments = load_all()
    console = Console()
    for name in args.names:
        if name not in experiments:
            hint = did_you_mean(name, experiments)
            raise UsageError(f"no experiment '{name}'" + (f"; {hint}" if hint else "; --list shows them"))
    if args.list or not args.names:  # (with names, --list lists those)
        table = Table(title="experiments")
        for col in ("name", "what", "paper"):
            table.add_column(col)
        for e in experiments.values():
            if not args.names or e.name in args.names:
                table.add_row(e.name, e.title, e.paper)
        console.print(table)
        return 0
    if not args.out.strip():
        raise UsageError("--out: the folder name is empty")
    for name in args.names:
        e = experiments[name]
        shown = make_folder(str(Path(args.out) / name), "--out")  # messages name it as the user wrote it
        out = shown.resolve()  # experiments hand it to processes that start in other folders
        console.print(f"[bold]{e.name}[/bold]: {e.title} ({e.paper})" + (" [quick]" if args.quick else ""))
        with writing(shown):
            report = _run(e, out, shown, args.quick)  # writes its figures into `out`
            for table_name, frame in report.tables.items():
                frame.write_csv(out / f"{table_name}.csv")
        table = Table(title=f"{e.name}: paper vs Roundhouse")
        for col in ("what", "paper", "ours", "note"):
            table.add_column(col, overflow="fold")  # (a long word, a path, wraps rather than being cut)
        for c in report.comparisons:
            table.add_row(c.what, c.paper, c.ours, c.note)
        console.print(table)
        for note in report.notes:
            console.print(f"note: {note}", highlight=False)
        written = [f.name for f in report.figures] + [f"{t}.csv" for t in report.tables]
        if written:
            console.print(f"wrote {', '.join(written)} to {shown}/")
    return 0


def _run(e, out: Path, shown: Path, quick: bool):
    """Run one experiment; a failure is a message (exit status 2), with any Python detail in a file."""
    try:
        return e.run(out, quick)
    except ExperimentFailed as err:
        raise ExperimentFailed(f"error: experiment {e.name} failed: {err}") from None
    except (RoundhouseError, OSError):
        raise
    except Exception as err:
        detail = shown / "failure.txt"
        detail.write_text(traceback.format_exc())
        raise ExperimentFailed(
            f"error: experiment {e.name} failed: {type(err).__name__}: {err}\n  the Python detail is in {detail}"
        ) from None
