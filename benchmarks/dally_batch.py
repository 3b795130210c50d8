"""Wall time of the full `roundhouse reproduce dally-batch`: 6 schemes x 4 cluster sizes (2, 4,
8 and 16 racks of Dally's machines), 500 jobs, on the local process pool.

    python benchmarks/dally_batch.py            # the full sweep (the target: under 5 minutes on 2 cores)
    python benchmarks/dally_batch.py --quick    # the --quick version (the target: under a minute)

Prints the wall time of the whole experiment beside its target, and the summed run time of its
runs (24; 12 with --quick), as each worker measured its own. A script that prints figures, not a
timed test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import description, exit_on_terminate, path_option, run_script  # noqa: E402

from roundhouse.tools.reproductions import load_all  # noqa: E402

# The targets: wall seconds of the whole experiment by (experiment, --quick).
TARGETS_S = {("dally-batch", False): 300.0, ("dally-batch", True): 60.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--quick", action="store_true", help="the experiment's --quick version (fewer jobs; default: the full experiment)"
    )
    parser.add_argument(
        "--experiment",
        default="dally-batch",
        choices=("dally-batch", "dally-poisson"),
        help="the experiment to time (default dally-batch)",
    )
    parser.add_argument(
        "--out", type=path_option, help="keep the experiment's tables and figures in this folder (default: a temporary folder)"
    )
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    if args.out is not None:
        if args.out.exists() and not args.out.is_dir():
            parser.error(f"--out {args.out}: a file of that name is there; give a folder")
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # no permission, or a file on the way
            parser.error(f"--out {args.out}: cannot make the folder ({err.strerror})")
    experiment = load_all()[args.experiment]
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out.resolve() if args.out else Path(scratch)
        started = time.perf_counter()
        report = experiment.run(out, args.quick)
        wall = time.perf_counter() - started
        for name, frame in report.tables.items():
            frame.write_csv(out / f"{name}.csv")
    runs = report.tables["runs"]
    print(f"{args.experiment}{' --quick' if args.quick else ''}: {runs.height} runs")
    run_s = runs["wall_s"].to_numpy()
    print(f"wall time: {wall:.1f} s; summed run time {run_s.sum():.1f} s; slowest run {run_s.max():.1f} s")
    limit = TARGETS_S.get((args.experiment, args.quick))
    if limit is not None:
        print(f"target: under {limit:g} s on 2 cores: {wall:.1f} s ({'met' if wall < limit else 'MISSED'})")
    for row in runs.sort("wall_s", descending=True).head(5).iter_rows(named=True):
        print(f"  {row['scheme']:<24} {row['racks']:>2} racks: {row['wall_s']:.1f} s, {row['rounds']} rounds")
    if args.out is not None:  # (without --out they went with the temporary folder)
        print(f"tables and figures written to {args.out.resolve()}")


if __name__ == "__main__":
    run_script(main)
