"""The LP libraries, loaded on first use.

A process may import Gavel's elements without solving a program: listing or checking elements,
checking a graph, a scheduler before its first solve. Importing scipy.sparse and OR-Tools' model
builder up front would cost each such process about 0.3 s, and even finding them without
importing them (Python's `LazyLoader` needs their specs) about 0.04 s. The names below stand for
the modules and import them when one of their attributes is first read.

scipy (1.15 on) clones NumPy's namespace for its array API layer with `from numpy import *`,
which imports every submodule NumPy lists, `numpy.f2py` (Fortran wrapping: about half of
importing scipy.sparse) and `numpy.testing` among them; a solve uses neither. Before scipy is
imported they are loaded lazily: the modules themselves, whose code runs when first read.
"""

from __future__ import annotations

import importlib
import sys
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
            if self.__name__.startswith("scipy"):
                _numpy_extras_on_first_use()
            module = self._module = importlib.import_module(self.__name__)
        return getattr(module, attr)


def _numpy_extras_on_first_use() -> None:
    """`numpy.f2py` and `numpy.testing`, unless imported already (see above), as modules that
    run their code when first read (the standard library's LazyLoader): each is the real module
    from the start, so that patching it, finding its spec or reading its docstring sees it."""
    import importlib.util

    import numpy

    for name in ("f2py", "testing"):
        full = f"numpy.{name}"
        if full in sys.modules or name in numpy.__dict__:
            continue
        spec = importlib.util.find_spec(full)
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        setattr(numpy, name, module)


if TYPE_CHECKING:
    import scipy.sparse as sp
    from ortools.linear_solver.python import model_builder_helper as mbh
else:
    sp = _OnFirstUse("scipy.sparse")
    mbh = _OnFirstUse("ortools.linear_solver.python.model_builder_helper")
