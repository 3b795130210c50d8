"""Every element documents itself in the fixed shape; the reference is generated from it."""

import inspect

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
    # The library's elements (tests and users may have registered their own in this process).
    library = [cls for cls in registry.classes() if cls.__module__.startswith("roundhouse.elements")]
    generated = reference_markdown(library)
    assert (REPO / "docs" / "elements.md").read_text() == generated, "run: roundhouse elements --markdown > docs/elements.md"


def _family_and_members():
    from roundhouse.runtime.element import Element, In, Out, element_family
    from roundhouse.runtime.types import Active, Ranking

    @element_family
    class Family(Element):
        """A family.

        Ports:
            active: shared text for active.
            ranking: shared text for ranking.
        Arguments:
            knob: shared text for knob.
        Counters:
            seen: shared text for seen.
        """

        category = "policy"
        inputs = (In("active", Active),)
        outputs = (Out("ranking", Ranking),)
        knob: int = 1

    class Plain(Family):
        """Plain member.

        See also: none
        Paper: none.
        """

    class Own(Family):
        """Member with its own words.

        Ports:
            ranking: its own text for ranking.
        Arguments:
            extra: its own argument.
        Counters:
            more: its own counter.
        See also: none
        Paper: none.
        """

        extra: int = 2

    define = attrs.define(kw_only=True, slots=False, eq=False)
    return Family, define(Plain), define(Own)


def test_a_family_documents_its_shared_entries_once_and_a_member_may_replace_one():
    _, plain, own = _family_and_members()
    doc = parse_doc(plain)
    assert doc.ports == {"active": "shared text for active.", "ranking": "shared text for ranking."}
    assert doc.arguments == {"knob": "shared text for knob."}
    assert doc.counters == {"seen": "shared text for seen."}
    doc = parse_doc(own)
    assert doc.ports == {"active": "shared text for active.", "ranking": "its own text for ranking."}
    assert doc.arguments == {"knob": "shared text for knob.", "extra": "its own argument."}
    assert list(doc.counters) == ["seen", "more"]


def test_a_family_may_not_document_what_it_does_not_declare():
    from roundhouse.runtime.element import Element, element_family

    with pytest.raises(TypeError, match="documents unknown argument"):

        @element_family
        class Wrong(Element):
            """A family.

            Arguments:
                missing: nothing declares it.
            """

            category = "policy"


def test_a_member_still_documents_what_it_adds():
    _, plain, _ = _family_and_members()
    undocumented = attrs.define(kw_only=True, slots=False, eq=False)(
        type("Undocumented", (plain,), {"__doc__": plain.__doc__, "__annotations__": {"new": "int"}, "new": 0})
    )
    with pytest.raises(TypeError, match="argument\\(s\\) not documented: new"):
        parse_doc(undocumented)


def test_each_shared_entry_is_written_once():
    # Families hold the entries their members share: no entry of a family is repeated, word
    # for word, by one of its members.
    for cls in registry.classes():
        own = inspect.cleandoc(cls.__doc__ or "")
        for base in cls.__mro__[1:]:
            family = base.__dict__.get("_family_doc")
            if family is None:
                continue
            for name, text in (*family.ports.items(), *family.arguments.items(), *family.counters.items()):
                assert f"{name}: {text}" not in own, f"{cls.__name__} repeats {base.__name__}'s entry {name!r}"


@pytest.mark.parametrize(
    "cls",
    [c for c in registry.classes() if c.__module__.startswith("roundhouse.elements")],
    ids=lambda c: c.__name__,
)
def test_every_library_element_states_its_cost_per_round(cls):
    cost = parse_doc(cls).cost
    assert cost.endswith(".") and ("O(" in cost or "linear program" in cost or "Water filling" in cost), cost


def test_cost_is_required_of_the_library_and_optional_for_ones_own_and_paper_of_both():
    from roundhouse.runtime.element import Element, In, Out
    from roundhouse.runtime.types import Active, Ranking

    class Mine(Element):
        """Mine.

        Ports:
            active: jobs.
            ranking: order.
        Arguments:
            none
        Counters:
            none
        See also: Las
        Paper: none.
        """

        category = "policy"
        inputs = (In("active", Active),)
        outputs = (Out("ranking", Ranking),)

    Mine = attrs.define(slots=False)(Mine)
    assert parse_doc(Mine).cost == ""  # a test module's element: not the library's
    Mine.__module__ = "roundhouse.elements.mine"
    with pytest.raises(TypeError, match="missing section.*Cost:"):
        parse_doc(Mine)
    Mine.__doc__ = Mine.__doc__.replace("        See also:", "        Cost: O(n) over the pool's jobs n.\n        See also:")
    assert parse_doc(Mine).cost == "O(n) over the pool's jobs n."
    # An element from no paper says so: an empty entry is refused, naming what to write.
    Mine.__doc__ = Mine.__doc__.replace("Paper: none.", "Paper:")
    with pytest.raises(TypeError, match=r"needs an entry after 'Paper:' \('Paper: none.'"):
        parse_doc(Mine)


def _counters_set_in_code(cls) -> set[str]:
    """The counters the class's code (and its bases') sets by name: `self.counters["x"]` and
    `self.counters.update(x=...)`. (A run checks every one at its end; this finds them in
    elements no test graph runs.)"""
    import ast
    import textwrap

    found = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("roundhouse."):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "counters":
                if isinstance(node.slice, ast.Constant):
                    found.add(node.slice.value)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "counters"
            ):
                found.update(kw.arg for kw in node.keywords if kw.arg)
    return found


@pytest.mark.parametrize("cls", registry.classes(), ids=lambda c: c.__name__)
def test_every_counter_the_code_sets_is_documented(cls):
    assert _counters_set_in_code(cls) <= set(cls.doc.counters)


def test_a_list_default_is_shown_as_its_value_and_written_back_gives_the_same_element():
    """A list argument's default (a fresh list per instance) is shown as the list, in the
    language, so that writing it out explicitly is the same element."""
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.tools.elements_cmd import _default

    shown = {f.name: _default(f) for f in attrs.fields(registry.get("TiresiasLas"))}
    assert shown["thresholds"] == "[1h]"
    text = 'round = 5min; cluster = "1x4:V100"; PoissonSource(rate=1/h, jobs=1, seed=0) -> AcceptAll -> JobPool -> {} -> FirstFree -> Launch -> JobMetrics;'
    written = compile_file("g.sched", text=text.format(f"p :: TiresiasLas(thresholds={shown['thresholds']})"))
    default = compile_file("g.sched", text=text.format("p :: TiresiasLas"))
    assert written.elements["p"].config() == default.elements["p"].config()
