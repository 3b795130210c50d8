"""A canonical CSV's header as other tools write it: separated by semicolons, tabs or '|' (one
column, as a comma-separated file reads it), or with a space before a quoted name (whose quote
marks are then part of it). The error says which, not only that job_id is missing."""

from __future__ import annotations

import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace


def refusal(path) -> str:
    with pytest.raises(TraceError) as err:
        read_trace(str(path))
    return str(err.value)


@pytest.mark.parametrize(("separator", "said"), [(";", "semicolons"), ("\t", "tabs"), ("|", "'|'")])
def test_a_header_separated_otherwise_than_by_commas_is_said_so(tmp_path, separator, said):
    path = tmp_path / "t.csv"
    names = ["job_id", "arrival_s", "gpus", "duration_s"]
    path.write_text(separator.join(names) + "\n" + separator.join(["0", "0", "1", "5"]) + "\n")
    message = refusal(path)
    assert f"its names separated by {said}" in message, message
    assert "save it with commas" in message


def test_a_quoted_name_after_a_space_is_said_to_hold_its_quote_marks(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('job_id, "arrival_s",gpus,duration_s\n0,0,1,5\n')
    message = refusal(path)
    assert "missing column 'arrival_s'" in message
    assert "holds quote marks" in message and "space" in message, message
    # as the message says: without the space, the same header reads
    path.write_text('job_id,"arrival_s",gpus,duration_s\n0,0,1,5\n')
    assert read_trace(str(path))["arrival_s"].to_list() == [0.0]


def test_a_near_miss_is_still_suggested(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arival_s,gpus,duration_s\n0,0,1,5\n")
    assert "did you mean 'arival_s'" in refusal(path)


def test_the_command_line_names_the_file_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("job_id;arrival_s;gpus;duration_s\n0;0;1;5\n")
    assert main(["trace", "describe", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: error: missing column 'job_id'" in err and "semicolons" in err, err
    assert "Traceback" not in err
