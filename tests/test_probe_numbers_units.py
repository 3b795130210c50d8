"""The figures a user reads in `roundhouse run`'s summary, `report` and `plot`, checked against
the numbers they print: a short figure in a long run's unit keeps its value, and an axis drawn
in minutes or hours is not labelled as seconds."""

from __future__ import annotations

import re

import polars as pl
import pytest

from roundhouse.runtime.sweep import point_text
from roundhouse.tools.outputs import open_folder
from roundhouse.tools.plots import load_figure
from roundhouse.tools.results import in_units, summary_rows

# Pollux's graph as shipped (graphs/pollux.sched): a 7.36 h makespan sets hours as the unit,
# and its jobs waited 31.35 s on average (0.0087 h), 29.5 s at the median.
POLLUX = {
    "jobs_tracked": 40,
    "jobs_finished": 40,
    "avg_jct_s": 1520.1244251490302,
    "median_jct_s": 890.6620060599386,
    "p95_jct_s": 3076.2263928548005,
    "p99_jct_s": 14233.900601097557,
    "avg_responsiveness_s": 31.35,
    "avg_queue_s": 17.0,
    "makespan_s": 26481.692820665852,
    "utilization": 0.9549158430976441,
    "preemptions": 0,
}
UNITS = {"h": 3600.0, "min": 60.0, "s": 1.0}


def read_back(text: str) -> float:
    """Seconds, from a figure as the summary prints it ("0.0087 h")."""
    number, unit = re.fullmatch(r"(-?[0-9.]+) (h|min|s)", text).groups()
    return float(number) * UNITS[unit]


@pytest.mark.parametrize("key", ["avg_jct_s", "median_jct_s", "p99_jct_s", "avg_responsiveness_s", "avg_queue_s", "makespan_s"])
def test_each_printed_time_reads_back_within_five_percent(key):
    rows = dict(summary_rows(POLLUX))
    label = {
        "avg_jct_s": "average JCT",
        "median_jct_s": "median JCT",
        "p99_jct_s": "p99 JCT",
        "avg_responsiveness_s": "average responsiveness",
        "avg_queue_s": "average queueing",
        "makespan_s": "makespan",
    }[key]
    shown = rows[label]
    assert shown.endswith(" h"), shown  # (one unit for the table: the makespan's)
    assert read_back(shown) == pytest.approx(POLLUX[key], rel=0.05), shown


def test_a_short_nonzero_time_is_never_printed_as_zero():
    show = in_units(30 * 3600.0)
    assert read_back(show(17.0)) > 0
    assert read_back(show(1.0)) == pytest.approx(1.0, rel=0.05)
    # Figures of two digits or more before the point keep two decimals, as before.
    assert show(122824.5335440249) == "34.12 h" and show(3600.0) == "1.00 h" and show(0.0) == "0.00 h"
    assert show(None) == "—"


def test_a_sweeps_time_axis_is_labelled_in_the_unit_it_is_drawn_in(tmp_path):
    rows = [
        {"round": r, "seed": 0, "avg_responsiveness_s": v, "avg_jct_s": 119126.7, "utilization": 0.5956}
        for r, v in (("5min", 150.5), ("10min", 305.9))
    ]
    folder = tmp_path / "sweep"
    folder.mkdir()
    rows = [{**row, "point": point_text({"round": row["round"]})} for row in rows]
    pl.DataFrame(rows).write_csv(folder / "summary.csv")
    sweep = open_folder(str(folder))
    fig = load_figure(sweep, "avg_responsiveness_s")
    label = fig.axes[0].get_ylabel()
    # Drawn in minutes (150.5 s is 2.51 min): the label names minutes, not the column's seconds.
    drawn = fig.axes[0].lines[0].get_ydata()
    assert list(drawn) == pytest.approx([150.5 / 60, 305.9 / 60])
    assert label == "avg_responsiveness (min)", label
    fig = load_figure(sweep, "utilization")
    assert fig.axes[0].get_ylabel() == "utilization (%)"
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx([59.56, 59.56])
