"""GavelPlacer swapped in behind a policy that names no GPU type (Fifo, Las, ...) on a cluster
of several types: an entry without a type takes the fastest type it can run on that has room
for it, rather than waiting for the fastest type while the others stand idle. Entries that
name a type (GavelRounds') are placed on it as before."""

import numpy as np

from roundhouse.tools.cli import main

GRAPH = """\
round = 6min;
cluster = "1x4:V100,1x4:K80";
arrivals :: TraceSource(path="t.csv");
arrivals -> AcceptAll -> JobPool -> {policy} -> GavelPlacer -> Launch -> JobMetrics;
"""


def _run(tmp_path, capsys, policy: str, jobs: list[tuple[int, str, int, int]]) -> list[dict]:
    lines = ["job_id,arrival_s,model,batch_size,gpus,duration_s"]
    lines += [f"{i},0,{model},{batch},{gpus},3600" for i, (gpus, model, batch, _) in enumerate(jobs)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "g.sched").write_text(GRAPH.format(policy=policy))
    out = tmp_path / "out"
    code = main(["run", str(tmp_path / "g.sched"), "--out", str(out), "--quiet", "--no-explain"])
    assert code == 0, capsys.readouterr().err
    rows = (out / "jobs.csv").read_text().splitlines()
    header = rows[0].split(",")
    return [dict(zip(header, r.split(","))) for r in rows[1:]]


def test_untyped_entries_use_the_slower_type_when_the_fastest_is_full(tmp_path, capsys):
    jobs = [(1, "ResNet-18", 64, 0)] * 8  # eight one-GPU jobs that run on V100s and K80s
    rows = _run(tmp_path, capsys, "Fifo", jobs)
    starts = np.array([float(r["first_start_s"]) for r in rows])
    assert (starts == 0.0).all(), starts  # four on the V100s, four on the K80s, at once
    runs = np.array([float(r["run_s"]) for r in rows])
    assert (runs[:4] < runs[4:]).all()  # the first four (ranking order) got the faster V100s


def test_untyped_entry_does_not_go_to_a_type_it_cannot_run_on(tmp_path, capsys):
    # ResNet-50 at batch size 128 runs on one K80 GPU but not on two: the two-GPU job waits for
    # the V100s, the one-GPU job behind it takes a K80
    jobs = [(4, "ResNet-18", 64, 0), (2, "ResNet-50", 128, 0), (1, "ResNet-50", 128, 0)]
    rows = _run(tmp_path, capsys, "Fifo", jobs)
    starts = [float(r["first_start_s"]) for r in rows]
    assert starts[0] == 0.0 and starts[1] > 0.0 and starts[2] == 0.0, starts
