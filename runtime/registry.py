"""The element registry: class name -> element class, filled by the `@element` decorator.

A graph names a handful of the library's elements, and importing the whole library (Gavel's
solvers, Pollux, Optimus and the rest) costs every command-line run and every scheduler process
about a tenth of a second. So the registry finds the built-in elements in the library's source
text (each is a class under `@element`), and imports an element's module when the element is
first looked up; listing every class (`classes`) imports them all.

Users' own elements come from Python files a graph requires (`require "x.py";`, loaded by
runtime/dsl/loader.py). Each file is imported once, and its classes are known by the file they
came from. Within `scope()`, what such files add is forgotten at its end: each command of the
command line runs within one (tools/cli.py), as each Simulation's graph is compiled within one,
so that a process that goes on (a notebook, a test) may require another copy of a file; and
`roundhouse check` reads several graphs, each of which may require its own copy of a file.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import re
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType, ModuleType
from typing import TYPE_CHECKING

from roundhouse.errors import did_you_mean

if TYPE_CHECKING:
    from roundhouse.runtime.element import Element

_CLASSES: dict[str, type[Element]] = {}
_LOADED = False
# Users' element files imported (resolved path -> module), the file each of their classes came
# from (as its path was given), and the file being imported now.
_FILES: dict[str, ModuleType] = {}
_FILE_OF: dict[str, str] = {}
_IMPORTING: list[str] = []
# Files a scope that remembers forgot, by resolved path, then by module name (each version of a
# file is a module of its own, its digest in its name): the module and its classes (name ->
# class, file as given), latest last. Required again as one of those versions, they are known
# again rather than imported anew, so that the classes of a graph built earlier (a notebook's
# simulation, whose snapshot pickles objects of them by reference) stay the classes their
# module holds.
_FORGOTTEN: dict[str, dict[str, tuple[ModuleType, dict[str, tuple[type[Element], str]]]]] = {}
# Where each element class defined at a module's top level was defined: the run of the module's
# code (its code object: a module imported again, or reloaded, runs code compiled anew), the file
# and the line, so that one run defining a name twice is told from a module imported again.
_DEFINED_AT: weakref.WeakKeyDictionary[type, tuple[CodeType, str, int]] = weakref.WeakKeyDictionary()
_LIBRARY = "roundhouse.elements"
# A built-in element: `@element` (maybe with other decorators after it), then its class line.
_DECLARED = re.compile(r"^@element\n(?:@[^\n]*\n)*class (\w+)", re.MULTILINE)


@functools.cache
def builtin_modules() -> dict[str, str]:
    """Class name -> module of every built-in element, read from the library's sources."""
    spec = importlib.util.find_spec(_LIBRARY)
    assert spec is not None and spec.submodule_search_locations is not None  # (the library ships with the package)
    root = Path(next(iter(spec.submodule_search_locations)))
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join((_LIBRARY, *path.relative_to(root).with_suffix("").parts))
        for name in _DECLARED.findall(path.read_text(encoding="utf-8")):
            found[name] = module
    return found


class DefinedTwice(TypeError):
    """Two element classes of one name: the message names where each is defined."""


def _check_declared_names(cls: type[Element]) -> None:
    """`state` and `fixed` are tuples of attribute names. A bare string (`state = ("_seen")`,
    the one-name tuple's comma left out) would be read a letter at a time, and forking would
    then say the element holds `_seen` undeclared, though it names it."""
    for which in ("state", "fixed"):
        names = getattr(cls, which, None)
        if names is None:
            continue
        if isinstance(names, str):
            raise TypeError(
                f"{cls.__name__}.{which} is the string {names!r}, not a tuple of attribute names: "
                f"write `{which} = ({names!r},)` (a tuple of one name needs its comma)"
            )
        if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{cls.__name__}.{which} must be a tuple of attribute names (str), got {names!r}")


def register(cls: type[Element]) -> None:
    _check_declared_names(cls)
    # Where a class of this name is defined already: registered, or a built-in not imported yet.
    # (The same file defining it again is no clash: a file imported again after it failed
    # half-way, or after it or a module it imports changed.)
    existing = _CLASSES.get(cls.__name__)
    # Defined by the user's file being imported: not a built-in that the file imports (its
    # module stays imported, so it must stay known when the file's classes are forgotten).
    from_file = bool(_IMPORTING) and not cls.__module__.startswith(_LIBRARY)
    first: str | None
    if existing is not None:
        first = existing.__module__
        clash = (_origin(existing), existing.__qualname__) != (_origin(cls), cls.__qualname__)
    else:
        first = builtin_modules().get(cls.__name__)
        clash = first is not None and (first, cls.__name__) != (cls.__module__, cls.__qualname__)
    if clash:
        first = _FILE_OF.get(cls.__name__, first)
        here = _IMPORTING[-1] if from_file else cls.__module__
        raise DefinedTwice(f"element class {cls.__name__} is defined twice: in {first} and {here}")
    defined = _definition(cls)
    before = _DEFINED_AT.get(existing) if existing is not None else None
    if defined is not None and before is not None and before[0] is defined[0]:
        shown = _IMPORTING[-1] if from_file and str(Path(_IMPORTING[-1]).resolve()) == defined[1] else defined[1]
        lines = [_class_line(defined[1], cls.__name__, line) for line in (before[2], defined[2])]
        raise DefinedTwice(
            f"element class {cls.__name__} is defined twice in {shown}: at lines {lines[0]} and {lines[1]} "
            "(a graph names an element by its class's name: rename one)"
        )
    _CLASSES[cls.__name__] = cls
    if defined is not None:
        _DEFINED_AT[cls] = defined
    if from_file:
        _FILE_OF[cls.__name__] = _IMPORTING[-1]


def _definition(cls: type) -> tuple[CodeType, str, int] | None:
    """For a class defined at its module's top level (or in a class there): the code of the
    module's run that defines it, its file, and the line that run is at (the class statement's
    decorator). None for a class defined in a function, which may define it again each call."""
    if "<locals>" in cls.__qualname__:
        return None
    file = _origin(cls)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_code.co_filename == file):
        frame = frame.f_back
    return None if frame is None else (frame.f_code, file, frame.f_lineno)


def _class_line(file: str, name: str, line: int) -> int:
    """The line of the `class` statement whose decorators (or itself) `line` is in, in `file`:
    `line` itself if the file cannot be read so."""
    import ast

    try:
        tree = ast.parse(Path(file).read_bytes(), file)
    except (OSError, SyntaxError, ValueError):
        return line
    around = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and node.name == name
        and min([node.lineno, *(d.lineno for d in node.decorator_list)]) <= line <= (node.end_lineno or node.lineno)
    ]
    return max(around, default=line)


def _origin(cls: type) -> str:
    """The file a class was defined in (its module's name if none): two versions of a user's
    element file are modules of their own names, and one file defining a class again is no clash."""
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return file if isinstance(file, str) else cls.__module__


def imported_file(resolved: str, name: str | None = None) -> ModuleType | None:
    """The module of a user's element file imported already (by its resolved path; with
    `name`, only the version imported as that module). One a scope forgot is known again, its
    classes with it, unless a class of the same name is known now (it is then imported again,
    and the clash reported as for any other)."""
    module = _FILES.get(resolved)
    if module is not None and (name is None or module.__name__ == name):
        return module
    versions = _FORGOTTEN.get(resolved, {})
    if module is not None or not versions or (name is not None and name not in versions):
        return None
    module, classes = versions[name] if name is not None else list(versions.values())[-1]
    if any(known in _CLASSES and _CLASSES[known] is not cls for known, (cls, _) in classes.items()):
        return None
    for known, (cls, shown) in classes.items():
        _CLASSES[known] = cls
        _FILE_OF[known] = shown
    _FILES[resolved] = module
    return module


def keep_file(resolved: str, module: ModuleType) -> None:
    """Record a user's element file as imported, so that it is not imported again."""
    _FILES[resolved] = module


@contextlib.contextmanager
def importing_file(shown: str) -> Iterator[None]:
    """Around the import of a user's element file: the classes it registers come from `shown`
    (its path as given), which messages about them name."""
    _IMPORTING.append(shown)
    try:
        yield
    finally:
        _IMPORTING.pop()


@contextlib.contextmanager
def scope(remember: bool = False) -> Iterator[None]:
    """Forget, at the end, the element files imported within and their classes (built-in
    classes imported within stay): what one graph requires is not seen by the next. With
    `remember` (the Simulation API, a command), a file forgotten so and required again unchanged is known
    again, not imported anew (`imported_file`). A scope that does not remember imports every
    file anew: a sweep's worker imports again the modules that changed, an element file's
    helpers included (runtime/user_modules.py), which a file known again would not."""
    if not remember:
        _FORGOTTEN.clear()
    files, file_of = dict(_FILES), dict(_FILE_OF)
    try:
        yield
    finally:
        for resolved, module in _FILES.items():
            if remember and resolved not in files:
                mine = {
                    n: (_CLASSES[n], _FILE_OF[n]) for n in _FILE_OF if n in _CLASSES and _CLASSES[n].__module__ == module.__name__
                }
                versions = _FORGOTTEN.setdefault(resolved, {})
                versions.pop(module.__name__, None)  # (latest last)
                versions[module.__name__] = (module, mine)
        for name in set(_FILE_OF) - set(file_of):
            _CLASSES.pop(name, None)
        _FILES.clear()
        _FILES.update(files)
        _FILE_OF.clear()
        _FILE_OF.update(file_of)


def load_builtin() -> None:
    """Import the whole element library (each family module registers its classes)."""
    global _LOADED
    if not _LOADED:
        for module in sorted(set(builtin_modules().values())):
            importlib.import_module(module)
        _LOADED = True


def get(name: str) -> type[Element] | None:
    cls = _CLASSES.get(name)
    if cls is None and not _LOADED:
        module = builtin_modules().get(name)
        if module is not None:
            importlib.import_module(module)
            cls = _CLASSES.get(name)
    return cls


def names() -> list[str]:
    return sorted(set(_CLASSES) | set(builtin_modules()))


def classes() -> list[type[Element]]:
    load_builtin()
    return [_CLASSES[n] for n in sorted(_CLASSES)]


def suggest(name: str) -> str | None:
    return did_you_mean(name, names())
