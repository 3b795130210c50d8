"""The intake elements (sources, admission gates, the pool, loss termination, the switches)
against their references: a refusal names the job and the element it is about, a switch naming
itself is refused once, and each element's per-round cost is what its reference says."""

from __future__ import annotations

import numpy as np

from roundhouse.runtime.simulation import Simulation
from tests.conftest import fails, write_trace


def _graph(tmp_path, body: str) -> str:
    path = tmp_path / "g.sched"
    path.write_text(f'round = 5min;\ncluster = "1x4:V100";\n{body}\n')
    return str(path)


class _CountingNumpy:
    """numpy as one element module sees it, with the lengths of what `function` returns noted."""

    def __init__(self, function: str, noted: list[int]):
        self._function, self._noted = function, noted

    def __getattr__(self, name):
        found = getattr(np, name)
        if name != self._function:
            return found

        def noting(*args, **kwargs):
            out = found(*args, **kwargs)
            self._noted.append(len(out))
            return out

        return noting


def test_timing_duration_without_a_duration_names_the_job_and_the_source(tmp_path, capsys):
    # Job 8 has no duration (it is known by its model and iterations): with timing=duration it
    # has nothing to run for, and a trace of a million jobs must say which one.
    (tmp_path / "t.csv").write_text(
        "job_id,arrival_s,gpus,duration_s,model,batch_size,iterations\n7,0,1,600,ResNet-50,64,\n8,0,1,,ResNet-50,64,1000\n"
    )
    graph = _graph(
        tmp_path,
        'src :: TraceSource(path="t.csv", timing="duration");\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;',
    )
    err = fails(capsys, "check", graph)
    assert "t.csv: error: column 'duration_s': job 8 has none" in err, err
    assert "timing=duration needs a duration_s for every job" in err
    assert "element 'src' (TraceSource), declared at " in err and "g.sched:3:1" in err


def test_an_admission_switch_naming_itself_is_refused_once(tmp_path, capsys):
    graph = _graph(
        tmp_path,
        'src :: TraceSource(path="t.csv");\n'
        "src -> ca :: ChooseAdmission(candidates=[ca]) -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;",
    )
    write_trace(tmp_path / "t.csv", [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 600.0}])
    err = fails(capsys, "check", graph)
    assert "'ca' names itself as one of its own candidates" in err
    # (not also that it lacks a gate's hand_over: it is not a candidate at all)
    assert err.count("error:") == 1, err


def test_a_threshold_gate_with_a_blocked_queue_does_not_sum_the_queue_in_a_quiet_round(tmp_path, monkeypatch):
    # One 4-GPU job takes the demand past the limit (0.5x of 4 GPUs: 2); the 200 behind it wait
    # (each refused on the demand before it, 4). Rounds without
    # arrivals or completions cost O(a) over the admitted jobs (its reference), not O(q) over
    # the queue: the queue's head is refused on the demand alone.
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 36000.0}]
    jobs += [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 600.0} for i in range(1, 201)]
    write_trace(tmp_path / "t.csv", jobs)
    graph = _graph(
        tmp_path,
        'src :: TraceSource(path="t.csv");\n'
        "src -> gate :: AcceptThreshold(factor=0.5x) -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;",
    )
    sim = Simulation(graph)
    sim.step()  # (the round the jobs arrive in: they are queued)
    gate = sim.graph.elements["gate"]
    assert gate.counters == {"admitted": 1, "queued": 200, "demand": 4}
    import roundhouse.elements.admission as admission

    summed: list[int] = []
    monkeypatch.setattr(admission, "np", _CountingNumpy("cumsum", summed))
    for _ in range(5):
        sim.step()
    assert gate.counters == {"admitted": 1, "queued": 200, "demand": 4}
    assert summed == []
    monkeypatch.undo()
    # ...and once the big job finishes, the queue is taken in as before: the demand before each
    # of the next 1-GPU jobs is 0, 1 and 2, within the limit, and 3 before the fourth, past it.
    sim.run_until(36000.0 + 300.0)
    assert gate.counters == {"admitted": 1 + 3, "queued": 197, "demand": 3}


def test_the_pool_and_the_admission_switch_copy_the_jobs_they_hold_when_jobs_join_as_their_references_say(tmp_path, monkeypatch):
    # A round in which jobs join makes each one's list of held jobs anew (n + k items copied,
    # not k): their cost lines say so, a cost a million-job run pays in every such round.
    from roundhouse.elements.control import ChooseAdmission
    from roundhouse.elements.pool import JobPool

    write_trace(
        tmp_path / "t.csv", [{"job_id": i, "arrival_s": 300.0 * (i // 3), "gpus": 1, "duration_s": 1e5} for i in range(9)]
    )
    graph = _graph(
        tmp_path,
        'src :: TraceSource(path="t.csv");\na :: AcceptAll;\n'
        "src -> ca :: ChooseAdmission(candidates=[a]) -> pool :: JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;",
    )
    sim = Simulation(graph)
    sim.run_until(600.0)  # (rounds 0 and 300: six jobs joined, none finished)
    import roundhouse.elements.control as control
    import roundhouse.elements.pool as pool

    copied: dict[str, list[int]] = {"pool": [], "control": []}
    monkeypatch.setattr(pool, "np", _CountingNumpy("concatenate", copied["pool"]))
    monkeypatch.setattr(control, "np", _CountingNumpy("concatenate", copied["control"]))
    sim.step()  # (three more join)
    monkeypatch.undo()
    assert sim.graph.elements["pool"].counters["active"] == 9
    # (the switch's admitted jobs and the pool's: 6 held + 3 joining, each made anew)
    assert copied == {"pool": [9], "control": [9]}
    assert "O(n + k) over its jobs n and the jobs k joining" in JobPool.__doc__
    assert "plus O(a + k) over the admitted, unfinished jobs a" in ChooseAdmission.__doc__
