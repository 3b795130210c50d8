"""An element's arguments that do not fit together, one of them given with --set (or --vary):
the error names that option, as an error in one argument given with --set does, rather than
pointing at the element's line in the file. Likewise for graph settings."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import Override, compile_file
from tests.conftest import fails

GRAPH = "round = 5min;\nsrc :: PoissonSource(rate=8/h, jobs=5);\nsrc -> AcceptAll -> JobPool -> NetworkSensitive -> place :: DelayPlacer{} -> Launch;\n"


def error_of(tmp_path, args, overrides):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(args))
    with pytest.raises(SchedError) as info:
        compile_file(path, overrides)
    return path, info.value


def test_arguments_that_do_not_fit_with_set_name_the_option(tmp_path):
    path, err = error_of(tmp_path, "", ["place.machine_wait=30h"])
    assert err.message.startswith("--set place.machine_wait=30h: DelayPlacer 'place': the default rack_wait (24h) is shorter")
    assert err.location is None and err.hint == f"'place' is declared at {path}:3:52"
    # One argument in the file, the other on the command line: the option is named.
    _, err = error_of(tmp_path, "(rack_wait=1h)", ["place.machine_wait=2h", "place.release=true"])
    assert (
        err.message.startswith("--set place.machine_wait=2h: DelayPlacer 'place': rack_wait (1h) is shorter")
        and err.location is None
    )
    # Both named: both options.
    _, err = error_of(tmp_path, "", ["place.mode=no_wait", "place.tuned=true"])
    assert err.message.startswith("--set place.mode=no_wait, --set place.tuned=true: DelayPlacer 'place': tuned=true needs")


def test_a_sweep_value_is_named_by_its_own_option(tmp_path):
    _, err = error_of(tmp_path, "", [Override("place.machine_wait=30h", "--vary")])
    assert err.message.startswith("--vary place.machine_wait=30h: DelayPlacer 'place'")


def test_arguments_of_the_file_that_do_not_fit_stay_at_the_file(tmp_path):
    path, err = error_of(tmp_path, "(mode=no_wait, machine_wait=1h)", ["place.release=true"])
    assert err.message == "DelayPlacer 'place': machine_wait has no effect with mode=no_wait, which sets its own timers"
    assert str(err.location) == f"{path}:3:61" and err.hint == "its arguments include --set place.release=true"
    _, err = error_of(tmp_path, "(mode=no_wait, machine_wait=1h)", [])
    assert str(err.location) == f"{path}:3:61" and err.hint is None


def test_settings_that_do_not_fit_with_set_name_the_option(tmp_path):
    path, err = error_of(tmp_path, "", ["checkpoint=10min"])
    assert (
        err.message
        == "--set checkpoint: settings do not fit together: checkpoint + restore (600s) must be shorter than a round (300s)"
    )
    assert err.location is None
    _, err = error_of(tmp_path, "", ["round=10s", "restore=11s"])
    assert err.message.startswith("--set round, --set restore: settings do not fit together")


def test_the_command_line_blames_the_option(tmp_path, capsys):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(""))
    err = fails(capsys, "run", path, "--set", "place.machine_wait=30h", "--until", "1h")
    assert (
        err.startswith("error: --set place.machine_wait=30h: DelayPlacer 'place': the default rack_wait")
        and f"{path}:3" not in err.splitlines()[0]
    )
