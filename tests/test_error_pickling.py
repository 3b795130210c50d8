"""Every RoundhouseError crosses a process boundary as itself: a sweep's or a reproduction's
worker raises it, the parent unpickles it and prints the same text (file, line, message), not a
BrokenProcessPool or a failed unpickling."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import subprocess
import sys

import pytest

import roundhouse
from roundhouse.errors import (
    ClusterError,
    Location,
    RoundhouseError,
    SchedError,
    SchedErrors,
    TraceError,
    UsageError,
    remember_source,
)
from tests.conftest import REPO


def _every_subclass() -> list[type[RoundhouseError]]:
    for module in pkgutil.walk_packages(roundhouse.__path__, "roundhouse."):
        importlib.import_module(module.name)  # (a subclass exists once its module is imported)
    found, todo = [], [RoundhouseError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and sub.__module__.startswith("roundhouse."):
                found.append(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


# Errors whose constructor takes more than a message, as they are raised.
SOURCE = 'round = 1min;\ncluster = "1x1:V100";\nsrc :: TraceSourse(path="t.csv");\n'
SAMPLES: dict[type, RoundhouseError] = {
    SchedError: SchedError("unknown element 'TraceSourse'", Location("g.sched", 3, 8, 11), hint="did you mean 'TraceSource'?"),
    SchedErrors: SchedErrors(
        [SchedError("second", Location("g.sched", 3, 8, 11)), SchedError("first", Location("g.sched", 1, 9, 4))]
    ),
    TraceError: TraceError("t.csv", "job id 7 is used twice", row=9, column="job_id", also=4),
    ClusterError: ClusterError("no [[group]] tables", "c.toml"),
    UsageError: UsageError("--out: the folder name is empty"),
}


def _sample(cls: type[RoundhouseError]) -> RoundhouseError:
    if cls in SAMPLES:
        return SAMPLES[cls]
    if cls.__name__ == "SchedulerError":
        return cls("the scheduler refused job 3", [1, 2])  # type: ignore[call-arg]
    err = cls("a message naming f.csv:3")
    err.detail = "Traceback (most recent call last): ..."  # (ElementFailure's; any error may carry one)
    return err


def test_every_error_class_is_tried():
    names = {c.__name__ for c in _every_subclass()}
    # The ones whose constructors differ from their args: the cause of a failed unpickling.
    assert {"SchedError", "SchedErrors", "TraceError", "ClusterError", "SchedulerError", "ElementFailure"} <= names


@pytest.mark.parametrize("cls", _every_subclass(), ids=lambda c: c.__name__)
def test_an_error_round_trips_through_pickle(cls):
    remember_source("g.sched", SOURCE)
    err = _sample(cls)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is cls
    assert str(copy) == str(err) and copy.args == err.args
    assert vars(copy).keys() == vars(err).keys()
    assert copy.exit_code == 2


def test_errors_print_the_same_in_another_process(tmp_path):
    """What a worker's error looks like in the parent, which has not read the worker's graph:
    the quoted line and its underline come along."""
    remember_source("g.sched", SOURCE)
    errors = [_sample(cls) for cls in _every_subclass()]
    assert "TraceSourse" in str(SAMPLES[SchedError]) and "^^^" in str(SAMPLES[SchedError])
    shown = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; print('\\x00'.join(map(str, pickle.load(sys.stdin.buffer))))"],
        input=pickle.dumps(errors),
        capture_output=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": ""},
        check=True,
    )
    assert shown.stdout.decode().rstrip("\n").split("\x00") == [str(e) for e in errors]


def test_a_trace_error_keeps_where_it_is():
    copy = pickle.loads(pickle.dumps(SAMPLES[TraceError]))
    assert (copy.path, copy.row, copy.column, copy.also) == ("t.csv", 9, "job_id", 4)
    assert str(copy) == "t.csv:9: error: column 'job_id': job id 7 is used twice: here and at t.csv:4"
