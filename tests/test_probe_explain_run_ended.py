"""A live run's end records the jobs it stopped (`run_ended`); `roundhouse explain` words it
as it words every other reason, not as the fallback for a reason it does not know."""

from __future__ import annotations

from roundhouse.runtime.explain import MEANINGS, Reason
from roundhouse.tools.explain_cmd import describe


def _row(reason: str, state: str) -> dict:
    return {
        "reason": reason,
        "state": state,
        "element": "",
        "element_class": "",
        "ranked_by": "",
        "ranked_by_class": "",
        "a": 0,
        "b": 0,
        "c": 0,
    }


def test_a_job_stopped_by_a_live_runs_end_is_worded():
    state = MEANINGS[Reason.RUN_ENDED][0]
    said = describe(_row(Reason.RUN_ENDED.name.lower(), state))
    assert said.startswith(f"{state}: stopped by the run's end")
    assert "a=0" not in said


def test_every_reason_of_the_record_is_worded():
    for reason in Reason:
        state = MEANINGS[reason][0]
        said = describe(_row(reason.name.lower(), state))
        assert "a=0, b=0, c=0" not in said, reason
