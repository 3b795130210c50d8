"""An agent refuses what it cannot honour before anything starts: more CPU threads a job
process than any machine should give one (`--threads-per-gpu`, bounded as `profile --threads`
is), and a launch naming a workload module its Python cannot import (said as the launch's
refusal, where the worker's ImportError would have been a traceback in the job's log)."""

from __future__ import annotations

import pytest

from roundhouse.agents.agent.processes import _no_program
from roundhouse.tools.cli import main
from roundhouse.tools.live_options import MAX_THREADS
from roundhouse.tools.loopback import free_port
from tests.conftest import fails


@pytest.mark.parametrize("threads", [str(MAX_THREADS + 1), "100000"])
def test_too_many_threads_per_gpu_are_refused_naming_the_bound(capsys, threads):
    argv = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--fake-gpus", "1:V100"]
    err = fails(capsys, *argv, "--threads-per-gpu", threads)
    assert f"--threads-per-gpu must be 0 to {MAX_THREADS}" in err
    assert "Traceback" not in err


def test_the_agents_help_names_the_bound(capsys):
    with pytest.raises(SystemExit):
        main(["agent", "--help"])
    assert f"at most {MAX_THREADS}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("workload", ["roundhouse.agents.workloads.no_such_model", "no_such_package.train", "bad..name"])
def test_a_launch_of_a_workload_this_python_lacks_is_refused_by_name(workload):
    reason = _no_program({"workload": workload})
    assert reason == f"its workload {workload!r} is no module this agent's Python has"


def test_a_launch_of_a_workload_this_python_has_is_taken():
    for workload in ("roundhouse.agents.workloads.cnn", "roundhouse.agents.workloads.lstm", "json.decoder"):
        assert _no_program({"workload": workload}) == "", workload
    assert _no_program({"command": ["python", "-c", "pass"]}) == ""


def test_looking_for_a_workload_runs_none_of_its_code():
    import sys

    sys.modules.pop("roundhouse.agents.workloads.recommend", None)
    assert _no_program({"workload": "roundhouse.agents.workloads.recommend"}) == ""
    assert "roundhouse.agents.workloads.recommend" not in sys.modules
