"""Mutated .sched files: every outcome is either a clean check or an error a person can act on
(path:line:col, exit status 2) — never a Python traceback."""

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roundhouse.tools.cli import main
from tests.conftest import REPO

SAMPLE = str(REPO / "traces" / "samples" / "philly-1000.csv")
SEEDS = [
    (REPO / "graphs" / name).read_text().replace("../traces/samples/philly-1000.csv", SAMPLE)
    for name in ("las.sched", "fifo.sched", "srtf.sched", "blox-accept.sched")
] + [
    """// compounds, imports-free, every value kind
round = 5min;
cluster = "4x4:V100";
elementclass Gate { $f=1.2x | input -> g :: AcceptThreshold(factor=$f) -> output; }
elementclass Core { input [jobs] -> pool :: JobPool -> Las(backfill=true) -> [ranking] output; }
src :: PoissonSource(rate=8/h, jobs=10, seed=1, gpus=philly, models=blox);
c :: Core;
src -> Gate(1.5x) -> [jobs] c [ranking] -> Consolidated(strict=false) -> Launch -> JobMetrics(track=0..5);
"""
]

PIECES = [
    ";",
    "->",
    "::",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "=",
    ",",
    '"',
    "$f",
    "/*",
    "*/",
    "//",
    "5min",
    "8/h",
    "1.2x",
    "3..4",
    "x",
    "Las",
    "pool",
    "input",
    "output",
    "elementclass",
    "import",
    "\n",
    " ",
    "0",
    "-",
]

LOCATED = re.compile(r"^\S+\.sched:\d+:\d+: error: ")


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "swap_lines", "truncate"]))
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        if kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 12)) :]
        elif kind == "insert":
            piece = draw(st.one_of(st.sampled_from(PIECES), st.text(min_size=1, max_size=3)))
            text = text[:i] + piece + text[i:]
        elif kind == "replace":
            piece = draw(st.sampled_from(PIECES))
            text = text[:i] + piece + text[i + len(piece) :]
        elif kind == "swap_lines":
            lines = text.split("\n")
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
        else:
            text = text[:i]
    return text


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated())
def test_mutated_files_fail_cleanly(tmp_path, capsys, text):
    path = Path(tmp_path) / "mutant.sched"
    path.write_text(text)
    status = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if status == 0:
        assert "ok (" in out
        # A graph that checks must also run (here for the first simulated hours) or fail cleanly.
        status = main(["run", str(path), "--until", "2h", "--quiet"])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        assert status == 0 or (status == 2 and err.strip()), err
    else:
        assert status == 2
        first = err.splitlines()[0]
        assert LOCATED.match(first), err
