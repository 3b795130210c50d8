"""Seeded mutations of the shipped graphs, compiled in process: each is either a graph or the
project's own error, every .sched error at a line and column inside the file, never a Python
exception. (tests/test_fuzz_sched.py runs fewer mutants through the command line, and runs the
ones that check; this one is quick enough to run every time: a few hundred in a few seconds.)"""

import random
import re
import time
from pathlib import Path

import pytest

from roundhouse.errors import RoundhouseError, RoundhouseErrors, SchedError, SchedErrors, source_lines
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import compile_file
from tests.conftest import REPO

CASES = 300
SEED = 20240611

GRAPHS = sorted((REPO / "graphs").glob("*.sched"))
COMPOUND = """round = 5min;
cluster = "4x4:V100";
elementclass Gate { $f=1.2x | input -> g :: AcceptThreshold(factor=$f) -> output; }
elementclass Core { input [jobs] -> pool :: JobPool -> Las(backfill=true) -> [ranking] output; }
src :: PoissonSource(rate=8/h, jobs=10, seed=1, gpus=philly, models=blox);
c :: Core;
src -> Gate(1.5x) -> [jobs] c [ranking] -> Consolidated(strict=false) -> Launch -> JobMetrics(track=0..5);
"""

# Tokens as a person sees them: strings, comments, arrows, names, numbers with their units, spaces, the rest.
TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|->|::|\.\.|[A-Za-z_$][A-Za-z0-9_]*|[0-9][0-9.]*[A-Za-z/]*|\s+|.', re.S
)
CHARACTERS = [
    '"',
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ";",
    "\x00",
    "\r",
    "\u00a0",
    "\u200b",
    "\ufeff",
    "é",
    "日",
    "٣",
    "\u201c",
    "$",
    "\\",
    "/*",
    "@",
    ":",
]
# What a `require` or an `import` may name that is no file of elements or graph (made in `folder` below).
ODD_PATHS = [
    "",
    ".",
    "..",
    "/",
    "nope.py",
    "nope.sched",
    "loop.py",
    "loop.sched",
    "x" * 300 + ".py",
    "/" + "a/" * 2000 + "x.sched",
    "folder.py",
    "bad.py",
    "raises.py",
    "binary.sched",
    "self.sched",
    "\u00e9.py",
    "../graphs",
]


def _mutant(rng: random.Random, text: str) -> bytes:
    tokens = TOKEN.findall(text)
    kind = rng.choice(["delete", "duplicate", "swap", "cut", "insert", "long name", "repeat", "path", "nest"])
    i = rng.randrange(len(tokens))
    if kind == "delete":
        tokens[i] = ""
    elif kind == "duplicate":
        tokens[i] *= rng.choice([2, 3])
    elif kind == "swap":
        j = min(i + 1 + rng.randrange(3), len(tokens) - 1)
        tokens[i], tokens[j] = tokens[j], tokens[i]
    elif kind == "cut":  # (at a byte: perhaps inside a character's UTF-8)
        data = text.encode()
        return data[: rng.randrange(len(data) + 1)]
    elif kind == "insert":
        tokens[i] = rng.choice(CHARACTERS) * rng.choice([1, 1, 3]) + tokens[i]
    elif kind == "long name":
        names = [t for t in tokens if re.fullmatch(r"[a-z_][A-Za-z0-9_]*", t) and t not in ("true", "false")]
        name = rng.choice(names)
        tokens = [t + "x" * 20_000 if t == name else t for t in tokens]
    elif kind == "repeat":  # (a declaration, a setting or an element class written twice)
        lines = text.split("\n")
        at = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[at])
        return "\n".join(lines).encode()
    elif kind == "path":
        statement = f'{rng.choice(["require", "import"])} "{rng.choice(ODD_PATHS)}";\n'
        at = rng.randrange(len(tokens))
        tokens.insert(at, statement)
    else:  # element classes each holding the one before, around the deepest that may nest
        depth = rng.choice([5, 99, 100, 101, 120])
        classes = ["elementclass C0 { input -> AcceptAll -> output; }"]
        classes += [f"elementclass C{k} {{ input -> C{k - 1} -> output; }}" for k in range(1, depth + 1)]
        chain = f"src :: PoissonSource(rate=8/h, jobs=5, seed=1); src -> C{depth} -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;"
        return ("round = 5min;\n" + "\n".join(classes) + "\n" + chain + "\n").encode()
    return "".join(tokens).encode("utf-8", "surrogatepass")


def _each(errors: list) -> list:
    return [e for err in errors for e in (_each(err.errors) if isinstance(err, SchedErrors | RoundhouseErrors) else [err])]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A graphs/ folder beside the repository's traces and clusters, with the odd files a mutant may name."""
    root = tmp_path_factory.mktemp("fuzz")
    for name in ("traces", "clusters"):
        (root / name).symlink_to(REPO / name)
    here = root / "graphs"
    here.mkdir()
    (here / "loop.py").symlink_to("loop.py")
    (here / "loop.sched").symlink_to("loop.sched")
    (here / "folder.py").mkdir()
    (here / "bad.py").write_text("def (:\n")
    (here / "raises.py").write_text("raise RuntimeError('at import')\n")
    (here / "binary.sched").write_bytes(bytes(range(256)))
    (here / "self.sched").write_text('import "self.sched";\n')
    return here


def test_mutated_graphs_compile_or_say_where(folder):
    rng = random.Random(SEED)
    seeds = [path.read_text() for path in GRAPHS] + [COMPOUND]
    refused = 0
    for case in range(CASES):
        data = _mutant(rng, rng.choice(seeds))
        path = folder / f"mutant{case % 10}.sched"
        path.write_bytes(data)
        started = time.perf_counter()
        try:
            with registry.scope():
                compile_file(path)
        except RoundhouseError as err:
            refused += 1
            errors = _each([err])
        else:
            errors = []
        # (a hang shows as a case taking seconds; each takes milliseconds)
        assert time.perf_counter() - started < 5, f"case {case} took {time.perf_counter() - started:.1f}s"
        try:
            lines = source_lines(data.decode("utf-8").removeprefix("\ufeff"))  # (as the parser counts them)
        except UnicodeDecodeError:
            lines = None
        for err in errors:
            assert isinstance(err, SchedError), f"case {case}: {err}"
            assert err.location is not None, f"case {case}: {err}"
            where = err.location
            if where.path == str(path) and lines is not None:
                assert 1 <= where.line <= len(lines), f"case {case}: {err}"
                assert 1 <= where.column <= len(lines[where.line - 1]) + 1, f"case {case}: {err}"
            assert "Traceback" not in str(err)
    # (most mutants are refused: the test checks errors, not that mutants happen to be graphs)
    assert refused > CASES // 2
