"""Optimus swapped in on a cluster of several GPU types: the GPU counts it hands out are ones
the job can run at on the types a placer may put it on. (ResNet-50 at batch size 128 runs on
K80s only on one GPU: given more, a placer that sends it to the K80s made a plan no GPU can run.)"""

import pytest

from roundhouse.tools.cli import main

TRACE = (
    "job_id,arrival_s,model,batch_size,gpus,duration_s\n"
    "0,0,ResNet-50,128,4,36000\n"
    "1,0,ResNet-50,128,1,36000\n"
    "2,0,ResNet-50,128,1,36000\n"
)
GRAPH = """\
round = 6min;
cluster = "1x4:V100,1x4:K80";
arrivals :: TraceSource(path="t.csv");
arrivals -> AcceptAll -> JobPool -> Optimus -> {placer} -> Launch -> report :: JobMetrics;
"""


@pytest.mark.parametrize("placer", ["Consolidated", "FirstFree", "GavelPlacer"])
def test_optimus_counts_run_on_every_type_of_the_cluster(tmp_path, capsys, placer):
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "g.sched").write_text(GRAPH.format(placer=placer))
    out = tmp_path / "out"
    code = main(["run", str(tmp_path / "g.sched"), "--out", str(out), "--quiet", "--no-explain"])
    err = capsys.readouterr().err
    assert code == 0, err
    rows = [line.split(",") for line in (out / "jobs.csv").read_text().splitlines()]
    header, body = rows[0], rows[1:]
    status = header.index("status")
    assert [r[status] for r in body] == ["finished"] * 3
