"""The LP libraries, loaded on first use.

Most graphs use no Gavel element, yet every scheduler, agent and CLI process registers them;
importing scipy.sparse and OR-Tools' model builder up front cost each of those processes about
0.3 s. The modules below load when an attribute is first read (Python's `LazyLoader`).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["mbh", "sp"]


def _lazy(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None, name
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


if TYPE_CHECKING:
    import scipy.sparse as sp
    from ortools.linear_solver.python import model_builder_helper as mbh
else:
    sp = _lazy("scipy.sparse")
    mbh = _lazy("ortools.linear_solver.python.model_builder_helper")
