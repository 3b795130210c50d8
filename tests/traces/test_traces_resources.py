"""CPU and memory demands (`cpus`, `memory_gb`): checked like other numbers when read, carried
into the job table; a demand beyond what the job's machines have runs (it is a wish)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.cluster import Cluster
from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.throughput import ThroughputModel

ROOT = Path(__file__).resolve().parents[2]
LAS = str(ROOT / "graphs" / "las.sched")
HEADER = "job_id,arrival_s,gpus,duration_s,cpus,memory_gb"


def write(tmp_path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def cluster(tmp_path, cpus: int, memory_gb: float, nodes: int = 2, gpus: int = 4) -> str:
    path = tmp_path / "c.toml"
    path.write_text(
        f'name = "small"\n[[group]]\nnodes = {nodes}\ngpus_per_node = {gpus}\ngpu_type = "V100"\n'
        f"cpus = {cpus}\nmemory_gb = {memory_gb}\n"
    )
    return str(path)


def test_resource_columns_are_numbers_and_optional(tmp_path):
    frame = read_trace(write(tmp_path, f"{HEADER}\n0,0,1,60,4,16.5\n1,5,2,60,,\n"))
    assert frame["cpus"].to_list() == [4.0, None] and frame["memory_gb"].to_list() == [16.5, None]
    plain = read_trace(write(tmp_path, "job_id,arrival_s,gpus,duration_s\n0,0,1,60\n", "plain.csv"))
    assert "cpus" not in plain.columns


@pytest.mark.parametrize(
    ("row", "column", "words"),
    [
        ("0,0,1,60,-1,4", "cpus", "must be 0 or more, got -1"),
        ("0,0,1,60,2,inf", "memory_gb", "must be a finite number"),
        ("0,0,1,60,nan,4", "cpus", "must be a finite number"),
        ("0,0,1,60,four,4", "cpus", "'four' is not a number"),
    ],
)
def test_bad_resource_cells_name_line_and_column(tmp_path, row, column, words):
    path = write(tmp_path, f"{HEADER}\n0,0,1,60,1,1\n{row.replace('0,', '1,', 1)}\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 3 and caught.value.column == column
    assert words in str(caught.value)


def run(tmp_path, capsys, trace: str, spec: str) -> tuple[int, str]:
    path = write(tmp_path, trace)
    out = tmp_path / "out"
    code = main(["run", LAS, "--trace", str(path), "--cluster", spec, "--out", str(out)])
    return code, capsys.readouterr().err


def test_demands_that_fit_run_and_reach_the_job_specs(tmp_path, capsys):
    spec = cluster(tmp_path, cpus=32, memory_gb=244)
    # 60 cores for 2 GPUs: two machines of 32 together can give it.
    text = f"{HEADER}\n0,0,1,60,32,244\n1,0,2,60,60,400\n2,0,1,60,,\n"
    code, err = run(tmp_path, capsys, text, spec)
    assert code == 0, err
    batch, _ = prepare_jobs(
        read_trace(tmp_path / "t.csv"), ThroughputModel(ProfileTable.load(), Cluster.parse(spec)), "V100", 8, "t.csv"
    )
    assert batch.columns["cpus"][:2].tolist() == [32.0, 60.0] and np.isnan(batch.columns["cpus"][2])
    assert batch.columns["memory_gb"][:2].tolist() == [244.0, 400.0]


@pytest.mark.parametrize("row", ["0,0,1,60,33,10", "0,0,1,60,1,245", "0,0,2,60,65,10", "0,0,8,60,65,10"])
def test_demand_beyond_every_placement_runs(tmp_path, capsys, row):
    """A demand is what a job would like, not what it must have: one beyond what its machines
    could give (a trace written for bigger machines) runs, as the graph's elements use it."""
    code, err = run(tmp_path, capsys, f"{HEADER}\n{row}\n", cluster(tmp_path, cpus=32, memory_gb=244))
    assert code == 0, err
    jobs = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert len(jobs) == 2  # the header and the job, which finished
