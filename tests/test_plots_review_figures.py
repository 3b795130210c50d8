"""Figures drawn as the folder says: names holding `$` drawn as written, a Gantt chart's rows
labelled with their jobs' ids, and the interval of a line of one point seen."""

from __future__ import annotations

import json

import polars as pl
from matplotlib.colors import to_rgb

from roundhouse.runtime.sweep import point_text
from roundhouse.tools.outputs import open_folder
from roundhouse.tools.plots import figure, figure_bytes, gantt_figure, load_figure
from roundhouse.tools.report_cmd import run_page

HEADER = "job_id,arrival_s,first_start_s,finish_s,jct_s,queue_s,responsiveness_s,run_s,gpus,preemptions,launches,service_gpu_s,model,batch_size,duration_s,status"


def a_run(folder, ids, graph: str = "g.sched"):
    """A run on two GPUs in which each job (given by id, in arrival order) ran alone for 100 s."""
    folder.mkdir()
    rows = [
        f"{j},{100.0 * i},{100.0 * i},{100.0 * i + 100},100.0,0.0,0.0,100.0,1,0,1,100.0,,,100.0,finished"
        for i, j in enumerate(ids)
    ]
    (folder / "jobs.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    end = 100.0 * len(ids)
    summary = {"jobs_tracked": len(ids), "jobs_finished": len(ids), "avg_jct_s": 100.0, "utilization": 0.5}
    (folder / "summary.json").write_text(json.dumps(summary))
    info = {"graph": graph, "cluster": "2 GPUs on 1 node (1x2:V100)", "rounds": 5, "end_s": end, "stop_reason": "x"}
    (folder / "run.json").write_text(json.dumps({**info, "busy_gpu_s": end}))
    return folder


def test_a_graph_whose_name_holds_dollars_is_drawn_as_written(tmp_path):
    # matplotlib reads text between two `$` as a TeX formula: `\foo` is none (drawing failed
    # with a traceback), and `x_1` would be drawn x with a 1 below it. Plot and report draw the
    # name as it is.
    run = open_folder(str(a_run(tmp_path / "run", [0, 1], graph="m$\\foo{$ x_1.sched")))
    for kind in ("jct-cdf", "utilisation", "gantt"):
        assert figure_bytes(figure(run, kind), "png").startswith(b"\x89PNG")
    assert "m$\\foo{$ x_1.sched" in run_page(run)
    [ax] = gantt_figure(run).axes
    title = ax._left_title  # (the title stands at the left)
    assert title.get_text() == "Jobs over time · m$\\foo{$ x_1.sched" and not title.get_parse_math()


def test_a_sweeps_value_holding_dollars_is_drawn_as_written(tmp_path):
    rows = [{"trace": f"t$_{i}$.csv", "seed": 0, "avg_jct_s": 100.0 * (i + 1)} for i in range(2)]
    rows = [{**row, "point": point_text({"trace": row["trace"]})} for row in rows]
    (tmp_path / "sweep").mkdir()
    pl.DataFrame(rows).write_csv(tmp_path / "sweep" / "summary.csv")
    fig = load_figure(open_folder(str(tmp_path / "sweep")))
    assert figure_bytes(fig, "png").startswith(b"\x89PNG")
    labels = fig.axes[0].get_xticklabels()
    assert [t.get_text() for t in labels] == ["t$_0$.csv", "t$_1$.csv"] and not any(t.get_parse_math() for t in labels)


def test_the_rows_of_a_long_gantt_chart_are_labelled_with_their_jobs_ids(tmp_path):
    # A sink that tracks jobs 200 to 239: the rows are those jobs, not jobs 0 to 39.
    fig = gantt_figure(open_folder(str(a_run(tmp_path / "run", list(range(200, 240))))))
    fig.canvas.draw()
    [ax] = fig.axes
    shown = {int(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels() if t.get_text()}
    assert len(shown) >= 3
    assert all(text == str(200 + row) for row, text in shown.items())


def test_a_line_of_one_point_shows_its_interval_as_a_bar(tmp_path):
    # LAS at two rates, FIFO at one: FIFO's interval over its three seeds is a bar, not a band
    # with no width.
    rows = [
        {"order": order, "rate": rate, "seed": seed, "avg_jct_s": base + 30.0 * seed}
        for order, rates in (("las", ("4/h", "8/h")), ("fifo", ("4/h",)))
        for rate in rates
        for base in [300.0 if order == "fifo" else 100.0]
        for seed in range(3)
    ]
    rows = [{**row, "point": point_text({"rate": row["rate"], "order": row["order"]})} for row in rows]
    (tmp_path / "sweep").mkdir()
    pl.DataFrame(rows).write_csv(tmp_path / "sweep" / "summary.csv")
    [ax] = load_figure(open_folder(str(tmp_path / "sweep"))).axes
    fifo = [line for line in ax.get_lines() if line.get_label() == "order=fifo"][0]
    [bar] = ax.containers  # (LAS's two points draw a band)
    [segments] = bar.lines[2]
    assert to_rgb(segments.get_color()[0]) == to_rgb(fifo.get_color())
    [[(x0, low), (x1, high)]] = segments.get_segments()
    # Three seeds 300, 330 and 360 s (in minutes: 5, 5.5, 6): mean 5.5 ± t(0.975, 2) · 0.5 / sqrt(3).
    half = 4.302653 * 0.5 / 3**0.5
    assert x0 == x1 and abs(low - (5.5 - half)) < 1e-4 and abs(high - (5.5 + half)) < 1e-4


def test_the_gantt_legend_stands_beside_the_bars_not_over_them(tmp_path):
    # The first jobs' bars run to the top right corner when they last the whole run.
    fig = gantt_figure(open_folder(str(a_run(tmp_path / "run", [0, 1, 2]))))
    fig.canvas.draw()
    [ax] = fig.axes
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
