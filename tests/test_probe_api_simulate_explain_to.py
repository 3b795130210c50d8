"""`simulate(..., explain_to=PATH)` writes the record only when `explain` keeps one: given
without it, the file asked for was silently never written; now it is refused, naming both."""

from __future__ import annotations

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import Override, compile_file
from roundhouse.runtime.explain import FILE_NAME
from roundhouse.runtime.simulate import simulate
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"


def _graph():
    return compile_file(FIFO, [Override("arrivals.jobs=8")])


def test_explain_to_without_explain_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"^explain_to: .*explain=True"):
        simulate(_graph(), "4x4:V100", explain_to=tmp_path / FILE_NAME)
    assert list(tmp_path.iterdir()) == []


def test_explain_to_with_explain_writes_the_record_there(tmp_path):
    path = tmp_path / FILE_NAME
    result = simulate(_graph(), "4x4:V100", explain=True, explain_to=path)
    result.world.explain.write(path, result.world)
    assert path.is_file()
    assert len(result.world.explain.frame(result.world)) > 0
