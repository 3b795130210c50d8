"""Blox's automatic scheduler synthesizer (Agarwal et al., EuroSys'24, §5.2 and Appendix A):
every ten rounds of five minutes, simulate each of nine combinations of an admission gate
(Accept All, Accept 1.2x, Accept 1.4x) and a policy (FIFO, SRTF, LAS) from the current state,
and run the best until the next decision. Figs 14-15 (average JCT; which combination ran
when) on the Philly-Trace and on the bursty workload, and Figs 20-21 (JCT and responsiveness
together), beside the nine combinations run alone.

Workloads, as in Blox's other case studies (tools/reproductions/blox.py): Philly durations and
Blox's models, one GPU per job, Poisson arrivals at 8 jobs/hour on 128 V100s (32 x 4). The
bursty workload adds, after every four hours, two hours of short jobs (10 minutes to an hour,
uniformly) at twice the load. `--quick` runs a quarter of the cluster (32 GPUs, 8 x 4) at the
same 8 jobs/hour, so four times the load per GPU, with fewer jobs (200, 50-149 measured) and a
shorter look-ahead (3 h).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import polars as pl

from roundhouse.runtime.sweep import RunSpec
from roundhouse.tools.reproductions import Comparison, Report, experiment
from roundhouse.tools.reproductions._runs import (
    hours,
    pct_lower,
    run,
    save_figure,
    sched_string,
    summary_table,
    value,
    write_graph,
)

GATES = {"Accept All": "AcceptAll", "Accept 1.2x": "AcceptThreshold(factor=1.2x)", "Accept 1.4x": "AcceptThreshold(factor=1.4x)"}
POLICIES = {"FIFO": "Fifo", "SRTF": "Srtf", "LAS": "Las(service=wall_seconds, backfill=false)"}
# Names the synthesizer's graph gives its candidates, and how the figures write them.
CANDIDATE_NAMES = {"all": "Accept All", "a12": "Accept 1.2x", "a14": "Accept 1.4x", "fifo": "FIFO", "srtf": "SRTF", "las": "LAS"}


@attrs.frozen
class Scale:
    cluster: str
    rate: float  # jobs per hour
    jobs: int
    track: tuple[int, int]
    horizon: str

    @property
    def burst_jobs(self) -> int:
        return int(round(2 * self.rate * 2))  # twice the load for two hours


FULL = Scale("32x4:V100", 8.0, 5000, (3000, 4000), "6h")
QUICK = Scale("8x4:V100", 8.0, 200, (50, 150), "3h")

DOCS = "docs/reproductions.md, blox-synthesizer"
CLOSE = 0.02  # "closely matches": the synthesizer's average JCT within 2% of the best static's
ROUND_S = 300.0  # responsiveness within one round of the best counts as matching it
WHY_SRTF = "our SRTF knows each job's remaining time exactly, which with a backlog minimises the mean completion time"


def best_static_note(best: str, paper: str) -> str:
    """The note beside the best static combination (`best`: "POLICY, GATE") against the paper's policy."""
    policy = best.split(",")[0]
    if policy == paper:
        return ""
    why = f": {WHY_SRTF}" if policy == "SRTF" else ""
    return f"{policy}, not {paper}{why} ({DOCS})"


def matches_best_note(auto: float, best: float) -> str:
    """The note beside the synthesizer's average JCT against the best static combination's."""
    if best > 0 and abs(auto - best) <= CLOSE * best:
        return ""
    return f"{pct_lower(best, auto)} than the best static combination, where the paper's closely matches it ({DOCS})"


def switches_note(switches: int, run_h: float) -> str:
    """The note beside how often the synthesizer (metric JCT) switched: fewer than once a day of
    the run is not the paper's continuous switching."""
    if switches >= run_h / 24:
        return ""
    return (
        f"{switches} switch{'es' if switches != 1 else ''} in {run_h:.0f} h, where the paper's switches continuously: with "
        f"exact remaining times, every decision picks SRTF once a backlog forms ({DOCS})"
    )


def both_note(jct: float, best_jct: float, responsiveness: float, best_responsiveness: float) -> str:
    """The note beside the synthesizer with metric JCT and responsiveness, which the paper finds
    minimizes both: where either is above the best static combination's (JCT by more than CLOSE,
    responsiveness by more than a round)."""
    parts = []
    if jct > best_jct * (1 + CLOSE):
        parts.append(f"JCT {pct_lower(best_jct, jct)} than the best static's")
    if responsiveness > best_responsiveness + ROUND_S:
        parts.append(f"responsiveness {hours(responsiveness - best_responsiveness)} above the best static's")
    if not parts:
        return ""
    return f"{' and '.join(parts)}: a trade-off between SRTF (JCT) and LAS (responsiveness), not both at their best ({DOCS})"


def order_note(order: list[str]) -> str:
    """The note beside the combinations the synthesizer (JCT and responsiveness) ran in turn
    ("POLICY, GATE"), which in the paper start on LAS and end on FIFO."""
    if not order:
        return ""
    first, last = order[0].split(",")[0], order[-1].split(",")[0]
    if (first, last) == ("LAS", "FIFO"):
        return ""
    why = f": {WHY_SRTF}, so it leads once a backlog forms" if "SRTF" in (first, last) else ""
    return f"starts on {first} and ends on {last}, where the paper's starts on LAS and ends on FIFO{why} ({DOCS})"


def _graph(scale: Scale, bursty: bool, body: str) -> str:
    hours_of_arrivals = scale.jobs / scale.rate
    bursts = int(hours_of_arrivals // 6) + 1
    burst = (
        f"burst :: BurstSource(jobs={scale.burst_jobs}, length=2h, every=6h, offset=4h, bursts={bursts}, "
        "min_duration=10min, max_duration=1h, gpus=single, models=blox, seed=7);\nburst -> admit;\n"
        if bursty
        else ""
    )
    return f"""
round = 5min;
checkpoint = 30s;
restore = 30s;
cluster = {sched_string(scale.cluster)};
arrivals :: PoissonSource(rate={scale.rate:g}/h, jobs={scale.jobs}, gpus=single, models=blox, seed=0);
report   :: JobMetrics(track={scale.track[0]}..{scale.track[1]});
{body}
{burst}arrivals -> admit;
admit -> JobPool -> order -> FirstFree -> Launch -> report;
"""


def static_graph(scale: Scale, bursty: bool, gate: str, policy: str) -> str:
    return _graph(scale, bursty, f"admit :: {gate};\norder :: {policy};")


def synthesizer_graph(scale: Scale, bursty: bool, metric: str) -> str:
    return _graph(
        scale,
        bursty,
        f"""synth :: Synthesizer(switches=[admit, order], every=10, horizon={scale.horizon}, metric={metric}, workers=1);
all :: AcceptAll;
a12 :: AcceptThreshold(factor=1.2x);
a14 :: AcceptThreshold(factor=1.4x);
admit :: ChooseAdmission(candidates=[all, a12, a14]);
fifo :: Fifo;
srtf :: Srtf;
las :: Las(service=wall_seconds, backfill=false);
order :: ChoosePolicy(candidates=[fifo, srtf, las]);""",
    )


def _pretty(combination: str) -> str:
    gate, policy = combination.split("+")
    return f"{CANDIDATE_NAMES[policy]}, {CANDIDATE_NAMES[gate]}"


@experiment(
    "blox-synthesizer",
    "The automatic scheduler synthesizer against the nine admission x policy combinations, on the Philly-Trace and a bursty load",
    "Blox (EuroSys'24) §5.2, Figs 14-15; Appendix A, Figs 20-21",
)
def blox_synthesizer(out_dir: Path, quick: bool) -> Report:
    scale = QUICK if quick else FULL
    specs = []
    for workload, bursty in (("Philly-Trace", False), ("bursty", True)):
        slug = "bursty" if bursty else "philly"
        for gate_name, gate in GATES.items():
            for policy_name, policy in POLICIES.items():
                name = f"{policy_name}, {gate_name}"
                graph = write_graph(
                    out_dir,
                    f"{slug}-{policy_name.lower()}-{gate_name.split()[-1].lower().replace('.', '_')}",
                    static_graph(scale, bursty, gate, policy),
                )
                specs.append(RunSpec(str(graph), labels={"workload": workload, "scheduler": name}))
        metrics = ("jct", "both") if not bursty else ("jct",)
        for metric in metrics:
            graph = write_graph(out_dir, f"{slug}-synthesizer-{metric}", synthesizer_graph(scale, bursty, metric))
            specs.append(RunSpec(str(graph), labels={"workload": workload, "scheduler": f"Automatic ({metric})"}))
    # The synthesizer's runs (hundreds of decisions of up to nine look-aheads each) start first,
    # so that the short static runs fill the other core around them.
    first = [s for s in specs if s.labels["scheduler"].startswith("Automatic")]
    outcomes = run(first + [s for s in specs if s not in first])
    outcomes.sort(key=lambda o: specs.index(o.spec))
    runs = summary_table(outcomes)
    timelines = []
    for o in outcomes:
        if "synth" in o.reports:
            choices = o.reports["synth"]["choices"]
            timelines.append(
                choices.with_columns(workload=pl.lit(o.spec.labels["workload"]), scheduler=pl.lit(o.spec.labels["scheduler"]))
            )
    timeline = pl.concat(timelines).with_columns(chosen=pl.col("combination").map_elements(_pretty, return_dtype=pl.String))
    figures = [
        _bars(runs, "Philly-Trace", out_dir / "fig14_philly.png", "Blox Fig 14: average JCT, Philly-Trace"),
        _bars(runs, "bursty", out_dir / "fig14_bursty.png", "Blox Fig 14: average JCT, bursty load"),
        _timeline(
            timeline.filter(pl.col("scheduler") == "Automatic (jct)"),
            out_dir / "fig15_choices.png",
            "Blox Fig 15: combination chosen (metric: JCT)",
        ),
        _scatter(runs.filter(pl.col("workload") == "Philly-Trace"), out_dir / "fig20_jct_responsiveness.png"),
        _timeline(
            timeline.filter(pl.col("scheduler") == "Automatic (both)"),
            out_dir / "fig21_choices.png",
            "Blox Fig 21: combination chosen (JCT and responsiveness)",
        ),
    ]

    def best_static(workload: str, metric: str = "avg_jct_s") -> tuple[str, float]:
        part = runs.filter((pl.col("workload") == workload) & ~pl.col("scheduler").str.starts_with("Automatic")).sort(metric)
        return part["scheduler"][0], float(part[metric][0])

    comparisons = []
    for workload, paper_best in (("Philly-Trace", "FIFO"), ("bursty", "SRTF")):
        name, jct = best_static(workload)
        auto = value(runs, "avg_jct_s", workload=workload, scheduler="Automatic (jct)")
        comparisons.append(
            Comparison(
                f"{workload}: best static combination (avg JCT)",
                paper_best,
                f"{name} ({hours(jct)})",
                best_static_note(name, paper_best),
            )
        )
        comparisons.append(
            Comparison(
                f"{workload}: automatic (JCT) vs the best static",
                "closely matches it (Fig 14)",
                f"{hours(auto)}: {pct_lower(jct, auto)} than {name}",
                matches_best_note(auto, jct),
            )
        )
        used = timeline.filter((pl.col("workload") == workload) & (pl.col("scheduler") == "Automatic (jct)"))
        comparisons.append(
            Comparison(
                f"{workload}: combinations the synthesizer ran (Fig 15)",
                "switches continuously among policies",
                f"{used.height - 1} switch{'es' if used.height != 2 else ''}; "
                + "; ".join(sorted(set(used["chosen"].to_list()))),
                switches_note(used.height - 1, float(used["until_s"].max() or 0.0) / 3600),
            )
        )
    both_jct = value(runs, "avg_jct_s", workload="Philly-Trace", scheduler="Automatic (both)")
    both_resp = value(runs, "avg_responsiveness_s", workload="Philly-Trace", scheduler="Automatic (both)")
    best_jct_name, best_jct = best_static("Philly-Trace")
    best_resp_name, best_resp = best_static("Philly-Trace", "avg_responsiveness_s")
    comparisons.append(
        Comparison(
            "Philly-Trace: automatic (JCT and responsiveness), Fig 20",
            "minimizes both",
            f"JCT {hours(both_jct)} (best static {best_jct_name} {hours(best_jct)}); responsiveness {hours(both_resp)} "
            f"(best static {best_resp_name} {hours(best_resp)})",
            both_note(both_jct, best_jct, both_resp, best_resp),
        )
    )
    order = timeline.filter(pl.col("scheduler") == "Automatic (both)")["chosen"].to_list()
    comparisons.append(
        Comparison(
            "Philly-Trace: combinations over time, Fig 21",
            "LAS, then LAS 1.2x, LAS 1.4x, finally FIFO",
            " -> ".join(order[:8]) + (" ..." if len(order) > 8 else ""),
            order_note(order),
        )
    )
    notes = [
        f"{scale.jobs} jobs at {scale.rate:g} jobs/h on {scale.cluster}, jobs {scale.track[0]}..{scale.track[1] - 1} measured; "
        f"the synthesizer looks {scale.horizon} ahead every 10 rounds, for the jobs then in the system (no future arrivals).",
    ]
    return Report(comparisons=comparisons, tables={"runs": runs, "choices": timeline}, figures=figures, notes=notes)


def _bars(runs: pl.DataFrame, workload: str, path: Path, title: str) -> Path:
    part = runs.filter(pl.col("workload") == workload)

    def draw(ax):
        names = part["scheduler"].to_list()
        values = (part["avg_jct_s"] / 3600).to_list()
        colours = ["#c44e52" if n.startswith("Automatic") else "#4c72b0" for n in names]
        ax.barh(names, values, color=colours)
        ax.set_xlabel("average JCT (h)")
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", labelsize=7)
        ax.invert_yaxis()

    return save_figure(path, draw, size=(6.0, 4.2))


def _timeline(choices: pl.DataFrame, path: Path, title: str) -> Path:
    """Which combination ran when: one lane per workload, a coloured span per combination."""

    def draw(ax):
        names = sorted(set(choices["chosen"].to_list()))
        colours = {n: f"C{i % 10}" for i, n in enumerate(names)}
        lanes = choices["workload"].unique(maintain_order=True).to_list()
        for lane, workload in enumerate(lanes):
            for row in choices.filter(pl.col("workload") == workload).iter_rows(named=True):
                start, end = row["time_s"] / 3600, row["until_s"] / 3600
                ax.broken_barh([(start, max(end - start, 0.05))], (lane - 0.4, 0.8), color=colours[row["chosen"]])
        ax.set_yticks(range(len(lanes)), lanes)
        ax.set_xlabel("time (h)")
        ax.set_title(title, fontsize=10)
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=colours[n], label=n) for n in names], fontsize=7, loc="upper right")

    return save_figure(path, draw, size=(7.0, 2.2 + 0.5 * choices["workload"].n_unique()))


def _scatter(runs: pl.DataFrame, path: Path) -> Path:
    def draw(ax):
        for row in runs.iter_rows(named=True):
            auto = row["scheduler"].startswith("Automatic")
            ax.scatter(row["avg_jct_s"] / 3600, row["avg_responsiveness_s"] / 3600, color="#c44e52" if auto else "#4c72b0")
            ax.annotate(row["scheduler"], (row["avg_jct_s"] / 3600, row["avg_responsiveness_s"] / 3600), fontsize=6)
        ax.set_xlabel("average JCT (h)")
        ax.set_ylabel("average responsiveness (h)")
        ax.set_title("Blox Fig 20: JCT and responsiveness, Philly-Trace", fontsize=10)
        ax.grid(alpha=0.3)

    return save_figure(path, draw, size=(6.0, 4.2))
