"""ONES (Bian et al., SC'21) §5: ONES against Tiresias, Optimus and the artifact's FIFO on
16 x 4 GPUs with 400 jobs, the scalability sweep over 16-64 GPUs, and three ablations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.runtime.sweep import RunSpec
from roundhouse.tools.reproductions import Comparison, Report, data_folder, experiment
from roundhouse.tools.reproductions._runs import (
    jobs_table,
    path_from_graphs,
    pct_lower,
    plot_bars,
    run,
    save_figure,
    sched_string,
    write_graph,
)

# ONES' trace, in the reference data.
TRACE_IN_DATA = Path("ones") / "trace_1.csv"
# The paper's figures (ONES §5, Table 4; notes §5): average JCT, and reductions by ONES.
PAPER_ONES_JCT = 244.97
PAPER_REDUCTION = {"Tiresias": 45.6, "Optimus": 41.7}
PAPER_QUEUE_REDUCTION = {"Tiresias": 19.1, "Optimus": 56.6}
PAPER_WILCOXON = {"Tiresias": 4.53e-8, "Optimus": 7.55e-10}
PAPER_SCALING = {"Tiresias": (44, 46), "Optimus": (24, 42)}  # ONES' gain at 16 and 64 GPUs, %

SCHEDULERS = {
    "ONES": "Ones(population=16, mutate_rate=0.3, seed=0) -> Launch",
    "Tiresias": "TiresiasLas(queues=2, thresholds=[3200s]) -> SkewAwarePlacer(packlimit=0.3) -> Launch",
    # Optimus reschedules every 10 minutes (ONES §5.1): its own graph's round.
    "Optimus": "Optimus -> Consolidated -> Launch",
    "FIFO": "Fifo -> Consolidated -> Launch",
}
ABLATIONS = {
    "ONES, resize 20 s": ("Ones(population=16, mutate_rate=0.3, seed=0, in_place=false) -> Launch", ""),
    "ONES, no R limit": ("Ones(population=16, mutate_rate=0.3, seed=0, limit=false) -> Launch", ""),
    "ONES, K = 1 (greedy)": ("Ones(population=1, search=false, seed=0) -> Launch", ""),
}


def _graph(out: Path, name: str, trace: Path, chain: str, nodes: int) -> Path:
    round_s = "10min" if chain.startswith("Optimus") else "10s"
    return write_graph(
        out,
        name,
        f"""
// ONES §5 setting: {name}. ONES' applications (traces/ones.py), {nodes} machines of 4 GPUs.
round = {round_s};
cluster = {sched_string(f"{nodes}x4:V100")};
elastic_profile = "ones";
resize_in_place = 1s;
resize_restart = 20s;
TraceSource(path={sched_string(path_from_graphs(out, trace))}) -> AcceptAll -> JobPool -> {chain} -> report :: JobMetrics;
""",
    )


def _trace(out: Path, quick: bool) -> Path:
    from roundhouse.traces import ones

    folder = out / "traces"
    folder.mkdir(parents=True, exist_ok=True)
    frame = ones.read_trace(data_folder() / TRACE_IN_DATA)
    if quick:  # the first 40 jobs of the same trace
        frame = frame.head(40)
    path = folder / "ones-trace.csv"
    frame.write_csv(path)
    return path


def _wilcoxon(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired Wilcoxon signed-rank p-value (scipy)."""
    from scipy.stats import wilcoxon

    if np.allclose(a, b):
        return 1.0
    return float(wilcoxon(a, b).pvalue)


@experiment(
    "ones-64gpu",
    "ONES vs Tiresias, Optimus and FIFO on 64 GPUs, 400 jobs; scaling; ablations",
    "ONES (SC'21) §5, Figs 15-18, Table 4",
    data=(str(TRACE_IN_DATA.parent),),
)
def ones_64gpu(out_dir: Path, quick: bool) -> Report:
    return report(jobs_table(run(specs(out_dir, quick))), out_dir, quick)


def specs(out_dir: Path, quick: bool) -> list[RunSpec]:
    """The runs, the main comparison on 64 GPUs first (a long run can be cut short there)."""
    trace = _trace(out_dir, quick)
    node_counts = (4, 16) if quick else (4, 8, 12, 16)  # machines of 4 GPUs: 16 to 64 GPUs
    specs = []
    for name, chain in SCHEDULERS.items():
        specs.append(RunSpec(str(_graph(out_dir, f"{name}-16", trace, chain, 16)), labels={"scheduler": name, "nodes": 16}))
    for name, (chain, _) in ({} if quick else ABLATIONS).items():
        specs.append(
            RunSpec(
                str(_graph(out_dir, name.replace(" ", "_").replace(",", ""), trace, chain, 16)),
                labels={"scheduler": name, "nodes": 16},
            )
        )
    for nodes in node_counts:
        if nodes == 16:
            continue
        for name, chain in SCHEDULERS.items():
            if name == "FIFO":
                continue
            specs.append(
                RunSpec(str(_graph(out_dir, f"{name}-{nodes}", trace, chain, nodes)), labels={"scheduler": name, "nodes": nodes})
            )
    return specs


def report(jobs: pl.DataFrame, out_dir: Path, quick: bool) -> Report:
    """The comparisons, tables and figures from the runs' jobs (jobs_table of their outcomes)."""
    # Steady state: the first 5% of jobs are left out (ONES §5.1).
    cut = int(np.ceil(0.05 * jobs["job_id"].n_unique()))
    jobs = jobs.filter(pl.col("job_id") >= cut)
    summary = (
        jobs.group_by(["scheduler", "nodes"], maintain_order=True)
        .agg(
            avg_jct_s=pl.col("jct_s").mean(),
            avg_exec_s=(pl.col("jct_s") - pl.col("queue_s")).mean(),
            avg_queue_s=pl.col("queue_s").mean(),
            under_200s=(pl.col("jct_s") <= 200).mean(),
            max_exec_s=(pl.col("jct_s") - pl.col("queue_s")).max(),
            jobs=pl.len(),
        )
        .sort(["nodes", "scheduler"])
    )
    main = summary.filter(pl.col("nodes") == 16)
    get = {r["scheduler"]: r for r in main.to_dicts()}
    ones_row = get["ONES"]
    per_job = {
        s: jobs.filter((pl.col("scheduler") == s) & (pl.col("nodes") == 16)).sort("job_id")["jct_s"].to_numpy() for s in get
    }
    comparisons = [
        Comparison("ONES average JCT (s)", f"{PAPER_ONES_JCT:.1f}", f"{ones_row['avg_jct_s']:.1f}"),
        Comparison("share of ONES jobs under 200 s", "86%", f"{100 * ones_row['under_200s']:.0f}%"),
    ]
    for base in ("Tiresias", "Optimus", "FIFO"):
        row = get[base]
        p = _wilcoxon(per_job["ONES"], per_job[base]) if len(per_job["ONES"]) == len(per_job[base]) else float("nan")
        paper = (
            f"-{PAPER_REDUCTION[base]}% JCT, -{PAPER_QUEUE_REDUCTION[base]}% queueing, p = {PAPER_WILCOXON[base]:.3g}"
            if base in PAPER_REDUCTION
            else "(artifact only)"
        )
        comparisons.append(
            Comparison(
                f"ONES vs {base}: JCT, queueing, paired Wilcoxon p",
                paper,
                f"{base} {row['avg_jct_s']:.0f} s; ONES' JCT {pct_lower(row['avg_jct_s'], ones_row['avg_jct_s'])}, "
                f"queueing {pct_lower(row['avg_queue_s'], ones_row['avg_queue_s'])}; p = {p:.3g}; "
                f"{base} under 200 s: {100 * row['under_200s']:.0f}%",
            )
        )
    for name in ABLATIONS:
        if name in get:
            comparisons.append(
                Comparison(
                    f"ablation: {name}, average JCT (s)",
                    "not in the paper (should be worse than ONES)",
                    f"{get[name]['avg_jct_s']:.1f} against ONES' {ones_row['avg_jct_s']:.1f}",
                )
            )
    by_size = {(r["scheduler"], r["nodes"]): r["avg_jct_s"] for r in summary.to_dicts()}
    sizes = sorted({n for s, n in by_size if s == "ONES"})
    for base, (small, large) in PAPER_SCALING.items():
        gains = [f"{4 * n} GPUs: {pct_lower(by_size[(base, n)], by_size[('ONES', n)])}" for n in sizes if (base, n) in by_size]
        comparisons.append(
            Comparison(
                f"ONES' JCT against {base}'s as the cluster grows", f"{small}% lower on 16 GPUs, {large}% on 64", "; ".join(gains)
            )
        )
    figure = plot_bars(
        main["scheduler"].to_list(),
        main["avg_jct_s"].to_list(),
        out_dir / "ones_avg_jct.png",
        "average JCT (s)",
        "ONES §5: average JCT, 64 GPUs",
    )
    scaling = summary.filter(pl.col("scheduler").is_in(["ONES", "Tiresias", "Optimus"]))

    def draw(ax):
        for name in ("ONES", "Tiresias", "Optimus"):
            part = scaling.filter(pl.col("scheduler") == name).sort("nodes")
            ax.plot((part["nodes"] * 4).to_list(), part["avg_jct_s"].to_list(), marker="o", label=name)
        ax.set_xlabel("GPUs")
        ax.set_ylabel("average JCT (s)")
        ax.set_title("ONES Figs 17-18: scalability", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    scale_fig = save_figure(out_dir / "ones_scaling.png", draw)
    notes = [
        "Throughputs, epochs to target and the interconnect are our own model (traces/ones.py), not measurements; "
        "the paper profiles them online on V100s. Tiresias and Optimus keep each job's requested GPUs and global batch.",
        "The paper's DRL baseline is not built. FIFO is the artifact's own baseline; the paper prints no FIFO figure.",
    ]
    if quick:
        notes.append("--quick: the first 40 jobs of the trace, 64 GPUs and 16 GPUs only, no ablations.")
    return Report(comparisons=comparisons, tables={"summary": summary, "jobs": jobs}, figures=[figure, scale_fig], notes=notes)
