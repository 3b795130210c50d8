"""A run that stalls because a policy leaves a job out of its ranking says whose ranking left it
out (the element the placer takes its ranking from), not only that no placer was asked."""

from __future__ import annotations

import numpy as np

from roundhouse.runtime.stalls import stall_message
from roundhouse.runtime.types import Ranking
from roundhouse.tools.cli import main
from tests.own_elements import policy_file
from tests.test_stall_and_columns import _Placer, _World

POLICY = policy_file(
    "SmallOnly",
    "Ranks only jobs of one GPU; the others never.",
    """
    small = active.gpus == 1
    return Ranking(active.rows[small], active.gpus[small])
    """,
)


def small_only_graph(tmp_path, jobs: str):
    """A graph whose policy ranks only one-GPU jobs (`POLICY`), on 2x4:V100, its trace `jobs`
    (rows of job_id,arrival_s,gpus,duration_s)."""
    (tmp_path / "mine.py").write_text(POLICY)
    (tmp_path / "jobs.csv").write_text(f"job_id,arrival_s,gpus,duration_s\n{jobs}")
    (tmp_path / "g.sched").write_text(
        'require "mine.py";\nround = 5min;\ncluster = "2x4:V100";\nsrc :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> order :: SmallOnly -> place :: FirstFree -> Launch -> JobMetrics;\n"
    )


def test_a_stall_names_the_ranking_that_left_the_job_out(tmp_path, capsys):
    small_only_graph(tmp_path, "0,0,1,600\n1,0,4,600\n")
    assert main(["run", str(tmp_path / "g.sched")]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "run stalled" in err, err
    assert "(the count its trace asks for: no placer was asked to place it: the ranking of 'order' left it out)" in err, err


def test_without_the_wiring_the_message_is_as_before():
    world = _World([2, 16])
    unranked = stall_message(world, 0.0, (), [(_Placer(), Ranking(np.array([0]), np.array([2])))], {"other": ["x"]})
    assert "(the count its trace asks for: no placer was asked to place it) of 8." in unranked
