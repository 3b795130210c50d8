"""The run's end note on jobs an elastic-only scheduler never started names the trace's model
names that no profile knows, rather than saying the job has "no model a profile knows"."""

from __future__ import annotations

from roundhouse.tools.cli import main
from tests.test_quiet_useless_runs import CIFAR, ELASTIC, POLLUX, flat, graph_in

HEAD = "note: element 'sched' (Pollux) left {n} waiting job(s) it never started: it starts only elastic jobs, and their model names no application of elastic profile 'pollux'"


def test_the_note_names_the_traces_models_that_no_profile_knows(tmp_path, capsys):
    trace = CIFAR + "3,0.0,1,mystery-net,16,,600.0\n4,0.0,1,mystery-net,16,,600.0\n5,0.0,1,other-net,16,,600.0\n"
    graph = graph_in(tmp_path, POLLUX.format(profile=ELASTIC), trace)
    assert main(["run", str(graph), "--until", "1h"]) == 0
    out = flat(capsys.readouterr().out)
    assert (
        HEAD.format(n=3) + " (job 3, no model a profile knows; the trace's models that no profile knows: mystery-net, other-net)"
    ) in out, out


def test_one_name_is_named_alone_and_a_job_without_a_model_is_said_so(tmp_path, capsys):
    trace = CIFAR + "3,0.0,1,mystery-net,16,,600.0\n"
    assert main(["run", str(graph_in(tmp_path, POLLUX.format(profile=ELASTIC), trace)), "--until", "1h"]) == 0
    out = flat(capsys.readouterr().out)
    assert HEAD.format(n=1) + " (job 3, no model a profile knows; the trace's model that no profile knows: mystery-net)" in out
    # No name to give: the job has none.
    trace = CIFAR + "3,0.0,1,,16,,600.0\n"
    assert main(["run", str(graph_in(tmp_path, POLLUX.format(profile=ELASTIC), trace)), "--until", "1h"]) == 0
    out = flat(capsys.readouterr().out)
    assert HEAD.format(n=1) + " (job 3, no model a profile knows)" in out


def test_the_run_s_summary_names_the_models_no_profile_knows_which_progress_at_one_unit_a_second(tmp_path, capsys):
    trace = CIFAR + "3,0.0,1,mystery-net,16,,600.0\n"
    assert main(["run", str(graph_in(tmp_path, POLLUX.format(profile=ELASTIC), trace)), "--until", "1h"]) == 0
    assert "note: models not in the profile progress at one unit per second: mystery-net" in flat(capsys.readouterr().out)
    # A trace whose models the profile knows gets no such note.
    assert main(["run", str(graph_in(tmp_path, POLLUX.format(profile=ELASTIC), CIFAR)), "--until", "1h"]) == 0
    assert "models not in the profile" not in capsys.readouterr().out
