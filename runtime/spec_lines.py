"""The lines of a TOML cluster spec on which its tables and keys are written, so that a problem
with a group's value names the line a user can go to (`spec.toml:14`). TOML readers give no
line numbers for values; this is a light scan of the text, run only on a file the TOML reader
took: table headers (`[tiers.rack]`, `[[group]]`) and `key = value` lines, past comments, blank
lines, strings (multi-line ones too) and arrays written over several lines. A spec the TOML
reader refuses is said at the line it names too (`not_toml`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from roundhouse.errors import ClusterError

# A place in the spec: its keys from the top, with an array of tables' element by its index
# (`("group", 1, "nodes")`: the second [[group]]'s `nodes`).
Place = tuple[str | int, ...]
# A key of bare parts, dotted or not (`nodes`, `rack.latency_ns`): read without the TOML reader.
_BARE = re.compile(r"[ \t]*[A-Za-z0-9_-]+(?:[ \t]*\.[ \t]*[A-Za-z0-9_-]+)*[ \t]*")


class SpecLines:
    """Where each table and key of a spec's text is written (1-based lines). The text is
    scanned when a line is first asked for: only a spec with a problem pays for it."""

    def __init__(self, text: str):
        self._text = text
        self._scanned = False
        self._lines: dict[Place, int] = {}
        self._counts: dict[Place, int] = {}  # an array of tables -> how many elements so far

    def _scan(self) -> None:
        if self._scanned:
            return
        self._scanned = True
        table: Place = ()
        string = ""  # the delimiter of a multi-line string the line before left open
        depth = 0  # brackets and braces a value left open (an array over several lines)
        for number, line in enumerate(self._text.split("\n"), start=1):
            if string or depth:
                string, depth = _scan_value(line, 0, string, depth)
                continue
            body = line.strip()
            if body.startswith("["):
                table = self._header(body, number, table)
                continue
            equals = _key_end(line)
            if equals < 0:  # (blank, or a comment)
                continue
            keys = _keys(line[:equals])
            if keys:
                for k in range(1, len(keys)):  # (a dotted key writes its tables there too)
                    self._lines.setdefault(table + keys[:k], number)
                self._lines[table + keys] = number
            string, depth = _scan_value(line, equals + 1, "", 0)

    def line(self, *place: str | int) -> int | None:
        """The line of `place`; if it is not written on a line of its own (a default, a key of an
        inline table), that of the nearest table or key around it; None if none is."""
        self._scan()
        while place:
            if place in self._lines:
                return self._lines[place]
            place = place[:-1]
        return None

    def written(self, *place: str | int) -> bool:
        """Whether `place` is written on a line of its own (a header or a key)."""
        self._scan()
        return place in self._lines

    def _header(self, body: str, number: int, table: Place) -> Place:
        """Note a table header's line; the table the lines after it are in."""
        array = body.startswith("[[")
        end = _comment_start(body)
        inner = body[:end].strip()
        inner = inner[2:-2] if array else inner[1:-1]
        keys = _keys(inner)
        if keys is None:
            return table
        if not array:
            place = self._resolve(keys)
            self._lines.setdefault(place, number)
            return place
        parent = self._resolve(keys[:-1])
        whole = (*parent, keys[-1])
        count = self._counts.get(whole, 0)
        self._counts[whole] = count + 1
        self._lines.setdefault(whole, number)
        self._lines[(*whole, count)] = number
        return (*whole, count)

    def _resolve(self, keys: tuple[str, ...]) -> Place:
        """The place of a header's keys: through an array of tables, its latest element."""
        place: Place = ()
        for key in keys:
            place = (*place, key)
            if place in self._counts:
                place = (*place, self._counts[place] - 1)
        return place


def at(path: Path | str, lines: SpecLines | None, *place: str | int) -> str:
    """`path`, with the line of `place` when one is found (`spec.toml:14`): where a message says
    the problem is."""
    number = lines.line(*place) if lines is not None else None
    return f"{path}:{number}" if number is not None else str(path)


def _keys(text: str) -> tuple[str, ...] | None:
    """A TOML key as written (bare, quoted or dotted), as its parts; None if it is none. The
    TOML reader decodes a quoted one, so that escapes come out as the spec's reader saw them."""
    if _BARE.fullmatch(text):
        return tuple(part.strip() for part in text.split("."))
    try:
        table = tomllib.loads(f"{text} = 0")
    except ValueError:
        return None
    keys: list[str] = []
    while isinstance(table, dict) and len(table) == 1:
        (key, table), *_ = table.items()
        keys.append(key)
    return tuple(keys)


def _key_end(line: str) -> int:
    """Where the `=` after a line's key is (-1 if the line has none before a comment)."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "#":
            return -1
        if c == "=":
            return i
        if c in "\"'":
            i = _string_end(line, i)
            continue
        i += 1
    return -1


def _comment_start(text: str) -> int:
    """Where a header line's comment starts (its length if it has none), past quoted keys."""
    i = 0
    while i < len(text):
        if text[i] == "#":
            return i
        i = _string_end(text, i) if text[i] in "\"'" else i + 1
    return len(text)


def _string_end(line: str, i: int) -> int:
    """The index after a one-line string starting at `i` (a basic one honours backslashes)."""
    quote = line[i]
    j = i + 1
    while j < len(line):
        if quote == '"' and line[j] == "\\":
            j += 2
            continue
        if line[j] == quote:
            return j + 1
        j += 1
    return len(line)


def _scan_value(line: str, i: int, string: str, depth: int) -> tuple[str, int]:
    """Read a value's text from `i` on: the multi-line string delimiter and the bracket depth it
    leaves open at the end of the line."""
    while i < len(line):
        if string:
            if string == '"""' and line[i] == "\\":
                i += 2
                continue
            if line.startswith(string, i):
                run = len(line[i:]) - len(line[i:].lstrip(string[0]))  # (up to two quotes of the text before it)
                string, i = "", i + run
                continue
            i += 1
            continue
        c = line[i]
        if c == "#":
            break
        if line.startswith('"""', i) or line.startswith("'''", i):
            string, i = line[i : i + 3], i + 3
        elif c in "\"'":
            i = _string_end(line, i)
        else:
            depth += (c in "[{") - (c in "]}")
            i += 1
    return string, max(depth, 0)


# Where the TOML reader says a problem is, at the end of its message.
_TOML_AT = re.compile(r"\s*\(at line ([0-9]+), column ([0-9]+)\)$")
# A line's text up to a number just written after its key: a unit written after it stops the reader.
_NUMBER_WRITTEN = re.compile(r"[^=#]+=\s*[-+]?[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][-+]?[0-9_]+)?\s*")
# A run of digits too long to be a count (Python's reader of whole numbers stops at 4,300 digits).
_LONG_NUMBER = re.compile(r"[0-9][0-9_]{999,}")


# The project's other files, by their extension: given where a cluster spec is asked for (a
# graph for `--cluster`), they are said to be what they are rather than TOML gone wrong.
_OTHER_FILES = {".sched": "a graph", ".csv": "a trace", ".parquet": "a trace or a table", ".trace": "a trace", ".py": "Python"}


def other_file(path: Path) -> ClusterError | None:
    """The error for a file of another kind given as a cluster spec (`las.sched`), or None."""
    kind = _OTHER_FILES.get(path.suffix.lower())
    if kind is None:
        return None
    return ClusterError(
        f"is {kind} ({path.suffix} file), not a cluster spec: give a .toml file of [[group]] tables "
        "(docs/clusters.md), or a shorthand such as 32x4:V100",
        path,
    )


def not_toml(path: Path, text: str, err: ValueError) -> ClusterError:
    """The error for a spec file the TOML reader refused, at the line it names (`spec.toml:6`),
    with what to write where a unit follows a number (`latency_ns = 5000 ns`), and a number too
    long for Python to read said as one, without Python's advice on raising its limit. A file of
    another kind (a graph) is said to be one."""
    other = other_file(path)
    if other is not None:
        return other
    message = str(err)
    lines = text.split("\n")
    if not isinstance(err, tomllib.TOMLDecodeError):
        runs = [
            (len(m.group().replace("_", "")), i)
            for i, text_line in enumerate(lines, start=1)
            for m in _LONG_NUMBER.finditer(text_line)
        ]
        if not runs:
            return ClusterError(f"not valid TOML: {message}", path)
        digits, line = max(runs, key=lambda run: run[0])  # (the longest: the one Python could not read)
        return ClusterError(
            f"not valid TOML for a spec: a whole number of {digits:,} digits, far past any value a spec takes", f"{path}:{line}"
        )
    at_ = _TOML_AT.search(message)
    if at_ is None:  # ("at end of document": no line of its own)
        return ClusterError(f"not valid TOML: {message}", path)
    line, column = int(at_.group(1)), int(at_.group(2))
    said = f"not valid TOML: {message[: at_.start()]} (column {column})"
    written = lines[line - 1] if line <= len(lines) else ""
    before, after = written[: column - 1], written[column - 1 :]
    if _NUMBER_WRITTEN.fullmatch(before) and re.match(r"[^\W0-9_]", after):
        said += "; write the number alone, its unit is the key's (bandwidth_gb_per_s = 200 is 200 GB/s)"
    elif message.startswith("Cannot overwrite a value") and re.fullmatch(r"\s*[A-Za-z0-9_-]+\s*", written.split("=")[0]):
        key = written.split("=", 1)[0].strip()  # (the reader names no key; a dotted one is left unsaid)
        said += f"; '{key}' has a value already in this table, written above (each key is written once)"
    return ClusterError(said, f"{path}:{line}")
