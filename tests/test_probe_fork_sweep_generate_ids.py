"""`trace generate --start-id` numbers the jobs of every workload from it (not Philly's alone),
so that two generated traces can feed one graph under distinct ids; the rest of each job is
what the same seed draws without it. And `whatif`'s header counts one round as one round."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails

ARGS = {
    "tiresias": ["--rate", "8/h"],
    "dally-batch": [],
    "dally-poisson": ["--rate", "8/h"],
    "synergy": ["--rate", "8/h"],
    "ones": ["--rate", "8/h"],
    "pollux": ["--rate", "8/h"],
}


def _generate(path, workload: str, *more: str) -> pl.DataFrame:
    args = ["trace", "generate", "-o", str(path), "--jobs", "4", "--seed", "3", "--workload", workload]
    assert main(args + ARGS[workload] + list(more)) == 0
    return pl.read_csv(path)


@pytest.mark.parametrize("workload", sorted(ARGS))
def test_start_id_numbers_every_workloads_jobs_from_it(tmp_path, workload):
    plain = _generate(tmp_path / "plain.csv", workload)
    moved = _generate(tmp_path / "moved.csv", workload, "--start-id", "1000")
    assert moved["job_id"].to_list() == [1000, 1001, 1002, 1003]
    assert plain["job_id"].to_list() == [0, 1, 2, 3]
    # The same jobs otherwise (a Pollux job's name, its application and number, follows its id).
    rest = [c for c in plain.columns if c not in ("job_id", "name")]
    assert moved.select(rest).equals(plain.select(rest))
    if "name" in plain.columns:
        apps = [name.rsplit("-", 1)[0] for name in plain["name"]]
        assert moved["name"].to_list() == [f"{app}-{i}" for app, i in zip(apps, moved["job_id"], strict=True)]


def test_start_id_is_still_refused_for_a_philly_log_which_numbers_its_own(tmp_path, capsys):
    err = fails(
        capsys, "trace", "generate", "-o", tmp_path / "log.json", "--jobs", "4", "--rate", "8/h", "--seed", "0", "--start-id", "5"
    )
    assert "its own job ids: leave out --start-id" in err, err


def test_whatif_header_says_one_round_not_one_rounds(tmp_path, capsys):
    sim = Simulation(str(REPO / "graphs" / "fifo.sched"), cluster="2x4:V100", overrides=["arrivals.jobs=6"], seed=1)
    sim.step()
    sim.save(tmp_path / "one.snap")
    assert main(["whatif", str(tmp_path / "one.snap"), "--horizon", "1h"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "after 1 round, at t=300s," in out, out
