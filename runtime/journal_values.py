"""How the journal's checks judge and show a value read back from it: a number is a finite int
or float (as JSON and SQLite give them: not a bool, not text), and a value named in an error is
cut short, so that a damaged row's message stays one line."""

from __future__ import annotations

import json
import math
from typing import Any


def is_number(x: Any) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def cell(value: Any) -> str:
    """A cell of a row as Python shows it, cut short (it may be text, a number or bytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def shown(value: Any) -> str:
    """A value as JSON, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
