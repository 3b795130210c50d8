"""The element registry: class name -> element class, filled by the `@element` decorator.

A graph names a handful of the library's elements, and importing the whole library (Gavel's
solvers, Pollux, Optimus and the rest) costs every command-line run and every scheduler process
about a tenth of a second. So the registry finds the built-in elements in the library's source
text (each is a class under `@element`), and imports an element's module when the element is
first looked up; listing every class (`classes`) imports them all.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING

from roundhouse.errors import did_you_mean

if TYPE_CHECKING:
    from roundhouse.runtime.element import Element

_CLASSES: dict[str, type[Element]] = {}
_LOADED = False
_LIBRARY = "roundhouse.elements"
# A built-in element: `@element` (maybe with other decorators after it), then its class line.
_DECLARED = re.compile(r"^@element\n(?:@[^\n]*\n)*class (\w+)", re.MULTILINE)


@functools.cache
def builtin_modules() -> dict[str, str]:
    """Class name -> module of every built-in element, read from the library's sources."""
    spec = importlib.util.find_spec(_LIBRARY)
    assert spec is not None and spec.submodule_search_locations is not None  # (the library ships with the package)
    root = Path(next(iter(spec.submodule_search_locations)))
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join((_LIBRARY, *path.relative_to(root).with_suffix("").parts))
        for name in _DECLARED.findall(path.read_text(encoding="utf-8")):
            found[name] = module
    return found


def register(cls: type[Element]) -> None:
    # Where a class of this name is defined already: registered, or a built-in not imported yet.
    existing = _CLASSES.get(cls.__name__)
    home = (
        (existing.__module__, existing.__qualname__)
        if existing is not None
        else (builtin_modules().get(cls.__name__), cls.__name__)
    )
    if home[0] is not None and home != (cls.__module__, cls.__qualname__):
        raise TypeError(f"element class {cls.__name__} is defined twice: in {home[0]} and {cls.__module__}")
    _CLASSES[cls.__name__] = cls


def load_builtin() -> None:
    """Import the whole element library (each family module registers its classes)."""
    global _LOADED
    if not _LOADED:
        for module in sorted(set(builtin_modules().values())):
            importlib.import_module(module)
        _LOADED = True


def get(name: str) -> type[Element] | None:
    cls = _CLASSES.get(name)
    if cls is None and not _LOADED:
        module = builtin_modules().get(name)
        if module is not None:
            importlib.import_module(module)
            cls = _CLASSES.get(name)
    return cls


def names() -> list[str]:
    return sorted(set(_CLASSES) | set(builtin_modules()))


def classes() -> list[type[Element]]:
    load_builtin()
    return [_CLASSES[n] for n in sorted(_CLASSES)]


def suggest(name: str) -> str | None:
    return did_you_mean(name, names())
