"""A graph's `cluster` setting written without quotes as nodes x GPUs alone (`cluster = 32x4;`)
is told to quote it, as `32x4:V100` is: no multiplier is followed by digits, so it is no number
written wrong. A number that is (`1.2x4` aside from a spec, `5.`) gets no such hint."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.dsl.parser import parse
from roundhouse.tools.cli import main


def _syntax_error(text: str) -> SchedError:
    with pytest.raises(SchedError) as got:
        parse(text, "f.sched")
    return got.value


@pytest.mark.parametrize("written", ["32x4", "32X4", "2x8"])
def test_nodes_by_gpus_unquoted_gets_the_quoting_hint(written):
    err = _syntax_error(f"cluster = {written};\n")
    assert err.hint == f'text such as a cluster spec or a file path is written in quotes: "{written}"'


@pytest.mark.parametrize("text", ["cluster = 1.2x4;\n", "round = 5.;\n", "seed = 0x10;\n"])
def test_a_number_written_wrong_still_gets_no_quoting_hint(text):
    err = _syntax_error(text)
    assert err.hint is None or "quotes" not in err.hint


def test_check_says_where_and_how_to_quote(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(
        "cluster = 32x4;\n"
        "arrivals :: PoissonSource(rate=4/h, jobs=5, seed=0);\n"
        "arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["check", str(graph)]) == 2
    err = capsys.readouterr().err
    assert "g.sched:1:14: error: unexpected '4'" in err and 'written in quotes: "32x4"' in err, err
    graph.write_text(graph.read_text().replace("32x4", '"32x4"'))
    assert main(["check", str(graph)]) == 0, capsys.readouterr().err
