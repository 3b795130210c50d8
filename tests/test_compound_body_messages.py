"""What the loader says of two mistakes with element classes: a graph element named inside an
elementclass body (which sees only its own elements, and reaches the graph's through `input` and
`output`), and a connection written twice into or out of a compound instance (said of the
instance and its port, not of the element inside that the connection reaches)."""

import pytest

from roundhouse.errors import SchedError, SchedErrors
from roundhouse.runtime.compiler import compile_file
from tests.conftest import fails

HEAD = 'round = 5min;\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=5, seed=0);\n'


def errors_of(path) -> list[SchedError]:
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path)
    return info.value.errors if isinstance(info.value, SchedErrors) else [info.value]


def only_error(tmp_path, text: str) -> SchedError:
    path = tmp_path / "g.sched"
    path.write_text(HEAD + text)
    (err,) = errors_of(path)
    return err


GRAPH_ELEMENT = "graph elements cannot be named inside an elementclass body"


def test_graph_element_named_at_the_end_of_a_body_chain(tmp_path):
    err = only_error(
        tmp_path,
        "elementclass Pol { input -> Fifo -> pool; }\nsrc -> pool :: JobPool -> p :: Pol -> Consolidated -> Launch;\n",
    )
    assert err.message == f"'pool' is an element of the graph, and {GRAPH_ELEMENT}"
    assert (err.location.line, err.location.column) == (4, 37)
    assert err.hint is not None and "'... -> output' in the body" in err.hint and "'p -> pool' in the graph" in err.hint
    assert "did you mean" not in err.hint


def test_graph_element_named_at_the_start_of_a_body_chain(tmp_path):
    err = only_error(
        tmp_path,
        "elementclass Pol { pool -> Fifo -> output; }\nsrc -> pool :: JobPool;\nPol -> Consolidated -> Launch;\n",
    )
    assert GRAPH_ELEMENT in err.message and (err.location.line, err.location.column) == (4, 20)
    # (an anonymous instance is shown by its class, as it is written)
    assert err.hint is not None and "'input -> ...' in the body" in err.hint and "'pool -> Pol' in the graph" in err.hint


def test_graph_element_named_in_a_class_with_no_instance(tmp_path):
    err = only_error(
        tmp_path,
        "elementclass Pol { input -> Fifo -> pool; }\nsrc -> pool :: JobPool -> Fifo -> Consolidated -> Launch;\n",
    )
    assert GRAPH_ELEMENT in err.message and err.location.line == 4
    assert err.hint is not None and "'Pol -> pool'" in err.hint


def test_a_name_that_is_no_graph_element_is_still_unknown(tmp_path):
    err = only_error(
        tmp_path,
        "elementclass Pol { input -> Fifo -> pol; }\nsrc -> pool :: JobPool -> p :: Pol -> Consolidated -> Launch;\n",
    )
    assert err.message == "unknown element or class 'pol'"


def test_a_connection_written_twice_into_an_instance_names_the_instance(tmp_path, capsys):
    path = tmp_path / "g.sched"
    path.write_text(
        HEAD + "elementclass Pol { input -> Fifo -> output; }\n"
        "src -> pool :: JobPool;\npool -> [0] p :: Pol -> Consolidated -> Launch;\npool -> p;\n"
    )
    (err,) = errors_of(path)
    assert err.message == "'pool' is connected to 'p' [0] twice"
    assert (err.location.line, err.location.column) == (7, 6)
    assert "'p' [0] twice" in fails(capsys, "check", path)


def test_a_connection_written_twice_out_of_an_instance_names_the_instance(tmp_path):
    err = only_error(
        tmp_path,
        "elementclass Pol { input -> Fifo -> output; }\nsrc -> JobPool -> p :: Pol -> c :: Consolidated -> Launch;\np -> c;\n",
    )
    assert err.message == "'p' [0] is connected to 'c' [0] twice"
    assert "Fifo" not in err.message and err.location.line == 6


def test_a_connection_written_twice_between_elements_is_said_as_before(tmp_path):
    err = only_error(tmp_path, "src -> pool :: JobPool -> Fifo -> Consolidated -> Launch;\nsrc -> pool;\n")
    assert err.message.startswith("'src' is connected to 'pool' [") and err.message.endswith("] twice")
