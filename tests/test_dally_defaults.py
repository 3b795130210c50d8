"""DelayPlacer refuses an argument where it would have no effect, but not one given its default
value, which has the same effect everywhere (`capped=false` without `tuned=true`)."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file

GRAPH = "src :: PoissonSource(rate=8/h, jobs=5);\nsrc -> AcceptAll -> JobPool -> NetworkSensitive -> place :: DelayPlacer{} -> Launch;\n"


@pytest.mark.parametrize(
    "args",
    [
        "(capped=false)",
        "(machine_wait=1h, capped=false)",
        "(history=24h, sigma=sample, machine_floor=0s, rack_floor=0, capped=false)",
        "(tuned=true, machine_wait=12h, rack_wait=24h)",
        "(mode=no_wait, machine_wait=12h, rack_wait=1d, history=1d)",
        "(mode=fully_consolidated, rack_wait=24h, capped=false)",
    ],
)
def test_defaults_given_where_they_have_no_effect_are_accepted(tmp_path, args):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(args))
    place = compile_file(path).elements["place"]
    assert place.rack_timer == 24 * 3600.0 and place.machine_timer == (3600.0 if "machine_wait=1h" in args else 12 * 3600.0)


@pytest.mark.parametrize(
    "args, words",
    [
        ("(capped=true)", "capped is an auto-tuner argument and has no effect without tuned=true"),
        ("(capped=false, sigma=population)", "sigma is an auto-tuner argument"),
        ("(machine_floor=1s)", "machine_floor is an auto-tuner argument"),
        ("(rack_floor=1s)", "rack_floor is an auto-tuner argument"),
        ("(history=23h)", "history is an auto-tuner argument"),
        ("(tuned=true, machine_wait=12h, rack_wait=25h)", "rack_wait has no effect with tuned=true"),
        ("(mode=no_wait, machine_wait=11h)", "machine_wait has no effect with mode=no_wait"),
    ],
)
def test_other_values_where_they_have_no_effect_are_refused(tmp_path, args, words):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(args))
    with pytest.raises(SchedError, match=words):
        compile_file(path)
