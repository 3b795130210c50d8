"""From `.sched` files to one flat graph: imports followed, compounds expanded.

- `import "x.sched";` brings in another file's settings, element classes and elements (a file
  imported twice is read once; the importing file's settings win over imported ones).
- A bare name in a chain refers to a declared element of the same scope; failing that, to an
  element class (an anonymous instance, named `Class@N` as in Click).
- `elementclass Name { $a, $b=default | input -> ... -> output; }` defines a compound. Each
  instance `c :: Name(...)` is expanded in place, its inner elements named `c/inner`, and
  connections to `c [port]` are spliced through to what `input [port] -> ...` and
  `... -> [port] output` connect to inside (runtime/dsl/compounds.py). The records it loads into are in flat.py.
- An elementclass the graph has no instance of is expanded too, on its own and apart from the
  graph (a `Body`), its `$parameters` left as they are, so that its problems are reported as
  Click reports them: the compiler checks what does not depend on an instance.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs

from roundhouse.errors import Location, SchedError, SchedErrors, did_you_mean, source_lines
from roundhouse.runtime import registry
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.compounds import bind_params, splice, substitute, unbound
from roundhouse.runtime.dsl.flat import Body, Decl, Edge, FlatGraph, OpenPort, port_key
from roundhouse.runtime.dsl.parser import parse
from roundhouse.runtime.snapshot_paths import saved_state_kind

__all__ = ["Body", "Decl", "Edge", "FlatGraph", "element_file_digest", "load", "load_element_file", "read_source"]

RESERVED = ("input", "output")

# A `.sched` file is a page or two; reading stops beyond this (a device such as /dev/zero never ends).
MAX_SOURCE_BYTES = 16 * 2**20


def read_source(path: Path) -> str:
    """The text of a `.sched` file. OSError, UnicodeDecodeError or ValueError (too large)."""
    with open(path, "rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise ValueError(f"it is larger than {MAX_SOURCE_BYTES // 2**20} MB, which no .sched file is")
    # Some editors begin a UTF-8 file with a byte order mark; it is not part of the text.
    return data.decode("utf-8").removeprefix("\ufeff")


def read_imported(path: Path) -> str:
    """The text of an imported `.sched` file, which may not be a named pipe: reading one would
    wait for a writer forever (the graph given on the command line may be one: `check <(...)`)."""
    try:
        fifo = stat.S_ISFIFO(path.stat().st_mode)
    except (OSError, ValueError):
        fifo = False  # (read_source says why it cannot be read)
    if fifo:
        raise ValueError(f"{path} is a named pipe, not a file: its text would be waited for")
    return read_source(path)


def _read_graph(path: str) -> str:
    """The text of the graph's own `.sched` file, or a SchedError saying why it cannot be read."""
    try:
        return read_source(Path(path))
    except FileNotFoundError:
        raise SchedError(f"no such file: {path}") from None
    except UnicodeDecodeError as err:  # (said at its line and column, as the parser's errors are)
        other = _not_a_graph(path, None)  # (a Parquet trace, say)
        if other is not None:
            raise other from None
        line, column = _line_and_column(err.object[: err.start])
        byte = err.object[err.start]
        raise SchedError(f"not UTF-8 text (byte 0x{byte:02x} cannot be decoded)", Location(path, line, column)) from None
    except (OSError, ValueError) as err:
        raise SchedError(f"cannot read {path}: {_why_unreadable(err)}") from None


# Files given where a graph goes, known by their names' endings: what each is, and where it goes.
_CLUSTER = (
    "a cluster spec (a .toml file of node groups)",
    "the cluster with --cluster {path} (or in the graph's cluster setting)",
)
_TRACE = ("a trace", "the trace with --trace {path} (or to the graph's TraceSource, as its path)")
_OTHER_FILES = {
    ".toml": _CLUSTER,
    ".csv": _TRACE,
    ".trace": _TRACE,
    ".parquet": _TRACE,
    ".pq": _TRACE,
    ".py": ("a Python file", 'require the elements it defines in the graph (require "{name}";)'),
}


def _not_a_graph(path: str, text: str | None) -> SchedError | None:
    """For the file given as the graph, which does not read as one: if it is a cluster spec, a
    trace or a Python file (by its name's ending, or a cluster spec's `[[group]]` tables), an
    error saying so and where it goes, rather than the parser's first complaint about its text."""
    what = _OTHER_FILES.get(Path(path).suffix.lower())
    if what is None and text is not None and _reads_as_cluster(text):
        what = _CLUSTER
    if what is None and text is None:  # (not text: a run's saved state, whatever its name)
        state = saved_state_kind(path)
        if state is not None:
            what = (state, f"simulate from it with `roundhouse whatif {path}`")
    if what is None:
        return None
    where = what[1].format(path=path, name=Path(path).name)
    return SchedError(f"{path} is {what[0]}, not a .sched graph: give a graph here, and {where}")


def _reads_as_cluster(text: str) -> bool:
    import tomllib

    try:
        return isinstance(tomllib.loads(text).get("group"), list)
    except tomllib.TOMLDecodeError:
        return False


def _why_unreadable(err: Exception) -> str:
    if isinstance(err, UnicodeDecodeError):
        line, column = _line_and_column(err.object[: err.start])
        return f"it is not UTF-8 text (byte 0x{err.object[err.start]:02x} at line {line}, column {column} cannot be decoded)"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror.lower()
    return str(err)


def _whole_path(path: Path) -> str:
    """`path` made whole, its links followed. Links that loop (which Python 3.11 says with a
    RuntimeError) are left as written: reading them then says why they cannot be read."""
    try:
        return str(path.resolve())
    except RuntimeError:
        return os.path.abspath(path)


def _line_and_column(before: bytes) -> tuple[int, int]:
    """Where the text that `before` holds ends, as the parser counts lines and columns: the
    1-based line and column of the byte after it."""
    lines = source_lines(before.decode("utf-8", errors="replace").removeprefix("\ufeff"))
    return len(lines), len(lines[-1]) + 1


# How deep imports may chain and compounds may nest: far beyond any real graph, and well short
# of Python's recursion limit, so that a runaway file gets a message instead of a crash.
MAX_DEPTH = 100

# How many elements and compound instances a graph may expand into: far beyond any real graph
# (tens), and few enough to load in seconds. Element classes that each hold two instances of
# the one before double with each level, so a short file could otherwise ask for billions.
MAX_ELEMENTS = 10_000


def load(path: str | Path, text: str | None = None, required: list[str] | None = None) -> FlatGraph:
    """Read a `.sched` file and everything it imports into a flat graph; the resolved paths of
    the Python files it requires are added to `required`, if given, in load order.
    Raises SchedError / SchedErrors naming every problem found."""
    if text is None and not str(path).strip():  # (an unset shell variable: to pathlib, this folder)
        raise SchedError("the graph path is empty: give a .sched file")
    loader = _Loader()
    graph = loader.load(str(path), text)
    if required is not None:
        required += loader.required
    return graph


# Where an imported element file's module keeps the digest of the text it was imported from,
# and the user's own modules it imports (runtime/user_modules.py).
_DIGEST = "__roundhouse_digest__"
_HELPERS = "__roundhouse_helpers__"


def load_element_file(path: Path) -> str | None:
    """Import a Python file of elements; returns a one-line description of what went wrong, if anything.
    (A problem in the user's own Python is shown as its file, line and message, not a traceback.)

    A file is imported once per process, and again when its contents change, or a module of the
    user's that it imports was dropped for having changed (`user_modules.forget_changed_modules`):
    a long-lived process (a Dask worker runs many sweeps, a notebook many simulations) must run
    what the file says now, not what it said when first imported. Each version is a module of
    its own, the text's digest in its name, so that objects of an earlier version's classes
    (a notebook's older simulation) still pickle. The digest of the text imported is kept with
    its module (`element_file_digest`), so that a run's key describes the code that ran."""
    import hashlib
    import importlib.util
    import traceback

    from roundhouse.runtime import user_modules

    if path.suffix != ".py":
        if path.is_dir():  # (a folder is said as one, whatever its name)
            return f"{path} is a folder, not a Python file"
        graph = " (a .sched file is brought in with import)" if path.suffix == ".sched" else ""
        return f"a required file is Python ending in .py{graph}"
    resolved = _whole_path(path)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError, ValueError):  # (ValueError: a NUL in the path)
        return f"no such file ({path})"
    except OSError as err:  # (links that loop, a name too long)
        return _why_unreadable(err)
    if stat.S_ISDIR(mode):
        return f"{path} is a folder, not a Python file"
    if not stat.S_ISREG(mode):
        return f"{path} is not a regular file"
    try:
        source = path.read_bytes()
    except OSError as err:
        return f"cannot read {path}: {err.strerror or err}"
    digest = hashlib.sha256(source).hexdigest()
    name = "roundhouse_user_" + "".join(ch if ch.isalnum() else "_" for ch in resolved) + "_" + digest[:16]
    previous = registry.imported_file(resolved, name)
    if (
        previous is not None
        and getattr(previous, _DIGEST, None) == digest
        and user_modules.still_current(getattr(previous, _HELPERS, {}))
    ):
        return None
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        return f"cannot load {path} as Python"
    module = importlib.util.module_from_spec(spec)
    before = sys.modules.get(name)
    sys.modules[name] = module
    try:
        with registry.importing_file(str(path)), _importable_from(str(Path(resolved).parent)):
            # (The bytes digested are the bytes run: the file may change while it is imported.)
            exec(compile(source, resolved, "exec", dont_inherit=True), module.__dict__)  # (not this module's __future__)
    except (Exception, SystemExit) as err:  # the user's code: report where, not how deep
        if before is not None:
            sys.modules[name] = before
        else:
            del sys.modules[name]
        if isinstance(err, SyntaxError) and err.filename == resolved:  # (the file itself: its place said once)
            column = f":{err.offset}" if err.offset else ""
            return f"{path}:{err.lineno}{column}: {type(err).__name__}: {err.msg}"
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == resolved]
        where = f"{path}:{frames[-1].lineno}: " if frames else ""
        # (The registry's own complaint says all there is; its type would add nothing.)
        what = str(err) if isinstance(err, registry.DefinedTwice) else f"{type(err).__name__}: {err}"
        return f"{where}{what}"
    setattr(module, _DIGEST, digest)
    setattr(module, _HELPERS, user_modules.user_imports(resolved))
    registry.keep_file(resolved, module)
    return None


def _undeclared_element(name: str, required_as: dict[str, str]) -> str | None:
    """What to say of a name that a required file defines as an Element subclass it never
    declared with @element (so the registry does not know it), if one does."""
    for resolved, written in required_as.items():
        if name in elements_of_file(Path(resolved))[1]:
            return undeclared_element(name, written)
    return None


def undeclared_element(name: str, written: str) -> str:
    """That class `name` of the file `written` is an Element it never declared as one."""
    return f"class {name} in {written} is an Element not declared as one: put @element on the line above its class"


def elements_of_file(path: Path) -> tuple[list[str], list[str]]:
    """The element classes a required file (imported by `load_element_file`) declares, and the
    Element subclasses of its own it never declared with @element (the registry does not know
    them)."""
    from roundhouse.runtime.element import Element

    module = registry.imported_file(_whole_path(path))
    declared: list[str] = []
    undeclared: list[str] = []
    if module is None:
        return declared, undeclared
    for name, found in vars(module).items():
        # (A class it imports, such as a family it builds on, is not its own.)
        if isinstance(found, type) and issubclass(found, Element) and found.__module__ == module.__name__:
            (declared if registry.get(name) is found else undeclared).append(name)
    return declared, undeclared


# Modules imported from beside an element file, by name: the folder each came from.
_BESIDE: dict[str, str] = {}


@contextlib.contextmanager
def _importable_from(folder: str) -> Iterator[None]:
    """While an element file is imported, the modules beside it are importable (`import helper`),
    as Python makes those beside a script it runs: its folder is first on `sys.path`. (A module
    so imported stays imported; the folder is not left on the path for other code to find.) A
    module of that name imported from beside another graph's element file is forgotten first,
    so that each file imports its own neighbour, not the one `sys.modules` already holds."""
    for name, where in list(_BESIDE.items()):
        if where != folder and ((Path(folder) / f"{name}.py").is_file() or (Path(folder) / name).is_dir()):
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[key]
            del _BESIDE[name]
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        # (the element file's own code may have changed sys.path: take out the entry put in)
        for i, entry in enumerate(sys.path):
            if entry is folder:
                del sys.path[i]
                break
        for name in set(sys.modules) - before:
            file = getattr(sys.modules[name], "__file__", None)
            home = None if file is None else Path(file).parent.parent if Path(file).name == "__init__.py" else Path(file).parent
            if "." not in name and home is not None and str(home) == folder:  # (a module, or a package, beside it)
                _BESIDE[name] = folder


def element_file_digest(path: str | Path) -> str | None:
    """The SHA-256 of the text an element file's module was imported from in this process, or
    None if it was not imported (or not since `registry.scope` forgot it)."""
    module = registry.imported_file(str(Path(path).resolve()))
    return None if module is None else getattr(module, _DIGEST, None)


def _in_scope(value: ast.Value, local: dict[str, str]) -> ast.Value:
    if value.kind == "reference" and value.word in local:
        return attrs.evolve(value, value=local[value.word])
    if value.kind == "list":
        return attrs.evolve(value, value=tuple(_in_scope(v, local) for v in value.items))
    return value


def _defaults_in_scope(env: dict[str, ast.Value], definition: ast.ElementClass, local: dict[str, str]) -> dict[str, ast.Value]:
    """An instance's parameters, a name in a default (written in the elementclass) meaning the
    instance's element of that name, as one in its body does."""
    defaults = {p.name: p.default for p in definition.params if p.default is not None}
    return {k: _in_scope(v, local) if defaults.get(k) is v else v for k, v in env.items()}


def _chosen_settings(
    settings: dict[str, list[ast.Setting]], imports: dict[str, set[str]], clashes: dict[str, list[SchedError]]
) -> dict[str, ast.Setting]:
    """Each setting as the file that wins for it sets it: a file's own settings win over those
    of every file it imports, directly or through others (`imports`: each file's, by resolved
    path), whatever the order of the import lines. Two files neither of which imports the other
    that set it differently are an error, put in `clashes` by setting: which one won would
    depend on that order, without a word (a `--set` of that setting leaves neither winning)."""
    chosen: dict[str, ast.Setting] = {}
    below = _imported_below(imports)
    for name, writes in settings.items():
        files = [_resolved(st.location.path) for st in writes]
        first, *others = [st for st, file in zip(writes, files) if not any(file in below.get(f, ()) for f in files if f != file)]
        chosen[name] = first
        for other in others:
            if not _same_value(first, other):
                clashes.setdefault(name, []).append(
                    SchedError(
                        f"setting '{name}' is set differently by two files, neither of which imports the other: "
                        f"{_shown(other)} here, {_shown(first)} at {first.location}",
                        other.location,
                        hint=f"set '{name}' in a file that imports them both: a file's own settings win over those it imports "
                        f"(or on the command line: --set {name}=...)",
                    )
                )
    return chosen


def _resolved(path: str) -> str:
    return str(Path(path).resolve())


def _imported_below(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each file's imports, directly or through others (by resolved path)."""
    below: dict[str, set[str]] = {}
    for top in imports:
        seen: set[str] = set()
        pending = list(imports[top])
        while pending:
            file = pending.pop()
            if file not in seen:
                seen.add(file)
                pending += imports.get(file, ())
        below[top] = seen
    return below


def _same_value(a: ast.Setting, b: ast.Setting) -> bool:
    """Whether two files set a setting alike: the same value, and a file path (a string) from
    the same folder."""
    same_folder = Path(a.location.path).parent == Path(b.location.path).parent
    return _plain(a.value) == _plain(b.value) and (a.value.kind != "string" or same_folder)


def _shown(setting: ast.Setting) -> str:
    return setting.value.text if setting.value.kind != "list" else "a list"


def _plain(value: ast.Value) -> object:
    if value.kind == "list":
        return ("list", tuple(_plain(v) for v in value.items))
    return (value.kind, value.value)


def _clashing_class_names(classes: dict[str, tuple[ast.ElementClass, str]], required_as: dict[str, str]) -> list[SchedError]:
    """An elementclass may not take the name of a Python element class, a built-in one or one
    a required file defines (`required_as`: resolved -> as written), whichever comes first."""
    errors = []
    for name, (definition, _) in classes.items():
        cls = registry.get(name)
        if cls is None:
            continue
        if name in registry.builtin_modules():
            what = "a built-in element class"
        else:
            file = getattr(sys.modules.get(cls.__module__), "__file__", None)
            written = required_as.get(str(Path(file).resolve())) if isinstance(file, str) else None
            what = f"a required element class (defined in {written})" if written else "an element class defined in Python"
        errors.append(SchedError(f"elementclass '{name}' has the name of {what}", definition.location))
    return errors


def _empty_path(st: ast.Import | ast.Require) -> SchedError:
    if isinstance(st, ast.Import):
        return SchedError(f"cannot import '{st.path}': the path is empty: give a .sched file", st.location)
    return SchedError(f"cannot require '{st.path}': the path is empty: give a Python file", st.location)


def _named_as_class(node: ast.Node) -> SchedError:
    """An element declared with the name of an element class: in a chain, that name would be
    read as the element, not as a new one of the class, whatever the element's own class."""
    assert node.name is not None
    lower = node.name.lower()
    return SchedError(
        f"element '{node.name}' ({node.class_name}) has the name of an element class: a chain's '{node.name}' "
        f"would be read as this element, not as a new {node.name}",
        node.location,
        hint="name it otherwise" + (f", such as {lower} :: {node.class_name}" if lower != node.name else ""),
    )


def _port_connects_nothing(port: ast.PortRef, node: ast.Node, side: str) -> SchedError:
    """An input port written before the first element of a chain, or an output port after its
    last: what it would name, and how it is written where it does connect."""
    name = node.name or node.class_name
    key = port.key
    if side == "input":
        where, what = f"before '{name}'", f"no connection enters '{name}' here"
        hint = f"an input port is written after the arrow that enters it: '... -> [{key}] {name}'"
        if node.class_name is None and name == "input":
            what = "the elementclass's input ports are written after 'input'"
            hint = f"write 'input [{key}] -> ...'"
    else:
        where, what = f"after '{name}'", f"no connection leaves '{name}' here"
        hint = f"an output port is written before the arrow that leaves it: '{name} [{key}] -> ...'"
        if node.class_name is None and name == "output":
            what = "the elementclass's output ports are written before 'output'"
            hint = f"write '... -> [{key}] output'"
    return SchedError(f"port [{key}] {where} connects nothing: {what}", port.location, hint=hint)


def _not_sched(st: ast.Import, err: SchedError) -> SchedError:
    """A file that is not a `.sched` file (a trace, a cluster spec), imported: its syntax error
    said at the import that brought it in, which is what to change, then where in it."""
    return SchedError(
        f"cannot import '{st.path}': it is not a .sched file, and does not read as one ({err.location}: {err.message})",
        st.location,
        hint="import brings in .sched files; a trace is given to a source (TraceSource(path=...)), "
        'a cluster spec to the cluster setting (cluster = "c.toml";)',
    )


def _too_many(within: list[tuple[str, Location]], node: ast.Node) -> SchedError:
    """Expanding `node` passes MAX_ELEMENTS: said at the outermost instance being expanded
    (whose element classes multiply), if any."""
    if not within:
        return SchedError(f"the graph has more than {MAX_ELEMENTS} elements", node.location)
    outer, at = within[0]
    return SchedError(
        f"'{outer}' expands into more than {MAX_ELEMENTS} elements (element classes inside element classes multiply)",
        at,
        hint="no scheduler needs that many; is an element class instantiated more often than meant?",
    )


def _doubled_params(definition: ast.ElementClass) -> list[SchedError]:
    """A parameter an elementclass declares twice, at its second declaration."""
    errors, seen = [], set()
    for p in definition.params:
        if p.name in seen:
            errors.append(SchedError(f"elementclass '{definition.name}' has parameter ${p.name} twice", p.location))
        seen.add(p.name)
    return errors


def _ports_at_ends(chain: ast.Chain) -> list[SchedError]:
    """A port before the first element of a chain, or after its last, connects nothing (no
    connection enters or leaves there): reported at the port, with the form that works."""
    first, last = chain.endpoints[0], chain.endpoints[-1]
    errors = []
    if first.in_port is not None:
        errors.append(_port_connects_nothing(first.in_port, first.node, "input"))
    if last.out_port is not None:
        errors.append(_port_connects_nothing(last.out_port, last.node, "output"))
    return errors


def _wrong_way(src: ast.Node, dst: ast.Node) -> SchedError | None:
    """Inside an elementclass, connections come in at `input` and leave at `output`: the
    problem with a connection that goes the other way, if it does."""
    if src.class_name is None and src.name == "output":
        return SchedError("'output' is where connections leave the elementclass: connect into it ('... -> output')", src.location)
    if dst.class_name is None and dst.name == "input":
        return SchedError("'input' is where connections enter the elementclass: connect from it ('input -> ...')", dst.location)
    return None


def _graph_element_in_body(name: str, node: ast.Node, prefix: str, ends: tuple[bool, bool]) -> SchedError:
    """`name`, an element of the graph, named inside an elementclass body (whose elements are
    named `prefix`...): a body sees only its own elements, and reaches the graph's through the
    elementclass's `input` and `output`. `ends`: whether a connection enters it in its chain,
    and whether one leaves it. The example for the graph's side names the outermost instance
    (an anonymous one, `Class@N`, and a class with no instance, by the class's name)."""
    instance = prefix.split("/")[0].split("@")[0]
    entered, left = ends
    inside, outside = [], []
    if entered:  # (the body connects into it: that leaves at `output`, and the instance connects into it)
        inside.append("'... -> output'")
        outside.append(f"'{instance} -> {name}'")
    if left or not entered:
        inside.append("'input -> ...'")
        outside.append(f"'{name} -> {instance}'")
    return SchedError(
        f"'{name}' is an element of the graph, and graph elements cannot be named inside an elementclass body",
        node.location,
        hint=f"connect through the elementclass's ports: {' and '.join(inside)} in the body, {' and '.join(outside)} in the graph",
    )


def _doubled_into_compounds(edges: list[Edge], compounds: dict[str, tuple[str, Location]]) -> list[SchedError]:
    """A connection written twice, into or out of a compound instance (before its connections are
    spliced through to the elements inside): said of the instance and its port as written, not of
    the element inside that it would reach."""
    errors, seen = [], set()
    for e in edges:
        if e.src not in compounds and e.dst not in compounds:
            continue
        key = (e.src, port_key(e.src_port), e.dst, port_key(e.dst_port))
        if key in seen:
            src = f"'{e.src}' [{port_key(e.src_port)}]" if e.src in compounds else f"'{e.src}'"
            errors.append(SchedError(f"{src} is connected to '{e.dst}' [{port_key(e.dst_port)}] twice", e.location))
        seen.add(key)
    return errors


class _Loader:
    def __init__(self) -> None:
        self.errors: list[SchedError] = []
        self.settings: dict[str, list[ast.Setting]] = {}  # each setting as written, in the order read
        self.imports: dict[str, set[str]] = {}  # the files each file imports (by resolved path)
        self.classes: dict[str, tuple[ast.ElementClass, str]] = {}
        self.chains: list[tuple[ast.Chain, str]] = []
        self.files: list[str] = []
        self.required: list[str] = []  # Python files required (resolved), imported without a problem
        self.required_as: dict[str, str] = {}  # each of them (resolved) -> its path as the require writes it
        self.decls: dict[str, Decl] = {}
        self.edges: list[Edge] = []
        self.compounds: dict[str, tuple[str, Location]] = {}  # instance -> elementclass name, declaration
        self.open_ports: list[OpenPort] = []
        self.bodies: list[Body] = []
        self.anonymous = 0
        self.within: list[tuple[str, Location]] = []  # the instances being expanded, outermost first
        self.stopped = False  # whether expanding has passed MAX_ELEMENTS or MAX_DEPTH (said once, then stopped)
        self.graph_names: set[str] = set()  # the graph's own named elements (not those of element classes)

    def load(self, path: str, text: str | None) -> FlatGraph:
        if text is None:
            text = _read_graph(path)
        self._read(path, text, depth=0, stack=())
        self.errors += _clashing_class_names(self.classes, self.required_as)
        clashes: dict[str, list[SchedError]] = {}
        settings = _chosen_settings(self.settings, self.imports, clashes)
        if self.errors:  # (said with the file's other problems; else the compiler says them, unless --set decides)
            self.errors += [err for errs in clashes.values() for err in errs]
        self._raise_if_errors()
        self._expand(self.chains, prefix="", env=None, params_owner=None, stack=())
        self._expand_unused()
        self.errors += _doubled_into_compounds(self.edges, self.compounds)
        self._raise_if_errors()
        self.edges, self.open_ports, errors = splice(self.compounds, self.edges)
        self.errors += errors
        self._raise_if_errors()
        return FlatGraph(
            path,
            settings,
            self.decls,
            self.edges,
            self.files,
            self.open_ports,
            self.bodies,
            clashes,
            instances=dict(self.compounds),
        )

    def _raise_if_errors(self) -> None:
        # An elementclass's body is expanded once per instance: report each of its problems once.
        self.errors = list({(e.message, e.location): e for e in self.errors}.values())
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise SchedErrors(self.errors)

    # --- files and imports ---
    def _read(self, path: str, text: str, depth: int, stack: tuple[str, ...], imported_at: ast.Import | None = None) -> None:
        try:
            program = parse(text, path)
        except SchedError as err:
            if imported_at is None:
                raise (_not_a_graph(path, text) or err) from None
            if Path(path).suffix == ".sched":
                raise
            raise _not_sched(imported_at, err) from None
        resolved = str(Path(path).resolve())
        self.files.append(path)
        self.imports[resolved] = set()
        base_dir = str(Path(path).parent)
        seen_here: dict[str, ast.Setting] = {}
        for st in program.statements:
            if isinstance(st, ast.Import | ast.Require) and not st.path.strip():  # (to pathlib, the file's own folder)
                self.errors.append(_empty_path(st))
            elif isinstance(st, ast.Import):
                target = Path(base_dir) / st.path
                target_resolved = _whole_path(target)
                if target_resolved in stack or target_resolved == resolved:
                    self.errors.append(SchedError(f"import cycle: '{st.path}' imports this file again", st.location))
                    continue
                if target.suffix == ".py":
                    self.errors.append(
                        SchedError(
                            f"cannot import '{st.path}': it is a Python file, which is brought in with require",
                            st.location,
                            hint=f'write require "{st.path}";',
                        )
                    )
                    continue
                self.imports[resolved].add(target_resolved)
                if any(str(Path(f).resolve()) == target_resolved for f in self.files):
                    continue
                if depth >= MAX_DEPTH:
                    self.errors.append(SchedError(f"imports chain more than {MAX_DEPTH} files deep", st.location))
                    continue
                try:
                    imported = read_imported(target)
                except FileNotFoundError:
                    self.errors.append(SchedError(f"cannot import '{st.path}': no such file ({target})", st.location))
                    continue
                except (OSError, UnicodeDecodeError, ValueError) as err:
                    self.errors.append(SchedError(f"cannot import '{st.path}': {_why_unreadable(err)}", st.location))
                    continue
                self._read(str(target), imported, depth + 1, stack + (resolved,), imported_at=st)
            elif isinstance(st, ast.Require):
                self._require(Path(base_dir) / st.path, st)
            elif isinstance(st, ast.Setting):
                if st.name in seen_here:
                    first = seen_here[st.name].location
                    self.errors.append(SchedError(f"setting '{st.name}' is set twice (first at {first})", st.location))
                    continue
                seen_here[st.name] = st
                self.settings.setdefault(st.name, []).append(st)
            elif isinstance(st, ast.ElementClass):
                self.errors += _doubled_params(st)
                if st.name in RESERVED:
                    self.errors.append(SchedError(f"'{st.name}' is reserved for compound ports", st.location))
                elif st.name in self.classes:
                    first = self.classes[st.name][0].location
                    self.errors.append(SchedError(f"elementclass '{st.name}' is defined twice (first at {first})", st.location))
                else:  # (its name is checked against Python's element classes once every file is read)
                    self.classes[st.name] = (st, base_dir)
            else:
                self.chains.append((st, base_dir))

    def _require(self, target: Path, st: ast.Require) -> None:
        """Import a Python file of element classes (they register themselves with @element)."""
        problem = load_element_file(target)
        if problem:
            self.errors.append(SchedError(f"cannot require '{st.path}': {problem}", st.location))
        elif str(target.resolve()) not in self.required:
            self.required.append(str(target.resolve()))
            self.required_as[str(target.resolve())] = st.path

    # --- scopes ---
    def _is_class(self, name: str) -> bool:
        return name in self.classes or registry.get(name) is not None

    def _expand(self, chains, prefix: str, env, params_owner, stack: tuple[str, ...]) -> None:
        """Declare and connect the elements of `chains`, named `prefix` + their names. A name in
        their arguments means the element of that name declared among them, if there is one (in
        instance `s`, `fifo` is `s/fifo`), else one of the graph's. It is looked up before the
        instance's parameters are substituted: a name the instance gives is one of its own scope."""
        local: dict[str, str] = {}
        first_seen: dict[str, Location] = {}
        declared: list[tuple[ast.Node, str]] = []
        # Pass 1: explicit declarations, so that a name may be used before its declaration.
        for chain, base_dir in chains:
            for ep in chain.endpoints:
                node = ep.node
                if node.name is None or node.class_name is None:
                    continue
                if node.name in RESERVED:
                    self.errors.append(SchedError(f"'{node.name}' is reserved for compound ports", node.location))
                    continue
                if node.name in local:
                    self.errors.append(
                        SchedError(f"element '{node.name}' is declared twice (first at {first_seen[node.name]})", node.location)
                    )
                    continue
                if self._is_class(node.name):  # (a chain's `-> Fifo ->` would be read as this element, whatever its class)
                    self.errors.append(_named_as_class(node))
                    continue
                local[node.name] = prefix + node.name
                first_seen[node.name] = node.location
                declared.append((node, base_dir))
        if prefix == "":
            self.graph_names = set(local)
        if env is not None and params_owner in self.classes:
            env = _defaults_in_scope(env, self.classes[params_owner][0], local)
        for node, base_dir in declared:
            assert node.name is not None  # (declared above)
            self._declare(prefix + node.name, node, base_dir, env, params_owner, stack, local)
        # Pass 2: connections.
        for chain, base_dir in chains:
            self.errors += _ports_at_ends(chain)
            last = len(chain.endpoints) - 1
            names = [
                self._endpoint(ep, (0 < i, i < last), local, prefix, base_dir, env, params_owner, stack)
                for i, ep in enumerate(chain.endpoints)
            ]
            if len(chain.endpoints) == 1:
                node = chain.endpoints[0].node
                if node.class_name is None and node.name in local:
                    self.errors.append(SchedError(f"statement does nothing: '{node.name}' alone", node.location))
                continue
            for i, (src, dst) in enumerate(zip(names, names[1:])):
                if src is None or dst is None:
                    continue
                wrong_way = _wrong_way(chain.endpoints[i].node, chain.endpoints[i + 1].node)
                if wrong_way is not None:
                    self.errors.append(wrong_way)
                    continue
                self.edges.append(Edge(src, chain.endpoints[i].out_port, dst, chain.endpoints[i + 1].in_port, chain.arrows[i]))

    def _endpoint(self, ep: ast.Endpoint, ends, local, prefix, base_dir, env, params_owner, stack) -> str | None:
        node = ep.node
        if node.class_name is not None:
            if node.name is not None:
                return local.get(node.name)
            self.anonymous += 1
            full = f"{prefix}{node.class_name}@{self.anonymous}"
            self._declare(full, node, base_dir, env, params_owner, stack, local)
            return full
        name = node.name
        assert name is not None  # the parser gives every reference (a node without a class) a name
        if name in RESERVED:
            if env is None:
                self.errors.append(SchedError(f"'{name}' only exists inside an elementclass", node.location))
                return None
            return prefix + name
        if name in local:
            return local[name]
        if self._is_class(name):
            self.anonymous += 1
            full = f"{prefix}{name}@{self.anonymous}"
            bare = ast.Node(None, name, None, node.location, node.location)
            self._declare(full, bare, base_dir, env, params_owner, stack, local)
            return full
        if env is not None and name in self.graph_names:
            self.errors.append(_graph_element_in_body(name, node, prefix, ends))
            return None
        hint = _undeclared_element(name, self.required_as) or did_you_mean(name, [*local, *registry.names(), *self.classes])
        self.errors.append(SchedError(f"unknown element or class '{name}'", node.location, hint=hint))
        return None

    def _declare(self, full: str, node: ast.Node, base_dir: str, env, params_owner, stack, local: dict[str, str]) -> None:
        if self.stopped:
            return
        if len(self.decls) + len(self.compounds) >= MAX_ELEMENTS:
            self.stopped = True
            self.errors.append(_too_many(self.within, node))
            return
        # (names in the arguments as written are of this scope; those a parameter gives, of the instance's)
        written = [(a, _in_scope(a.value, local)) for a in (node.args or ())]
        substituted = [(a, substitute(v, env, params_owner, self.errors)) for a, v in written]
        args = tuple(attrs.evolve(a, value=v) for a, v in substituted if v is not None)
        if len(args) < len(substituted):
            return
        class_name = node.class_name
        assert class_name is not None  # only nodes that name a class are declared
        compound = self.classes.get(class_name)
        if compound is None:
            location, class_location = node.location, node.class_location or node.location
            self.decls[full] = Decl(full, class_name, args, location, class_location, base_dir, tuple(self.within))
            return
        definition, class_dir = compound
        if definition.name in stack:
            self.errors.append(SchedError(f"elementclass '{definition.name}' contains itself", node.class_location))
            return
        if len(stack) >= MAX_DEPTH:  # (said once: each class below would say it again)
            self.errors.append(SchedError(f"element classes nest more than {MAX_DEPTH} deep", node.class_location))
            self.stopped = True
            return
        bound = bind_params(definition, args, node, self.errors)
        if bound is None:
            return
        self.compounds[full] = (definition.name, node.location)
        self.within.append((full, node.location))
        self._expand(
            [(c, class_dir) for c in definition.body],
            prefix=full + "/",
            env=bound,
            params_owner=definition.name,
            stack=stack + (definition.name,),
        )
        self.within.pop()

    # --- element classes without an instance ---
    def _expand_unused(self) -> None:
        """Expand each element class the graph has no instance of, apart from the graph, into a
        `Body`, so that its problems are reported as Click reports them (the compiler checks
        its elements and connections). Its parameters keep their `$name`s; a class inside
        another such class is checked inside it, with the arguments it is given there."""
        used = {cls for cls, _ in self.compounds.values()}
        graph = self.decls, self.edges, self.compounds
        unused = [name for name in self.classes if name not in used]
        nested = {  # (the names a body uses: classes among them are inside another)
            n
            for name in unused
            for c in self.classes[name][0].body
            for ep in c.endpoints
            for n in (ep.node.name, ep.node.class_name)
        }
        for name in sorted(unused, key=lambda n: n in nested):  # (those inside no other first)
            if name in used:  # (expanded inside one already)
                continue
            definition, class_dir = self.classes[name]
            self.decls, self.edges, self.compounds = {}, [], {}
            self._expand([(c, class_dir) for c in definition.body], name + "/", unbound(definition), name, (name,))
            used.update(cls for cls, _ in self.compounds.values())
            edges, _, errors = splice(self.compounds, self.edges)
            self.errors += _doubled_into_compounds(self.edges, self.compounds) + errors
            self.bodies.append(
                Body(name, FlatGraph(definition.location.path, {}, self.decls, edges, [], instances=dict(self.compounds)))
            )
        self.decls, self.edges, self.compounds = graph
