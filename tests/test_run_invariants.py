"""Invariants every simulated run keeps, checked on the outputs of every shipped graph (a short
stretch of each): no machine or GPU type holds more jobs' GPUs than it has, every job's times
are in order and its JCT is its finish less its arrival, no job finishes faster than it could on
its fastest GPUs, the summary is what the job table gives, and the same run gives the same bytes.

Each checker returns what it found wrong (an empty list when nothing), so that the unit tests
below can show it catching a deliberately corrupted output."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import REPO
from test_fork import SHIPPED

from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.explain import FILE_NAME
from roundhouse.runtime.results_files import write_results
from roundhouse.runtime.simulate import load_cluster, simulate
from roundhouse.tools.cli import main

GRAPHS = REPO / "graphs"
# Rounds run of each graph: enough for jobs to finish and be preempted, few enough that the
# module stays near a minute of CPU (the elastic schedulers' rounds cost the most).
ROUNDS = {"ones.sched": 40, "pollux.sched": 40, "blox-synthesizer.sched": 300, "synergy-opt.sched": 300}
DEFAULT_ROUNDS = 1000
# Relative slack for sums of floating-point times that should agree.
REL = 1e-9


@dataclass(frozen=True)
class RunOutputs:
    """What a run wrote (jobs.csv, summary.json, run.json, explain.parquet) and the cluster it
    ran on; `least_run_s` is, by job id, its work over its fastest rate (NaN: not known)."""

    jobs: pl.DataFrame
    summary: dict
    info: dict
    record: pl.DataFrame
    cluster: Cluster
    least_run_s: dict[int, float]


def run_into(name: str, out: Path) -> tuple[RunOutputs, float]:
    """The graph run for its stretch, its results written to `out` as `roundhouse run --out`
    writes them; also the time limit used (seconds)."""
    graph = compile_file(GRAPHS / name)
    until = ROUNDS.get(name, DEFAULT_ROUNDS) * float(graph.settings.round)
    cluster = load_cluster(graph, None)
    result = simulate(graph, cluster, until=until, explain=True, explain_to=out / FILE_NAME)
    write_results(out, graph, cluster, result)
    return read_outputs(out, cluster, least_run_seconds(result.world)), until


def least_run_seconds(world) -> dict[int, float]:
    """By job id: its work over the fastest rate it has on any of the cluster's GPU types at
    its GPU count, on one machine or spread (Gavel's profile measures some models faster
    spread, ResNet-50 at batch size 128 on 4 and 8 V100s among them)."""
    table = world.jobs
    rates = table.type_rates
    best = rates.max(axis=1) if len(table) else np.zeros(0)
    rows = np.flatnonzero(table.column("has_model"))
    models, batch, gpus = (table.column(c)[rows] for c in ("model", "batch_size", "gpus"))
    for t, name in enumerate(world.cluster.gpu_types):
        for count in np.unique(gpus).tolist():
            at = rows[gpus == count]
            spread = world.throughput.estimate(models[gpus == count], batch[gpus == count], name, count, False)
            best[at] = np.maximum(best[at], np.where(rates[at, t] > 0, spread, 0.0))
    best *= cpu_speedup(world)
    with np.errstate(divide="ignore", invalid="ignore"):
        least = np.where(best > 0, table.column("work") / best, np.nan)
    return dict(zip(table.column("job_id").tolist(), least.tolist()))


def read_outputs(out: Path, cluster: Cluster, least_run_s: dict[int, float]) -> RunOutputs:
    """The files run.json names as the job metrics sink's (jobs.csv and summary.json, or the
    sink's name before them when several elements report)."""
    info = json.loads((out / "run.json").read_text())
    sink = metrics_sink(info)
    files = info["reports"][sink]
    return RunOutputs(
        jobs=pl.read_csv(out / files["jobs"], infer_schema_length=None),
        summary=json.loads((out / files["summary"]).read_text()),
        info=info,
        record=pl.read_parquet(out / FILE_NAME),
        cluster=cluster,
        least_run_s=least_run_s,
    )


def cpu_speedup(world) -> np.ndarray:
    """By job row: how much faster than its profiled rate the CPU cores and memory an allocator
    may give it can make it (Synergy's sensitivity profile over the GPU-proportional share of
    the machine that gives the least per GPU; docs/semantics.md, "CPU and memory"); 1 for the rest."""
    table, cluster = world.jobs, world.cluster
    factor = np.ones(len(table))
    resources = world.throughput.resources
    if resources is None or not table.has_column("resource_model"):
        return factor
    rows = table.column("resource_model")
    known = np.flatnonzero(rows >= 0)
    shares = {(c / g, m / g) for c, m, g in zip(cluster.node_cpus, cluster.node_memory_gb, cluster.node_gpus)}
    at_share = np.min([resources.relative_speed(rows[known], c, m) for c, m in shares], axis=0)
    factor[known] = resources.speed[rows[known]].max(axis=(1, 2)) / at_share
    return factor


def metrics_sink(info: dict) -> str:
    """The one element whose report has a job table and a summary (JobMetrics)."""
    (sink,) = (name for name, files in info["reports"].items() if {"jobs", "summary"} <= set(files))
    return sink


# --- the checkers -------------------------------------------------------------------------------
RELEASES = {"suspended", "finished", "waiting", "held"}  # states in which a job holds no GPU


def holding_faults(record: pl.DataFrame, cluster: Cluster, per_gpu: int = 1, one_type: bool = True) -> list[str]:
    """Replays the record's launches, moves, resizes, suspensions and completions: after each
    instant's changes, the GPUs held in all must fit the cluster, those of each GPU type that
    type (when jobs run on one type), and those of each machine that machine, `per_gpu` jobs to
    a GPU (2 under space sharing). A job spanning several machines is known to hold at least
    one GPU on the first (the record names only that one); others, all their GPUs there."""
    faults: list[str] = []
    holding: dict[int, tuple[int, int, int]] = {}  # job -> (machine of its first GPU, GPUs, machines)
    rows = record.select("t_s", "job_id", "state", "reason", "a", "b", "c").iter_rows()
    node_gpus, node_type = cluster.node_gpus * per_gpu, cluster.node_type
    type_gpus = cluster.gpus_by_type * per_gpu

    def check(t: float) -> None:
        total = sum(g for _, g, _ in holding.values())
        if total > cluster.n_gpus * per_gpu:
            faults.append(f"t={t}: jobs hold {total} GPUs of the cluster's {cluster.n_gpus}")
        on_node: dict[int, int] = defaultdict(int)
        on_type: dict[int, int] = defaultdict(int)
        for machine, gpus, spans in holding.values():
            on_node[machine] += gpus if spans == 1 else 1
            on_type[int(node_type[machine])] += gpus
        faults.extend(
            f"t={t}: machine {m} holds at least {n} jobs' GPUs of its {node_gpus[m] // per_gpu}"
            for m, n in on_node.items()
            if n > node_gpus[m]
        )
        if one_type:
            faults.extend(
                f"t={t}: GPU type {cluster.gpu_types[k]} holds {n} jobs' GPUs of its {type_gpus[k] // per_gpu}"
                for k, n in on_type.items()
                if n > type_gpus[k]
            )

    now = None
    for t, job, state, reason, a, b, c in rows:
        if t != now:  # (a plan's changes at one instant are applied together)
            if now is not None:
                check(now)
            now = t
        if state == "running":
            if reason == "launched" and job in holding:
                faults.append(f"t={t}: job {job} launched while it still holds GPUs")
            spans = c if reason == "launched" else 1 if b == 1 else 2  # (moves, resizes: spread unknown)
            if not 0 <= a < cluster.n_nodes or b < 1:
                faults.append(f"t={t}: job {job} {reason} on machine {a} with {b} GPUs")
                continue
            holding[job] = (a, b, spans)
        elif state in RELEASES:
            holding.pop(job, None)
    if now is not None:
        check(now)
    return faults


def job_faults(jobs: pl.DataFrame, least_run_s: dict[int, float] | None = None) -> list[str]:
    """Each job's times in order (arrival <= first start <= finish), its JCT, queueing and
    responsiveness what its times give, its time held within its time since its first start,
    a finished job started, and (given `least_run_s`) no job holding GPUs for less than its
    work takes at its fastest rate."""
    faults = []
    for row in jobs.iter_rows(named=True):
        job, arrival, first, finish = row["job_id"], row["arrival_s"], row["first_start_s"], row["finish_s"]
        run_s, status = row["run_s"], row["status"]
        said = f"job {job}"
        if first is not None and first < arrival:
            faults.append(f"{said}: first start {first} before its arrival {arrival}")
        if finish is not None:
            if first is None:
                faults.append(f"{said}: finished at {finish} without a first start")
            elif finish < first:
                faults.append(f"{said}: finished at {finish} before its first start {first}")
            if status != "finished":
                faults.append(f"{said}: a finish time with status {status}")
            if not _close(row["jct_s"], finish - arrival):
                faults.append(f"{said}: JCT {row['jct_s']}, not finish - arrival = {finish - arrival}")
            if not _close(row["queue_s"], finish - arrival - run_s, scale=finish):
                faults.append(f"{said}: queueing {row['queue_s']}, not JCT - run time = {finish - arrival - run_s}")
            if run_s > (finish - first) * (1 + REL):
                faults.append(f"{said}: held GPUs {run_s} s, more than its {finish - first} s from first start to finish")
            least = (least_run_s or {}).get(job, math.nan)
            if run_s < least * (1 - 1e-6):
                faults.append(f"{said}: finished after {run_s} s on GPUs, less than its work takes at its fastest: {least}")
        elif status == "finished":
            faults.append(f"{said}: status finished without a finish time")
        if first is not None and not _close(row["responsiveness_s"], first - arrival):
            faults.append(f"{said}: responsiveness {row['responsiveness_s']}, not first start - arrival")
        if first is not None and row["launches"] < 1:
            faults.append(f"{said}: started with {row['launches']} launches")
        if row["preemptions"] > row["launches"]:
            faults.append(f"{said}: {row['preemptions']} preemptions of {row['launches']} launches")
    return faults


def bounded_jobs(outputs: RunOutputs) -> dict[int, float]:
    """`least_run_s` of the jobs it bounds: those that ran to the end of their work (not stopped
    early by a `completed`: LossTermination's converged jobs) and only ever on the GPU count
    they asked for (an elastic policy's resized job may run faster on more)."""
    record, jobs = outputs.record, outputs.jobs
    asked = record.join(jobs.select("job_id", "gpus"), on="job_id")
    other_count = asked.filter((pl.col("state") == "running") & (pl.col("b") != pl.col("gpus")))["job_id"]
    completed = record.filter(pl.col("reason") == "completed")["job_id"]
    left_out = set(other_count.to_list()) | set(completed.to_list())
    return {job: least for job, least in outputs.least_run_s.items() if job not in left_out}


def record_faults(jobs: pl.DataFrame, record: pl.DataFrame) -> list[str]:
    """The record agrees with jobs.csv: a job's first `running` line is at its first start, its
    `finished` line at its finish, and a job neither finished nor started has neither."""
    faults = []
    running = record.filter(pl.col("state") == "running").group_by("job_id").agg(pl.col("t_s").min().alias("first"))
    ended = record.filter(pl.col("state") == "finished").group_by("job_id").agg(pl.col("t_s").max().alias("end"))
    both = jobs.select("job_id", "first_start_s", "finish_s", "status").join(running, on="job_id", how="left")
    both = both.join(ended, on="job_id", how="left")
    for job, first, finish, status, seen, end in both.iter_rows():
        if first != seen and not (first is not None and seen is not None and _close(first, seen)):
            faults.append(f"job {job}: first start {first} in jobs.csv, first running line at {seen}")
        if status != "failed" and finish != end and not (finish is not None and end is not None and _close(finish, end)):
            faults.append(f"job {job}: finish {finish} in jobs.csv, finished line at {end}")
    return faults


def summary_faults(jobs: pl.DataFrame, summary: dict, info: dict, cluster: Cluster, whole: bool) -> list[str]:
    """summary.json recomputed from jobs.csv (and utilization from run.json's GPU time, when
    jobs.csv holds every job the run saw: `whole`)."""
    finished = jobs.filter(pl.col("finish_s").is_not_null())
    started = jobs.filter(pl.col("first_start_s").is_not_null())
    jct, queue = finished["jct_s"].to_numpy(), finished["queue_s"].to_numpy()
    resp = started["responsiveness_s"].to_numpy()
    stat = lambda f, a: float(f(a)) if len(a) else None  # noqa: E731
    pct = lambda q: lambda a: np.percentile(a, q)  # noqa: E731
    want: dict[str, object] = {
        "jobs_tracked": jobs.height,
        "jobs_finished": finished.height,
        "jobs_started": started.height,
        "jobs_failed": int((jobs["status"] == "failed").sum()),
        "avg_jct_s": stat(np.mean, jct),
        "median_jct_s": stat(np.median, jct),
        "p95_jct_s": stat(pct(95), jct),
        "p99_jct_s": stat(pct(99), jct),
        "avg_responsiveness_s": stat(np.mean, resp),
        "median_responsiveness_s": stat(np.median, resp),
        "avg_queue_s": stat(np.mean, queue),
        "median_queue_s": stat(np.median, queue),
        "p95_queue_s": stat(pct(95), queue),
        "p99_queue_s": stat(pct(99), queue),
        "makespan_s": float(finished["finish_s"].max() - jobs["arrival_s"].min()) if finished.height else None,
        "preemptions": int(jobs["preemptions"].sum()),
        "avg_queue_after_preemption_s": stat(np.mean, finished["queue_after_preemption_s"].to_numpy()),
        "avg_comm_s": stat(np.mean, finished["comm_s"].to_numpy()),
        "total_comm_s": float(finished["comm_s"].sum()),
        **{f"{tier}_starts": int(jobs[f"{tier}_starts"].sum()) for tier in ("machine", "rack", "network")},
        "end_s": info["end_s"],
    }
    span = info["end_s"] - (jobs["arrival_s"].min() if jobs.height else 0.0)
    if whole and span > 0:
        want["utilization"] = info["busy_gpu_s"] / (cluster.n_gpus * span)
    faults = [
        f"summary {key}: {summary.get(key)!r}, jobs.csv gives {value!r}"
        for key, value in want.items()
        if not (value is None and summary.get(key) is None)
        and (value is None or summary.get(key) is None or not _close(summary[key], value))
    ]
    if summary.get("utilization") is not None and not 0 <= summary["utilization"] <= 1 + REL:
        faults.append(f"summary utilization {summary['utilization']} outside [0, 1]")
    return faults


def _close(x, y, scale: float = 0.0) -> bool:
    if x is None or y is None:
        return x is y
    return abs(x - y) <= REL * max(abs(x), abs(y), abs(scale), 1.0)


# --- every shipped graph ------------------------------------------------------------------------
def sharing_in(outputs: RunOutputs) -> bool:
    """Whether some element of the run was set to share GPUs between jobs."""
    return any(args.get("space_sharing") for args in outputs.info["arguments"].values())


# Schedulers that may put one job on GPUs of several types (docs/semantics.md, "Progress").
MIXED_TYPES = ("Pollux", "Ones")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each shipped graph run once into a folder of its own (on first use): outputs, time limit."""
    made: dict[str, tuple[RunOutputs, float, Path]] = {}

    def get(name: str) -> tuple[RunOutputs, float, Path]:
        if name not in made:
            out = tmp_path_factory.mktemp(name.removesuffix(".sched"))
            outputs, until = run_into(name, out)
            made[name] = (outputs, until, out)
        return made[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_graph_keeps_the_run_invariants(runs, name):
    outputs, _, _ = runs(name)
    assert outputs.jobs.height > 0 and outputs.record.height > 0
    graph_text = (GRAPHS / name).read_text()
    one_type = not any(f"{cls}(" in graph_text or f"> {cls} " in graph_text for cls in MIXED_TYPES)
    per_gpu = 2 if sharing_in(outputs) else 1
    assert holding_faults(outputs.record, outputs.cluster, per_gpu, one_type) == []
    bounded = bounded_jobs(outputs)
    assert job_faults(outputs.jobs, bounded) == []
    assert record_faults(outputs.jobs, outputs.record) == []
    whole = outputs.info["arguments"][metrics_sink(outputs.info)].get("track") is None
    assert summary_faults(outputs.jobs, outputs.summary, outputs.info, outputs.cluster, whole) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_graph_run_twice_gives_the_same_bytes(runs, name, tmp_path):
    # The second run through the command line, as a user runs it: the same files, byte for byte.
    _, until, first = runs(name)
    assert main(["run", str(GRAPHS / name), "--until", f"{until}s", "--out", str(tmp_path / "again"), "--quiet"]) == 0
    assert byte_faults(first, tmp_path / "again") == []


def byte_faults(first: Path, second: Path) -> list[str]:
    """The reports of two runs (jobs.csv and summary.json among them) that differ in a byte."""
    reports = json.loads((first / "run.json").read_text())["reports"]
    if json.loads((second / "run.json").read_text())["reports"] != reports:
        return ["the two runs wrote different reports"]
    files = [file for named in reports.values() for file in named.values()]
    return [f"{file} differs" for file in files if (first / file).read_bytes() != (second / file).read_bytes()]


# --- each checker catches what it is for --------------------------------------------------------
def launch(t: float, job: int, machine: int, gpus: int, state: str = "running", reason: str = "launched") -> dict:
    return {"t_s": t, "job_id": job, "state": state, "reason": reason, "a": machine, "b": gpus, "c": 1}


def test_holding_catches_a_machine_a_type_and_the_cluster_overfilled():
    cluster = Cluster.parse("2x4:V100")
    record = pl.DataFrame([launch(0.0, 1, 0, 3), launch(0.0, 2, 1, 4), launch(300.0, 3, 0, 2)])
    faults = holding_faults(record, cluster)
    assert any("machine 0 holds at least 5" in f for f in faults)
    assert any("GPU type V100 holds 9" in f for f in faults) and any("jobs hold 9 GPUs" in f for f in faults)
    # Job 1 finishing first frees its GPUs: then all fits, also two jobs to a GPU when shared.
    freed = pl.concat([record[:2], pl.DataFrame([launch(120.5, 1, 0, 0, "finished", "finished")]), record[2:]])
    assert holding_faults(freed, cluster) == []
    assert holding_faults(record, cluster, per_gpu=2) == []
    again = pl.DataFrame([launch(0.0, 1, 0, 1), launch(300.0, 1, 1, 1)])
    assert holding_faults(again, cluster) == ["t=300.0: job 1 launched while it still holds GPUs"]


def test_job_checks_catch_times_out_of_order_a_wrong_jct_and_a_job_too_fast(runs):
    outputs = runs("las.sched")[0]
    jobs, bounded = outputs.jobs, bounded_jobs(outputs)
    assert job_faults(jobs, bounded) == []
    job = jobs.filter(pl.col("finish_s").is_not_null())["job_id"][0]
    this = pl.col("job_id") == job
    set_ = lambda column, value: jobs.with_columns(pl.when(this).then(value).otherwise(pl.col(column)).alias(column))  # noqa: E731
    assert any("before its arrival" in f for f in job_faults(set_("first_start_s", pl.col("arrival_s") - 1)))
    assert any("before its first start" in f for f in job_faults(set_("finish_s", pl.col("first_start_s") - 1)))
    assert any("not finish - arrival" in f for f in job_faults(set_("jct_s", pl.col("jct_s") + 1)))
    assert any("from first start to finish" in f for f in job_faults(set_("run_s", pl.col("run_s") * 2)))
    faster = {**bounded, job: float(jobs.filter(this)["run_s"][0]) * 1.01}
    assert [f for f in job_faults(jobs, faster) if "at its fastest" in f] != []


def test_record_and_summary_checks_catch_a_moved_finish_and_a_wrong_average(runs):
    outputs = runs("las.sched")[0]
    record, jobs, summary, info = outputs.record, outputs.jobs, outputs.summary, outputs.info
    assert record_faults(jobs, record) == [] and summary_faults(jobs, summary, info, outputs.cluster, True) == []
    finished = pl.col("state") == "finished"
    later = record.with_columns(pl.when(finished).then(pl.col("t_s") + 1).otherwise(pl.col("t_s")).alias("t_s"))
    assert any("finished line at" in f for f in record_faults(jobs, later))
    for key in ("avg_jct_s", "jobs_finished", "preemptions", "utilization", "p99_queue_s"):
        wrong = {**summary, key: summary[key] + 1}
        assert any(f.startswith(f"summary {key}:") for f in summary_faults(jobs, wrong, info, outputs.cluster, True)), key


def test_byte_comparison_catches_another_seed(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=4/h, jobs=30, seed=0);\nsrc -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;\n'
    )
    for out, seed in (("a", 0), ("b", 0), ("c", 1)):
        assert main(["run", str(graph), "--set", f"src.seed={seed}", "--out", str(tmp_path / out), "--quiet"]) == 0
    assert byte_faults(tmp_path / "a", tmp_path / "b") == []
    assert byte_faults(tmp_path / "a", tmp_path / "c") == ["jobs.csv differs", "summary.json differs"]
