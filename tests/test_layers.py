"""The house's layers (docs/architecture.md's table): each package imports only from those
below it, never from one above it or from the other of its own layer, and never in a circle; no
two command modules import each other; and no class grows past about 300 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from tests.conftest import REPO

PACKAGES = ("traces", "wire", "runtime", "agents", "elements", "tools")
# The layers, bottom first ("roundhouse": the error types, roundhouse/errors.py); the packages of
# one layer do not import each other.
LAYERS = (("roundhouse",), ("traces", "wire"), ("runtime",), ("elements",), ("agents",), ("tools",))
# Every import against them: of a package by one of a lower layer, or of its own layer.
FORBIDDEN = {
    (low, high) for i, lower in enumerate(LAYERS) for low in lower for higher in LAYERS[i:] for high in higher if high != low
}
MAX_CLASS_LINES = 300


def modules() -> dict[str, Path]:
    """Every module of the roundhouse package, by dotted name."""
    found = {"roundhouse.errors": REPO / "roundhouse" / "errors.py"}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")) if (REPO / package).is_dir() else ():
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(("roundhouse", *parts)).removesuffix(".__init__")
            found[name] = path
    return found


def imports(path: Path, name: str) -> set[str]:
    """Modules a module imports, anywhere in it (type-checking blocks and functions included)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("roundhouse.tools."):
            out.add(node.value)  # modules named for importlib (the command list)
    return {m for m in out if m.startswith("roundhouse.")}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "roundhouse"


def against_the_layers(found: dict[str, Path]) -> tuple[list[str], list[list[str]]]:
    """The imports of these modules against the layers (one of each pair of packages), and the
    cycles between packages (each as the imports that make it)."""
    graph = nx.DiGraph()
    where: dict[tuple[str, str], str] = {}
    for name, path in found.items():
        for target in imports(path, name):
            a, b = layer(name), layer(target)
            if a != b:
                graph.add_edge(a, b)
                where.setdefault((a, b), f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path} imports {target}")
    wrong = sorted(where[e] for e in FORBIDDEN if e in where)
    cycles = list(nx.simple_cycles(graph))
    return wrong, [[where[(c[i], c[(i + 1) % len(c)])] for i in range(len(c))] for c in cycles]


def test_packages_import_downward_only():
    wrong, cycles = against_the_layers(modules())
    assert not wrong, wrong
    assert not cycles, cycles


def test_an_import_against_the_layers_without_a_cycle_is_caught(tmp_path):
    found = {}
    for name, line in (
        ("roundhouse.elements.mine", "from roundhouse.agents.client import report\n"),
        ("roundhouse.elements.theirs", "def f():\n    import roundhouse.tools.common\n"),
        ("roundhouse.traces.mine", "from roundhouse.wire import protocol\n"),
        ("roundhouse.wire.mine", "from roundhouse.traces.jobs import FINISHED\n"),
        ("roundhouse.runtime.mine", "from roundhouse.elements.sinks import JobMetrics\n"),
    ):
        path = tmp_path / f"{name}.py"
        path.write_text(line)
        found[name] = path
    wrong, _ = against_the_layers(found)
    assert len(wrong) == len(found) and all(any(str(found[n]) + " imports " in w for w in wrong) for n in found), wrong


def test_every_import_against_the_layers_is_forbidden():
    assert {layer for layers in LAYERS for layer in layers} == {"roundhouse", *PACKAGES}
    rank = {layer: i for i, layers in enumerate(LAYERS) for layer in layers}
    for a in rank:
        for b in rank:
            assert ((a, b) in FORBIDDEN) == (a != b and rank[a] <= rank[b]), (a, b)
    assert {
        ("elements", "agents"),
        ("elements", "tools"),
        ("traces", "wire"),
        ("wire", "traces"),
        ("runtime", "elements"),
    } <= FORBIDDEN


def test_no_two_command_modules_import_each_other():
    found = modules()
    tools = {n: p for n, p in found.items() if n.startswith("roundhouse.tools.")}
    graph = nx.DiGraph()
    for name, path in tools.items():
        for target in imports(path, name):
            if target in tools and target != name:
                graph.add_edge(name, target)
    commands = [n for n in tools if n.endswith("_cmd")]
    between = [(a, b) for a, b in graph.edges if a in commands and b in commands]
    assert not between, between
    assert not list(nx.simple_cycles(graph)), list(nx.simple_cycles(graph))


def test_no_class_is_longer_than_about_three_hundred_lines():
    long = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long, long


def test_the_walk_sees_the_whole_package():
    found = modules()
    assert "roundhouse.runtime.engine" in found and "roundhouse.tools.cli" in found
    assert "roundhouse.runtime.world" in imports(found["roundhouse.runtime.engine"], "roundhouse.runtime.engine")
