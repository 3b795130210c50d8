"""Corners of ChooseAdmission: a gate that cannot hand its held jobs over is named where the
graph makes it a candidate."""

from tests.conftest import fails

GATE = '''
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Jobs


@element
class PassGate(Element):
    """Pass every job.

    Ports:
        jobs: arriving jobs.
        admitted: the same jobs.
    Arguments:
        none
    Counters:
        none
    See also: AcceptAll
    Paper: none
    """

    state = ()
    category = "admission"
    inputs = (In("jobs", Jobs, multi=True),)
    outputs = (Out("admitted", Jobs),)

    def tick(self, ctx, jobs):
        return jobs
'''

GRAPH = """require "gate.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=4/h, jobs=30, gpus=single, models=blox, seed=0);
p :: PassGate; all :: AcceptAll;
admit :: ChooseAdmission(candidates=[all, p]);
arrivals -> admit -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def test_a_gate_that_cannot_hand_over_its_jobs_is_named_at_the_candidate(tmp_path, capsys):
    (tmp_path / "gate.py").write_text(GATE)
    path = tmp_path / "g.sched"
    path.write_text(GRAPH)
    for command in ("check", "run"):
        err = fails(capsys, command, path)
        assert f"{path}:6:43: error: 'p' (PassGate) cannot be a candidate of a ChooseAdmission" in err
        assert "hand_over and take_over" in err
        assert "raised" not in err and "--debug" not in err


NESTED = """round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=4/h, jobs=30, gpus=single, models=blox, seed=0);
fifo :: Fifo; srtf :: Srtf; las :: Las;
inner :: ChoosePolicy(candidates=[fifo, srtf]);
order :: ChoosePolicy(candidates=[inner, las]);
arrivals -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;
"""


def test_a_switch_among_a_switchs_candidates_is_named_where_it_is_given(tmp_path, capsys):
    # Before: it ran, and the record credited its rankings to the inner switch rather than to
    # the policy acting inside it (and a synthesizer weighed the same combinations twice).
    path = tmp_path / "g.sched"
    path.write_text(NESTED)
    err = fails(capsys, "check", path)
    assert f"{path}:6:35: error: 'inner' (ChoosePolicy) cannot be a candidate of a switch" in err
