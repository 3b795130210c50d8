"""The user's own Python modules that a graph's required element files import from their
folders: found (by the files' import statements, as loaded in this process), digested for a
run's key, and imported again when their files change under a long-lived worker."""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType


def file_digest(path: str | os.PathLike) -> str:
    """A file's SHA-256, read a block at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# Where installed code lies: modules from there are Python's or a package's, whose version
# does not change under a running sweep.
INSTALLED = tuple(
    os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)

# The modules `helper_modules` found in this process: name -> (module, its file, the digest of
# that file when the module was first found), so that one whose file changes since can be
# imported again (`forget_changed_modules`).
_SEEN_MODULES: dict[str, tuple[ModuleType, str, str]] = {}


@cache
def _real_file(file: str) -> str:
    return os.path.realpath(file)


def helper_modules(required: Iterable[str]) -> dict[str, str]:
    """The user's own modules that required Python files import (as `import helper`, or `from
    helper import SIGN`) from their own folder or below, directly or through one another, as
    loaded in this process now: their files, by their paths within that folder (a required
    file's index first, when a graph requires several). Element files themselves are digested
    on their own; installed packages are left out."""
    found: dict[str, str] = {}
    for index, file in enumerate(required):
        root = os.path.dirname(os.path.realpath(file)) + os.sep
        for _, _, real in _helpers(file):
            found[f"{index}:{real[len(root) :]}"] = real
    return found


def user_imports(file: str) -> dict[str, ModuleType]:
    """The user's own modules a required Python file imports (as `helper_modules` finds them),
    by module name: kept with the file's module, so that it is imported again once one of them
    is (`still_current`)."""
    return {name: module for name, module, _ in _helpers(file)}


def still_current(modules: dict[str, ModuleType]) -> bool:
    """Whether each of these modules is still the one imported under its name (none was
    dropped by `forget_changed_modules` since)."""
    return all(sys.modules.get(name) is module for name, module in modules.items())


def seen_digests(required: Iterable[str]) -> dict[str, str]:
    """The user's modules that required files import (`helper_modules`), by whole path: the
    SHA-256 of each file as it was when its module was imported (first found), for a snapshot
    to record the code its state was made by."""
    out: dict[str, str] = {}
    for file in required:
        for name, module, real in _helpers(file):
            seen = _SEEN_MODULES.get(name)
            out[real] = seen[2] if seen is not None and seen[0] is module else file_digest(real)
    return out


def _helpers(file: str) -> Iterator[tuple[str, ModuleType, str]]:
    """(name, module, whole path) of each user module `file` imports from its folder or below,
    directly or through one another; each is remembered for `forget_changed_modules`."""
    root = os.path.dirname(os.path.realpath(file)) + os.sep
    pending: list[tuple[str, str | None]] = [(file, None)]
    done = {os.path.realpath(file)}
    while pending:
        source, package = pending.pop()
        for name in _imported_names(source, package):
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None)
            if module is None or not isinstance(path, str) or name.partition(".")[0] == "roundhouse":
                continue  # (Roundhouse's own code is in the key as its version)
            real = _real_file(path)
            if real in done or not real.startswith(root) or real.startswith(INSTALLED) or not os.path.isfile(real):
                continue
            done.add(real)
            seen = _SEEN_MODULES.get(name)
            if seen is None or seen[0] is not module:
                _SEEN_MODULES[name] = (module, real, file_digest(real))
            yield name, module, real
            if real.endswith(".py"):
                pending.append((real, module.__package__ or None))


def _imported_names(file: str, package: str | None) -> list[str]:
    """The modules a Python file's import statements name (a package's parents included, and
    for `from a import b`, `a.b` too: it may be a module); relative ones from `package`."""
    try:
        stat = os.stat(file)
    except OSError:
        return []
    return _parsed_imports(file, stat.st_mtime_ns, stat.st_size, package)


@lru_cache(maxsize=256)
def _parsed_imports(file: str, _mtime_ns: int, _size: int, package: str | None) -> list[str]:
    import ast

    try:
        tree = ast.parse(Path(file).read_bytes(), file)
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [n for alias in node.names for n in _with_parents(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    continue
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            if base:
                names += _with_parents(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
    return list(dict.fromkeys(names))


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def forget_changed_modules() -> None:
    """Drop from `sys.modules` the user's modules (seen by `helper_modules`) whose file has
    changed since they were imported, so that the element file importing them next imports
    them as they are now: a long-lived worker runs many sweeps, a notebook builds many
    simulations (an element file whose modules were dropped is imported again, runtime/dsl/loader.py)."""
    for name, (module, file, digest) in list(_SEEN_MODULES.items()):
        try:
            changed = file_digest(file) != digest
        except OSError:
            changed = True
        if changed or sys.modules.get(name) is not module:
            del _SEEN_MODULES[name]
            if changed and sys.modules.get(name) is module:
                del sys.modules[name]
