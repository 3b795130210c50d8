"""`roundhouse plot RUN_OR_SWEEP [--kind ...] -o FILE`: draw one figure of a run's or a sweep's
output folder (PNG or SVG, by the file's suffix)."""

from __future__ import annotations

import sys

from roundhouse.errors import UsageError, print_warning
from roundhouse.tools.outputs import RunFolder, SweepFolder, open_folder
from roundhouse.tools.outputs.output_place import refuse_extension_alone, refuse_unwritable_place
from roundhouse.tools.outputs.whole_file import output_file
from roundhouse.tools.plots import FILE_FORMATS, KINDS, check_kind, figure, file_format, save


def register(sub) -> None:
    p = sub.add_parser("plot", help="draw a figure of a run's or a sweep's output folder")
    p.add_argument("folder", metavar="RUN_OR_SWEEP", help="a folder written by `run --out` or `sweep --out`")
    p.add_argument(
        "--kind",
        help=f"{', '.join(KINDS)} (default: jct-cdf for a run, load for a sweep)",
    )
    p.add_argument("--metric", help="for --kind load: the summary column to draw (default avg_jct_s)")
    p.add_argument("--x", help="for --kind load: the varied name on the x axis (default: the first one that is not a seed)")
    p.add_argument("-o", "--output", required=True, help="output file: .png or .svg")
    p.set_defaults(handler=plot)


def plot(args) -> int:
    # (An empty value is refused, not taken for the option left out; a kind is known before any work.)
    for name, value, what in (("kind", args.kind, "kind"), ("metric", args.metric, "metric"), ("x", args.x, "varied name")):
        if value is not None and not value.strip():
            hint = f"; choose {', '.join(KINDS[:-1])} or {KINDS[-1]}" if name == "kind" else ""
            raise UsageError(f"--{name}: no {what} given{hint}")
    if args.kind is not None:
        check_kind(args.kind)
    out = output_file(args.output)
    refuse_extension_alone(out, args.output, FILE_FORMATS, "figure")
    file_format(out)  # before any work
    refuse_unwritable_place(out)
    folder = open_folder(args.folder)
    kind = args.kind or ("load" if isinstance(folder, SweepFolder) else "jct-cdf")
    # Options that would not change the figure are refused rather than ignored.
    given = [f"--{name} {value}" for name, value in (("metric", args.metric), ("x", args.x)) if value is not None]
    if given and kind != "load":
        raise UsageError(f"{', '.join(given)}: only for --kind load, a sweep's metric against a varied name (not --kind {kind})")
    fig = figure(folder, kind, args.metric or "avg_jct_s", args.x)
    if isinstance(folder, SweepFolder) and folder.incomplete:  # (the figure says so too)
        print_warning(f"warning: {folder.path}: {folder.incomplete}; drawn from those runs")
    elif isinstance(folder, RunFolder) and folder.incomplete:
        print_warning(f"warning: {folder.path}: {folder.incomplete}; drawn from those jobs")
    if isinstance(folder, SweepFolder):
        for note in folder.notes:  # (runs of the store the figure leaves out)
            print(f"note: {folder.path}: {note}", file=sys.stderr)
    save(fig, out)
    return 0
