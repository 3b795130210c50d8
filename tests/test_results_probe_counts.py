"""Counts in what `plot`, `report` and `explain` write have their digits grouped ("1,200 jobs",
"29,564 preemptions"), as `roundhouse run` prints its rounds and every message writes a count:
checked on a hand-built run folder of more than a thousand jobs, and a hand-built record."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.outputs import open_folder
from roundhouse.tools.plots import figure, figure_bytes
from roundhouse.tools.results import objectives, summary_rows
from tests.conftest import fails

JOBS = 1_200
HEADER = "job_id,arrival_s,first_start_s,finish_s,jct_s,run_s,gpus,preemptions,service_gpu_s"


def big_run(folder, tracked: float = JOBS):
    """A run of 1,200 one-GPU jobs on a 1,024-GPU cluster, each preempted once: it held its GPU
    for 50 of the 100 s from its first start to its finish."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f"{i},{i}.0,{i}.0,{i + 100}.0,100.0,50.0,1,1,50.0" for i in range(JOBS)]
    (folder / "jobs.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    summary = {"jobs_tracked": tracked, "jobs_finished": JOBS, "avg_jct_s": 100.0, "utilization": 0.01, "preemptions": 29564}
    (folder / "summary.json").write_text(json.dumps(summary))
    info = {
        "graph": "nowhere.sched",
        "cluster": "1,024 GPUs on 256 nodes (256x4:V100)",
        "rounds": 12345,
        "end_s": float(JOBS + 100),
        "stop_reason": "every job finished",
    }
    (folder / "run.json").write_text(json.dumps(info))
    return folder


def drawn_texts(fig) -> str:
    """The texts of a figure as its SVG names them (each drawn text is preceded by a comment
    holding it)."""
    return "\n".join(re.findall(r"<!-- (.*?) -->", figure_bytes(fig, "svg").decode()))


def test_a_runs_summary_groups_the_digits_of_its_counts():
    rows = dict(summary_rows({"jobs_finished": 12000, "jobs_tracked": 12345, "preemptions": 29564, "makespan_s": 3600.0}))
    assert rows["jobs finished / tracked"] == "12,000 / 12,345"
    assert rows["preemptions"] == "29,564"
    # (an objective's whole numbers too)
    assert objectives({"slo": {"missed": 12345}}) == [("slo", [("missed", "12,345")])]


@pytest.mark.parametrize(
    "kind, wanted",
    [
        ("jct-cdf", ["1,200 finished jobs"]),
        ("utilisation", ["cluster: 1,024 GPUs", "1,200 preempted or resized jobs"]),
        ("gantt", ["lighter: 1,200 preempted jobs"]),
    ],
)
def test_a_figures_counts_have_their_digits_grouped(tmp_path, kind, wanted):
    texts = drawn_texts(figure(open_folder(str(big_run(tmp_path / "r"))), kind))
    for text in wanted:
        assert text in texts


def test_an_incomplete_runs_counts_have_their_digits_grouped(tmp_path):
    run = open_folder(str(big_run(tmp_path / "r", tracked=2500)))
    assert run.incomplete == "jobs.csv holds 1,200 jobs, but summary.json counts 2,500 (cut short?)"


def test_a_count_that_is_not_whole_keeps_its_fraction(tmp_path):
    # (grouped, not rounded: "counts 1,200" beside "holds 1,200 jobs" would contradict itself)
    run = open_folder(str(big_run(tmp_path / "r", tracked=1200.5)))
    assert run.incomplete == "jobs.csv holds 1,200 jobs, but summary.json counts 1,200.5 (cut short?)"


def test_a_reports_facts_and_summary_group_their_digits(tmp_path, capsys):
    page = tmp_path / "r.html"
    assert main(["report", str(big_run(tmp_path / "r")), "-o", str(page)]) == 0, capsys.readouterr().err
    text = page.read_text()
    assert "12,345 rounds" in text
    assert '<td class="n">1,200 / 1,200</td>' in text and '<td class="n">29,564</td>' in text


def test_a_sweeps_report_groups_the_digits_of_its_counts(tmp_path, capsys):
    sweep = tmp_path / "s"
    sweep.mkdir()
    rows = [
        {"point": f"x={x}", "seed": 0, "x": str(x), "jobs_finished": 1500, "avg_jct_s": 60.0 * x, "preemptions": 29564}
        for x in (1, 2)
    ]
    pl.DataFrame(rows).write_csv(sweep / "summary.csv")
    page = tmp_path / "r.html"
    assert main(["report", str(sweep), "-o", str(page)]) == 0, capsys.readouterr().err
    text = page.read_text()
    assert '<td class="n">1,500</td>' in text and '<td class="n">29,564</td>' in text


def write_record(folder, *rows: tuple):
    """An explain.parquet of `rows` (t_s, job_id, state, reason, a, b, c), said by an element."""
    folder.mkdir(parents=True, exist_ok=True)
    names = ("t_s", "job_id", "state", "reason", "a", "b", "c")
    frame = pl.DataFrame([dict(zip(names, row, strict=True)) for row in rows]).with_columns(
        element=pl.lit("order"), element_class=pl.lit("Las"), ranked_by=pl.lit(""), ranked_by_class=pl.lit("")
    )
    frame.write_parquet(folder / "explain.parquet")
    (folder / "run.json").write_text(json.dumps({"end_s": 9000.0, "stop_reason": "every job finished"}))
    return folder


def test_a_timelines_counts_have_their_digits_grouped(tmp_path, capsys):
    run = write_record(
        tmp_path / "r",
        (0.0, 7, "waiting", "admitted", 0, 0, 0),
        (60.0, 7, "waiting", "ranked_behind", 1500, 1200, 2048),
        (120.0, 7, "held", "held", 3, 12000, 16384),
        (180.0, 7, "waiting", "not_scheduled", 1200, 2048, 0),
        (240.0, 7, "note", "demoted", 2, 1234567, 0),
    )
    assert main(["explain", str(run), "7"]) == 0
    out = capsys.readouterr().out
    assert "1,200 jobs ranked ahead hold GPUs, 2,048 left free" in out
    assert "admitted jobs ask for 12,000 GPUs of a limit of 16,384" in out
    assert "it runs 1,200 jobs and leaves 2,048 GPU(s) idle" in out
    assert "after 1,234,567 GPU-seconds of service" in out


def test_explain_refuses_an_empty_job_id_as_no_id_given(tmp_path, capsys):
    run = write_record(tmp_path / "r", (0.0, 7, "waiting", "admitted", 0, 0, 0))
    err = fails(capsys, "explain", run, " ")
    assert "no job id given" in err and "in the record" not in err


def test_a_negative_job_id_after_the_end_of_options_is_the_job(tmp_path, capsys):
    run = write_record(tmp_path / "r", (0.0, -5, "waiting", "admitted", 0, 0, 0))
    assert main(["explain", str(run), "--", "-5"]) == 0
    assert capsys.readouterr().out.startswith("job -5: 1 change(s)")


def test_explain_warns_of_a_run_json_it_cannot_read(tmp_path, capsys):
    # (without it, a job that had not finished would end its timeline with no word of the run's end)
    run = write_record(tmp_path / "r", (0.0, 7, "waiting", "admitted", 0, 0, 0), (60.0, 7, "running", "launched", 3, 1, 1))
    (run / "run.json").write_text('{"end_s": 9000.0, "stop_')
    assert main(["explain", str(run), "7"]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("job 7: 2 change(s)") and "Traceback" not in got.err
    assert f"warning: {run / 'run.json'}: cannot be read (line 1: " in got.err
    assert "the timeline does not say where the run stopped" in got.err
