"""`roundhouse plot` and `report` on what a review found them to get wrong: a summary.json of
wrong types, a sweep in which no job finished, a sink inside a compound, the measured average of
a run whose first job arrives late, the order of summaries and of a figure's lines, and notes
that named the wrong file or said the same thing four times."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.sweep import point_text
from roundhouse.tools.cli import main
from roundhouse.tools.outputs import open_folder
from roundhouse.tools.plots import metric_bands, utilisation_figure

HEADER = "job_id,arrival_s,first_start_s,finish_s,jct_s,queue_s,responsiveness_s,run_s,gpus,preemptions,launches,service_gpu_s,model,batch_size,duration_s,status"
JOBS = """\
0,0.0,0.0,100.0,100.0,0.0,0.0,100.0,2,0,1,200.0,,,100.0,finished
1,10.0,50.0,150.0,140.0,90.0,40.0,50.0,1,1,2,50.0,,,50.0,finished
"""
SUMMARY = {"jobs_tracked": 2, "jobs_finished": 2, "avg_jct_s": 120.0, "utilization": 0.5, "makespan_s": 150.0, "preemptions": 1}

TINY = """\
round = 60s;
cluster = "1x2:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;
"""


def hand_run(folder, summary: dict | str = SUMMARY):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "jobs.csv").write_text(HEADER + "\n" + JOBS)
    (folder / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    info = {"graph": "nowhere.sched", "cluster": "8 GPUs on 2 nodes (2x4:V100)", "rounds": 3, "end_s": 200.0, "stop_reason": "x"}
    (folder / "run.json").write_text(json.dumps(info))
    return folder


def sweep_csv(folder, rows, varied) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{**row, "point": point_text({n: row[n] for n in varied})} for row in rows]
    pl.DataFrame(rows).write_csv(folder / "summary.csv")


def store_of(folder, rows, varied) -> None:
    from roundhouse.runtime.results_store import ResultsStore

    store = ResultsStore(folder / "results", labels=varied)
    store.folder.mkdir(parents=True)
    for i, row in enumerate(rows):
        store.write({"key": f"{i:064d}", "seed": 0, "status": "ok", **row, "point": point_text({n: row[n] for n in varied})})


def notes_of(page: str) -> list[str]:
    """The notes among the report's plots."""
    return re.findall(r'<p class="note">([^<]*)</p>', page[page.index("<h2>Plots</h2>") :])


# --- a summary.json whose values are not numbers --------------------------------------------------


@pytest.mark.parametrize(
    "key, text, kind",
    [
        ("utilization", '"high"', "utilisation"),
        ("utilization", "true", "utilisation"),  # (a bool would be drawn as 100%)
        ("avg_jct_s", "[1]", "jct-cdf"),
        ("makespan_s", "NaN", "jct-cdf"),
        ("jobs_finished", '{"n": 2}', "gantt"),
    ],
)
def test_a_summary_value_of_the_wrong_type_is_named_with_its_file(tmp_path, capsys, key, text, kind):
    summary = json.dumps({k: v for k, v in SUMMARY.items() if k != key})[:-1] + f', "{key}": {text}}}'
    run = hand_run(tmp_path / "run", summary)
    assert main(["plot", str(run), "--kind", kind, "-o", str(tmp_path / "p.png")]) == 2
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and "Traceback" not in "".join(errors)
    for line in errors:
        assert line.startswith(f"error: {run / 'summary.json'}: {key!r} should be a ") and line.endswith(f"not {text}")
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "r.html").exists()


def test_every_sinks_summary_is_checked_not_only_the_drawn_ones(tmp_path, capsys):
    run = hand_run(tmp_path / "run")
    (run / "zz-summary.json").write_text('{"avg_jct_s": "long"}')
    info = json.loads((run / "run.json").read_text())
    info["reports"] = {"a": {"jobs": "jobs.csv", "summary": "summary.json"}, "zz": {"summary": "zz-summary.json"}}
    (run / "run.json").write_text(json.dumps(info))
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 2
    assert f"{run / 'zz-summary.json'}: 'avg_jct_s' should be a number or null, not \"long\"" in capsys.readouterr().err


def test_null_values_and_whole_numbers_are_a_summary_as_it_should_be(tmp_path):
    run = hand_run(tmp_path / "run", {**SUMMARY, "avg_jct_s": None, "preemptions": 0})
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0


# --- a sweep in which no job finished ----------------------------------------------------------


@pytest.mark.parametrize("write", [sweep_csv, store_of])
def test_a_metric_no_run_has_a_value_of_is_refused_for_want_of_values(tmp_path, capsys, write):
    rows = [
        {"arrivals.rate": r, "jobs_finished": 0, "avg_jct_s": None, "p99_jct_s": None, "utilization": u}
        for r, u in (("4/h", 0.1), ("8/h", 0.2))
    ]
    write(tmp_path / "sweep", rows, ("arrivals.rate",))
    sweep = open_folder(str(tmp_path / "sweep"))
    assert "avg_jct_s" in sweep.metrics and "p99_jct_s" in sweep.metrics
    assert "status" not in sweep.metrics and "point" not in sweep.metrics
    assert main(["plot", str(tmp_path / "sweep"), "-o", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "no finished run has a value of avg_jct_s; nothing to draw" in err and "--metric" not in err
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert notes_of(page) == ["Not drawn: no finished run has a value of avg_jct_s or p99_jct_s."]
    assert page.count('<figure class="plot"><img') == 1  # utilization


def test_a_sweep_that_ran_out_of_time_before_any_job_finished(tmp_path, capsys):
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "2x4:V100";\narrivals :: PoissonSource(rate=8/h, jobs=20, seed=1);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    argv = ["sweep", str(tmp_path / "g.sched"), "--vary", "arrivals.rate=4/h,8/h", "--until", "10min"]
    assert main([*argv, "--workers", "1", "--out", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "s"), "-o", str(tmp_path / "p.png")]) == 2
    assert "no finished run has a value of avg_jct_s" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "s"), "-o", str(tmp_path / "r.html")]) == 0
    notes = notes_of((tmp_path / "r.html").read_text())
    assert notes == ["Not drawn: no finished run has a value of avg_jct_s or p99_jct_s."]


# --- a metrics sink inside a compound element --------------------------------------------------

COMPOUND = """\
round = 5min;
cluster = "2x4:V100";
elementclass Sinks { input -> m :: JobMetrics; }
src :: PoissonSource(rate=8/h, jobs=20, seed=1);
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run :: Launch -> s :: Sinks;
run -> c :: CostMetrics(prices=["V100:2.48"]);
"""


def test_a_sink_inside_a_compound_is_written_and_read_back(tmp_path):
    (tmp_path / "g.sched").write_text(COMPOUND)
    out = tmp_path / "o"
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["c-cost.json", "c-costs.csv", "explain.parquet", "run.json", "s.m-jobs.csv", "s.m-summary.json"]
    info = json.loads((out / "run.json").read_text())
    assert info["reports"]["s/m"] == {"jobs": "s.m-jobs.csv", "summary": "s.m-summary.json"}
    assert info["files"] == names
    run = open_folder(str(out))
    assert run.sink == "s/m" and run.jobs_name == "s.m-jobs.csv" and run.summary["jobs_tracked"] == 20
    for kind in ("jct-cdf", "utilisation", "gantt"):
        assert main(["plot", str(out), "--kind", kind, "-o", str(tmp_path / f"{kind}.png")]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "<h3>g.sched · s/m · 8 GPUs on 2 nodes (2x4:V100)</h3>" in page and "<h3>c · cost</h3>" in page
    # Run again into the same folder: the earlier run's files are found and replaced.
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == names


# --- the measured average of a run whose first job arrives late ----------------------------------


def test_the_measured_average_is_drawn_where_it_was_measured(tmp_path, monkeypatch):
    rows = [{"job_id": i, "arrival_s": 3000.0 + 30.0 * i, "gpus": 1 + i % 2, "duration_s": 400.0 + 90 * i} for i in range(6)]
    pl.DataFrame(rows).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    for out, more in (("out", []), ("bare", ["--no-explain"])):
        assert main(["run", "g.sched", "--out", out, *more]) == 0
        run = open_folder(out)
        fig = utilisation_figure(run)
        lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
        measured = run.summary["utilization"]
        [label] = [k for k in lines if k.startswith("measured average")]
        assert label == f"measured average: {measured:.1%} (from the first arrival)"
        xs, ys = lines[label].get_data()
        unit = 60.0  # (a run of minutes)
        assert xs[0] * unit == pytest.approx(3000.0) and xs[1] * unit == pytest.approx(run.end_s)
        # Over that span the curve's average is the line.
        times, busy = lines["GPUs held"].get_data()
        times = np.asarray(times) * unit
        area = float(np.sum(np.diff(times) * np.asarray(busy)[:-1]))
        assert area / (run.end_s - 3000.0) == pytest.approx(ys[0], rel=1e-9)


def test_a_run_whose_first_job_arrives_at_0_draws_the_average_over_the_whole_axis(tmp_path):
    run = open_folder(str(hand_run(tmp_path / "run")))
    lines = {line.get_label(): line for line in utilisation_figure(run).axes[0].get_lines()}
    xs, ys = lines["measured average: 50.0%"].get_data()
    assert list(xs) == pytest.approx([0.0, 200.0 / 60]) and list(ys) == [4.0, 4.0]  # (in minutes)


# --- the summaries in the order `run` prints them ----------------------------------------------

ORDERED = """\
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=20, seed=1);
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run :: Launch -> zsink :: JobMetrics;
run -> cost :: CostMetrics(prices=["V100:2.48"]);
"""


def _titles(text: str) -> list[str]:
    return re.findall(r"(g\.sched · zsink|cost · cost)", text)


def test_the_report_shows_the_summaries_in_the_order_run_prints_them(tmp_path, capsys):
    (tmp_path / "g.sched").write_text(ORDERED)
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(tmp_path / "o")]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert main(["report", str(tmp_path / "o"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    summary = page[page.index("<h2>Summary</h2>") : page.index("<h2>Plots</h2>")]
    assert _titles(summary) == _titles(printed) and len(_titles(printed)) == 2
    # The cost rows as the element reported them (which is not name order).
    cost = json.loads((tmp_path / "o" / "cost-cost.json").read_text())
    rows = re.findall(r'<td class="">(\w+_cost_usd)</td>', summary)
    assert rows == list(cost) and rows != sorted(rows)
    assert [r for r in re.findall(r"\b(\w+_cost_usd)\b", printed)] == rows
    # A run folder written before the order was kept (every key in name order) still reads.
    for name in ("run.json", "cost-cost.json"):
        path = tmp_path / "o" / name
        path.write_text(json.dumps(json.loads(path.read_text()), indent=2, sort_keys=True))
    assert main(["report", str(tmp_path / "o"), "-o", str(tmp_path / "old.html")]) == 0
    old = (tmp_path / "old.html").read_text()
    assert re.findall(r'<td class="">(\w+_cost_usd)</td>', old) == sorted(rows)


# --- the lines of a load figure in the order of their values -------------------------------------


def test_lines_are_ordered_by_their_values_not_their_text(tmp_path):
    rows = [
        {"order.service": s, "arrivals.rate": r, "cluster": c, "avg_jct_s": 1.0 + i}
        for i, (s, r, c) in enumerate(
            (s, r, c) for c in ("16x2:V100", "4x2:V100") for r in ("16/h", "4/h", "8/h") for s in ("wall", "gpu")
        )
    ]
    sweep_csv(tmp_path / "sweep", rows, ("cluster", "arrivals.rate", "order.service"))
    sweep = open_folder(str(tmp_path / "sweep"))
    bands, _ = metric_bands(sweep, "avg_jct_s", "order.service")
    series = list(dict.fromkeys(bands["series"].to_list()))
    # Clusters as the sweep ran them, rates by value (4/h, 8/h, 16/h), not as text.
    assert series == [f"cluster={c}, arrivals.rate={r}" for c in ("16x2:V100", "4x2:V100") for r in ("4/h", "8/h", "16/h")]
    bands, _ = metric_bands(sweep, "avg_jct_s", "cluster")
    series = list(dict.fromkeys(bands["series"].to_list()))
    assert series == [f"arrivals.rate={r}, order.service={s}" for r in ("4/h", "8/h", "16/h") for s in ("wall", "gpu")]
    # The figure's legend lists them so.
    from roundhouse.tools.plots import load_figure

    legend = load_figure(sweep, "avg_jct_s", "cluster").axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()][:3] == [
        "arrivals.rate=4/h, order.service=wall",
        "arrivals.rate=4/h, order.service=gpu",
        "arrivals.rate=8/h, order.service=wall",
    ]


# --- notes that name the right file and are said once ---------------------------------------------


def test_a_jobs_csv_run_json_lists_but_is_gone_is_said_to_be_missing(tmp_path, capsys):
    run = hand_run(tmp_path / "run")
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "files": ["jobs.csv", "run.json", "summary.json"]}))
    (run / "jobs.csv").unlink()
    for argv in (["plot", str(run), "-o", str(tmp_path / "p.png")], ["report", str(run), "-o", str(tmp_path / "r.html")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {run / 'jobs.csv'}: missing, though run.json lists it") and "no JobMetrics" not in err


TWO_TRACKED = """\
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=20, seed=1);
src -> AcceptAll -> JobPool -> Las -> Consolidated -> run :: Launch -> early :: JobMetrics(track=0..8);
run -> late :: JobMetrics(track=8..20);
"""


def test_the_tracked_jobs_note_names_the_file_they_are_read_from(tmp_path):
    (tmp_path / "g.sched").write_text(TWO_TRACKED)
    assert main(["run", str(tmp_path / "g.sched"), "--no-explain", "--out", str(tmp_path / "o")]) == 0
    run = open_folder(str(tmp_path / "o"))
    assert run.jobs_name == "early-jobs.csv" and run.summary_name == "early-summary.json"
    notes = utilisation_figure(run).axes[0].get_title(loc="left").split("\n")[1:]
    assert notes[0] == "only the 8 jobs early-jobs.csv tracks"


def test_a_seed_only_sweep_says_so_once(tmp_path):
    sweep_csv(tmp_path / "sweep", [{"seed": s, "avg_jct_s": 1.0, "utilization": 0.5} for s in range(3)], ("seed",))
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    notes = notes_of((tmp_path / "r.html").read_text())
    assert len(notes) == 1 and "varies nothing but the seed" in notes[0]


def test_text_label_columns_are_not_aligned_as_numbers(tmp_path):
    rows = [{"arrivals.rate": r, "order": o, "x": 2, "avg_jct_s": 10.0} for r in ("4/h", "8/h") for o in ("las", "fifo")]
    sweep_csv(tmp_path / "sweep", rows, ("arrivals.rate", "order", "x"))
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    first = re.search(r"<tbody><tr>(.*?)</tr>", page).group(1)
    assert re.findall(r'<td class="(n?)">', first)[:3] == ["", "", "n"]  # rate, policy: text; a number: a number
    assert '<td class="">las</td>' in page and '<td class="n">las</td>' not in page
