"""DelayPlacer takes the fewest machines and racks and moves a spread job to a tighter placement
at a lease's end; traces bound their times at a century, read Dally's JSON with either name of
a field record by record, refuse JSON of no known format, and say a whole number is too large;
the Dally reproduction shows every gain the same way."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from roundhouse.elements.placement.dally import DelayPlacer
from roundhouse.errors import TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.reproductions import dally as reproduction
from roundhouse.tools.reproductions._runs import sched_string
from roundhouse.traces import helios
from roundhouse.traces.formats import detect_format, read_trace
from roundhouse.traces.schema import MAX_SECONDS
from tests.conftest import fails, jobs_of
from tests.test_dally_baselines import cluster_of, make_world, tick

REPO = Path(__file__).resolve().parents[1]

# --- DelayPlacer: the fewest machines and racks ---


def test_within_a_rack_a_job_takes_the_fewest_machines(tmp_path):
    # One rack of 4 machines of 4 GPUs: machines 0 and 1 have 1 GPU free, machine 2 all 4,
    # machine 3 two. 6 GPUs fit on machines 2 and 3; the lowest-numbered GPUs would span all 4.
    world = make_world(
        cluster_of(tmp_path, 4, 1),
        [(100, 3, "BERT"), (101, 3, "BERT"), (102, 2, "BERT"), (1, 6, "BERT")],
        {100: [0, 1, 2], 101: [4, 5, 6], 102: [12, 13]},
    )
    placer = DelayPlacer(mode="no_wait")
    launched, kept, _ = tick(placer, world, [1, 100, 101, 102])
    assert launched == {1: [8, 9, 10, 11, 14, 15]} and kept == [100, 101, 102]
    assert placer.counters["rack"] == 1


def test_a_job_takes_the_rack_that_needs_the_fewest_machines(tmp_path):
    # Two racks of 3 machines of 4 GPUs. Rack 0 has 2 GPUs free on each machine (6 on 3
    # machines); rack 1 has machine 3 free and 2 GPUs on machine 4 (6 on 2 machines).
    running = {100: [0, 1], 101: [4, 5], 102: [8, 9], 103: [16, 17], 104: [20, 21, 22, 23]}
    jobs = [(j, len(g), "BERT") for j, g in running.items()] + [(1, 6, "BERT")]
    world = make_world(cluster_of(tmp_path, 6, 2), jobs, running)
    launched, _, _ = tick(DelayPlacer(mode="no_wait"), world, [1, *running])
    assert launched == {1: [12, 13, 14, 15, 18, 19]}


def test_across_racks_a_job_takes_the_fewest_racks(tmp_path):
    # Three racks of 2 machines of 4 GPUs: rack 0 has 2 GPUs free, rack 1 four, rack 2 all 8.
    # 10 GPUs fit racks 2 and 1; the lowest-numbered GPUs would span all three.
    running = {100: [0, 1, 2, 3, 4, 5], 101: [8, 9, 10, 11]}
    jobs = [(j, len(g), "BERT") for j, g in running.items()] + [(1, 10, "BERT")]
    world = make_world(cluster_of(tmp_path, 6, 3), jobs, running)
    placer = DelayPlacer(mode="no_wait")
    launched, _, _ = tick(placer, world, [1, 100, 101])
    assert launched == {1: [12, 13, 14, 15, 16, 17, 18, 19, 20, 21]}
    assert placer.counters["network"] == 1


def test_at_a_lease_end_a_job_spread_over_a_rack_moves_to_fewer_machines(tmp_path):
    # Job 7 (8 GPUs) runs on 2 GPUs of each of 4 machines of one rack; the others are idle. At
    # the lease's end machines 0 and 1 hold it: it moves there.
    spread = [2, 3, 6, 7, 10, 11, 14, 15]
    world = make_world(cluster_of(tmp_path, 4, 1), [(7, 8, "MobileNetV3")], {7: spread})
    placer = DelayPlacer(machine_wait=100.0, rack_wait=200.0, release=True)
    assert tick(placer, world, [7]) == ({7: [0, 1, 2, 3, 4, 5, 6, 7]}, [], [7])
    assert placer.counters["moved"] == 1 and placer.counters["rack"] == 1


def test_a_job_on_as_few_machines_as_it_can_keeps_its_gpus(tmp_path):
    world = make_world(cluster_of(tmp_path, 4, 1), [(7, 8, "MobileNetV3")], {7: [4, 5, 6, 7, 8, 9, 10, 11]})
    placer = DelayPlacer(machine_wait=100.0, rack_wait=200.0, release=True)
    assert tick(placer, world, [7]) == ({}, [7], [])
    assert placer.counters["moved"] == 0


def test_a_job_spread_over_racks_moves_to_fewer_racks(tmp_path):
    # Job 7 (12 GPUs, more than a rack of 8) spans 3 racks; racks 0 and 1 are otherwise idle.
    spread = [4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19]
    world = make_world(cluster_of(tmp_path, 6, 3), [(7, 12, "MobileNetV3")], {7: spread})
    placer = DelayPlacer(mode="no_wait", release=True)
    launched, kept, suspended = tick(placer, world, [7])
    assert kept == [] and suspended == [7]
    assert {g // 8 for g in launched[7]} == {0, 1} and placer.counters["network"] == 1


def test_the_repacked_job_runs_on_two_machines_after_its_first_lease(tmp_path):
    # Eight 5-GPU jobs (an hour, no model) fill 5 GPUs of each machine of one Dally rack; a
    # 16-GPU MobileNetV3 job (10 h of compute) starts on the 3 GPUs left on 6 machines (44.5x
    # slower). At the first lease's end (2 h) the rack is idle: it moves to 2 whole machines
    # (10.6x), so it ends after about 2 h + (10 h - 2 h / 44.5) x 10.6 = 106 h, not 445 h.
    trace = tmp_path / "repack.csv"
    rows = [f"{j},0,5,3600," for j in range(8)] + ["8,0,16,36000,MobileNetV3"]
    trace.write_text("job_id,arrival_s,gpus,duration_s,model\n" + "\n".join(rows) + "\n")
    graph = compile_file(REPO / "graphs" / "dally-consolidated.sched", ["round=2h", f"arrivals.path={sched_string(trace)}"])
    job = jobs_of(simulate(graph, "dally:1"))[8]
    assert 100 * 3600 < job["finish_s"] < 112 * 3600
    assert job["rack_starts"] == 2 and job["network_starts"] == 0


# --- traces: times within a century ---


@pytest.mark.parametrize(
    "row, column, value",
    [
        ("1,1e30,1,3600,", "arrival_s", "1e+30"),
        ("1,0,1,1e12,", "duration_s", "1e+12"),
        ("1,0,1,3600,1e300", "slo_s", "1e+300"),
    ],
)
def test_times_beyond_a_century_are_refused_naming_file_row_and_column(tmp_path, row, column, value):
    path = tmp_path / "t.csv"
    path.write_text(f"job_id,arrival_s,gpus,duration_s,slo_s\n0,0,1,60,\n{row}\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert str(caught.value) == f"{path}:3: error: column '{column}': must be at most 3.1536e+09 s (a century), got {value}"


def test_a_century_itself_is_a_time_a_trace_may_give(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(f"job_id,arrival_s,gpus,duration_s\n0,{MAX_SECONDS!r},1,{MAX_SECONDS!r}\n")
    assert read_trace(path)["arrival_s"].to_list() == [100 * 365 * 86400.0]


def test_a_dally_json_duration_beyond_a_century_is_refused(tmp_path):
    path = _dally_json(tmp_path, [{}, {"duration": 1e300}])
    with pytest.raises(TraceError, match=r"column 'duration': record 2: must be at most 3\.1536e\+09 s"):
        read_trace(path)


# --- Dally's JSON: either name of a field, record by record ---


def _dally_json(tmp_path, changes: list[dict], drop: tuple[str, ...] = ()) -> Path:
    """A Dally job list, one record per change (applied to a plain record; None removes a key)."""
    records = []
    for number, change in enumerate(changes):
        record = {"job_id": str(100 + number), "max_parallelism": "4", "arrival_time": "0", "duration": "3600"}
        record.update({"submit_time": f"2020-03-26 13:4{number}:00", "model": "BERT"})
        record.update(change)
        records.append({k: v for k, v in record.items() if v is not None and k not in drop})
    path = tmp_path / "d.json"
    path.write_text(json.dumps(records, indent=1))
    return path


def test_a_record_with_gpu_num_only_takes_its_gpus_from_it(tmp_path):
    path = _dally_json(tmp_path, [{}, {"max_parallelism": None, "gpu_num": "2"}, {"gpu_num": "16"}])
    assert read_trace(path)["gpus"].to_list() == [4, 2, 4]


def test_a_record_with_submit_time_only_arrives_after_the_first_submission(tmp_path, capsys):
    path = _dally_json(tmp_path, [{"arrival_time": "50"}, {"arrival_time": None}, {"arrival_time": ""}])
    # Submissions at 13:40, 13:41, 13:42: records 2 and 3 arrive 60 s and 120 s after the first.
    assert read_trace(path).sort("job_id")["arrival_s"].to_list() == [50.0, 60.0, 120.0]
    # (Two clocks, whose start lines nothing in the file relates: read as the docs say, and said.)
    err = capsys.readouterr().err
    assert (
        f"warning: {path}: 1 job(s) arrive at their 'arrival_time' (seconds from the workload's start) and "
        "2 at their 'submit_time' (seconds after the first submission of a job kept)"
    ) in err, err


def test_a_job_list_on_one_clock_reads_without_a_warning(tmp_path, capsys):
    read_trace(_dally_json(tmp_path, [{}, {}]))  # (all arrival_time, each with a submit_time too)
    read_trace(_dally_json(tmp_path, [{}, {}], drop=("arrival_time",)))
    # (a skipped job, one that never ran, does not count as one on the other clock)
    read_trace(_dally_json(tmp_path, [{}, {"arrival_time": None, "duration": "0"}]))
    assert "warning" not in capsys.readouterr().err


def test_an_error_names_the_field_the_record_gave(tmp_path):
    path = _dally_json(tmp_path, [{}, {"max_parallelism": None, "gpu_num": "two"}])
    with pytest.raises(TraceError, match=r"column 'gpu_num': record 2: 'two' is not a number"):
        read_trace(path)
    path = _dally_json(tmp_path, [{}, {"max_parallelism": None}])
    with pytest.raises(TraceError, match=r"column 'max_parallelism': record 2: has no value"):
        read_trace(path)


# --- JSON of no known format ---


def test_a_helios_json_without_a_gpu_field_is_read_as_helios(tmp_path, capsys):
    path = _dally_json(tmp_path, [{}, {}], drop=("max_parallelism",))
    assert detect_format(path) == "helios"
    err = fails(capsys, "trace", "convert", path, tmp_path / "x.csv")
    assert "no record has 'max_parallelism' or 'gpu_num', which every Helios job needs" in err


@pytest.mark.parametrize("text", ["[{}]", '[{"name": "a", "gpus": 1}]'])
def test_json_of_neither_philly_nor_helios_is_not_guessed_at(tmp_path, text):
    path = tmp_path / "j.json"
    path.write_text(text)
    with pytest.raises(TraceError, match=r"cannot tell the trace format.*one of canonical, gavel, tiresias, philly, helios"):
        detect_format(path)


def test_an_empty_json_list_still_reads_as_no_jobs(tmp_path):
    path = tmp_path / "e.json"
    path.write_text("[]\n")
    assert read_trace(path).height == 0


def test_helios_keys_are_recognised_without_the_gpu_field():
    assert helios.looks_like_json('[{"job_id": "1", "submit_time": "2020-01-01 00:00:00"}]')
    assert not helios.looks_like_json('[{"jobid": "a", "attempts": []}]')


# --- whole numbers too large ---


def test_a_whole_number_too_large_says_so(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s\n0,0,99999999999999999999,60\n")
    with pytest.raises(TraceError, match=r"column 'gpus': '99999999999999999999' is too large \(at most 2\^63 - 1\)"):
        read_trace(path)
    json_path = _dally_json(tmp_path, [{}, {"job_id": "99999999999999999999"}])
    with pytest.raises(TraceError, match=r"column 'job_id': record 2: '99999999999999999999' is too large"):
        read_trace(json_path)
    path.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1.5,60\n")
    with pytest.raises(TraceError, match=r"'1.5' is not a whole number"):
        read_trace(path)


# --- the reproduction's Table rows ---


def test_the_table_rows_show_gains_past_minus_100_percent_as_x_as_high():
    racks = {"racks": [8] * 4, "scheme": ["Gandiva", "Tiresias", "Dally-manual", "Dally"]}
    stats = {s: [1.0, 1.0, 1.0, 1.0] for s in reproduction.STATS}
    stats["avg_jct_s"] = [1.0, 1.0, 1.0, 9.92]  # Dally 9.92x Tiresias: -892%
    rows = reproduction._table_rows(pl.DataFrame({**racks, **stats}), "batch", "Table II")
    ours = rows[-1].ours
    assert ours.startswith("9.9x / +0% / +0% / +0%") and "-892%" not in ours
    assert rows[-1].paper.startswith("+37% / +6% / +66% / +67%")
