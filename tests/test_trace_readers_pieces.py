"""The Gavel reader reads a trace a piece of lines at a time: the same jobs, and the same error
for a bad file, as reading it at once, with a peak memory that does not hold the whole text,
its lines and their fields together."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import gavel
from roundhouse.traces.linepieces import pieces

MODELS = ("ResNet-18 (batch size 64)", "LM (batch size 20)", "A3C", "Transformer (batch size 32)")


def job_line(i: int, arrival: float | None = None, **fields: str) -> str:
    """One 10-field Gavel line (fields given by Gavel's names replace the defaults)."""
    values = {
        "job_type": MODELS[i % len(MODELS)],
        "command": f"python3 main.py --seed {i}",
        "working_directory": "image_classification/cifar10",
        "num_steps_arg": "--num_steps",
        "needs_data_dir": "1",
        "total_steps": str(1000 + 37 * i),
        "scale_factor": str(1 << (i % 3)),
        "priority_weight": "1.0",
        "SLO": "-1" if i % 5 else "2.5",
        "arrival_time": str(float(i * 10) if arrival is None else arrival),
    }
    values.update(fields)
    return "\t".join(values[name] for name in gavel.COLUMNS_10)


def write(tmp_path, lines: list[str], name: str = "t.trace", end: str = "\n") -> str:
    path = tmp_path / name
    path.write_bytes(end.join(lines).encode() + end.encode())
    return str(path)


def read_both(path: str, size: int) -> tuple[object, object]:
    """What reading `path` at once and in pieces of `size` bytes give: a frame or a message."""
    out = []
    for piece_bytes in (None, size):
        try:
            out.append(gavel.read(path, piece_bytes=piece_bytes))
        except TraceError as err:
            out.append(str(err))
    return out[0], out[1]


def test_pieces_end_at_whole_lines_and_count_them(tmp_path):
    lines = [job_line(i) for i in range(200)]
    path = write(tmp_path, lines)
    got = list(pieces(path, 500))
    assert len(got) > 20
    assert "".join(p.text for p in got).splitlines() == lines
    for p in got:
        assert p.text.endswith("\n")
        assert p.text.splitlines()[0] == lines[p.first_line - 1]


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_jobs_read_in_pieces_are_those_read_at_once(tmp_path, end):
    lines = [job_line(i) for i in range(3000)]
    lines[7:7] = ["", "   "]  # (blank lines are skipped, and counted)
    path = write(tmp_path, lines, end=end)
    whole, parts = read_both(path, 4000)
    assert isinstance(whole, pl.DataFrame) and isinstance(parts, pl.DataFrame)
    assert whole.height == 3000
    assert parts.equals(whole) and parts.schema == whole.schema
    assert parts["job_id"].to_list() == list(range(3000))


def test_older_layout_and_a_byte_order_mark_read_in_pieces(tmp_path):
    lines = [f"LM (batch size 20)\tpython main.py\t--steps\t1\t{100 + i}\t{i * 3.5}\t1" for i in range(800)]
    path = tmp_path / "old.trace"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())
    whole, parts = read_both(str(path), 1000)
    assert isinstance(parts, pl.DataFrame) and parts.equals(whole)
    assert parts["iterations"].to_list()[:2] == [100.0, 101.0]


def test_arrivals_out_of_order_across_pieces_are_sorted_as_at_once(tmp_path):
    lines = [job_line(i, arrival=float((i * 7919) % 1000)) for i in range(1000)]
    path = write(tmp_path, lines)
    whole, parts = read_both(path, 3000)
    assert isinstance(parts, pl.DataFrame) and parts.equals(whole)
    assert parts["arrival_s"].is_sorted()


def test_text_column_of_numbers_in_some_pieces_only_stays_text(tmp_path):
    # (The schema reads a text column whose every cell is a number as numbers: whole, this
    # column is not, though its first pieces are.)
    lines = [job_line(i, num_steps_arg=str(i)) for i in range(600)] + [job_line(600, num_steps_arg="--steps")]
    path = write(tmp_path, lines)
    whole, parts = read_both(path, 2000)
    assert isinstance(parts, pl.DataFrame) and parts.equals(whole)
    assert parts.schema["num_steps_arg"] == pl.String


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # A column checked first wins over a line earlier in the file.
        ({30: job_line(29, SLO="x"), 1500: job_line(1499, arrival_time="soon")}, ":1500: error: column 'arrival_time'"),
        # A line of the wrong width, before any value.
        ({1800: job_line(1799, arrival_time="soon"), 1900: job_line(1899) + "\textra"}, ":1900: error: has 11"),
        # A value the schema refuses comes after every value that does not convert.
        ({20: job_line(19, scale_factor="0"), 1700: job_line(1699, total_steps="many")}, ":1700: error: column 'total_steps'"),
        ({20: job_line(19, scale_factor="0"), 1700: job_line(1699, SLO="0")}, ":20: error: column 'scale_factor'"),
        # The text's own faults come first, a byte that is not UTF-8 before all.
        ({3: job_line(2, arrival_time="soon"), 1990: job_line(1989, command="caf\udce9")}, ":1990: error: is not UTF-8"),
        ({3: job_line(2, command="a\x00b"), 1990: job_line(1989, command="caf\udce9")}, ":1990: error: is not UTF-8"),
        ({3: job_line(2) + "\r", 1990: job_line(1989, command="a\x00b")}, ":1990: error: holds a NUL byte"),
        ({3: job_line(2, total_steps="x"), 1990: job_line(1989) + "\r "}, ":1990: error: holds a carriage return"),
        ({1: job_line(0) + "\t"}, ":1: error: has 11 tab-separated fields (the last one empty"),
    ],
)
def test_an_error_read_in_pieces_is_the_one_read_at_once(tmp_path, changes, expected):
    lines = {n: line.encode("utf-8", "surrogateescape").decode("latin-1") for n, line in changes.items()}
    path = tmp_path / "bad.trace"
    text = "\n".join(lines.get(n + 1, job_line(n)) for n in range(2000)) + "\n"
    path.write_bytes(text.encode("latin-1"))
    whole, parts = read_both(str(path), 5000)
    assert isinstance(parts, str), parts
    assert parts == whole
    assert expected in parts


def test_undecodable_byte_in_a_later_piece_names_its_line_and_column(tmp_path):
    path = tmp_path / "bad.trace"
    lines = [job_line(i).encode() for i in range(1000)]
    lines[900] = b"\xef\xbb\xbfLM\xff" + lines[900]  # (a U+FEFF inside the file counts as a character)
    path.write_bytes(b"\n".join(lines))
    whole, parts = read_both(str(path), 3000)
    assert parts == whole
    assert "byte 0xff at line 901, column 4" in str(parts)


def test_carriage_return_before_blanks_at_a_piece_end(tmp_path):
    # A \r followed by blanks ends no line unless the file goes on after them.
    body = [job_line(i) for i in range(400)]
    path = write(tmp_path, [*body[:200], body[200] + "\r ", "  ", *body[201:]])
    whole, parts = read_both(path, 700)
    assert parts == whole and ":201: error: holds a carriage return" in str(parts)
    path = write(tmp_path, [*body, body[0] + "\r ", "  ", " "], name="end.trace")
    whole, parts = read_both(path, 700)
    assert isinstance(parts, pl.DataFrame) and parts.equals(whole)


def test_empty_file_and_blank_lines_only(tmp_path):
    for text in ("", "\n\n  \n"):
        path = tmp_path / "empty.trace"
        path.write_text(text)
        whole, parts = read_both(str(path), 10)
        assert parts == whole and "is empty" in str(parts)


def test_peak_memory_of_a_large_trace_stays_near_its_size(tmp_path):
    """Reading a 200,000-job trace (30 MB) grows the peak resident memory by less than six times
    the file's size (about four); read at once, its text, lines and fields took ten times."""
    path = write(tmp_path, [job_line(i) for i in range(200_000)])
    script = textwrap.dedent(
        f"""
        import json, os, resource
        from roundhouse.traces import gavel
        from roundhouse.traces.profiles import ProfileTable
        profile = ProfileTable.load()
        gavel.read({str(tmp_path / "warm.trace")!r}, profile)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        frame = gavel.read({path!r}, profile)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps({{"grown": after - before, "size": os.path.getsize({path!r}), "jobs": frame.height}}))
        """
    )
    write(tmp_path, [job_line(i) for i in range(100)], name="warm.trace")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout)
    assert figures["jobs"] == 200_000
    assert figures["grown"] < 6 * figures["size"], figures
