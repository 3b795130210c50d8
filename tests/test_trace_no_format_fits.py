"""A CSV whose header is no format's (a Philly-derived table such as Pollux's `traces/philly.csv`,
a results table) is taken for canonical only for want of another; its refusal says so and
lists the formats to name, rather than only that job_id is missing."""

from __future__ import annotations

from roundhouse.tools.cli import main

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]
NO_FORMAT = "its header fits none of the trace formats Roundhouse reads"


def _philly_table(tmp_path):
    path = tmp_path / "philly.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n0,3600,1,3600,a\n60,120,4,480,b\n")
    return path


def test_describe_says_the_header_is_no_formats_and_lists_them(tmp_path, capsys):
    path = _philly_table(tmp_path)
    assert main(["trace", "describe", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: error: missing column 'job_id'" in err, err
    assert NO_FORMAT in err and "gavel, tiresias, philly, helios, pai, pollux or ones" in err, err
    assert "Traceback" not in err


def test_a_run_given_it_as_trace_says_so_before_running(tmp_path, capsys):
    path = _philly_table(tmp_path)
    assert main(["run", str(REPO / "graphs" / "las.sched"), "--trace", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert NO_FORMAT in err, err


def test_convert_says_so_too(tmp_path, capsys):
    path = _philly_table(tmp_path)
    assert main(["trace", "convert", str(path), str(tmp_path / "out.trace")]) == 2
    assert NO_FORMAT in capsys.readouterr().err
    assert not (tmp_path / "out.trace").exists()


def test_a_canonical_header_missing_a_column_or_one_named_canonical_is_told_as_before(tmp_path, capsys):
    lacking = tmp_path / "lacking.csv"
    lacking.write_text("job_id,arrival_s,duration_s\n0,0,5\n")
    assert main(["trace", "describe", str(lacking)]) == 2
    err = capsys.readouterr().err
    assert "missing column 'gpus'" in err and NO_FORMAT not in err, err
    path = _philly_table(tmp_path)
    assert main(["trace", "describe", "--format", "canonical", str(path)]) == 2
    err = capsys.readouterr().err
    assert "missing column 'job_id'" in err and NO_FORMAT not in err, err
