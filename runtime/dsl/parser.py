"""Parse `.sched` text into a `Program` with a Lark LALR grammar (`grammar.lark`).

Syntax errors become `SchedError`s at the offending line and column, phrased for a person:
"unterminated string", "expected ';' after ...", "unknown time unit 'm'".
"""

from __future__ import annotations

import functools
import re
import unicodedata
from importlib import resources

import attrs
import lark
from lark import Token, Transformer, v_args

from roundhouse.errors import Location, SchedError, remember_source, source_lines
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.values import (
    DURATION_UNITS,
    Duration,
    IdRange,
    Multiplier,
    Rate,
    finite,
    format_duration,
    short_text,
    unit_list,
    whole_number,
)

_UNIT_HINT = f"time units are {unit_list()}; rates are written like 8/h; multipliers like 1.2x"

# How terminals are named in messages.
_TERMINAL_TEXT = {
    "SEMICOLON": "';'",
    "ARROW": "'->'",
    "NAME": "a name",
    "PARAM": "a $parameter",
    "INT": "a port number",
    "NUMBER": "a number",
    "RANGE": "a range",
    "STRING": "a string",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "EQUAL": "'='",
    "VBAR": "'|'",
    "__ANON_0": "'::'",
    "IMPORT": "'import'",
    "REQUIRE": "'require'",
    "ELEMENTCLASS": "'elementclass'",
    "TRUE": "'true'",
    "FALSE": "'false'",
    "$END": "end of file",
}


@functools.cache
def _parser() -> lark.Lark:
    grammar = resources.files("roundhouse.runtime.dsl").joinpath("grammar.lark").read_text()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=_cache_file())


def _cache_file() -> str | bool:
    """Where lark keeps the parser tables it builds from the grammar (building them is about a
    tenth of a second of every command's start-up): the user's cache folder, or nowhere if it
    cannot be made. Lark checks the grammar's hash before it uses the file."""
    import os
    import sys
    from pathlib import Path

    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "roundhouse"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return str(folder / f"grammar-lark{lark.__version__}-py{sys.version_info[0]}.{sys.version_info[1]}.cache")


def _terminal_text(name: str) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    for term in _parser().terminals:
        if term.name == name and isinstance(term.pattern, lark.lexer.PatternStr):
            return f"'{term.pattern.value}'"
    return name.lower()


def _loc(path: str, token_or_meta, length: int | None = None) -> Location:
    line = token_or_meta.line
    col = token_or_meta.column
    if length is None:
        end_line = getattr(token_or_meta, "end_line", line)
        end_col = getattr(token_or_meta, "end_column", col + 1)
        length = (end_col - col) if end_line == line else 1
    return Location(path, line, col, max(1, length))


def classify_number(text: str, location: Location) -> ast.Value:
    """Turn a NUMBER token (`300`, `1.5`, `5min`, `1.2x`, `8/h`) into a typed value.
    Values that do not fit (`1e999s` is infinite, whole numbers beyond 64 bits) are refused here."""
    m = re.fullmatch(r"([+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(/?)([A-Za-z]*)", text)
    if m is None:  # the token pattern guarantees a match; kept as a guard
        raise SchedError(f"'{text}' is not a number", location)
    number_text, slash, unit = m.groups()
    try:
        return _typed_number(text, number_text, slash, unit, location)
    except ValueError as err:
        raise SchedError(str(err), location) from None


def _typed_number(text: str, number_text: str, slash: str, unit: str, location: Location) -> ast.Value:
    if unit == "" and re.fullmatch(r"[+-]?[0-9]+", number_text):
        return ast.Value("number", whole_number(number_text), location, text)
    number = not_lost(finite(float(number_text), text), number_text, text)
    if slash:
        if unit not in DURATION_UNITS:
            raise SchedError(f"unknown time unit '{unit}' in rate '{text}'", location, hint=_UNIT_HINT)
        return ast.Value("rate", Rate(not_lost(finite(number / DURATION_UNITS[unit], text), number_text, text)), location, text)
    if unit == "":
        return ast.Value("number", number, location, text)
    if unit == "x":
        return ast.Value("multiplier", Multiplier(number), location, text)
    if unit in DURATION_UNITS:
        return ast.Value(
            "duration", Duration(not_lost(finite(number * DURATION_UNITS[unit], text), number_text, text)), location, text
        )
    raise SchedError(f"unknown unit '{unit}' in '{text}'", location, hint=_UNIT_HINT)


def not_lost(number: float, number_text: str, text: str) -> float:
    """`number` (read from `text`, whose number is `number_text`) unless it is 0 where the text
    is not (`1e-400` is closer to 0 than a float can be): ValueError saying the text, which a
    complaint about the 0 it reads as would not."""
    if number == 0 and any(ch in "123456789" for ch in number_text.lower().partition("e")[0]):
        raise ValueError(
            f"'{short_text(text)}' is too small to be held (it would read as 0): a number other than 0 is 5e-324 or more in size"
        )
    return number


# The escapes a string knows. A tab may be written as is too; a line break only as \n, since
# a string is written on one line (a file's path may hold one).
_ESCAPES = {'"': '"', "\\": "\\", "t": "\t", "n": "\n"}
_ESCAPES_TEXT = '\\" (a quote), \\\\ (a backslash), \\t (a tab) and \\n (a line break)'


def _string(tok: Token, path: str) -> str:
    """The text of a STRING token, its escapes replaced. A control character other than a tab,
    written as is, is refused at its column: it is invisible where the file is read, and a
    drawing's text (SVG, Graphviz's labels) cannot hold it. An escape other than `_ESCAPES` is
    refused at its column too (a backslash is not dropped without a word)."""
    text = str(tok)
    line, column = tok.line or 1, tok.column or 1
    for i, ch in enumerate(text):
        if ch != "\t" and unicodedata.category(ch) == "Cc":
            raise SchedError(
                f"a string holds the control character U+{ord(ch):04X}",
                Location(path, line, column + i, 1),
                hint="a string holds printable text; a tab may be written \\t",
            )
    out: list[str] = []
    i = 1
    while i < len(text) - 1:  # (between the quotes; the token's pattern pairs each backslash)
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        code = text[i + 1]
        if code not in _ESCAPES:
            raise SchedError(
                f"unknown escape '\\{code}' in a string",
                Location(path, line, column + i, 2),
                hint=f"a string's escapes are {_ESCAPES_TEXT}; a backslash itself is written \\\\",
            )
        out.append(_ESCAPES[code])
        i += 2
    return "".join(out)


@v_args(meta=True)
class _Build(Transformer):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def _l(self, x, length=None):
        return _loc(self.path, x, length)

    # --- values ---
    def number(self, meta, children):
        (tok,) = children
        return classify_number(str(tok), self._l(tok))

    def range(self, meta, children):
        (tok,) = children
        loc = self._l(tok)
        try:
            a, b = (whole_number(end) for end in str(tok).split(".."))
        except ValueError as err:
            raise SchedError(f"range {short_text(str(tok))}: {err}", loc) from None
        if b < a:
            raise SchedError(f"range {short_text(str(tok))} ends before it starts", loc)
        return ast.Value("range", IdRange(a, b), loc, str(tok))

    def string(self, meta, children):
        (tok,) = children
        return ast.Value("string", _string(tok, self.path), self._l(tok), str(tok))

    def true(self, meta, children):
        return ast.Value("bool", True, self._l(meta, 4), "true")

    def false(self, meta, children):
        return ast.Value("bool", False, self._l(meta, 5), "false")

    def list(self, meta, children):
        items = tuple(c for c in children if c is not None)
        return ast.Value("list", items, self._l(meta), "[...]")

    def reference(self, meta, children):
        (tok,) = children
        return ast.Value("reference", str(tok), self._l(tok), str(tok))

    def param_ref(self, meta, children):
        (tok,) = children
        return ast.Value("param", str(tok)[1:], self._l(tok), str(tok))

    # --- arguments ---
    def keyword_arg(self, meta, children):
        name, value = children
        return ast.Arg(str(name), value, self._l(name))

    def positional_arg(self, meta, children):
        (value,) = children
        return ast.Arg(None, value, value.location)

    def arguments(self, meta, children):
        return tuple(c for c in children if c is not None)

    # --- chains ---
    def ref(self, meta, children):
        (name,) = children
        return ast.Node(str(name), None, None, self._l(name))

    def decl(self, meta, children):
        name, cls, args = children
        return ast.Node(str(name), str(cls), args, self._l(name), self._l(cls))

    def anon(self, meta, children):
        cls, args = children
        return ast.Node(None, str(cls), args, self._l(cls), self._l(cls))

    def port(self, meta, children):
        (tok,) = children
        if tok.type != "INT":
            return ast.PortRef(str(tok), self._l(meta))
        try:  # (Python refuses to read a number of thousands of digits)
            key = whole_number(str(tok))
        except ValueError:
            raise SchedError(f"port number {short_text(str(tok))} is too large", self._l(tok)) from None
        return ast.PortRef(key, self._l(meta))

    def endpoint(self, meta, children):
        in_port, node, out_port = children
        return ast.Endpoint(in_port, node, out_port)

    def chain(self, meta, children):
        endpoints = tuple(c for c in children if isinstance(c, ast.Endpoint))
        arrows = tuple(self._l(c) for c in children if isinstance(c, Token) and c.type == "ARROW")
        return ast.Chain(endpoints, arrows, self._l(meta))

    # --- statements ---
    def setting(self, meta, children):
        name, value = children
        param = _param_in(value)
        if param is not None:  # (settings are written outside element classes, which alone have parameters)
            raise SchedError(
                f"setting '{name}' is given {param.text}: a $parameter is only allowed inside an elementclass", param.location
            )
        return ast.Setting(str(name), value, self._l(name))

    def import_stmt(self, meta, children):
        (tok,) = children
        return ast.Import(_string(tok, self.path), self._l(tok))

    def require_stmt(self, meta, children):
        (tok,) = children
        return ast.Require(_string(tok, self.path), self._l(tok))

    def param(self, meta, children):
        tok, default = children
        other = None if default is None else _param_in(default)
        if other is not None:
            raise SchedError(
                f"the default of {tok} names the parameter {other.text}: a default is a value, it cannot name a parameter",
                other.location,
            )
        return ast.Param(str(tok)[1:], default, self._l(tok))

    def params(self, meta, children):
        return tuple(c for c in children if c is not None)

    def body(self, meta, children):
        return tuple(c for c in children if isinstance(c, ast.Chain))

    def elementclass(self, meta, children):
        name, params, body = children
        return ast.ElementClass(str(name), params or (), body, self._l(name))

    def start(self, meta, children):
        return tuple(children)


def _param_in(value: ast.Value) -> ast.Value | None:
    """The first $parameter a value names (itself, or an item of its list), if any."""
    if value.kind == "param":
        return value
    if value.kind == "list":
        return next((p for p in map(_param_in, value.items) if p is not None), None)
    return None


def parse(text: str, path: str = "<string>") -> ast.Program:
    """Parse one `.sched` file. Raises `SchedError` for the first syntax error."""
    # A carriage return not followed by a newline ends a line (a file saved with old Mac line
    # ends has no other): the parser counts lines, and ends comments, at newlines only.
    text = _LONE_CR.sub("\n", text)
    remember_source(path, text)
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as err:
        raise _syntax_error(err, text, path) from None
    try:
        statements = _Build(path).transform(tree)
    except lark.exceptions.VisitError as err:
        if isinstance(err.orig_exc, SchedError):
            raise err.orig_exc from None
        if isinstance(err.orig_exc, RecursionError):
            raise _too_deep(text, path) from None
        raise
    except RecursionError:  # the tree is walked recursively; thousands of nested [lists] overflow it
        raise _too_deep(text, path) from None
    return ast.Program(path, statements)


_LONE_CR = re.compile(r"\r(?!\n)")


def _too_deep(text: str, path: str) -> SchedError:
    """The error for text that parsed but nests too deeply to be built, at the first '[' of its
    most deeply nested list (the parse succeeded, so its tokens can be read again)."""
    depth, start, deepest, where = 0, None, 0, None
    try:
        for tok in _parser().lex(text):
            if tok.type == "LSQB":
                start = tok if depth == 0 else start
                depth += 1
                if depth > deepest:
                    deepest, where = depth, start
            elif tok.type == "RSQB":
                depth = max(depth - 1, 0)
    except lark.exceptions.LarkError:  # (read token by token, out of the parser's context)
        where = None
    if where is None:  # (no list: nothing else nests in the grammar, but say so anyway)
        return SchedError("the file nests too deeply to be read", Location(path, 1, 1))
    return SchedError(
        f"this list nests too deeply to be read ({deepest} lists inside lists; a few hundred at most)",
        _loc(path, where, 1),
        hint="write the values as one flat list",
    )


def _syntax_error(err: lark.exceptions.UnexpectedInput, text: str, path: str) -> SchedError:
    line, column = max(err.line, 1), max(err.column, 1)
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        rest = text[err.pos_in_stream :]
        loc = Location(path, line, column, 1)
        if rest.startswith('"'):
            length = len(rest.split("\n", 1)[0])
            return SchedError(
                "unterminated string", Location(path, line, column, length), hint='close it with " on the same line'
            )
        if rest.startswith("/*"):
            return SchedError("unterminated comment", Location(path, line, column, 2), hint="close it with */")
        ch = rest[:1]
        pos = err.pos_in_stream or 0
        value = _unquoted_value(text, pos)
        # A digit of another script here, or in the value it stops (`1..٥` stops at the '.'):
        # 0-9 alone are read as numbers.
        foreign = 0 if _foreign_digit(ch) else None
        if foreign is None and value is not None:
            start, written = value
            foreign = next((start + i - pos for i, c in enumerate(written) if _foreign_digit(c)), None)
        if foreign is not None:
            digit = text[pos + foreign]
            return SchedError(
                f"unexpected character {digit!r} (U+{ord(digit):04X}, a digit of another script)",
                Location(path, line, column + foreign, 1),
                hint="numbers are written with the digits 0-9",
            )
        if ch == "'":
            quoted = re.match(r"'([^'\n]*)'", rest)
            written = f'"{quoted.group(1)}"' if quoted is not None else '"..."'
            return SchedError('unexpected character "\'"', loc, hint=f"a string is written between double quotes: {written}")
        if ch in _TYPOGRAPHIC_QUOTES:
            return SchedError(
                f"unexpected character {ch!r} (a typographic quote)", loc, hint='a string is written between plain quotes: "..."'
            )
        if unicodedata.category(ch) in ("Zs", "Zl", "Zp", "Cf"):  # (no-break and zero-width spaces, a byte order mark)
            return SchedError(
                f"unexpected character {ch!r} (U+{ord(ch):04X}, {unicodedata.name(ch, 'an invisible character').lower()})",
                loc,
                hint="replace it with a plain space, or delete it",
            )
        if value is not None and (per_many := _rate_per_many(value[1], path, line, column - (pos - value[0]))) is not None:
            return per_many
        hint = None if value is None else _quoting_hint(value[1])
        if hint is not None:
            return SchedError(f"unexpected character {ch!r} in a value", loc, hint=hint)
        number = _NUMBER_BEFORE.search(text, 0, pos)
        if ch == "/" and number is not None:
            return SchedError("unexpected character '/'", loc, hint=f"a rate is written without spaces, as {number.group(1)}/h")
        if ch.isalpha() and not ch.isascii():
            return SchedError(
                f"unexpected character {ch!r} (U+{ord(ch):04X})",
                loc,
                hint="a name is written with the letters A-Z and a-z, the digits 0-9 and _ (text in quotes may hold any)",
            )
        if ch == "$":
            return SchedError("a $parameter is only allowed inside an elementclass", loc)
        shown_name = _shown_name(text, pos, loc)
        if shown_name is not None:
            return shown_name
        if ch == ":" and not rest.startswith("::"):
            if _in_arguments(text, pos):
                return SchedError("unexpected ':' (an argument is written 'name=value')", loc)
            return SchedError("unexpected ':' (a declaration is written 'name :: Class')", loc)
        if (ch == "-" and not rest.startswith("->")) or (ch == ">" and text[pos - 1 : pos] == "="):
            return SchedError(f"unexpected '{ch}' (a connection is written 'a -> b')", loc)
        if ch == "<" and rest.startswith("<-"):
            return SchedError(
                "unexpected '<-' (a connection is written 'a -> b', from left to right)", Location(path, line, column, 2)
            )
        return SchedError(f"unexpected character {ch!r}", loc)
    assert isinstance(err, lark.exceptions.UnexpectedToken)  # what an LALR parser raises besides
    tok = err.token
    # The parser's own expected set merges every context a value can end in (an argument list, a
    # list, a setting); asking which tokens it would accept here gives only the real ones.
    accepted = err.interactive_parser.accepts() if err.interactive_parser is not None else err.expected
    expected = sorted({_terminal_text(t) for t in accepted or err.expected})
    open_class = _open_class(err)
    if tok.type == "$END":
        # Lark places the end at the last token: point just after it, not at blank lines below.
        loc = Location(path, tok.end_line or 1, tok.end_column or 1, 1)
        if open_class is not None and "RBRACE" in (accepted or ()):
            return SchedError(
                f"unexpected end of file: {_not_closed(open_class)}", loc, hint="close it with '}' after its last statement"
            )
        also = None if open_class is None else f"{_not_closed(open_class)} either"
        if "';'" in expected:
            return SchedError("unexpected end of file: missing ';' at the end of the last statement", loc, hint=also)
        return SchedError("unexpected end of file, expected " + _one_of(expected), loc, hint=also)
    loc = Location(path, line, column, max(1, len(str(tok))))
    inside = _inside_class(err, open_class, text, path)
    if inside is not None:
        return inside
    value = _unquoted_value(text, tok.start_pos) if tok.start_pos is not None else None
    hint = None if value is None else _quoting_hint(value[1])
    number = _NUMBER_BEFORE.search(text, 0, tok.start_pos or 0) if tok.type == "NAME" and _is_unit(str(tok)) else None
    if hint is None and number is not None:
        hint = f"a unit is written right after its number, without a space: {number.group(1)}{tok}"
    if hint is None and tok.type == "NUMBER" and tok.start_pos is not None:
        hint = _one_unit_hint(text, tok.start_pos, str(tok))
    end_line, ended = _end_before(err, text)
    if hint is None and "';'" in expected and end_line < line and not ended:
        hint = "a statement ends with ';' (did the previous line forget one?)"
    return SchedError(f"unexpected '{tok}', expected " + _one_of(expected), loc, hint=hint)


# A name just before a position (digits before its first letter are no part of it). A match may
# start only where a run of name characters starts: else every character of a long name earlier
# in the file would start a scan to that name's end (seconds for a name of 50,000 characters).
_NAME_BEFORE = re.compile(r"(?<![A-Za-z0-9_])[0-9]*([A-Za-z_][A-Za-z0-9_]*)\Z")
_ANONYMOUS_NUMBER = re.compile(r"@[0-9]+")
_INNER_NAME = re.compile(r"/[A-Za-z_][A-Za-z0-9_]*(?:@[0-9]+)?(?:/[A-Za-z_][A-Za-z0-9_]*(?:@[0-9]+)?)*")


def _shown_name(text: str, pos: int, loc: Location) -> SchedError | None:
    """The error for a name as messages show it, written back into a graph: an anonymous
    element's (`JobPool@2`) or an element's inside a compound instance (`g/AcceptAll@1`),
    neither of which the language can write; None when the '@' or '/' at `pos` is no such name."""
    before = _NAME_BEFORE.search(text, 0, pos)
    if before is None:
        return None
    name = before.group(1)
    anonymous = _ANONYMOUS_NUMBER.match(text, pos)
    if anonymous is not None:
        return SchedError(
            f"unexpected character '@': '{name}{anonymous.group()}' is how messages name an anonymous element, "
            "which a graph cannot write",
            loc,
            hint=f"name the element where it is declared (x :: {name}) and connect it by that name",
        )
    inner = _INNER_NAME.match(text, pos)
    if inner is not None:
        return SchedError(
            f"unexpected character '/': '{name}{inner.group()}' is how messages name an element inside the "
            f"compound '{name}', which a graph cannot write",
            loc,
            hint=f"connect the compound itself, through its ports ({name} -> ..., ... -> {name})",
        )
    return None


def _open_class(err: lark.exceptions.UnexpectedToken) -> Token | None:
    """The name of the elementclass whose '{' the parser has read and not closed, if any (an
    element class holds no other, so there is at most one)."""
    stack = err.interactive_parser.parser_state.value_stack if err.interactive_parser is not None else []
    for i, item in enumerate(stack[:-2]):
        if isinstance(item, Token) and item.type == "ELEMENTCLASS" and str(stack[i + 2]) == "{":
            name = stack[i + 1]
            return name if isinstance(name, Token) else None
    return None


def _not_closed(name: Token) -> str:
    return f"elementclass {name} (line {name.line}) is not closed with '}}'"


# Statements that cannot be inside an element class: read there, each is a name (the keyword
# is a keyword only where a statement may begin outside one).
_OUTSIDE_ONLY = ("elementclass", "import", "require")


def _inside_class(err: lark.exceptions.UnexpectedToken, open_class: Token | None, text: str, path: str) -> SchedError | None:
    """For a statement that cannot be inside an element class (a setting, another elementclass,
    an import) read inside an open one: the error; None otherwise. Such a statement is most
    often one after an element class whose '}' is missing: when no '}' follows in the file, it
    certainly is, and the message says so."""
    stack = err.interactive_parser.parser_state.value_stack if err.interactive_parser is not None else []
    if open_class is None or len(stack) < 2:
        return None
    first, before = stack[-1], stack[-2]
    starts = (isinstance(before, Token) and str(before) in ("{", "|", ";")) or (
        isinstance(before, lark.Tree) and str(before.data).startswith("__body")
    )
    if not (starts and isinstance(first, Token) and first.type == "NAME"):
        return None
    if str(first) in _OUTSIDE_ONLY:
        what = f"'{first}' cannot be written inside"
    elif err.token.type == "EQUAL":
        what = "a setting cannot be written inside"
    else:
        return None
    where = Location(path, first.line or 1, first.column or 1, len(str(first)))
    if "}" not in text[first.start_pos or 0 :]:
        return SchedError(f"{_not_closed(open_class)}: {what} it", where, hint=f"close {open_class} with '}}' before this line")
    return SchedError(
        f"{what} elementclass {open_class} (line {open_class.line})",
        where,
        hint=f"if {open_class} should end before it, close it there with '}}'; else write it outside {open_class}",
    )


# A value being written: `name = ` at the start of a statement or of an argument, then the
# value's text so far (the characters a value written without quotes may run on with).
_VALUE_SO_FAR = re.compile(r"(?:^|[;{(,|])\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*([^\s;,()\[\]\"=]*)$", re.M)
_VALUE_TEXT = re.compile(r"[^\s;,()\[\]\"]*")


_TYPOGRAPHIC_QUOTES = "\u201c\u201d\u201e\u201f\u2018\u2019\u201a\u201b\u00ab\u00bb\u2039\u203a"

# A number, then spaces, just before a position (`5 min`, `8 / h`).
_NUMBER_BEFORE = re.compile(r"(?<![A-Za-z0-9_.])([0-9]+(?:\.[0-9]+)?)[ \t]+\Z")


def _is_unit(word: str) -> bool:
    return word in DURATION_UNITS or word == "x"


def _foreign_digit(ch: str) -> bool:
    return unicodedata.category(ch) == "Nd" and not ch.isascii()


def _unquoted_value(text: str, pos: int) -> tuple[int, str] | None:
    """Where a value written without quotes that the parser stopped inside at `pos` starts,
    and its text (`cluster = 32x4:V100;`, `path=traces/x.csv`); None if there is none. Text
    such as a cluster spec or a path is a string, written in quotes."""
    line_start = text.rfind("\n", 0, pos) + 1
    m = _VALUE_SO_FAR.search(text, line_start, pos)
    if m is None:
        return None
    start = m.start(1)
    written = _VALUE_TEXT.match(text, start).group()  # type: ignore[union-attr]
    if not start <= pos < start + len(written) or "->" in written or "::" in written or not any(c.isalnum() for c in written):
        return None
    return start, written


def _quoting_hint(written: str) -> str | None:
    """The hint for a value written without quotes; None for one that starts as a number: that
    is a number written wrong (`5.`, `1_000`, `0x10`), unless it holds what only a cluster spec
    does (`32x4:V100`, `4x8@dgx`, `32x4`: no multiplier is followed by digits), or reads as a
    path does (`../traces/x.csv`, `1data/f.csv`: a '/' that is no rate's)."""
    spec = ":" in written or "@" in written or re.match(r"[1-9][0-9]*[xX][0-9]", written) is not None  # (0x10: hex)
    if written[0] in "0123456789+-." and not spec and not _reads_as_path(written):
        return None
    return f'text such as a cluster spec or a file path is written in quotes: "{written}"'


def _in_arguments(text: str, pos: int) -> bool:
    """Whether `pos` is inside an argument list: a '(' opens before it, on its statement, and
    is not closed (strings and comments aside, which a ':' there would end anyway)."""
    start = max(text.rfind(";", 0, pos), text.rfind("{", 0, pos), text.rfind("}", 0, pos))
    return text.rfind("(", start + 1, pos) > text.rfind(")", start + 1, pos)


# A duration just before a position, with nothing between (`1h` of `1h30min`).
_DURATION_BEFORE = re.compile(r"(?<![A-Za-z0-9_.])([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)\Z")


def _one_unit_hint(text: str, pos: int, token: str) -> str | None:
    """For a duration written in several units (`1h30min`, read as `1h` then `30min`): a hint
    giving it in one; None when the number at `pos` does not follow a duration so."""
    before = _DURATION_BEFORE.search(text, 0, pos)
    after = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)", token)
    if before is None or after is None or before.group(2) not in DURATION_UNITS or after.group(2) not in DURATION_UNITS:
        return None
    seconds = float(before.group(1)) * DURATION_UNITS[before.group(2)] + float(after.group(1)) * DURATION_UNITS[after.group(2)]
    return f"a duration is written with one unit: {before.group()}{token} is {format_duration(seconds)}"


# A rate written per a number of units (`8/2h`): a rate is a count per one unit.
_RATE_PER_MANY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+))/([0-9]+(?:\.[0-9]+)?|\.[0-9]+)([A-Za-z]*)")


def _rate_per_many(written: str, path: str, line: int, column: int) -> SchedError | None:
    """The error for a rate written per several units (`8/2h`, `8/1h`), at the value (which
    starts at `column`); None for any other text. Read as a path, it would be told to be quoted,
    which makes it text that no rate is."""
    m = _RATE_PER_MANY.fullmatch(written)
    if m is None:
        return None
    count, per, unit = m.groups()
    if unit in DURATION_UNITS and float(per) > 0:
        hint = f"{written} is {float(count) / float(per):g}/{unit}"
    else:
        hint = f"time units are {unit_list()}"
    return SchedError(
        f"rate '{written}' is not written per one unit: a rate is a count per unit of time, such as 8/h",
        Location(path, line, column, len(written)),
        hint=hint,
    )


def _reads_as_path(written: str) -> bool:
    """Whether text written without quotes reads as a file path: it starts as one does, or holds
    a '/' that is no rate's (`1data/f.csv`, not `8/h`)."""
    written = written.strip()
    return written.startswith(("./", "../", "/")) or ("/" in written and re.fullmatch(_NUMBER, written) is None)


def _end_before(err: lark.exceptions.UnexpectedToken, text: str) -> tuple[int, bool]:
    """The line on which the text parsed before the unexpected token ends (0 if none was), and
    whether that text ends a statement or a block (with ';' or '}': no ';' is missing then)."""
    stack = err.interactive_parser.parser_state.value_stack if err.interactive_parser is not None else []
    last = stack[-1] if stack else None
    if isinstance(last, Token):
        return last.end_line or 0, str(last) in (";", "}")
    if isinstance(last, lark.Tree) and not last.meta.empty:
        return last.meta.end_line, text[last.meta.end_pos - 1 : last.meta.end_pos] in (";", "}")
    return 0, False


def _one_of(items: list[str]) -> str:
    if len(items) <= 2:
        return " or ".join(items)
    return "one of " + ", ".join(items)


_VALUE_NAME = "__value__"
_VALUE_AT = f"{_VALUE_NAME} = "  # (a value is parsed as the right side of a setting)


# A number as classify_number reads one: digits, then perhaps a '/' (a rate) and a unit.
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?/?[A-Za-z]*"
# A range, as the grammar's RANGE reads one (`3000..4000`): no string either.
_RANGE = r"-?[0-9]+\.\.-?[0-9]+"


def parse_value(text: str, where: str = "<command line>") -> ast.Value:
    """Parse a single value as written in a `.sched` file (for `--set element.field=VALUE`).
    Errors point into `text` itself, as the user wrote it. A comment may follow the value."""
    if not text.strip():
        raise SchedError("no value after '='")
    # The ';' that ends the setting goes on a line of its own, where a `//` comment the value
    # ends with cannot take it.
    lines = len(source_lines(text))
    try:
        program = parse(f"{_VALUE_AT}{text}\n;", where)
    except SchedError as err:
        if _has_semicolon(text):  # (a ';' inside: the parser's complaint is of what follows it)
            raise SchedError(f"'{text}' is not a single value (a value cannot contain ';' or statements)") from None
        # Quoting helps text that was meant as a string; a number with a bad unit or out of
        # range is no string either, so it keeps the parser's own hint (the units), as does a
        # number written with other digits than 0-9.
        quoted = '"' in text or "'" in text
        numeric = re.fullmatch(rf"\s*(?:{_NUMBER}|{_RANGE})\s*", text) is not None
        # (a number written wrong, `5 min`, `5.`, `8 / h`: quotes would make it text, which no
        # number is; a cluster spec such as 32x4:V100 is text)
        number_like = (
            re.match(r"\s*[+-]?\.?[0-9]", text) is not None and not any(c in text for c in ":@") and not _reads_as_path(text)
        )
        foreign_digits = any(unicodedata.category(ch) == "Nd" and not ch.isascii() for ch in text)
        parameter = err.message.startswith(f"setting '{_VALUE_NAME}' ")
        own = err.hint is not None and not err.hint.startswith("text such as")  # (a unit apart, a typographic quote)
        keep = quoted or numeric or number_like or foreign_digits or parameter or own
        hint = err.hint if keep else f"text such as a file path is written in quotes: '\"{text}\"'"
        location, message = None, err.message
        if parameter:  # (the setting is parse_value's own: the complaint is the $parameter's)
            message = "a $parameter is only allowed inside an elementclass"
        if err.location is not None and err.location.line > lines:
            # The ';' the parse adds after the value is not the user's: the value ended too soon.
            last = source_lines(text)[-1]
            location = Location(where, lines, len(last) + 1, 1)
            expected = message.partition(", expected ")[2]
            if "']'" in expected:
                message, hint = "the value ends before its closing ']'", "close the list with ']'"
            elif "';'" in message:
                message, hint = "the value ends too soon" + (f" (expected {expected})" if expected else ""), None
        elif err.location is not None:
            location = _in_text(err.location)
            # The value is whole and more follows: the ';' the parser wants is not the user's to
            # write (a value holding one is refused below).
            unexpected, _, expected = message.partition(", expected ")
            if expected == "';'" and unexpected.startswith("unexpected "):
                message = f"{unexpected} after the value: one value is given here"
                hint = hint or "a list is written [a, b]"
        raise SchedError(message, location, hint=hint) from None
    finally:
        remember_source(where, text)
    # Text such as `5min; x :: Las` parses as several statements; a value is exactly one.
    if len(program.statements) != 1 or not isinstance(program.statements[0], ast.Setting) or _has_semicolon(text):
        raise SchedError(f"'{text}' is not a single value (a value cannot contain ';' or statements)")
    return _value_in_text(program.statements[0].value)


def _has_semicolon(text: str) -> bool:
    """Whether `text` (which parsed) holds a ';' of its own, outside its strings and comments."""
    try:
        return any(tok.type == "SEMICOLON" for tok in _parser().lex(text))
    except lark.exceptions.LarkError:  # (read token by token, out of the parser's context)
        return ";" in text


def _in_text(location: Location) -> Location:
    """A location in the setting `parse_value` parses, moved into the value's own text."""
    if location.line != 1:
        return location
    return attrs.evolve(location, column=max(1, location.column - len(_VALUE_AT)))


def _value_in_text(value: ast.Value) -> ast.Value:
    inner = tuple(_value_in_text(v) for v in value.items) if value.kind == "list" else value.value
    return attrs.evolve(value, value=inner, location=_in_text(value.location))
