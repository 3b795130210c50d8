"""`roundhouse trace generate` and `convert` say what they wrote in good English: "1 job", not
"1 jobs"; many jobs are still "jobs"."""

from __future__ import annotations

from roundhouse.tools.cli import main


def test_one_job_generated_and_converted(tmp_path, capsys):
    one = tmp_path / "one.csv"
    assert main(["trace", "generate", "-o", str(one), "--jobs", "1", "--rate", "8/h", "--seed", "1"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 1 job to {one}"
    assert main(["trace", "convert", str(one), str(tmp_path / "one.parquet")]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 1 job to {tmp_path / 'one.parquet'}"


def test_several_jobs_are_still_jobs(tmp_path, capsys):
    many = tmp_path / "many.csv"
    assert main(["trace", "generate", "-o", str(many), "--jobs", "3", "--rate", "8/h", "--seed", "1"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 3 jobs to {many}"
