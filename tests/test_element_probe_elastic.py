"""The elastic-job elements' references (Pollux, PolluxAgent, Ones) checked against behaviour:
small traces on small clusters, and bad arguments refused at the argument."""

import re

import pytest

from roundhouse.elements.policies import pollux
from roundhouse.elements.policies.ones import Ones
from roundhouse.elements.policies.pollux import Pollux
from roundhouse.errors import RoundhouseError
from tests.conftest import jobs_of

POLLUX = """
round = 60s;
cluster = "1x4:V100";
elastic_profile = "pollux";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> sched :: Pollux({args}) -> PolluxAgent{agent} -> Launch -> m :: JobMetrics;
"""

ONES = """
round = 10s;
cluster = "1x2:V100";
elastic_profile = "ones";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> sched :: Ones({args}) -> Launch -> m :: JobMetrics;
"""


def _flat(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "")


def _pollux_job(job_id: int, model: str = "cifar10", **extra) -> dict:
    row = {"job_id": job_id, "arrival_s": 0.0, "gpus": 1, "model": model, "batch_size": 128, "epochs": 1.0}
    return {**row, "max_gpus": 64.0, "batch_fixed": 0.0, **extra}


def _ones_job(job_id: int, **extra) -> dict:
    # vgg16-cifar as the ONES trace reader writes it: `epochs` in epochs of 20000 samples.
    row = {"job_id": job_id, "arrival_s": 0.0, "gpus": 1, "model": "vgg16-cifar", "batch_size": 128, "epochs": 2.0}
    return {**row, "local_batch": 128.0, "epoch_size": 20000.0, "max_gpus": 16.0, "max_batch_size": 2048.0, **extra}


def test_ones_refits_its_predictor_once_a_round_on_every_job_finished_in_it(run_graph):
    """Two equal jobs side by side finish in the same round: one refit, on both, as the
    reference's `refit_steps` and cost line say (not one per completion)."""
    result = run_graph(ONES.format(args="population=4, seed=0, limit=false"), [_ones_job(0), _ones_job(1)])
    jobs = jobs_of(result)
    assert jobs[0]["finish_s"] == pytest.approx(jobs[1]["finish_s"])
    assert result.counters["sched"]["refits"] == 1
    doc = _flat(Ones.__doc__)
    assert "one refit in each round in which jobs finished" in doc
    assert "in each round in which jobs finished." in doc and "per completion" not in doc


def test_pollux_computes_a_goodput_table_once_per_application_and_fixed_batch(run_graph, monkeypatch):
    """Two cifar10 jobs share one table; an NCF job of fixed batch has its own; none is computed
    again in the later searches, as the cost line says."""
    computed = []
    table = pollux.goodput_table

    def counted(elastic, app, batch, *args, **kwargs):
        computed.extend(zip(app.tolist(), batch.tolist(), strict=True))
        return table(elastic, app, batch, *args, **kwargs)

    monkeypatch.setattr(pollux, "goodput_table", counted)
    trace = [_pollux_job(0), _pollux_job(1, epochs=2.0), _pollux_job(2, "ncf", batch_size=32768, batch_fixed=1.0, max_gpus=1.0)]
    result = run_graph(POLLUX.format(args="population=6, generations=3, seed=0", agent=""), trace)
    assert result.counters["sched"]["searches"] > 2
    assert len(computed) == len(set(computed)) == 2
    assert {batch for _, batch in computed} == {0, 32768}
    assert "per application and fixed batch size, computed once" in _flat(Pollux.__doc__)


@pytest.mark.parametrize(
    "graph, args, said",
    [
        (POLLUX, "population=0", "'population' of Pollux must be greater than 0"),
        (POLLUX, "generations=100001", "'generations' of Pollux must be at most 100000"),
        (POLLUX, "patience=0", "'patience' of Pollux must be greater than 0"),
        (POLLUX, "p=-11", "'p' of Pollux must be at least -10"),
        (POLLUX, "p=1e-9", "'p' of Pollux must be 0 (the geometric mean) or at least 1e-06"),
        (POLLUX, "restart_delay=-1s", "'restart_delay' of Pollux must be 0 or more"),
        (POLLUX, "interval=-1s", "'interval' of Pollux must be 0 or more"),
        (POLLUX, "seed=-1", "'seed' of Pollux must be 0 or more"),
        (POLLUX, "explore=1", "'explore' of Pollux expects true or false"),
        (ONES, "mutate_rate=1.5", "'mutate_rate' of Ones must be at most 1"),
        (ONES, "swap=-0.1", "'swap' of Ones must be 0 or more"),
        (ONES, "sigma=-1/s", "'sigma' of Ones must be 0 or more"),
        (ONES, 'rounding="up"', "'rounding' of Ones must be one of 'ceil', 'floor'"),
        (ONES, 'rounding="ceil"', "needs sigma"),
        (ONES, "gate_epochs=-1", "'gate_epochs' of Ones must be 0 or more"),
        (ONES, "refit_steps=0", "'refit_steps' of Ones must be greater than 0"),
        (ONES, 'history="nowhere.csv"', "'history' of Ones names no file"),
    ],
)
def test_a_bad_argument_is_refused_at_its_line(run_graph, graph, args, said):
    with pytest.raises(RoundhouseError) as caught:
        run_graph(graph.format(args=args, agent=""), [_ones_job(0)])
    text = str(caught.value)
    assert "graph.sched:6:" in text and said in text and "Traceback" not in text


def test_polluxagent_refuses_no_candidates(run_graph):
    with pytest.raises(RoundhouseError) as caught:
        run_graph(POLLUX.format(args="seed=0", agent="(candidates=0)"), [_pollux_job(0)])
    assert "graph.sched:6:" in str(caught.value) and "'candidates' of PolluxAgent must be greater than 0" in str(caught.value)
