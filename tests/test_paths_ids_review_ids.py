"""Job ids in a run are unique across its sources: a live submission is never given an id that
another source (a trace) will still bring, one that asks for such an id is refused naming the
source, and two generated sources that clash are told how to part their ids."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.errors import SchedError, TraceError
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.simulation import Simulation
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable

LM = {"model": "LM", "iterations": 10, "gpus": 1}


class _Source:
    """What Submissions asks of a source: its name, where it is declared and its coming ids."""

    def __init__(self, name: str, ids):
        self.name = name
        self.declared_at = None
        self._ids = None if ids is None else np.asarray(ids, dtype=np.int64)

    def coming_job_ids(self):
        return self._ids


def _submissions(path) -> tuple[Submissions, Journal]:
    journal = Journal(path)
    return Submissions(World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100"), journal), journal


def test_a_submission_is_given_no_id_a_source_will_bring(tmp_path):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    submissions.expect([_Source("live", None), _Source("trace", [0, 1, 2, 7])])
    assert submissions.accept([LM, LM], 0.0) == [8, 9]
    assert submissions.accept([{**LM, "job_id": 4}, LM], 0.0) == [4, 10]
    journal.commit()
    journal.close()
    # A restarted scheduler, told the same, goes on from the same place.
    again, journal = _submissions(tmp_path / "j.sqlite")
    again.expect([_Source("trace", [0, 1, 2, 7])])
    assert again.accept([LM], 0.0) == [11]
    journal.close()


def test_a_submission_that_asks_for_an_id_a_source_will_bring_is_refused(tmp_path):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    submissions.expect([_Source("trace", [0, 1, 2, 7]), _Source("burst", [100, 101])])
    with pytest.raises(TraceError) as got:
        submissions.accept([LM, {**LM, "job_id": 101}], 0.0)
    assert str(got.value).startswith("submission:2: error: job id 101 is one that source 'burst' will bring later")
    assert not journal.submission_ids()  # none of the submission is accepted
    journal.close()


def test_a_submission_accepted_before_the_sources_started_that_clashes_is_said(tmp_path):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    assert submissions.accept([LM], 0.0) == [0]  # (before the sources' ids were known)
    with pytest.raises(SchedError) as got:
        submissions.expect([_Source("trace", [0, 1])])
    assert "element 'trace' (_Source): job id 0 is also the id of a job submitted" in got.value.message
    assert "start_id" in (got.value.hint or "")
    journal.close()


def test_two_generated_sources_with_one_id_are_told_about_start_id(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "2x4:V100";\n'
        "a :: PoissonSource(jobs=5, rate=6/h);\nb :: PoissonSource(jobs=5, rate=6/h);\n"
        "a -> g :: AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\nb -> g;\n"
    )
    with pytest.raises(SchedError) as got:
        Simulation(str(path)).run()
    assert "job id 0 is also one of element 'a's jobs" in got.value.message
    assert "give 'b' a start_id past the other source's ids, e.g. start_id=5" in (got.value.hint or "")


def test_the_simulation_says_a_trace_for_several_trace_sources_is_refused(tmp_path):
    from roundhouse.errors import UsageError
    from tests.conftest import REPO

    trace = REPO / "traces" / "samples" / "philly-1000.csv"
    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "2x4:V100";\n'
        f'a :: TraceSource(path="{trace}", jobs=5);\nb :: TraceSource(path="{trace}", jobs=5);\n'
        "a -> g :: AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\nb -> g;\n"
    )
    with pytest.raises(UsageError, match="has 2 TraceSource elements"):
        Simulation(str(path), trace=str(trace))
    doc = " ".join((Simulation.__doc__ or "").split())
    assert "replaces the path of the graph's one `TraceSource`" in doc and "with several" in doc
    assert "every `TraceSource`" not in doc
    api = " ".join((REPO / "docs" / "simulation-api.md").read_text().split())
    assert "a `trace` for a graph with no TraceSource, or with several" in api


def test_an_engine_with_submissions_tells_them_the_ids_its_sources_will_bring(tmp_path):
    """The engine, once its sources have started, hands their coming ids to the backend's
    submissions (a live backend's): the first submission then takes an id past them."""
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import new_engine

    (tmp_path / "g.sched").write_text(
        'round = 1min;\ncluster = "1x2:V100";\n'
        "src :: PoissonSource(jobs=5, rate=6/h, start_id=3);\n"
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    graph = compile_file(tmp_path / "g.sched")
    engine = new_engine(graph)
    journal = Journal(tmp_path / "j.sqlite")
    engine.backend.submissions = Submissions(engine.world, journal)  # (as a live backend holds them)
    engine.begin()
    assert engine.backend.submissions.accept([LM], 0.0) == [8]  # (the source brings 3 to 7)
    journal.close()
