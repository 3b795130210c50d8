"""A run on a cluster holding a GPU type beyond the profile reads its trace once: the cluster's
check reads it for the types its jobs name, and the TraceSource replays that read instead of
reading the file again (traces/readonce.py). The reader is counted by wrapping it; the runs'
results are compared with a run that reads the file as before."""

from __future__ import annotations

import pytest

from roundhouse.runtime import cluster_types
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster, simulate
from roundhouse.tools.cli import main
from roundhouse.traces import formats, readonce
from tests.test_cluster_types_beyond_profile import PAI_CLUSTER, PAI_ROWS, _graph

JOB_COLUMNS = ("job_id", "arrival_s", "gpus", "first_start_s", "finish_s", "placed_type")


@pytest.fixture
def reads(monkeypatch):
    """The paths of the traces read while the test runs, one entry a read."""
    seen: list[str] = []
    read = formats.load_trace

    def counted(path, *args, **kwargs):
        seen.append(str(path))
        return read(path, *args, **kwargs)

    monkeypatch.setattr(formats, "load_trace", counted)
    readonce.clear()
    yield seen
    readonce.clear()


def _jobs(result) -> dict:
    jobs = result.world.jobs
    return {name: jobs.column(name).tolist() for name in JOB_COLUMNS}


def test_a_run_on_types_beyond_the_profile_reads_its_trace_once(tmp_path, reads, monkeypatch):
    graph = compile_file(_graph(tmp_path, "pai_task_table.csv", PAI_ROWS, PAI_CLUSTER))
    result = simulate(graph)
    assert reads == [str(tmp_path / "pai_task_table.csv")]
    assert result.world.jobs.column("finish_s").size == 5
    # The same run with nothing handed over (the check reads the file, and so does the source,
    # as before): the same jobs at the same times, on the same types.
    monkeypatch.setattr(cluster_types, "read_for_source", lambda path, format, elastic: formats.load_trace(path, format=format))
    reads.clear()
    apart = simulate(compile_file(_graph(tmp_path, "pai_task_table.csv", PAI_ROWS, PAI_CLUSTER)))
    assert len(reads) == 2
    assert _jobs(apart) == _jobs(result)


def test_the_command_line_reads_the_trace_once_though_it_loads_the_cluster_first(tmp_path, reads):
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS)
    assert main(["run", str(graph), "--cluster", PAI_CLUSTER, "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert reads == [str(tmp_path / "pai_task_table.csv")]


def test_a_cluster_of_the_profiles_types_reads_the_trace_only_in_its_source(tmp_path, reads):
    simulate(
        compile_file(
            _graph(tmp_path, "pai_task_table.csv", PAI_ROWS.replace("T4", "V100").replace("misc", "P100"), "2x8:V100,2x8:P100")
        )
    )
    assert reads == [str(tmp_path / "pai_task_table.csv")]


def test_a_read_asked_for_by_two_sources_is_kept_for_both(tmp_path, reads):
    (tmp_path / "t.csv").write_text(PAI_ROWS)
    first = readonce.read_for_source(tmp_path / "t.csv", "pai", None)
    assert readonce.read_for_source(tmp_path / "t.csv", "pai", None) is first
    assert readonce.take_or_read(tmp_path / "t.csv", "pai", None) is first
    assert readonce.take_or_read(tmp_path / "t.csv", "pai", None) is first
    assert len(reads) == 1 and readonce.kept() == 0
    # Taken by both, it is read again; so is a read another way (format, elastic profile).
    readonce.read_for_source(tmp_path / "t.csv", "pai", None)
    assert readonce.take_or_read(tmp_path / "t.csv", "auto", None).frame.height == first.frame.height
    assert readonce.take_or_read(tmp_path / "t.csv", "pai", None) is not None
    readonce.take_or_read(tmp_path / "t.csv", "pai", None)
    assert len(reads) == 4


def test_a_trace_edited_after_the_check_is_read_again(tmp_path, reads):
    graph = compile_file(_graph(tmp_path, "pai_task_table.csv", PAI_ROWS, PAI_CLUSTER))
    cluster = load_cluster(graph, None)
    assert len(reads) == 1
    rows = PAI_ROWS.splitlines(keepends=True)
    (tmp_path / "pai_task_table.csv").write_text("".join(rows[:2]))  # (two jobs now: another size)
    result = simulate(graph, cluster)
    assert len(reads) == 2
    assert result.world.jobs.column("job_id").tolist() == [0, 1]


def test_a_refused_cluster_keeps_no_read(tmp_path, reads):
    graph = compile_file(_graph(tmp_path, "pai_task_table.csv", PAI_ROWS))
    with pytest.raises(Exception, match="unknown GPU type 'A100'"):
        load_cluster(graph, "1x2:T4,1x2:A100")
    assert readonce.kept() == 0


def test_a_sweep_s_plan_keeps_no_read_for_runs_made_elsewhere(tmp_path, reads):
    """The plan checks each cell's cluster in the sweep's own process, reading the trace for the
    types it names; the runs read it where they run, so the plan keeps none."""
    graph = _graph(tmp_path, "pai_task_table.csv", PAI_ROWS)
    args = ["sweep", str(graph), "--cluster", PAI_CLUSTER, "--vary", "seed=1,2", "--workers", "1", "--out", str(tmp_path / "s")]
    assert main(args) == 0
    assert reads and readonce.kept() == 0
