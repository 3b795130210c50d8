"""Paths holding `[` or `*`: polars reads a path as a glob pattern unless told otherwise, so a
Parquet trace, a run's record or a submitted file in a folder such as `results[1]` was "not
found". Every file named by a user is read as the path it is."""

import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"


@pytest.mark.parametrize("folder", ["results[1]", "a*b"])
def test_a_parquet_trace_and_its_run_are_read_in_a_folder_named_like_a_pattern(tmp_path, capsys, folder):
    where = tmp_path / folder
    where.mkdir()
    trace, out = where / "t.parquet", where / "out"
    assert main(["trace", "generate", "-o", str(trace), "--jobs", "5", "--rate", "8/h", "--seed", "1"]) == 0
    assert main(["trace", "describe", str(trace)]) == 0
    assert main(["run", str(FIFO), "--trace", str(trace), "--cluster", "1x8:V100", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["explain", str(out), "1"]) == 0
    assert "finished" in capsys.readouterr().out
    assert main(["trace", "convert", str(trace), str(where / "t.csv")]) == 0
    assert main(["run", str(FIFO), "--trace", str(where / "t.csv"), "--cluster", "1x8:V100"]) == 0
