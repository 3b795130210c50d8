"""Every element documents itself in the fixed shape; the reference is generated from it."""

import attrs
import pytest

from roundhouse.runtime import registry
from roundhouse.runtime.element import CATEGORIES, parse_doc
from roundhouse.tools.elements_cmd import reference_markdown
from tests.conftest import REPO


@pytest.mark.parametrize("cls", registry.classes(), ids=lambda c: c.__name__)
def test_docstring_documents_every_port_argument_and_counter(cls):
    doc = parse_doc(cls)
    assert cls.category in CATEGORIES
    assert doc.synopsis.endswith(".")
    assert set(doc.ports) == {p.name for p in (*cls.inputs, *cls.outputs)}
    assert set(doc.arguments) == {f.name for f in attrs.fields(cls)}
    unknown = [other for other in doc.see_also if registry.get(other) is None]
    assert not unknown, f"{cls.__name__} refers to no element class: {unknown}"


def test_counters_an_element_reports_are_documented(tmp_path):
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    path = tmp_path / "g.sched"
    path.write_text(
        "round = 5min;\nsrc :: PoissonSource(rate=20/h, jobs=40, seed=3);\n"
        "src -> a :: AcceptThreshold(factor=1.0x) -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n"
    )
    graph = compile_file(path)
    result = simulate(graph, "2x4:V100")
    assert result.counters
    for name, counters in result.counters.items():
        documented = type(graph.elements[name]).doc.counters
        assert set(counters) <= set(documented), (name, counters)


def test_docs_elements_md_is_up_to_date():
    generated = reference_markdown(registry.classes())
    assert (REPO / "docs" / "elements.md").read_text() == generated, "run: roundhouse elements --markdown > docs/elements.md"
