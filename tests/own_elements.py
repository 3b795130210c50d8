"""Element files of one's own, as tests write them beside a graph that requires them: `@element`
classes with the documentation block every element needs (Ports, Arguments, Counters, See also,
Paper). Tests that need a malformed file derive it from these texts where it can be seen."""

from __future__ import annotations

import re
import textwrap

# (port name, type in runtime.types, what its documentation says of it)
Port = tuple[str, str, str]
ACTIVE: Port = ("active", "Active", "admitted jobs.")
RANKING: Port = ("ranking", "Ranking", "the jobs in pool order.")
# (argument name, its class line after the colon, what its documentation says of it)
Argument = tuple[str, str, str]
# (counter name, what its documentation says of it)
Counter = tuple[str, str]


def _tuple(kind: str, ports: tuple[Port, ...], extra: str = "") -> str:
    """A class's `inputs` or `outputs` as Python writes a tuple (a comma after one item);
    `extra` follows each port's type (as `, multi=True`)."""
    items = [f'{kind}("{port}", {type_}{extra})' for port, type_, _ in ports]
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _documented(items: tuple[tuple[str, str], ...]) -> str:
    """A documentation section's lines (`none` for none)."""
    return "\n".join(f"        {name}: {says}" for name, says in items) or "        none"


def _lines(text: str, indent: int) -> str:
    return textwrap.indent(textwrap.dedent(text).strip(), " " * indent)


def element_class(
    name: str,
    synopsis: str,
    tick: str,
    *,
    params: str | None = None,
    category: str = "policy",
    inputs: tuple[Port, ...] = (ACTIVE,),
    outputs: tuple[Port, ...] = (RANKING,),
    multi: bool = False,
    declares: str | None = "state = ()",
    arguments: tuple[Argument, ...] = (),
    counters: tuple[Counter, ...] = (),
    see_also: str = "Fifo",
    after: str = "",
) -> str:
    """The text of an element class `name`: its documentation block opens with `synopsis`, its
    `tick(params)` (by default its input ports by name) runs the lines `tick`; `multi`: its inputs
    take several connections; `declares` is the class lines after its ports (None: none, as an
    element declaring no state), `arguments` are declared below them and documented with
    `counters`; `after` goes below its tick (methods)."""
    ports = "\n".join(f"        {port}: {says}" for port, _, says in inputs + outputs)
    params = params or ", ".join(["self", "ctx", *(port for port, _, _ in inputs)])
    declared = f"\n{_lines(declares, 4)}" if declares is not None else ""
    if arguments:
        declared += "\n\n" + "\n".join(f"    {argument}: {line}" for argument, line, _ in arguments)
    outputs_line = f"\n    outputs = {_tuple('Out', outputs)}" if outputs else ""
    body = _lines(tick, 8) + (f"\n\n{_lines(after, 4)}" if after else "")
    return f'''
@element
class {name}(Element):
    """{synopsis}

    Ports:
{ports}
    Arguments:
{_documented(tuple((argument, says) for argument, _, says in arguments))}
    Counters:
{_documented(counters)}
    See also: {see_also}
    Paper: none.
    """

    category = "{category}"
    inputs = {_tuple("In", inputs, ", multi=True" if multi else "")}{outputs_line}{declared}

    def tick({params}):
{body}
'''


def element_file(*classes: str, before: str = "") -> str:
    """The text of a file defining `classes` (from element_class), importing what their ports'
    types need; `before` goes above them (imports, module values)."""
    kinds = sorted({kind for text in classes for kind in _port_types(text)})
    return (
        f"{before}\nfrom roundhouse.runtime.element import Element, In, Out, element\n"
        f"from roundhouse.runtime.types import {', '.join(kinds)}\n\n" + "\n".join(classes)
    )


def _port_types(text: str) -> list[str]:
    return re.findall(r'(?:In|Out)\("\w+", (\w+)[,)]', text)


def policy_file(
    name: str, synopsis: str, tick: str, params: str = "self, ctx, active", before: str = "", after: str = "", **shape
) -> str:
    """The text of an element file defining `name`, a policy that ranks the jobs it is given:
    its documentation block opens with `synopsis`, its `tick(params)` runs the lines `tick`;
    `before` goes above the class (imports, module values), `after` below its tick (methods);
    `shape` as element_class takes them (outputs, declares, arguments, counters, see_also)."""
    return element_file(element_class(name, synopsis, tick, params=params, after=after, **shape), before=before)
