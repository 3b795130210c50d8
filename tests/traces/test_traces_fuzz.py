"""Damaged trace files either read or fail with a TraceError: never any other exception.

Starting from valid files, hypothesis applies random edits (characters replaced or inserted,
cells deleted, lines cut short or dropped, bytes that are not UTF-8) and reads the result with
the reader of that format, and with format detection."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roundhouse.errors import TraceError
from roundhouse.traces import canonical, gavel, helios, pai, tiresias
from roundhouse.traces.formats import read_trace

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"
BASES = {
    "canonical": (
        "job_id,arrival_s,gpus,duration_s,model,iterations,batch_size,user,weight,slo_s,note\n"
        "0,0.0,1,3600.5,ResNet-18,,32,alice,1.0,,0.5\n"
        "1,12.25,4,,LM,5000,20,bob,2.0,7200,\n"
        "2,30,8,1e4,Transformer,100,64,,1,,1e-3\n"
        "3,31,2,90,,,,carol,,,x\n",
        canonical.read_csv,
    ),
    "tiresias": ("".join((SAMPLES / "tiresias-60.csv").read_text().splitlines(keepends=True)[:6]), tiresias.read),
    "gavel": ("".join((SAMPLES / "gavel-50.trace").read_text().splitlines(keepends=True)[:4]), gavel.read),
    "helios": (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "11,uA,vcB,1,4,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n"
        "12,uC,vcB,8,32,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n"
        "13,uA,vcD,16,64,2,COMPLETED,2020-06-09 19:00:01,2020-06-09 19:10:01,2020-06-09 21:10:01,7200,600\n",
        helios.read,
    ),
    "dally": (
        '[{"job_id": "1", "cpu_num": "8", "duration": "1000", "model": "VGG", "batchsize": "32",\n'
        '  "total_iterations": "2000", "time_per_iteration": "0.5", "max_parallelism": "1", "arrival_time": "0"},\n'
        ' {"job_id": "2", "cpu_num": "16", "duration": "900", "model": "BERT", "batchsize": "64",\n'
        '  "total_iterations": "300", "time_per_iteration": "3", "max_parallelism": "8", "arrival_time": "5"},\n'
        ' {"job_id": "3", "cpu_num": "1", "duration": "50", "model": "ResNet50", "batchsize": "128",\n'
        '  "total_iterations": "100", "time_per_iteration": "0.5", "max_parallelism": "2", "arrival_time": "9"}]\n',
        helios.read,
    ),
    "pai": (
        "4f057009,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC\n"
        "af724763,ps,1.0,Terminated,1739100.0,1739900.0,600.0,10.0,,\n"
        "af724763,worker,2.0,Terminated,1739110.0,1740000.0,400.0,20.0,100.0,V100\n"
        "e387fbc1,worker,4.0,Running,1739500.0,1739800.0,1200.0,62.5,200.0,V100\n",
        pai.read,
    ),
}
TRICKY = list(',"\n\r\t#-+.e ') + ["nan", "inf", "-1", "0", "1e400", "\x00", "é", "\ufeff", "9" * 30]


@st.composite
def damaged(draw, text: str) -> bytes:
    """`text` after a few random edits, as bytes (some of them not valid UTF-8)."""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["replace", "insert", "delete_cell", "truncate_line", "drop_line", "cut"]))
        position = draw(st.integers(0, max(len(text) - 1, 0)))
        if kind in ("replace", "insert"):
            piece = draw(st.one_of(st.sampled_from(TRICKY), st.text(min_size=1, max_size=3)))
            end = position + (1 if kind == "replace" else 0)
            text = text[:position] + piece + text[end:]
        elif kind == "delete_cell":
            start = max(text.rfind(",", 0, position), text.rfind("\t", 0, position), text.rfind("\n", 0, position)) + 1
            stops = [i for i in (text.find(",", position), text.find("\t", position), text.find("\n", position)) if i >= 0]
            text = text[:start] + text[min(stops) if stops else len(text) :]
        elif kind == "truncate_line":
            stop = text.find("\n", position)
            text = text[:position] + (text[stop:] if stop >= 0 else "")
        elif kind == "drop_line":
            lines = text.splitlines(keepends=True)
            if lines:
                del lines[draw(st.integers(0, len(lines) - 1))]
            text = "".join(lines)
        else:
            text = text[:position]
    data = text.encode("utf-8", errors="surrogatepass")
    if draw(st.booleans()) and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.sampled_from([0x80, 0xFF, 0xC3]))]) + data[at + 1 :]
    return data


def check(data: bytes, reader, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"trace{suffix}"
        path.write_bytes(data)
        for read in (reader, read_trace):
            try:
                df = read(path)
            except TraceError as err:
                assert str(err).startswith(str(path))
            else:
                assert df["job_id"].is_unique().all()
                assert df.height == 0 or df["gpus"].min() >= 1


FUZZ = settings(
    max_examples=int(os.environ.get("ROUNDHOUSE_FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(damaged(BASES["canonical"][0]))
def test_damaged_canonical_csv(data):
    check(data, BASES["canonical"][1], ".csv")


@FUZZ
@given(damaged(BASES["tiresias"][0]))
def test_damaged_tiresias_csv(data):
    check(data, BASES["tiresias"][1], ".csv")


@FUZZ
@given(damaged(BASES["gavel"][0]))
def test_damaged_gavel_trace(data):
    check(data, BASES["gavel"][1], ".trace")


@FUZZ
@given(damaged(BASES["helios"][0]))
def test_damaged_helios_csv(data):
    check(data, BASES["helios"][1], ".csv")


@FUZZ
@given(damaged(BASES["dally"][0]))
def test_damaged_dally_json(data):
    check(data, BASES["dally"][1], ".json")


@FUZZ
@given(damaged(BASES["pai"][0]))
def test_damaged_pai_task_table(data):
    check(data, BASES["pai"][1], ".csv")


def test_the_undamaged_bases_read():
    for text, reader in BASES.values():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "t"
            path.write_text(text)
            assert reader(path).height >= 3
