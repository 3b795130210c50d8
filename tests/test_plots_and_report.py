"""`roundhouse plot` and `roundhouse report`: figures of a run's or a sweep's output folder,
checked on hand-built folders (where every number is known) and on real runs."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.sweep import point_text
from roundhouse.tools.cli import main
from roundhouse.tools.outputs import NOT_VARIED, open_folder
from roundhouse.tools.plots import busy_gpus, metric_bands, recorded_busy_gpus

HEADER = "job_id,arrival_s,first_start_s,finish_s,jct_s,queue_s,responsiveness_s,run_s,gpus,preemptions,launches,service_gpu_s,model,batch_size,duration_s,status"
# Five jobs on an 8-GPU cluster, a run that stopped at 200 s. Job 2 still runs at the end, job 3
# never started; jobs 0, 2 and 4 change the count at the same instant (100 s). Job 1 was
# preempted and held its GPU for 50 of the 100 s from its first start to its finish.
JOBS = """\
0,0.0,0.0,100.0,100.0,0.0,0.0,100.0,2,0,1,200.0,,,100.0,finished
1,10.0,50.0,150.0,140.0,90.0,40.0,50.0,1,1,2,50.0,,,50.0,finished
2,20.0,100.0,,,,80.0,100.0,4,0,1,400.0,,,500.0,running
3,30.0,,,,,,0.0,8,0,0,0.0,,,50.0,waiting
4,60.0,100.0,180.0,120.0,40.0,40.0,80.0,1,0,1,80.0,,,80.0,finished
"""


TINY = """\
round = 60s;
cluster = "1x2:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;
"""


def hand_run(folder, jobs: str = JOBS, sink: str | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    prefix = f"{sink}-" if sink else ""
    (folder / f"{prefix}jobs.csv").write_text(HEADER + "\n" + jobs)
    summary = {
        "jobs_tracked": 5,
        "jobs_finished": 3,
        "avg_jct_s": 120.0,
        "utilization": 0.5,
        "makespan_s": 180.0,
        "preemptions": 1,
    }
    (folder / f"{prefix}summary.json").write_text(json.dumps(summary))
    info = {"graph": "nowhere.sched", "cluster": "8 GPUs on 2 nodes (2x4:V100)", "rounds": 20, "end_s": 200.0, "stop_reason": "x"}
    (folder / "run.json").write_text(json.dumps(info))
    return folder


def is_png(data: bytes) -> bool:
    """A whole PNG picture of some size (Pillow decodes every pixel)."""
    from io import BytesIO

    from PIL import Image

    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    picture = Image.open(BytesIO(data))
    picture.load()
    return picture.format == "PNG" and picture.width > 200 and picture.height > 100


def is_svg(data: bytes) -> bool:
    """Well-formed XML whose root is an SVG element with drawn paths."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(data)
    return root.tag == "{http://www.w3.org/2000/svg}svg" and len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 5


# --- the series the figures draw ----------------------------------------------------------------


def test_busy_gpus_on_a_hand_computed_run(tmp_path):
    run = open_folder(str(hand_run(tmp_path / "run")))
    times, busy = busy_gpus(run.jobs, run.end_s)
    # 0: job 0 (2); 50: + half of job 1's GPU (2.5); 100: - job 0, + job 2 and 4 (5.5);
    # 150: - job 1 (5); 180: - job 4 (4); 200: job 2 counted to the run's end (0). Job 3 never
    # held a GPU.
    assert times.tolist() == [0.0, 50.0, 100.0, 150.0, 180.0, 200.0]
    assert busy.tolist() == [2.0, 2.5, 5.5, 5.0, 4.0, 0.0]
    assert run.cluster_gpus == 8


@pytest.mark.parametrize("policy", ["Fifo", "Las"])
def test_busy_gpus_of_a_real_run_add_up_to_its_measured_utilization(tmp_path, policy):
    """The GPU time under the curve is the simulator's own busy GPU time, with preemptions
    (LAS on two GPUs time-shares ten jobs) or without (FIFO)."""
    rows = [{"job_id": i, "arrival_s": 30.0 * i, "gpus": 1 + i % 2, "duration_s": 400.0 + 90 * i} for i in range(10)]
    pl.DataFrame(rows).write_csv(tmp_path / "trace.csv")
    graph = tmp_path / "g.sched"
    graph.write_text(TINY.replace("Las", policy))
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    run = open_folder(str(tmp_path / "out"))
    assert (run.jobs["preemptions"].sum() > 0) == (policy == "Las") and run.jobs["finish_s"].null_count() == 0
    times, busy = busy_gpus(run.jobs, run.end_s)
    area = float(np.sum(np.diff(times) * busy[:-1]))
    span = run.summary["end_s"] - 0.0  # the first job arrives at 0
    assert area / (2 * span) == pytest.approx(run.summary["utilization"], rel=1e-9)
    assert busy[-1] == pytest.approx(0.0, abs=1e-9)
    if policy == "Fifo":
        assert set(busy.tolist()) <= {0.0, 1.0, 2.0}
    # From the run's explanation record the curve is exact: whole GPUs, never more than the
    # cluster's two, with the same area.
    exact = recorded_busy_gpus(pl.read_parquet(tmp_path / "out" / "explain.parquet"), run.jobs, run.end_s)
    assert exact is not None
    times, busy = exact
    assert set(busy.tolist()) <= {0.0, 1.0, 2.0} and busy[-1] == 0.0
    assert float(np.sum(np.diff(times) * busy[:-1])) / (2 * span) == pytest.approx(run.summary["utilization"], rel=1e-9)


def test_the_recorded_curve_gives_way_when_the_record_does_not_account_for_the_jobs(tmp_path):
    run = open_folder(str(hand_run(tmp_path / "run")))
    record = pl.DataFrame(
        {"t_s": [0.0], "job_id": [0], "state": ["running"], "reason": ["launched"], "a": [0], "b": [1], "c": [1]}
    )  # job 0 held 2 GPUs (jobs.csv), not 1
    assert recorded_busy_gpus(record, run.jobs, run.end_s) is None


def with_points(rows, varied) -> list[dict]:
    """The rows with each run's `point`, its `varied` names and values, as a sweep records it."""
    return [{**row, "point": point_text({n: row[n] for n in varied if row.get(n) is not None})} for row in rows]


def store_of(folder, rows, varied) -> None:
    """A sweep's results store, one Parquet file per row, as `sweep --out` writes it."""
    from roundhouse.runtime.results_store import ResultsStore

    store = ResultsStore(folder / "results", labels=varied)
    store.folder.mkdir(parents=True)
    for i, row in enumerate(with_points(rows, varied)):
        store.write({"key": f"{i:064d}", "seed": 0, **row})


def sweep_csv(folder, rows, varied) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(with_points(rows, varied)).write_csv(folder / "summary.csv")


def test_load_bands_are_the_mean_and_a_95_percent_interval_over_seeds(tmp_path):
    rows = []
    for policy, shift in (("fifo", 0.0), ("las", 10.0)):
        for rate, base in (("16/h", 300.0), ("4/h", 100.0), ("8/h", 200.0)):
            for seed, noise in enumerate((-1.0, 0.0, 1.0)):
                rows.append(
                    {"order": policy, "arrivals.rate": rate, "seed": seed, "avg_jct_s": base + shift + noise, "utilization": 0.5}
                )
    sweep_csv(tmp_path / "sweep", rows, ("order", "arrivals.rate"))
    sweep = open_folder(str(tmp_path / "sweep"))
    assert sweep.labels == ("order", "arrivals.rate", "seed")
    bands, axis = metric_bands(sweep, "avg_jct_s", "arrivals.rate")
    assert axis.unit == "per hour" and not axis.categorical
    fifo = bands.filter(pl.col("series") == "order=fifo")
    assert fifo["x"].to_list() == ["4/h", "8/h", "16/h"]  # by rate, not as written
    assert fifo["position"].to_list() == pytest.approx([4.0, 8.0, 16.0])
    assert fifo["mean"].to_list() == pytest.approx([100.0, 200.0, 300.0])
    # Three seeds, standard deviation 1: half-width t(0.975, 2) / sqrt(3) = 4.3027 / 1.7321.
    half = 4.302653 / 3**0.5
    assert (fifo["high"] - fifo["mean"]).to_list() == pytest.approx([half] * 3, rel=1e-5)
    assert (fifo["mean"] - fifo["low"]).to_list() == pytest.approx([half] * 3, rel=1e-5)
    assert bands.filter(pl.col("series") == "order=las")["mean"].to_list() == pytest.approx([110.0, 210.0, 310.0])
    assert set(bands["runs"].to_list()) == {3}


def test_load_bands_stop_where_the_metric_can_go(tmp_path):
    # Two seeds far apart: Student's interval (t = 12.7 with one degree of freedom) reaches below
    # 0 and above 100% utilization, and below a JCT of 0 s; the band stops at what can be.
    rows = [
        {"arrivals.rate": "4/h", "seed": 0, "utilization": 0.02, "avg_jct_s": 10.0},
        {"arrivals.rate": "4/h", "seed": 1, "utilization": 0.30, "avg_jct_s": 100.0},
        {"arrivals.rate": "8/h", "seed": 0, "utilization": 0.95, "avg_jct_s": 50.0},
        {"arrivals.rate": "8/h", "seed": 1, "utilization": 0.99, "avg_jct_s": 52.0},
    ]
    sweep_csv(tmp_path / "sweep", rows, ("arrivals.rate",))
    sweep = open_folder(str(tmp_path / "sweep"))
    util, _ = metric_bands(sweep, "utilization")
    assert util["mean"].to_list() == pytest.approx([0.16, 0.97])
    assert util["low"][0] == 0.0 and util["high"].to_list() == [1.0, 1.0]
    assert util["low"][1] == pytest.approx(0.97 - 12.7062 * 0.04 / 2**0.5 / 2**0.5, rel=1e-4)  # (as computed)
    jct, _ = metric_bands(sweep, "avg_jct_s")
    assert jct["low"][0] == 0.0 and jct["high"][0] > 100.0
    assert main(["plot", str(tmp_path / "sweep"), "--metric", "utilization", "-o", str(tmp_path / "u.svg")]) == 0


def test_a_figures_notes_stay_inside_it(tmp_path):
    # A sweep that did not finish (a results store, no summary.csv) says so under the title, in
    # lines the figure's width holds: a note longer than that is cut off at the picture's edge.
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from roundhouse.tools.plots import figure

    store = tmp_path / "sweep" / "results"
    store.mkdir(parents=True)
    rows = [{"arrivals.rate": r, "seed": s, "avg_jct_s": 100.0 + s, "status": "ok"} for r in ("4/h", "8/h") for s in (0, 1)]
    for i, row in enumerate(with_points(rows, ("arrivals.rate",))):
        pl.DataFrame([row]).with_columns(key=pl.lit(f"k{i}")).write_parquet(store / f"k{i}.parquet")
    fig = figure(open_folder(str(tmp_path / "sweep")), "load")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    title = fig.axes[0]._left_title
    assert "incomplete: the sweep did not finish" in title.get_text()
    assert title.get_window_extent(canvas.get_renderer()).x1 <= fig.bbox.x1


def test_one_seed_per_point_draws_no_band_and_words_sit_in_order(tmp_path):
    rows = [{"order": o, "avg_jct_s": v} for o, v in (("las", 5.0), ("fifo", 7.0), ("srtf", 6.0))]
    sweep_csv(tmp_path / "sweep", rows, ("order",))
    bands, axis = metric_bands(open_folder(str(tmp_path / "sweep")))
    assert axis.categorical and bands["x"].to_list() == ["las", "fifo", "srtf"]
    assert (bands["low"] == bands["mean"]).all() and (bands["high"] == bands["mean"]).all()


# --- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jct-cdf", "utilisation", "gantt"])
@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot_a_run(tmp_path, kind, suffix):
    run = hand_run(tmp_path / "run")
    out = tmp_path / f"{kind}.{suffix}"
    assert main(["plot", str(run), "--kind", kind, "-o", str(out)]) == 0
    data = out.read_bytes()
    assert is_png(data) if suffix == "png" else is_svg(data)


def test_plot_of_a_run_defaults_to_the_jct_cdf_and_is_the_same_every_time(tmp_path):
    run = hand_run(tmp_path / "run")
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    assert main(["plot", str(run), "-o", str(a)]) == 0
    assert main(["plot", str(run), "--kind", "jct-cdf", "-o", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes() and b"JCT CDF" in a.read_bytes()


def test_plot_reads_the_jobs_of_a_graph_with_several_sinks(tmp_path):
    run = hand_run(tmp_path / "run", sink="report")
    out = tmp_path / "g.png"
    assert main(["plot", str(run), "--kind", "gantt", "-o", str(out)]) == 0
    assert is_png(out.read_bytes())


def test_plot_a_sweep_from_its_summary_and_from_a_results_store(tmp_path):
    rows = [
        {"arrivals.rate": r, "seed": s, "avg_jct_s": 100.0 * (i + 1) + s} for i, r in enumerate(("4/h", "8/h")) for s in range(3)
    ]
    sweep_csv(tmp_path / "sweep", rows, ("arrivals.rate",))
    out = tmp_path / "load.svg"
    assert main(["plot", str(tmp_path / "sweep"), "-o", str(out)]) == 0
    assert is_svg(out.read_bytes()) and b"avg_jct_s against arrivals.rate" in out.read_bytes()

    store = tmp_path / "store" / "results"
    store.mkdir(parents=True)
    rows = with_points(rows, ("arrivals.rate",))
    parts = [pl.DataFrame(rows[:3]).with_columns(status=pl.lit("ok")), pl.DataFrame(rows[3:]).with_columns(status=pl.lit("ok"))]
    failed = pl.DataFrame(
        [{"arrivals.rate": "8/h", "seed": 9, "avg_jct_s": None, "status": "error", "error": "boom", "point": "arrivals.rate=8/h"}]
    )
    late = pl.DataFrame(
        [{"arrivals.rate": "8/h", "seed": 8, "avg_jct_s": 1e9, "status": "timeout", "point": "arrivals.rate=8/h"}]
    )
    for i, part in enumerate([*parts, failed, late]):  # (each run with its key, as a sweep stores it)
        keys = pl.Series("key", [f"{i}-{j}" for j in range(part.height)])
        part.with_columns(keys).write_parquet(store / f"part-{i}.parquet")
    sweep = open_folder(str(tmp_path / "store"))
    assert sweep.failed == 2 and sweep.table.height == 6 and sweep.labels == ("arrivals.rate", "seed")
    out = tmp_path / "load.png"
    assert main(["plot", str(tmp_path / "store"), "--kind", "load", "-o", str(out)]) == 0
    assert is_png(out.read_bytes())


@pytest.mark.parametrize(
    "make, argv, words, report_too",
    [
        (lambda p: p.mkdir(), [], "neither a run's folder", True),
        (lambda p: p.write_text("x"), [], "not a folder", True),
        (lambda p: None, [], "no such folder", True),
        (lambda p: hand_run(p), ["--kind", "histogram"], "--kind histogram: unknown kind", False),
        (lambda p: hand_run(p), ["--kind", "load"], "needs a sweep's folder", False),
        (lambda p: hand_run(p, jobs=""), [], "the run has no jobs", False),  # (report: tests/test_cli_report_empty.py)
        (
            lambda p: hand_run(p, jobs="0,0.0,,,,,,0.0,1,0,0,0.0,,,5.0,waiting\n"),
            ["--kind", "utilisation"],
            "no job started",
            False,
        ),
        (lambda p: hand_run(p, jobs="0,0.0,,,,,,0.0,1,0,0,0.0,,,5.0,waiting\n"), [], "no job finished", False),
        (lambda p: (hand_run(p), (p / "run.json").write_text("{not json")), [], "run.json:1: not valid JSON", True),
        (lambda p: (hand_run(p), (p / "jobs.csv").unlink()), [], "no jobs.csv", True),
        (lambda p: (hand_run(p), (p / "jobs.csv").write_text("a,b\n1,2\n")), [], "no column 'job_id'", True),
        # A row cut short (the last one, say): named, not drawn as if whole.
        (
            lambda p: hand_run(p, jobs=JOBS + "5,70.0,75.0,90.0,20.0,0.0,5.0,15.0\n"),
            [],
            "jobs.csv:7: a row cut short",
            True,
        ),
        (
            lambda p: (hand_run(p), (p / "run.json").write_text('{"graph": 5, "end_s": 200.0}')),
            [],
            "run.json: 'graph' should be a string, not 5",
            True,
        ),
        (
            lambda p: (hand_run(p), (p / "run.json").write_text('{"end_s": "soon"}')),
            [],
            "run.json: 'end_s' should be a number, not \"soon\"",
            True,
        ),
        # A run of no length: nothing to draw against time (no matplotlib warning).
        (
            lambda p: (
                hand_run(p, jobs="0,0.0,0.0,,,,0.0,0.0,1,0,1,0.0,,,5.0,running\n"),
                (p / "run.json").write_text('{"end_s": 0.0}'),
            ),
            ["--kind", "utilisation"],
            "the run lasted 0 s",
            False,
        ),
        (
            lambda p: (
                hand_run(p, jobs="0,0.0,0.0,,,,0.0,0.0,1,0,1,0.0,,,5.0,running\n"),
                (p / "run.json").write_text('{"end_s": 0.0}'),
            ),
            ["--kind", "gantt"],
            "the run lasted 0 s",
            False,
        ),
        (lambda p: sweep_csv(p, [{"seed": 0, "avg_jct_s": 1.0}], ()), [], "the sweep varies nothing (one run)", False),
        (
            lambda p: sweep_csv(p, [{"seed": 0, "avg_jct_s": 1.0}, {"seed": 1, "avg_jct_s": 2.0}], ()),
            [],
            "the sweep varies nothing but the seed",
            False,
        ),
        (
            lambda p: sweep_csv(p, [{"x": 1, "avg_jct_s": 1.0}], ("x",)),
            ["--metric", "nope"],
            "--metric nope: not a metric",
            False,
        ),
        (lambda p: sweep_csv(p, [{"x": 1, "avg_jct_s": 1.0}], ("x",)), ["--kind", "gantt"], "is a sweep", False),
        # Each option names the other when given a name of the other kind.
        (
            lambda p: sweep_csv(p, [{"x": 1, "avg_jct_s": 1.0}], ("x",)),
            ["--x", "avg_jct_s"],
            "--x avg_jct_s: a metric, not a name the sweep varied (draw it with --metric avg_jct_s); it varied x",
            False,
        ),
        (
            lambda p: sweep_csv(p, [{"x": 1, "avg_jct_s": 1.0}], ("x",)),
            ["--metric", "x"],
            "--metric x: a name the sweep varied, not a metric (draw against it with --x x); its metrics are avg_jct_s",
            False,
        ),
        # Without each run's point, what was varied is not guessed from the column names.
        (
            lambda p: (p.mkdir(), (p / "summary.csv").write_text("x,jobs_started,avg_jct_s\n1,5,2.0\n")),
            [],
            "no column 'point'",
            True,
        ),
        (
            lambda p: (hand_run(p), (p / "run.json").write_text('{"end_s": -5.0}')),
            [],
            "run.json: 'end_s' should be a number of 0 or more, not -5.0",
            True,
        ),
        (
            lambda p: (hand_run(p), (p / "run.json").write_text('{"end_s": 200.0, "busy_gpu_s": NaN}')),
            [],
            "run.json: 'busy_gpu_s' should be a number of 0 or more, not NaN",
            True,
        ),
        (lambda p: (p.mkdir(), (p / "results").mkdir()), [], "holds no Parquet files", True),
        (
            lambda p: hand_run(p),
            ["--metric", "nosuch", "--x", "nosuch"],
            "--metric nosuch, --x nosuch: only for --kind load",
            False,
        ),
        (lambda p: hand_run(p), ["--kind", "gantt", "--x", "seed"], "--x seed: only for --kind load", False),
        (
            lambda p: store_of(p, [{"x": "1", "status": "error"}, {"x": "2", "status": "timeout"}], ("x",)),
            [],
            "no run of the sweep finished (2 failed)",
            False,
        ),
    ],
)
def test_bad_input_gets_a_message_and_status_2(tmp_path, capsys, make, argv, words, report_too):
    import warnings

    folder = tmp_path / "in"
    make(folder)
    out = tmp_path / "out.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a Python warning would reach the user with our source paths)
        assert main(["plot", str(folder), *argv, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "Traceback" not in err
    assert not out.exists()
    if report_too:  # the report refuses the same folders (it draws every plot it can)
        assert main(["report", str(folder), "-o", str(tmp_path / "r.html")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and not (tmp_path / "r.html").exists()


def test_plot_refuses_a_file_type_it_cannot_write(tmp_path, capsys):
    assert main(["plot", str(hand_run(tmp_path / "run")), "-o", str(tmp_path / "f.pdf")]) == 2
    assert "end the name in .png or .svg" in capsys.readouterr().err


# --- the report ----------------------------------------------------------------------------------


@pytest.fixture
def real_run(tmp_path, monkeypatch):
    """A small LAS run that preempts, written with `run --out` from its own folder (run.json
    names the graph relative to where the run was started)."""
    rows = [{"job_id": i, "arrival_s": 30.0 * i, "gpus": 1 + i % 2, "duration_s": 400.0 + 90 * i} for i in range(10)]
    pl.DataFrame(rows).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "g.sched", "--out", "out"]) == 0
    return tmp_path / "out"


def test_report_of_a_run_embeds_everything(real_run, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(real_run), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count('<figure class="plot"><img') == 3
    assert page.count('src="data:image/png;base64,') == 3 and page.count('src="data:image/svg+xml;base64,') == 1
    assert "average JCT" in page and "2 GPUs on 1 node" in page
    for attribute in ("src=", "href="):  # nothing but data URIs to load
        assert all(part.startswith('"data:') for part in page.split(attribute)[1:])
    assert 'class="note"' not in page


def test_report_says_when_the_graph_is_not_found(tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", str(hand_run(tmp_path / "run")), "-o", str(out)]) == 0
    page = out.read_text()
    assert "nowhere.sched is not found (looked for from " in page and page.count('<figure class="plot"><img') == 3
    assert "relative to the folder the run was started in" in page


def _graph_drawn(page: str) -> str:
    """The report's Graph section: the SVG drawn, decoded, or the note standing in its place."""
    import base64

    section = page[page.index("<h2>Graph</h2>") : page.index("<h2>Summary</h2>")]
    drawn = re.search(r'data:image/svg\+xml;base64,([^"]+)', section)
    return base64.b64decode(drawn.group(1)).decode() if drawn else section


def test_the_report_draws_the_graph_the_run_read_from_wherever_it_is_made(real_run, tmp_path, monkeypatch):
    assert json.loads((real_run / "run.json").read_text())["graph_text"] == TINY
    # Another folder with its own g.sched and trace.csv: the run's graph is drawn, not that one.
    other = tmp_path / "other"
    other.mkdir()
    (other / "g.sched").write_text(TINY.replace("Las", "Fifo"))
    (other / "trace.csv").write_text((tmp_path / "trace.csv").read_text())
    monkeypatch.chdir(other)
    assert main(["report", str(real_run), "-o", "r.html"]) == 0
    drawn = _graph_drawn((other / "r.html").read_text())
    assert ">Las<" in drawn and ">Fifo<" not in drawn
    assert "g.sched, as the run read it" in (other / "r.html").read_text()
    # The folder the run was started in holds the graph the run read, above the run's folder:
    # the files it names are read from there, whichever folder `report` is run from.
    (other / "trace.csv").unlink()
    assert main(["report", str(real_run), "-o", "r.html"]) == 0
    assert ">Las<" in _graph_drawn((other / "r.html").read_text())
    # A file the graph names missing there too is said in a note naming where it was read from.
    (tmp_path / "trace.csv").unlink()
    assert main(["report", str(real_run), "-o", "r.html"]) == 0
    drawn = _graph_drawn((other / "r.html").read_text())
    assert "<svg" not in drawn and f"could not be drawn (read from {tmp_path}, where its file is)" in drawn
    assert f"names no file: {tmp_path / 'trace.csv'}" in drawn


def test_a_run_json_without_the_graphs_text_draws_its_file_as_it_reads_now(real_run, tmp_path, monkeypatch):
    info = json.loads((real_run / "run.json").read_text())
    del info["graph_text"]  # as run.json was written before it kept the text
    (real_run / "run.json").write_text(json.dumps(info))
    assert main(["report", str(real_run), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert ">Las<" in _graph_drawn(page) and "g.sched, as the file reads now, which may differ from what was run" in page
    monkeypatch.chdir(real_run)
    assert main(["report", ".", "-o", str(tmp_path / "r.html")]) == 0
    assert f"g.sched is not found (looked for from {real_run};" in _graph_drawn((tmp_path / "r.html").read_text())


def test_the_same_run_from_another_folder_into_another_writes_the_same_files(real_run, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["run", str(tmp_path / "g.sched"), "--out", "a", "--quiet"]) == 0
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    names = sorted(p.name for p in (elsewhere / "a").iterdir())
    assert "run.json" in names and names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (elsewhere / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_report_of_a_sweep(tmp_path):
    rows = [
        {"arrivals.rate": r, "seed": seed, "avg_jct_s": 10.0 + seed, "utilization": 0.4}
        for seed in (1, 0)
        for r in ("16/h", "4/h")  # listed by the rate as a number, not as the sweep ran them
    ]
    sweep_csv(tmp_path / "sweep", rows, ("arrivals.rate",))
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "sweep"), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count('<figure class="plot"><img') == 2  # avg_jct_s and utilization against the rate
    assert page.count("<tr>") == 1 + len(rows) and "40.0%" in page
    listed = re.findall(r'<tr><td class="">([^<]*)</td><td class="n">([^<]*)</td>', page)
    assert listed == [("4/h", "0"), ("4/h", "1"), ("16/h", "0"), ("16/h", "1")]


def test_report_and_plot_of_a_store_two_sweeps_of_different_names_wrote(tmp_path):
    # The first sweep varied the round, the second a seed of the arrivals: each run has the
    # other's name unset, and ran with the graph's own value of it (neither fixed anything: `set`).
    rows = [
        {"round": r, "arrivals.seed": None, "seed": 0, "avg_jct_s": v, "set": "{}"} for r, v in (("5min", 10.0), ("10min", 12.0))
    ]
    rows += [{"round": None, "arrivals.seed": s, "seed": 0, "avg_jct_s": v, "set": "{}"} for s, v in (("1", 11.0), ("2", 13.0))]
    sweep_csv(tmp_path / "sweep", rows, ("round", "arrivals.seed"))
    sweep = open_folder(str(tmp_path / "sweep"))
    assert sorted(sweep.table["round"].to_list()) == sorted(["5min", "10min", NOT_VARIED, NOT_VARIED])
    bands, axis = metric_bands(sweep, "avg_jct_s", "round")
    assert axis.categorical and set(bands["x"].to_list()) == {"5min", "10min", NOT_VARIED}
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    assert NOT_VARIED.replace("'", "&#x27;") in (tmp_path / "r.html").read_text()
    assert main(["plot", str(tmp_path / "sweep"), "-o", str(tmp_path / "p.png")]) == 0


@pytest.mark.slow
def test_the_report_opens_in_a_headless_browser(real_run, tmp_path):
    import shutil

    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        pytest.fail("Debian's chromium and chromium-driver are required (the README's test command installs them)")
    from io import BytesIO

    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    page = tmp_path / "report.html"
    assert main(["report", str(real_run), "-o", str(page)]) == 0
    # A page that does load something from elsewhere, to show that such loads are seen.
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png"></body></html>')

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,2600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:

        def visit(path) -> list[str]:
            """Open a page; the URLs it asked for besides itself and data URIs."""
            driver.get_log("performance")
            driver.get(path.as_uri())
            driver.execute_script("return document.readyState")
            urls = []
            for entry in driver.get_log("performance"):
                message = json.loads(entry["message"])["message"]
                if message["method"] == "Network.requestWillBeSent":
                    urls.append(message["params"]["request"]["url"])
            return [u for u in urls if u != path.as_uri() and not u.startswith("data:")]

        assert visit(leaky) == ["http://127.0.0.1:9/x.png"]
        assert visit(page) == []
        images = driver.execute_script(
            "return Array.from(document.images).map(i => ({plot: i.closest('figure.plot') !== null, "
            "complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}))"
        )
        plots = [i for i in images if i["plot"]]
        assert len(plots) == 3 and len(images) == 4  # three plots and the graph
        assert all(i["complete"] and i["width"] > 0 and i["height"] > 0 for i in images), images
        resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert [r for r in resources if not r.startswith("data:")] == []
        shot = driver.get_screenshot_as_png()
    finally:
        driver.quit()
    assert is_png(shot)
    picture = Image.open(BytesIO(shot)).convert("RGB")
    colours = picture.getcolors(maxcolors=1 << 20)
    assert picture.width > 500 and colours is not None and len(colours) > 50


def test_a_damaged_file_of_a_results_store_is_named_and_left_out(tmp_path, capsys):
    rows = [{"arrivals.rate": r, "status": "ok", "avg_jct_s": v} for r, v in (("4/h", 10.0), ("8/h", 20.0), ("16/h", 40.0))]
    store_of(tmp_path / "sweep", rows, ("arrivals.rate",))
    damaged = sorted((tmp_path / "sweep" / "results").glob("*.parquet"))[1]
    damaged.write_bytes(b"PAR1 not a whole file")
    assert main(["plot", str(tmp_path / "sweep"), "-o", str(tmp_path / "p.png")]) == 0
    assert f"warning: {damaged}: cannot be read (damaged?)" in capsys.readouterr().err
    assert open_folder(str(tmp_path / "sweep")).table["arrivals.rate"].to_list() == ["4/h", "16/h"]
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    assert f"1 damaged file of the results store left out ({damaged.name})" in (tmp_path / "r.html").read_text()
    for path in (tmp_path / "sweep" / "results").glob("*.parquet"):
        path.write_bytes(b"PAR1 not a whole file")
    assert main(["plot", str(tmp_path / "sweep"), "-o", str(tmp_path / "q.png")]) == 2
    assert "none of its 3 Parquet files can be read" in capsys.readouterr().err


def test_a_varied_cluster_is_an_axis_like_any_other_varied_name(tmp_path):
    rows = [
        {
            "cluster": f'"dally:{racks}"',
            "place.mode": mode,
            "status": "ok",
            "avg_jct_s": 100.0 / racks + extra,
            "utilization": 0.5,
        }
        for racks in (2, 4)
        for mode, extra in (("no_wait", 1.0), ("fully_consolidated", 0.0))
    ]
    store_of(tmp_path / "sweep", rows, ("cluster", "place.mode"))
    sweep = open_folder(str(tmp_path / "sweep"))
    assert set(sweep.labels) == {"cluster", "place.mode", "seed"}
    bands, axis = metric_bands(sweep, "avg_jct_s", "cluster")
    assert axis.categorical and bands.height == 4 and set(bands["runs"]) == {1}  # nothing pooled across clusters
    bands, _ = metric_bands(sweep, "avg_jct_s", "place.mode")
    assert sorted(bands["series"].unique()) == ['cluster="dally:2"', 'cluster="dally:4"']
    assert main(["plot", str(tmp_path / "sweep"), "--x", "cluster", "-o", str(tmp_path / "p.png")]) == 0
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "<th>cluster</th>" in page and page.count("dally:4") == 2


def test_a_resized_job_is_drawn_with_the_gpu_time_it_held_within_the_cluster(tmp_path):
    # 8 GPUs. Job 0 asked for 1 GPU and, grown, held 600 GPU-seconds over 0-100 s (6 on
    # average); job 1 held its 4 GPUs over 50-150 s. Spread, 50-100 s would hold 10: the 2
    # above the cluster go into 100-150 s, where 4 are free.
    jobs = "0,0.0,0.0,100.0,100.0,0.0,0.0,100.0,1,0,1,600.0,,,100.0,finished\n"
    jobs += "1,50.0,50.0,150.0,100.0,0.0,0.0,100.0,4,0,1,400.0,,,100.0,finished\n"
    run = open_folder(str(hand_run(tmp_path / "run", jobs=jobs)))
    times, busy = busy_gpus(run.jobs, run.end_s)
    assert times.tolist() == [0.0, 50.0, 100.0, 150.0] and busy.tolist() == [6.0, 10.0, 4.0, 0.0]
    times, busy = busy_gpus(run.jobs, run.end_s, run.cluster_gpus)
    assert busy.tolist() == [6.0, 8.0, 6.0, 0.0]
    assert main(["plot", str(tmp_path / "run"), "--kind", "utilisation", "-o", str(tmp_path / "u.svg")]) == 0
    assert b"1 preempted or resized job:" in (tmp_path / "u.svg").read_bytes()


def test_the_utilisation_of_an_elastic_run_adds_up_to_its_measured_utilization(tmp_path):
    """Pollux grows and shrinks jobs: their requested `gpus` say little of what they held."""
    from tests.conftest import REPO

    out = tmp_path / "out"
    assert main(["run", str(REPO / "graphs" / "pollux.sched"), "--set", "arrivals.jobs=12", "--out", str(out)]) == 0
    run = open_folder(str(out))
    record = pl.read_parquet(out / "explain.parquet")
    assert recorded_busy_gpus(record, run.jobs, run.end_s) is None  # (the record holds no resizes)
    times, busy = busy_gpus(run.jobs, run.end_s, run.cluster_gpus)
    span = run.summary["end_s"] - float(run.jobs["arrival_s"].min())
    area = float(np.sum(np.diff(times) * busy[:-1]))
    assert area / (run.cluster_gpus * span) == pytest.approx(run.summary["utilization"], rel=1e-9)
    assert busy.max() <= run.cluster_gpus + 1e-9 and busy.min() >= -1e-9


# --- review: the utilisation of a tracked sink, a damaged record, every sink in the report ---


@pytest.fixture
def tracked_run(tmp_path, monkeypatch):
    """The TINY LAS run (it preempts) with a sink that tracks only jobs 2 to 5."""
    rows = [{"job_id": i, "arrival_s": 30.0 * i, "gpus": 1 + i % 2, "duration_s": 400.0 + 90 * i} for i in range(10)]
    pl.DataFrame(rows).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(TINY.replace("JobMetrics", "JobMetrics(track=2..6)"))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "g.sched", "--out", "out"]) == 0
    return tmp_path / "out"


def _drawn_lines(fig):
    [ax] = fig.axes
    return {line.get_label(): line for line in ax.get_lines()}


def test_the_utilisation_of_a_tracked_sink_is_every_jobs_from_the_record(tracked_run):
    from roundhouse.tools.plots import _record, utilisation_figure

    run = open_folder(str(tracked_run))
    assert run.jobs.height == 4 and run.busy_gpu_s > 0
    exact = recorded_busy_gpus(_record(run), run.jobs, run.end_s, run.busy_gpu_s)
    assert exact is not None
    times, busy = exact
    area = float(np.sum(np.diff(np.append(times, run.end_s)) * busy))
    assert area == pytest.approx(run.busy_gpu_s, rel=1e-9)
    assert area / (2 * run.end_s) == pytest.approx(run.summary["utilization"], rel=1e-9)  # (the first job arrives at 0)
    lines = _drawn_lines(utilisation_figure(run))
    assert "GPUs held" in lines and any(label.startswith("measured average") for label in lines)


def test_without_the_record_a_tracked_sinks_curve_says_whose_it_is(tracked_run):
    from roundhouse.tools.plots import utilisation_figure

    (tracked_run / "explain.parquet").unlink()
    fig = utilisation_figure(open_folder(str(tracked_run)))
    lines = _drawn_lines(fig)
    assert "GPUs held by the tracked jobs" in lines
    assert not any(label.startswith("measured average") for label in lines)  # (the run's, not the curve's)
    # Both notes apply (LAS preempted some of the jobs): each on its own line under the title.
    title, *notes = fig.axes[0].get_title(loc="left").split("\n")
    assert title == "GPU utilisation · g.sched" and fig.axes[0].get_title(loc="right") == ""
    assert notes[0] == "only the 4 jobs jobs.csv tracks"
    assert re.fullmatch(r"\d+ preempted or resized jobs: their GPU time spread over first start to finish", notes[1])


def test_a_damaged_record_is_named_and_the_curve_drawn_from_jobs_csv(real_run, tmp_path, capsys):
    record = real_run / "explain.parquet"
    record.write_bytes(record.read_bytes()[:100])
    assert main(["plot", str(real_run), "--kind", "utilisation", "-o", str(tmp_path / "u.png")]) == 0
    assert main(["report", str(real_run), "-o", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {record}: cannot be read as Parquet (" in err and "Traceback" not in err
    assert is_png((tmp_path / "u.png").read_bytes())


TWO_SINKS = """\
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=20, seed=1);
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run :: Launch -> m1 :: JobMetrics;
run -> m2 :: JobMetrics(track=10..20);
"""


def test_the_report_shows_every_sinks_summary_as_run_prints_it(tmp_path, capsys):
    (tmp_path / "two.sched").write_text(TWO_SINKS)
    assert main(["run", str(tmp_path / "two.sched"), "--out", str(tmp_path / "o")]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # (rich wraps long titles)
    assert main(["report", str(tmp_path / "o"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    summary = page[page.index("<h2>Summary</h2>") : page.index("<h2>Plots</h2>")]
    for sink in ("m1", "m2"):
        assert f"<h3>two.sched · {sink} · 8 GPUs on 2 nodes (2x4:V100)</h3>" in summary
        assert f"two.sched · {sink} · 8 GPUs on 2 nodes (2x4:V100)" in printed
    for row in ("CPU utilization", "memory utilization", "average JCT", "preemptions"):
        assert summary.count(f">{row}<") == 2 and row in printed
    assert "From m1's per-job table (m1-jobs.csv)" in page


def test_the_report_says_when_the_summary_is_missing(real_run, tmp_path):
    (real_run / "summary.json").unlink()
    assert main(["report", str(real_run), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "summary.json: not there; the run&#x27;s summary cannot be shown." in page


# --- sweeps as `roundhouse sweep` writes them: labels, grid order, incomplete and failed sweeps ---

SWEPT = """\
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=60, seed=1);
arrivals -> AcceptAll -> JobPool -> order :: Las(service=wall_seconds) -> Consolidated -> Launch -> JobMetrics;
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two sweeps of one graph stopped at 3 h, so that the jobs that started differ from run to
    run: the policy's service measure one way and the other round, at two rates, each with two
    seeds of the arrivals."""
    folder = tmp_path_factory.mktemp("swept")
    (folder / "g.sched").write_text(SWEPT)
    for name, services in (("ahead", "wall_seconds,gpu_seconds"), ("back", "gpu_seconds,wall_seconds")):
        argv = ["sweep", str(folder / "g.sched"), "--vary", f"order.service={services}", "--vary", "arrivals.rate=4/h,16/h"]
        argv += ["--vary", "arrivals.seed=0,1", "--until", "3h", "--workers", "2", "--out", str(folder / name)]
        assert main(argv) == 0
    return folder


def test_what_a_sweep_measured_is_never_taken_for_what_it_varied(swept, tmp_path):
    sweep = open_folder(str(swept / "ahead"))
    assert sweep.labels == ("order.service", "arrivals.rate", "arrivals.seed", "seed")
    assert sweep.table["jobs_started"].n_unique() > 1 and "jobs_started" in sweep.metrics
    bands, axis = metric_bands(sweep, "jobs_started", "arrivals.rate")
    # One line per service measure, each point the mean of the two seeds of the arrivals.
    assert sorted(bands["series"].unique()) == ["order.service=gpu_seconds", "order.service=wall_seconds"]
    assert bands.height == 4 and set(bands["runs"]) == {2} and axis.positions == {"4/h": 4.0, "16/h": 16.0}
    out = tmp_path / "p.svg"
    assert main(["plot", str(swept / "ahead"), "--x", "arrivals.rate", "--metric", "jobs_started", "-o", str(out)]) == 0
    assert b"jobs_started against arrivals.rate" in out.read_bytes()


@pytest.mark.parametrize("name, first", [("ahead", "wall_seconds"), ("back", "gpu_seconds")])
def test_words_are_drawn_and_listed_in_the_order_the_sweep_ran_them(swept, tmp_path, name, first):
    second = {"wall_seconds": "gpu_seconds", "gpu_seconds": "wall_seconds"}[first]
    summary_only = tmp_path / "summary-only"
    summary_only.mkdir()
    (summary_only / "summary.csv").write_bytes((swept / name / "summary.csv").read_bytes())
    for folder in (swept / name, summary_only):  # the results store keeps its runs by key
        _, axis = metric_bands(open_folder(str(folder)), "avg_jct_s", "order.service")
        assert axis.categorical and axis.positions == {first: 0.0, second: 1.0}
        assert main(["report", str(folder), "-o", str(tmp_path / "r.html")]) == 0
        cells = re.findall(r'<tr><td class="">([^<]*)</td>', (tmp_path / "r.html").read_text())
        assert cells == [first] * 4 + [second] * 4


def test_a_sweep_that_did_not_finish_says_so(swept, tmp_path, capsys):
    import shutil

    stopped = tmp_path / "stopped"
    shutil.copytree(swept / "ahead", stopped)
    (stopped / "summary.csv").unlink()
    (stopped / "points.csv").unlink()
    for kept, path in enumerate(sorted((stopped / "results").glob("*.parquet"))):
        if kept >= 3:
            path.unlink()
    assert main(["report", str(stopped), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    said = "the sweep did not finish (no summary.csv); 3 runs are in its results store"
    assert f"Incomplete: {said}" in page and "incomplete" in page[page.index('class="facts"') :].split("</p>")[0]
    assert main(["plot", str(stopped), "--x", "arrivals.rate", "-o", str(tmp_path / "p.svg")]) == 0
    assert f"warning: {stopped}: {said}" in capsys.readouterr().err
    assert b"incomplete: the sweep did not finish" in (tmp_path / "p.svg").read_bytes()
    # A finished sweep whose store has lost a run: summary.csv says how many there were.
    shutil.rmtree(stopped)
    shutil.copytree(swept / "ahead", stopped)
    sorted((stopped / "results").glob("*.parquet"))[0].unlink()
    assert open_folder(str(stopped)).incomplete == "7 of the 8 runs summary.csv lists are in its results store"
    assert open_folder(str(swept / "ahead")).incomplete is None


def test_the_report_of_a_sweep_whose_every_run_failed_says_so(tmp_path):
    rows = [{"x": "1", "status": "error", "error": "boom"}, {"x": "2", "status": "timeout", "error": "timed out"}]
    store_of(tmp_path / "sweep", rows, ("x",))
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    plots = page[page.index("<h2>Plots</h2>") :]
    assert (
        "No run of the sweep finished (2 failed, each listed above with its error): there is nothing to plot" in plots
        and "<img" not in plots
    )


# --- Graphviz's dot missing or failing ---------------------------------------------------------


def _failing_dot(folder):
    """A `dot` that fails as one lacking a format's plugin does."""
    folder.mkdir()
    dot = folder / "dot"
    dot.write_text('#!/bin/sh\necho "Format: \\"svg\\" not recognized. No formats found." >&2\nexit 1\n')
    dot.chmod(0o755)
    return folder


def test_a_failing_dot_is_quoted_by_render_and_noted_by_the_report(real_run, tmp_path, monkeypatch, capsys):
    import os

    monkeypatch.setenv("PATH", f"{_failing_dot(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "g.svg"
    assert main(["render", str(tmp_path / "g.sched"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: Graphviz's 'dot' failed to draw the graph as svg (exit status 1): Format: \"svg\" not recognized"
    )
    assert "Traceback" not in err and not out.exists()
    assert main(["report", str(real_run), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    graph = page[page.index("<h2>Graph</h2>") : page.index("<h2>Summary</h2>")]
    assert "could not be drawn: Graphviz&#x27;s &#x27;dot&#x27; failed" in graph and "not recognized" in graph
    assert page.count('<figure class="plot"><img') == 3


def test_without_dot_render_offers_a_dot_file_and_the_report_a_note(real_run, tmp_path, monkeypatch, capsys):
    (tmp_path / "nothing").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert main(["render", str(tmp_path / "g.sched"), "-o", str(tmp_path / "g.png")]) == 2
    assert f"not installed (apt-get install graphviz); or write the graph as a .dot file (-o {tmp_path / 'g.dot'})" in (
        capsys.readouterr().err
    )
    assert main(["report", str(real_run), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    graph = page[page.index("<h2>Graph</h2>") : page.index("<h2>Summary</h2>")]
    assert "Graphviz&#x27;s &#x27;dot&#x27; program is not installed" in graph and ".dot" not in graph
