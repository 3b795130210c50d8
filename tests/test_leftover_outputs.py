"""Small defects left from earlier probes: a result lost on standard output (a full disk) with a
status of 0, a cluster's large counts without thousands separators, the shorthand `2X4:V100`
refused, a track range that caught no job unsaid in summary.json, and a sweep that warned of its
base graph only, whatever --vary changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import polars as pl
import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.cluster import Cluster
from roundhouse.tools.cli import main
from tests.conftest import fails

HEADER = "job_id,arrival_s,gpus,duration_s,model,batch_size\n"
THIRTY = HEADER + "".join(f"{i},{60.0 * i},1,600.0,ResNet-18,16\n" for i in range(30))
FIFO = 'round = 5min;\ncluster = "1x2:V100";\nPoissonSource(rate=4/h, jobs=6, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
TRACKED = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> report :: JobMetrics(track=3000..4000);
"""


def flat(text: str) -> str:
    """Printed text as one line: rich wraps lines at the terminal's width."""
    return " ".join(text.split())


def graph_in(tmp_path, text: str, trace: str = THIRTY):
    (tmp_path / "trace.csv").write_text(trace)
    (tmp_path / "g.sched").write_text(text)
    return tmp_path / "g.sched"


# --- a result lost to a full disk is an error ---


def _to_full_disk(argv: list[str]) -> subprocess.CompletedProcess:
    """`roundhouse ARGV > /dev/full`, as the installed command runs it."""
    code = "import sys; from roundhouse.tools.entry_point import main; sys.exit(main())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-c", code, *map(str, argv)], stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=300
        )


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["run", "{graph}", "--until", "1h"], "the run's summary"),
        (["sweep", "{graph}", "--vary", "seed=1,2", "--workers", "1", "--until", "1h"], "the sweep's table"),
        (["trace", "describe", "{trace}"], "the description of {trace}"),
    ],
    ids=["run", "sweep", "trace-describe"],
)
def test_a_result_only_standard_output_holds_lost_to_a_full_disk_is_an_error(tmp_path, argv, what):
    graph = graph_in(tmp_path, FIFO)
    names = {"graph": graph, "trace": tmp_path / "trace.csv"}
    done = _to_full_disk([a.format(**names) for a in argv])
    assert done.returncode == 2, (done.returncode, done.stderr)
    lost = what.format(**names)
    assert done.stderr.endswith(f"error: standard output: cannot write {lost} (No space left on device)\n"), done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "written"),
    [
        (["run", "{graph}", "--until", "1h", "--out", "{out}"], "summary.json"),
        (["sweep", "{graph}", "--vary", "seed=1,2", "--workers", "1", "--until", "1h", "--out", "{out}"], "summary.csv"),
    ],
    ids=["run", "sweep"],
)
def test_with_out_the_results_are_the_folders_and_a_full_disk_under_standard_output_is_no_error(tmp_path, argv, written):
    """What `--out` holds is the result: the printed summary is only said on the way, as to a
    reader that left (`| head`)."""
    graph = graph_in(tmp_path, FIFO)
    done = _to_full_disk([a.format(graph=graph, out=tmp_path / "o") for a in argv])
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "error" not in done.stderr, done.stderr
    assert (tmp_path / "o" / written).is_file()


# --- a cluster's counts with thousands separators ---


@pytest.mark.parametrize(
    ("spec", "described"),
    [
        ("1600x4:V100", "6,400 GPUs on 1,600 nodes (1600x4:V100)"),
        ("2x4:V100", "8 GPUs on 2 nodes (2x4:V100)"),
        ("1x1:V100", "1 GPU on 1 node (1x1:V100)"),
        ("dally:1000", "64,000 GPUs on 8,000 nodes (8000x8:V100) in 1,000 racks of 8 machines"),
    ],
)
def test_a_clusters_counts_are_written_with_thousands_separators(spec, described):
    assert Cluster.parse(spec).describe().startswith(described), Cluster.parse(spec).describe()


def test_a_large_clusters_description_in_the_printed_summary_and_run_json(tmp_path, capsys):
    graph = graph_in(tmp_path, FIFO)
    assert main(["run", str(graph), "--cluster", "1600x4:V100", "--out", str(tmp_path / "o")]) == 0
    assert "6,400 GPUs on 1,600 nodes (1600x4:V100)" in flat(capsys.readouterr().out)
    info = json.loads((tmp_path / "o" / "run.json").read_text())
    assert info["cluster"] == "6,400 GPUs on 1,600 nodes (1600x4:V100)"


# --- the shorthand with an upper-case X ---


@pytest.mark.parametrize("spec", ["2X4:V100", "2X4", " 2 X 4 : V100 ", "1X2:V100,1x2:P100", "2X4:V100@p3.8xlarge"])
def test_the_shorthand_takes_an_upper_case_x(spec):
    assert Cluster.parse(spec).describe() == Cluster.parse(spec.replace("X", "x")).describe()


def test_a_run_takes_a_cluster_with_an_upper_case_x(tmp_path, capsys):
    graph = graph_in(tmp_path, FIFO)
    assert main(["run", str(graph), "--cluster", "2X4:V100", "--until", "1h"]) == 0
    assert "8 GPUs on 2 nodes (2x4:V100)" in flat(capsys.readouterr().out)


@pytest.mark.parametrize("spec", ["2Y4:V100", "2*4:V100", "X4:V100", "2XX4"])
def test_a_bad_shorthand_is_refused_as_before(tmp_path, capsys, spec):
    graph = graph_in(tmp_path, FIFO)
    err = fails(capsys, "run", graph, "--cluster", spec)
    assert err == (
        f"error: --cluster: bad cluster '{spec}': '{spec}' is not NODESxGPUS[:TYPE][@TOPOLOGY]; write e.g. 32x4:V100, "
        "16x4:V100,16x4:P100, 32x4:V100@p3.8xlarge, 36:36:36 or a .toml file\n"
    ), err


# --- summary.json says what the note says of a track range that caught no job ---


def test_summary_json_says_how_many_jobs_arrived_when_the_track_range_caught_none(tmp_path, capsys):
    graph = graph_in(tmp_path, TRACKED)
    assert main(["run", str(graph), "--out", str(tmp_path / "o")]) == 0
    out = flat(capsys.readouterr().out)
    assert "note: report tracked no job" in out and "the 30 jobs that arrived" in out
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["jobs_tracked"], summary["jobs_arrived"]) == (0, 30)
    # (`report` reads it: every value of a summary is a number or null)
    assert main(["report", str(tmp_path / "o"), "-o", str(tmp_path / "r.html")]) == 0, capsys.readouterr().err


def test_a_summary_whose_track_range_caught_jobs_keeps_its_keys(tmp_path, capsys):
    graph = graph_in(tmp_path, TRACKED.replace("3000..4000", "0..10"))
    assert main(["run", str(graph), "--out", str(tmp_path / "tracked")]) == 0
    graph_in(tmp_path, TRACKED.replace("report :: JobMetrics(track=3000..4000)", "report :: JobMetrics"))
    assert main(["run", str(graph), "--out", str(tmp_path / "all")]) == 0
    for folder in ("tracked", "all"):
        summary = json.loads((tmp_path / folder / "summary.json").read_text())
        assert "jobs_arrived" not in summary and summary["jobs_tracked"] > 0


# --- a sweep warns of each varied graph ---


def _sweep_warnings(tmp_path, capsys, *vary: str) -> list[str]:
    argv = ["sweep", str(tmp_path / "g.sched"), *vary, "--workers", "1", "--until", "1h", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    return [line.partition("warning: ")[2] for line in err.splitlines() if "warning: " in line]


def test_a_sweep_warns_of_a_varied_value_that_makes_the_run_to_no_use(tmp_path, capsys):
    # The base graph (all 30 jobs) has ids in the track range; src.jobs=10 brings none of them.
    graph_in(tmp_path, TRACKED.replace("3000..4000", "20..40"))
    warnings = _sweep_warnings(tmp_path, capsys, "--vary", "src.jobs=10,30")
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("with src.jobs=10: element 'report' (JobMetrics): track=20..40 (ids 20 to 39)")
    assert "names none of the 10 jobs the graph's sources bring (ids 0 to 9)" in warnings[0]


def test_a_sweep_names_the_points_of_each_warning_and_says_once_those_of_every_run(tmp_path, capsys):
    graph_in(tmp_path, TRACKED)
    warnings = _sweep_warnings(tmp_path, capsys, "--vary", "report.track=3000..4000,0..10,5000..6000", "--seeds", "2")
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("with report.track=3000..4000: element 'report' (JobMetrics): track=3000..4000"), warnings
    assert warnings[1].startswith("with report.track=5000..6000: element 'report' (JobMetrics): track=5000..6000"), warnings
    # Each warning of two points (every round varied), said once, naming the value they share.
    warnings = _sweep_warnings(tmp_path, capsys, "--vary", "src.jobs=5,10,30", "--vary", "round=5min,10min")
    assert [w.partition(":")[0] for w in warnings] == ["with src.jobs=5", "with src.jobs=10", "with src.jobs=30"], warnings
    assert all("round=" not in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("runs", "named"),
    [
        ([("1", "a", 0), ("1", "a", 1)], "x=1 y=a"),  # (every seed of the point)
        ([("1", "a", 0)], "x=1 y=a seed=0"),
        ([("1", "a", 0), ("1", "a", 1), ("1", "b", 0), ("1", "b", 1)], "x=1"),
        ([("1", "a", 0), ("1", "a", 1), ("2", "b", 0), ("2", "b", 1)], "x=1 y=a; x=2 y=b"),
    ],
)
def test_the_runs_a_warning_applies_to_are_named_by_their_values(runs, named):
    from roundhouse.tools.sweep_warnings import runs_named

    values = {"x": dict.fromkeys(["1", "2"]), "y": dict.fromkeys(["a", "b"]), "seed": dict.fromkeys(["0", "1"])}
    assert runs_named([{"x": x, "y": y, "seed": seed} for x, y, seed in runs], values) == named


def test_a_sweep_whose_every_run_is_warned_of_alike_says_it_once_plainly(tmp_path, capsys):
    graph_in(tmp_path, TRACKED)
    warnings = _sweep_warnings(tmp_path, capsys, "--vary", "round=5min,10min", "--seeds", "2")
    assert warnings == [w for w in warnings if not w.startswith("with ")] and len(warnings) == 1, warnings
    assert "element 'report' (JobMetrics): track=3000..4000 (ids 3000 to 3999) names none of the 30 jobs" in warnings[0]


def test_the_warnings_leave_a_sweeps_results_as_they_were(tmp_path, capsys):
    """The runs' rows are those of the same runs one at a time (`run`)."""
    graph_in(tmp_path, TRACKED.replace("3000..4000", "20..40"))
    _sweep_warnings(tmp_path, capsys, "--vary", "src.jobs=10,30")
    rows = pl.read_csv(tmp_path / "o" / "summary.csv")
    for jobs in (10, 30):
        out = tmp_path / f"run{jobs}"
        argv = ["run", str(tmp_path / "g.sched"), "--set", f"src.jobs={jobs}", "--until", "1h", "--out", str(out)]
        assert main(argv) == 0
        summary = json.loads((out / "summary.json").read_text())
        row = rows.filter(pl.col("src.jobs") == jobs).row(0, named=True)
        assert {k: row[k] for k in summary} == summary


@pytest.mark.parametrize("text", ["6,400 GPUs on 800 nodes (800x8:V100)", "6400 GPUs on 800 nodes (800x8:V100)"])
def test_plots_read_a_large_clusters_gpu_count_with_or_without_separators(tmp_path, text):
    from roundhouse.tools.outputs.run_folder import RunFolder

    assert RunFolder(tmp_path, {"cluster": text}, pl.DataFrame(), {}, None).cluster_gpus == 6400
    assert RunFolder(tmp_path, {"cluster": Cluster.parse("800x8:V100").describe()}, pl.DataFrame(), {}, None).cluster_gpus == 6400


def test_a_journals_cluster_described_without_separators_is_the_same_cluster(tmp_path):
    from roundhouse.runtime.cluster import described_alike
    from roundhouse.runtime.journal_runs import check_same_run

    now = Cluster.parse("800x8:V100").describe()
    assert described_alike("6400 GPUs on 800 nodes (800x8:V100)", now)
    assert described_alike("1 GPUs on 1 nodes (1x1:V100)", Cluster.parse("1x1:V100").describe())
    assert not described_alike("6400 GPUs on 800 nodes (800x8:V100)", Cluster.parse("800x8:P100").describe())

    class _Journal:
        path = tmp_path / "j.db"

    check_same_run(_Journal(), {"cluster": "6400 GPUs on 800 nodes (800x8:V100)"}, {"cluster": now})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="cluster differs"):
        check_same_run(_Journal(), {"cluster": "6400 GPUs on 800 nodes (800x8:P100)"}, {"cluster": now})  # type: ignore[arg-type]
