"""The LP libraries, loaded on first use.

A process may import Gavel's elements without solving a program: listing or checking elements,
checking a graph, a scheduler before its first solve. Importing scipy.sparse and OR-Tools' model
builder up front would cost each such process about 0.3 s, and even finding them without
importing them (Python's `LazyLoader` needs their specs) about 0.04 s. The names below stand for
the modules and import them when one of their attributes is first read.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["mbh", "sp"]


class _OnFirstUse(ModuleType):
    """A module imported when one of its attributes is first read."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:  # (called only for names the stand-in lacks)
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self.__name__)
        return getattr(module, attr)


if TYPE_CHECKING:
    import scipy.sparse as sp
    from ortools.linear_solver.python import model_builder_helper as mbh
else:
    sp = _OnFirstUse("scipy.sparse")
    mbh = _OnFirstUse("ortools.linear_solver.python.model_builder_helper")
