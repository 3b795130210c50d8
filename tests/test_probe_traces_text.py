"""Trace files as people's tools leave them: bare carriage returns, trailing commas, long files
described, and converted jobs whose values were made up rather than kept."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces import csvtext
from roundhouse.traces.formats import file_columns, load_trace, read_trace, write_trace

GAVEL_LINE = "ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t{t}"


@pytest.mark.parametrize(
    "name, text",
    [
        ("mac.csv", "job_id,arrival_s,gpus,duration_s\r0,0,1,100\r1,5,1,100\r"),
        ("mac.trace", "\r".join(GAVEL_LINE.format(t=t) for t in (0, 4)) + "\r"),
        ("mac-tiresias.csv", "job_id,num_gpu,submit_time,duration\r0,1,0,100\r1,2,5,100\r"),
    ],
)
def test_lines_ending_in_a_bare_carriage_return_are_named_as_such(tmp_path, name, text):
    # Split at newlines, such a file is one line: the reader complained of a header column
    # named twice, or of 19 tab-separated fields, not of the line endings.
    path = tmp_path / name
    path.write_bytes(text.encode())
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 1
    assert "carriage return" in caught.value.message and "line endings" in caught.value.message


def test_a_bare_carriage_return_after_good_lines_names_its_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"job_id,arrival_s,gpus,duration_s\r\n0,0,1,100\r\n1,5,1,100\r2,6,1,100\r\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 3


@pytest.mark.parametrize(
    "text",
    [
        "job_id,arrival_s,gpus,duration_s\r\n0,0,1,100\r\n1,5,2,100\r\n",  # CRLF
        "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,5,2,100\r",  # a last line's lone \r
        '"job_id","arrival_s","gpus","duration_s"\r\n"0","0","1","100"\r\n"1","5","2","100"\r\n',
    ],
)
def test_crlf_and_a_final_carriage_return_still_read(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    frame = read_trace(path)
    assert frame["gpus"].to_list() == [1, 2]
    assert frame["arrival_s"].to_list() == [0.0, 5.0]


def test_a_trailing_comma_in_the_header_is_suggested(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s,\n0,0,1,100,\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 1
    assert "column 5 has no name" in caught.value.message and "comma at the end" in caught.value.message


def test_a_trailing_comma_in_a_row_is_suggested(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,5,1,100,\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 3
    assert "comma at the end" in caught.value.message


def test_a_row_with_one_value_too_many_not_empty_is_not_called_a_trailing_comma(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100,7\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert "has 5 values" in caught.value.message and "comma" not in caught.value.message


@pytest.mark.parametrize(
    "name, header, row",
    [
        ("t.csv", "job_id,arrival_s,gpus,duration_s", "{i},{i},1,100"),
        ("t.trace", None, GAVEL_LINE),
        ("tiresias.csv", "job_id,num_gpu,submit_time,duration", "{i},1,{i},100"),
    ],
)
def test_describe_takes_a_files_columns_from_its_first_line_only(tmp_path, monkeypatch, name, header, row):
    # describe read the whole file a second time (and split it into lines) for its header: on
    # a million-job Gavel trace a third of the command's time.
    lines = [row.format(i=i, t=i) for i in range(20000)]
    text = "\n".join(([header] if header else []) + lines) + "\n"
    path = tmp_path / name
    path.write_text(text)
    loaded = load_trace(path)
    read = []
    original = csvtext.read_bytes

    def counting(p, size=None):
        data = original(p, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(csvtext, "read_bytes", counting)
    columns = file_columns(path, loaded.format)
    assert columns[:2] == (("job_type", "command") if name.endswith(".trace") else ("job_id", header.split(",")[1]))
    assert sum(read) < len(text) / 2


def test_tiresias_writer_says_which_iterations_it_leaves_empty(tmp_path, capsys):
    # A job with no model the profile knows has no iterations to derive: left empty (none made
    # up), and said.
    source = tmp_path / "in.csv"
    source.write_text("job_id,arrival_s,gpus,duration_s,model\n0,0,1,100,\n1,5,1,200,M5\n2,6,1,300,ResNet-18\n")
    out = tmp_path / "out.csv"
    assert main(["trace", "convert", str(source), str(out), "--to", "tiresias"]) == 0
    err = capsys.readouterr().err
    assert "iterations of 2 job(s) left empty" in err
    back = read_trace(out)
    assert back.filter(pl.col("job_id") < 2)["iterations"].to_list() == [None, None]


def test_tiresias_writer_is_quiet_when_every_iteration_is_derived_or_given(tmp_path):
    frame = pl.DataFrame(
        {"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1, 1], "duration_s": [100.0, 70.0], "model": ["ResNet-18", "M5"]}
    ).with_columns(iterations=pl.Series([None, 50.0]))
    notes = write_trace(frame, tmp_path / "t.csv", "tiresias")
    assert not any("left empty" in note for note in notes)


def test_a_quoted_file_with_bare_carriage_returns_says_so_not_what_the_csv_module_says(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b'job_id,arrival_s,gpus,duration_s\n0,0,1,100\n"1",5,1,100\r"2",6,1,100\r\n')
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 3
    assert "line endings" in caught.value.message and "universal-newline" not in caught.value.message


def test_a_carriage_return_inside_a_quoted_value_is_the_values(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b'job_id,arrival_s,gpus,duration_s,command\n0,0,1,100,"run\rthere"\n')
    assert read_trace(path)["command"].to_list() == ["run\rthere"]


def test_tiresias_writer_says_it_rounds_durations_it_derived(tmp_path):
    # A Gavel trace gives steps: its jobs' durations (steps at their V100 throughput) are
    # fractions, and were rounded into the file without the note a given duration gets.
    source = tmp_path / "in.trace"
    source.write_text("\n".join(GAVEL_LINE.format(t=t) for t in (0, 4)) + "\n")
    frame = read_trace(source)
    assert frame["duration_s"].is_null().all()
    notes = write_trace(frame, tmp_path / "out.csv", "tiresias")
    back = read_trace(tmp_path / "out.csv")
    assert (back["duration_s"] % 1 == 0).all()
    assert "durations rounded to whole numbers (Tiresias reads no fractions)" in notes


@pytest.mark.parametrize("bad_line, row", [(1, 1), (2, 2)])
def test_a_trailing_tab_in_a_gavel_trace_is_suggested(tmp_path, bad_line, row):
    lines = [GAVEL_LINE.format(t=t) for t in (0, 4)]
    lines[bad_line - 1] += "\t"
    path = tmp_path / "t.trace"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == row
    assert "has 11 tab-separated fields" in caught.value.message and "a tab at the end of the line" in caught.value.message


def test_a_gavel_line_with_one_field_too_many_not_empty_is_not_called_a_trailing_tab(tmp_path):
    path = tmp_path / "t.trace"
    path.write_text(GAVEL_LINE.format(t=0) + "\tx\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert "has 11 tab-separated fields" in caught.value.message and "tab at the end" not in caught.value.message
