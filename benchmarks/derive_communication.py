"""Derive the communication profile (traces/profiles/communication.csv) from Dally's inputs.

Reads, in place, the per-layer ASTRA-sim workloads of Dally's simulator (the folder
`shared/data/dally/astra-sim-workload/`: one file per model, each layer's all-reduce bytes in
the column after `ALLREDUCE`), summarises each model as its layer count and total gradient
bytes, and fits the per-tier scales (traces/communication.py) so that 8 GPUs on Table I's
placements give Table I's shares exactly. The result goes to the profile file (or `--out`).

    python benchmarks/derive_communication.py [--workloads DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import description, path_option, run_script  # noqa: E402

from roundhouse.errors import UsageError  # noqa: E402
from roundhouse.tools.outputs.whole_file import write_whole  # noqa: E402
from roundhouse.traces.communication import DALLY_TIERS, SHIPPED_COMMUNICATION, TIER_NAMES, fit_scales  # noqa: E402

WORKLOADS = REPO.parent / "shared" / "data" / "dally" / "astra-sim-workload"

# Dally (Sharma et al., IEEE BigData 2025), Table I: communication time as a % of compute time,
# 8 GPUs, measured in ASTRA-sim (machine, rack, network). Beside each, its workload file and
# the names Dally's traces use for it.
TABLE_I: dict[str, tuple[tuple[float, float, float], str, str]] = {
    "VGG11": ((1, 6, 7), "vgg11_B256_astra-sim.csv", "VGG"),
    "AlexNet": ((2, 13, 100), "alexnet_B512_astra-sim.csv", ""),
    "MobileNetV3": ((42, 940, 19592), "mobilenet_v3_B512_astra-sim.csv", "MobileNet"),
    "ResNet18": ((7, 116, 2749), "resnet18_B512_astra-sim.csv", ""),
    "ResNet50": ((12, 12, 38), "resnet50_B512_astra-sim.csv", ""),
    "BERT-large": ((8, 23, 715), "BERT-large_B256_astra-sim2.csv", "BERT"),
}

HEADER = """\
# Communication profiles for the network-tier model (traces/communication.py), one row per model.
# Made by benchmarks/derive_communication.py; do not edit by hand.
# *_share: Dally (Sharma et al., IEEE BigData 2025) Table I, communication time as a fraction of
#   compute time for 8 GPUs on one machine, in one rack, across racks (ASTRA-sim), transcribed.
# layers, gradient_bytes: the number of layers with a gradient all-reduce and their total bytes
#   per iteration, summed from the per-layer ASTRA-sim workloads of Dally's simulator
#   (aakash-sharma/cluster-sim at 4cd660e, astra-sim-workload/*.csv).
# *_scale: per-tier factors fitted so that the alpha-beta ring model on Dally's tiers
#   (machine {m}; rack {r}; network {n}; ns and GB/s) gives the *_share figures exactly on
#   Table I's placements: 1x8 GPUs, 2 machines x 4 GPUs, 2 racks x 4 GPUs.
# also_named: other names of the model (semicolon-separated), as Dally's traces write them.
"""


def read_workload(path: Path) -> tuple[int, int]:
    """(layers, total all-reduce bytes) of one ASTRA-sim workload file."""
    layers, volume = 0, 0
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SystemExit(f"error: {path}: not UTF-8 text (byte {err.start} cannot be decoded)") from None
    except OSError as err:
        raise SystemExit(f"error: {path}: cannot read it ({err.strerror})") from None
    for number, line in enumerate(text.splitlines(), 1):
        cells = line.split("\t")
        if "ALLREDUCE" in cells:
            try:
                volume += int(cells[cells.index("ALLREDUCE") + 1])
            except (IndexError, ValueError):
                raise SystemExit(
                    f"error: {path}:{number}: expected the all-reduce bytes after ALLREDUCE, a whole number"
                ) from None
            layers += 1
    if not layers:
        raise SystemExit(f"error: {path}: no layer with an ALLREDUCE column")
    return layers, volume


def derive(workloads: Path) -> str:
    def tier(t) -> str:
        return f"{t.latency_ns:g} {t.bandwidth_gb_per_s:g}"

    lines = [HEADER.format(m=tier(DALLY_TIERS.machine), r=tier(DALLY_TIERS.rack), n=tier(DALLY_TIERS.network))]
    columns = ["model", "also_named", "layers", "gradient_bytes"]
    columns += [f"{t}_share" for t in TIER_NAMES] + [f"{t}_scale" for t in TIER_NAMES]
    lines.append(",".join(columns) + "\n")
    for model, (percent, filename, also) in TABLE_I.items():
        path = workloads / filename
        if not path.is_file():
            raise SystemExit(f"error: {path}: no such workload file")
        layers, volume = read_workload(path)
        shares = [p / 100 for p in percent]
        try:
            scales = fit_scales(layers, volume, shares)
        except ValueError as err:  # (a workload whose sizes give no finite, positive scale)
            raise SystemExit(f"error: {path}: {model}: {err}") from None
        cells = [model, also, str(layers), str(volume)] + [repr(s) for s in shares] + [repr(float(s)) for s in scales]
        lines.append(",".join(cells) + "\n")
    return "".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--workloads",
        type=path_option,
        default=WORKLOADS,
        help=f"the folder of Dally's ASTRA-sim workload files (default: {WORKLOADS})",
    )
    parser.add_argument(
        "--out",
        type=path_option,
        default=SHIPPED_COMMUNICATION,
        help=f"the file to write (default: {SHIPPED_COMMUNICATION}, the shipped profile, which is overwritten)",
    )
    args = parser.parse_args(argv)
    if not args.workloads.is_dir():
        parser.error(f"--workloads {args.workloads}: no such folder")
    if not args.out.parent.is_dir() or args.out.is_dir():
        parser.error(f"--out {args.out}: not a file in an existing folder")
    text = derive(args.workloads)
    try:  # (whole or not at all: a failed write leaves the profile there as it was)
        write_whole(args.out, text.encode())
    except UsageError as err:
        parser.error(str(err).removeprefix("error: "))  # (it names the file)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_script(main)
