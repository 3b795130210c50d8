"""The element registry: class name -> element class, filled by the `@element` decorator."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from roundhouse.errors import did_you_mean

if TYPE_CHECKING:
    from roundhouse.runtime.element import Element

_CLASSES: dict[str, type[Element]] = {}
_LOADED = False


def register(cls: type[Element]) -> None:
    existing = _CLASSES.get(cls.__name__)
    if existing is not None and existing is not cls:
        if (existing.__module__, existing.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"element class {cls.__name__} is defined twice: in {existing.__module__} and {cls.__module__}")
    _CLASSES[cls.__name__] = cls


def load_builtin() -> None:
    """Import the element library (each family module registers its classes)."""
    global _LOADED
    if not _LOADED:
        importlib.import_module("roundhouse.elements")
        _LOADED = True


def get(name: str) -> type[Element] | None:
    load_builtin()
    return _CLASSES.get(name)


def names() -> list[str]:
    load_builtin()
    return sorted(_CLASSES)


def classes() -> list[type[Element]]:
    load_builtin()
    return [_CLASSES[n] for n in sorted(_CLASSES)]


def suggest(name: str) -> str | None:
    return did_you_mean(name, names())
