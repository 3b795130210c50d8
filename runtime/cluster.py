"""Clusters: a TOML spec of node groups, a command-line shorthand, and the per-GPU table.

A spec file::

    name = "blox-128"
    [[group]]
    nodes = 32             # how many identical nodes
    gpus_per_node = 4
    gpu_type = "V100"
    rack = "r0"            # optional; `racks = 4` splits the group evenly over r0-0..r0-3
    cpus = 32              # optional node facts
    memory_gb = 244
    gpu_memory_gb = 16
    network_gbps = 10      # bandwidth between nodes
    topology = "p3.8xlarge"   # optional: intra-node GPU links (runtime/topologies.py)
    # or `machines_per_rack = 8` instead of `racks` (it must divide `nodes`)

    [tiers]                # optional: the links of machine, rack and network tiers, which
    [tiers.rack]           # turn on the communication model (traces/communication.py);
    latency_ns = 5000      # each tier's keys default to Dally's values
    bandwidth_gb_per_s = 200

The shorthand: `32x4:V100` (32 nodes of 4 V100s), several groups joined by commas
(`16x4:V100,16x4:P100`), and Gavel's `36:36:36` (V100:P100:K80 counts, one GPU per node, as
Gavel's simulator sweeps use). A group may name its intra-node topology: `32x4:V100@p3.8xlarge`.
`dally:N` is Dally's cluster of N racks: 8 machines of 8 V100s per rack, with Dally's tiers.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.errors import ClusterError, did_you_mean
from roundhouse.runtime.near_gpu_types import near_types
from roundhouse.runtime.spec_lines import SpecLines, at, not_toml, other_file
from roundhouse.traces.csvtext import undecodable_byte
from roundhouse.traces.jobs import read_only

if TYPE_CHECKING:
    from roundhouse.traces.communication import Tiers

GAVEL_TYPES = ("V100", "P100", "K80")

# The cluster is held as numpy rows per GPU and per node, so its size is bounded: far above
# any real cluster, far below what would exhaust memory or overflow 64-bit counts. The link
# table holds GPUs-per-node squared numbers per node, hence the tighter bound on nodes' size.
MAX_GPUS = 1_000_000
MAX_GPUS_PER_NODE = 64
# A cluster with intra-node topologies holds that many link bandwidths (512 MB): as many as
# 15,625 nodes of 64 GPUs, or 1,000,000 of up to 8.
MAX_LINK_ENTRIES = 64 * 1_000_000
# Node facts and tier links far above any real machine or network, so that the numbers built
# from them (memory shares, optimizers' coefficients, communication times) stay finite.
MAX_AMOUNT = 1_000_000.0  # memory_gb, gpu_memory_gb, network_gbps; bandwidth_gb_per_s
MAX_LATENCY_NS = 1e12  # 1000 s
MIN_BANDWIDTH_GB_PER_S = 1e-6  # 1 KB/s


@attrs.frozen
class NodeGroup:
    nodes: int
    gpus_per_node: int
    gpu_type: str = "V100"
    rack: str = ""  # "" (none given): rack "r0", shared; split, racks of the group's own (rack_names)
    racks: int = 1
    cpus: int = 32
    memory_gb: float = 244.0
    gpu_memory_gb: float = 16.0
    network_gbps: float = 10.0
    topology: str = ""  # a name in runtime.topologies.TOPOLOGIES, or "" (links unknown)
    # Whether the group is split into racks of its own (`racks` or `machines_per_rack` given),
    # even into one: not a key of a spec file, which gives it by giving one of those.
    own_racks: bool = False


# The keys a spec file's [[group]] may have: NodeGroup's fields (but `own_racks`), and
# `machines_per_rack`, which is turned into `racks`.
_GROUP_KEYS = [*(f.name for f in attrs.fields(NodeGroup) if f.name != "own_racks"), "machines_per_rack"]
_INTS = {"nodes", "gpus_per_node", "racks", "cpus", "machines_per_rack"}
_FLOATS = {"memory_gb", "gpu_memory_gb", "network_gbps"}
_TIER_FIELDS = ("latency_ns", "bandwidth_gb_per_s")
# Dally's cluster (`dally:N`): 8 GPUs per machine on NVSwitch, 8 machines per rack.
DALLY_GPUS_PER_MACHINE = 8
DALLY_MACHINES_PER_RACK = 8


def _as_written(value) -> str:
    """A value read from a spec file, as TOML writes it (true, not True; strings in quotes; dates
    and times as written, not as Python's objects; arrays and inline tables of those)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**21:
        return f"a number of {len(str(abs(value)))} digits"  # (not hundreds of digits in a message)
    if isinstance(value, (datetime.date, datetime.time)):  # (a datetime is a date too)
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_as_written(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_as_written(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


# Where a problem in a spec given as its whole text (not a file) is said: `cluster spec text:3`.
SPEC_TEXT = "cluster spec text"


def is_spec_text(text: str) -> bool:
    """Whether a cluster spec is given as a spec file's whole text (as a snapshot's graph keeps
    a cluster built in Python): more than one line, with a key's `=` (a shorthand written over
    lines has none, and no path has a line break)."""
    text = text.strip()
    return "\n" in text and "=" in text


def _toml_value(value: object, kind: type) -> str:
    """A group's or tier's value as a spec file writes it (TypeError for one of another kind)."""
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"not a {kind.__name__}: {value!r}")
    if isinstance(value, str):
        value.encode()  # (UnicodeEncodeError for a lone surrogate, which no text file holds)
        # (JSON's escapes are TOML's; DEL, which JSON leaves as it is, TOML takes escaped only)
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    assert isinstance(value, numbers.Real)
    return repr(float(value))


def _spec_toml(spec: ClusterSpec) -> str:
    """The spec file's text of `spec` (ClusterSpec.spec_text checks it reads back)."""
    from roundhouse.traces.communication import TIER_NAMES

    out = [f"name = {_toml_value(spec.name, str)}"]
    for g in spec.groups:
        out += ["", "[[group]]"]
        for f in attrs.fields(NodeGroup):
            value = getattr(g, f.name)
            if f.name == "own_racks" or (f.name in ("rack", "topology") and value == ""):
                continue
            if f.name == "racks" and not (g.own_racks or value != 1):
                continue  # (one rack, shared: no `racks` key)
            kind = numbers.Integral if f.name in _INTS else numbers.Real if f.name in _FLOATS else str
            out.append(f"{f.name} = {_toml_value(value, kind)}")
    if spec.tiers is not None:
        for name in TIER_NAMES:
            tier = getattr(spec.tiers, name)
            out += ["", f"[tiers.{name}]"]
            out += [f"{field} = {_toml_value(getattr(tier, field), numbers.Real)}" for field in _TIER_FIELDS]
    return "\n".join(out)


def _as_read(spec: ClusterSpec) -> ClusterSpec:
    """`spec` as its spec file's text reads back: a group split into racks has them as its own."""
    groups = tuple(attrs.evolve(g, own_racks=g.own_racks or g.racks != 1) for g in spec.groups)
    return attrs.evolve(spec, groups=groups)


@attrs.frozen
class ClusterSpec:
    name: str
    groups: tuple[NodeGroup, ...]
    tiers: Tiers | None = None  # network tiers: the communication model is on
    # The spec file it was read from, by its whole path (None for a shorthand or one built in
    # Python): where it came from, not what it is, so not compared. A graph given the cluster
    # says it as this file (runtime/simulation.py `_cluster_spec`); one built in Python, as
    # its spec text (`spec_text`).
    file: str | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def parse(cls, text: str, gpu_types: Sequence[str] | None = None) -> ClusterSpec:
        """A spec from a TOML file path, a spec file's whole text (`spec_text`) or the
        command-line shorthand. With `gpu_types`, a
        group of any other GPU type (compared case-insensitively) is an error."""
        text = text.strip()
        if not text:
            raise ClusterError("the cluster is blank: give a shorthand such as 32x4:V100, or a .toml spec file")
        if is_spec_text(text):
            return cls.from_text(text, gpu_types)
        if text.endswith(".toml") or names_a_file(text):
            return cls.from_toml(Path(text), gpu_types)
        try:
            return cls._from_text(text, gpu_types)
        except ClusterError:
            if _names_a_folder(text):  # (not a shorthand, but a folder's name)
                raise ClusterError(
                    "is a folder, not a cluster spec file (give a .toml file, or a shorthand such as 32x4:V100)", text
                ) from None
            if "/" not in text and "\\" not in text and names_a_file(f"{text}.toml"):  # (the extension left out)
                raise ClusterError(
                    f"bad cluster '{_shown(text)}': neither a shorthand such as 32x4:V100 nor a file; did you mean {text}.toml?"
                ) from None
            raise

    @classmethod
    def _from_text(cls, text: str, gpu_types: Sequence[str] | None = None) -> ClusterSpec:
        """A spec from the command-line shorthand, Dally's `dally:N` included."""
        if text.lower().startswith("dally"):
            return cls.dally(text, gpu_types)
        return cls.from_shorthand(text, gpu_types)

    @classmethod
    def dally(cls, text: str, gpu_types: Sequence[str] | None = None) -> ClusterSpec:
        """`dally:N`: Dally's cluster of N racks, with Dally's network tiers."""
        m = re.fullmatch(r"dally\s*:\s*([0-9]+)", text, re.I)
        if m is None and "," in text:  # (dally:N joined with node groups: it is a cluster of its own)
            raise ClusterError(f"bad cluster '{_shown(text)}': {_not_a_group(text.split(',')[0])}")
        if m is None or _count(m.group(1), text) < 1:
            raise ClusterError(
                f"bad cluster '{_shown(text)}': write dally:N, N racks of Dally's machines (N at least 1){_digits_note(text)}"
            )
        from roundhouse.traces.communication import DALLY_TIERS

        racks = _count(m.group(1), text)
        nodes = racks * DALLY_MACHINES_PER_RACK
        group = NodeGroup(nodes=nodes, gpus_per_node=DALLY_GPUS_PER_MACHINE, racks=racks)
        problem = _gpu_type_problem(group.gpu_type, gpu_types)
        if problem:
            raise ClusterError(f"bad cluster '{_shown(text)}': {problem}")
        _check_size(f"bad cluster '{_shown(text)}'", [group])
        return cls(text, (group,), DALLY_TIERS)

    @classmethod
    def from_shorthand(cls, text: str, gpu_types: Sequence[str] | None = None) -> ClusterSpec:
        if re.fullmatch(r"[0-9]+(\s*:\s*[0-9]+){2}", text):
            counts = [_count(c.strip(), text) for c in text.split(":")]
            groups = tuple(NodeGroup(nodes=c, gpus_per_node=1, gpu_type=t) for c, t in zip(counts, GAVEL_TYPES) if c)
            if not groups:
                raise ClusterError(f"cluster '{_shown(text)}' has no GPUs")
            for g in groups:
                problem = _gpu_type_problem(g.gpu_type, gpu_types)
                if problem:
                    raise ClusterError(f"bad cluster '{_shown(text)}': {problem}")
            _check_size(f"bad cluster '{_shown(text)}'", groups)
            return cls(text, groups)
        parsed: list[NodeGroup] = []
        for part in text.split(","):
            # (the type is read whole up to '@' and checked as a spec file's gpu_type is, so
            # that every name a spec file, an agent or `gpu_types` takes is taken here too)
            m = re.fullmatch(r"\s*([0-9]+)\s*[xX]\s*([0-9]+)\s*(?::\s*([^\s:@,]+))?\s*(?:@\s*([A-Za-z][\w.-]*))?\s*", part)
            if m is None:
                if "/" in text or "\\" in text:  # (a path: the file it names is missing, or no file; shown whole, as paths are)
                    raise ClusterError(_not_a_spec_file(text))
                raise ClusterError(f"bad cluster '{_shown(text)}': {_not_a_group(part)}")
            nodes, gpus, gpu_type = _count(m.group(1), text), _count(m.group(2), text), m.group(3) or "V100"
            if nodes < 1 or gpus < 1:
                raise ClusterError(
                    f"bad cluster '{_shown(text)}': node and GPU counts must be at least 1 "
                    f"('{_shown(part.strip())}' has {nodes} node{'s' if nodes != 1 else ''} of {gpus} GPU{'s' if gpus != 1 else ''})"
                )
            topology = m.group(4) or ""
            problem = (
                _type_name_problem(gpu_type)
                or _topology_problem(topology, gpus)
                or _gpu_type_problem(gpu_type, gpu_types)
                or _topology_type_problem(topology, gpu_type)
            )
            if problem:
                raise ClusterError(f"bad cluster '{_shown(text)}': {problem}")
            parsed.append(NodeGroup(nodes=nodes, gpus_per_node=gpus, gpu_type=gpu_type, topology=topology))
        _check_size(f"bad cluster '{_shown(text)}'", parsed)
        return cls(text, tuple(parsed))

    @classmethod
    def from_toml(cls, path: Path, gpu_types: Sequence[str] | None = None) -> ClusterSpec:
        try:
            # A byte-order mark (some Windows editors write one) is not TOML: dropped after
            # decoding, so that a bad byte's offset stays the file's.
            text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
            data = tomllib.loads(text)
        except FileNotFoundError:
            raise ClusterError(_spec_not_found(path), path) from None
        except IsADirectoryError:
            raise ClusterError("is a folder, not a cluster spec file", path) from None
        except UnicodeDecodeError as err:
            raise other_file(path) or ClusterError(
                f"cannot read cluster spec: not UTF-8 text ({undecodable_byte(err)} cannot be decoded)", path
            ) from None
        except OSError as err:
            raise ClusterError(f"cannot read cluster spec: {err.strerror or err}", path) from None
        except ValueError as err:  # (a TOMLDecodeError, or a whole number too long to read)
            raise not_toml(path, text, err) from None
        return cls._from_data(data, text, path, gpu_types, str(path.resolve()))

    @classmethod
    def from_text(cls, text: str, gpu_types: Sequence[str] | None = None) -> ClusterSpec:
        """A spec from a spec file's whole text (`spec_text`'s, say), its problems said at
        `cluster spec text:LINE`."""
        where = Path(SPEC_TEXT)
        try:
            data = tomllib.loads(text)
        except ValueError as err:
            raise not_toml(where, text, err) from None
        return cls._from_data(data, text, where, gpu_types, None)

    @classmethod
    def _from_data(cls, data: dict, text: str, path: Path, gpu_types: Sequence[str] | None, file: str | None) -> ClusterSpec:
        lines = SpecLines(text)  # (problems below name the line of the group or key they are about)
        unknown = [k for k in data if k not in ("name", "group", "tiers")]
        if unknown:
            hint = did_you_mean(unknown[0], ["name", "group", "tiers"])
            raise ClusterError(
                f"unknown key '{unknown[0]}'"
                + (f" ({hint})" if hint else "")
                + "; a spec has 'name', [[group]] tables and an optional [tiers] table",
                at(path, lines, unknown[0]),
            )
        raw_groups = data.get("group")
        if not isinstance(raw_groups, list) or not raw_groups:
            single = (
                " ([group] is a single table; groups are written [[group]], one for each)" if isinstance(raw_groups, dict) else ""
            )
            where = at(path, lines, "group") if "group" in data else path
            raise ClusterError(f"no [[group]] tables (each describes a set of identical nodes){single}", where)
        groups = [_group_from_table(path, lines, i, g, gpu_types) for i, g in enumerate(raw_groups)]
        _check_size("", groups, path, lines)
        rack_names(groups, path, lines)
        name = data.get("name", path.stem)
        if not isinstance(name, str):
            raise ClusterError("'name' must be a string", at(path, lines, "name"))
        tiers = _tiers_from_table(path, lines, data["tiers"]) if "tiers" in data else None
        return cls(name, tuple(groups), tiers, file=file)

    def spec_text(self) -> str | None:
        """The spec as a spec file's text, which `parse` reads back as this spec (a group split
        into one rack or more is written with `racks`, which makes its racks its own, as split
        racks are anyway); None for one that no spec file writes: a value of a type or range a
        spec file does not take (a count that is no whole number from 1, an amount that is not
        above 0 and finite up to 1,000,000, a GPU type that is no plain name, a topology
        unknown or of other GPUs, more racks than nodes, tiers' links out of their ranges), a
        cluster past the size bounds, or a name TOML cannot hold (a lone surrogate)."""
        try:
            text = _spec_toml(self)
            return text if ClusterSpec.from_text(text) == _as_read(self) else None
        except (ClusterError, TypeError, ValueError, AttributeError):
            return None


# A count written with more digits than this is past every bound here, whatever it is: it is
# refused before Python reads it (which takes time quadratic in its length, and stops at 4,300
# digits), and before a message shows it whole.
_MAX_COUNT_DIGITS = 30


def _count(digits: str, text: str) -> int:
    """A count of the shorthand `text`, written in ASCII digits; one too long to be any
    cluster's is an error saying how long it is."""
    significant = digits.lstrip("0")
    if len(significant) > _MAX_COUNT_DIGITS:
        raise ClusterError(
            f"bad cluster '{_shown(text)}': a count of {len(significant):,} digits; a cluster may have at most {MAX_GPUS:,} GPUs"
        )
    return int(significant or "0")


# A path is shown whole unless it is longer than any a file system takes.
_MAX_PATH_SHOWN = 4096


def _spec_not_found(path: Path) -> str:
    """Why a spec file is not there: its folder is missing, or a spec of a near name is beside
    where it was looked for (a misspelt name)."""
    if not path.parent.is_dir():
        return f"cluster spec not found: no folder {_shown(str(path.parent), _MAX_PATH_SHOWN)}"
    hint = _near_spec(path)
    return "cluster spec not found" + (f" ({hint})" if hint else "")


def _near_spec(path: Path) -> str | None:
    """`did you mean 'x.toml'?` for the spec file of a near name beside `path` (written with
    `.toml` or without), or None. Names are compared without `.toml`, which all share."""
    try:  # (a folder of thousands of files is not searched whole)
        beside = [p.stem for _, p in zip(range(1000), path.parent.glob("*.toml"), strict=False)]
    except OSError:
        return None
    hint = did_you_mean(path.stem if path.suffix == ".toml" else path.name, beside)
    return None if hint is None else re.sub(r"'([^']*)'", r"'\1.toml'", hint)


def _not_a_spec_file(text: str) -> str:
    """Why a path given as a cluster spec (not a .toml name) is none: nothing is there, or what is
    there is no file (a device, say); with the spec file it may have meant, its extension left out."""
    shown = _shown(text, _MAX_PATH_SHOWN)
    try:
        there = Path(text).exists()
    except (OSError, ValueError):
        there = False
    if there:
        return f"cluster spec {shown} is not a file (give a .toml file, or a shorthand such as 32x4:V100)"
    if names_a_file(f"{text}.toml"):
        hint = f" (did you mean {shown}.toml?)"
    else:
        near = _near_spec(Path(text)) if _names_a_folder(Path(text).parent) else None
        hint = f" ({near})" if near else ""
    return f"cluster spec not found: no file {shown}{hint}"


def _not_a_group(part: str) -> str:
    """Why one comma-separated part of a shorthand is no node group."""
    part = part.strip()
    if not part:
        return "a node group is empty (a comma with no group on one side); write e.g. 16x4:V100,16x4:P100"
    if re.fullmatch(r"[0-9]+(\s*:\s*[0-9]+){2}", part):  # (a whole cluster: said why it is refused here)
        groups = ",".join(f"{int(c)}x1:{t}" for c, t in zip(part.split(":"), GAVEL_TYPES) if int(c))
        return (
            f"'{_shown(part)}' is Gavel's shorthand for a whole cluster, not a group to join with others; "
            f"write its groups out: {_shown(groups or '0 GPUs')}"
        )
    if re.fullmatch(r"dally\s*:\s*[0-9]+", part, re.I):
        return (
            f"'{_shown(part)}' is Dally's whole cluster, not a group to join with others; for Dally's racks "
            "beside other nodes, write a .toml file with machines_per_rack and [tiers] (docs/clusters.md)"
        )
    return (
        f"'{_shown(part)}' is not NODESxGPUS[:TYPE][@TOPOLOGY]; write e.g. 32x4:V100, 16x4:V100,16x4:P100, "
        "32x4:V100@p3.8xlarge, 36:36:36 or a .toml file" + _digits_note(part)
    )


def _shown(text: str, most: int = 60) -> str:
    """`text` as a message shows it: cut short in the middle if it is long."""
    return text if len(text) <= most else f"{text[: most // 2]}...{text[-most // 4 :]} ({len(text):,} characters)"


def _digits_note(text: str) -> str:
    """A note for a shorthand written with digits of another script (counts are read in 0-9)."""
    return " (counts are written with the digits 0-9)" if any(c.isdigit() and not c.isascii() for c in text) else ""


def names_a_file(path: str | Path) -> bool:
    """Whether `path` names a file; False where it cannot be a path at all (too long a name, a
    NUL), so that a long shorthand reaches its own parser."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def _names_a_folder(path: str | Path) -> bool:
    """Whether `path` names a folder (False where it cannot be a path at all, as names_a_file)."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def spec_shown(spec: str) -> str:
    """A graph's `cluster` setting in one line (a graph printed, a message): a spec's whole
    text as `Cluster(...)` with its description (but the tiers' links), as a Cluster prints;
    any other as written."""
    if not is_spec_text(spec):
        return spec
    try:
        return f"Cluster({Cluster.parse(spec).describe().split(';')[0]})"
    except ClusterError:  # (a bad one: its first line, and that more follow)
        return f"{spec.strip().splitlines()[0]} ..."


def spec_file(spec: str, folder: str | Path) -> Path | None:
    """The file a cluster spec written in a graph names, relative to the graph's `folder`: a
    `.toml` name, a name with a `/` or `\\` (no shorthand has one), or anything there (a folder
    too, which the spec's reader refuses); None for a shorthand such as "32x4:V100". Spaces
    around the spec are not part of the name, as ClusterSpec.parse reads it."""
    spec = spec.strip()
    if not spec or is_spec_text(spec):  # (a spec's whole text names no file)
        return None
    path = Path(folder) / spec
    if spec.endswith(".toml") or "/" in spec or "\\" in spec or names_a_file(path):
        return path
    return path if _names_a_folder(path) and not _is_shorthand(spec) else None


def _is_shorthand(text: str) -> bool:
    """Whether `text` reads as a shorthand (of any GPU types)."""
    try:
        ClusterSpec._from_text(text.strip())
    except ClusterError:
        return False
    return True


def _plain_gpu_type(name: str) -> bool:
    """Whether a spec file's `gpu_type` is a name an agent can register its GPUs under and a
    profile can hold (the wire's names): not text with spaces, commas, colons or '@', which
    would be a type no node has, nor any other setting names."""
    from roundhouse.wire.protocol import NAME_RE

    return re.fullmatch(NAME_RE, name) is not None


_TYPE_NAME = (
    "a GPU type's name (up to 64 letters, digits, '.', '_' and '-', starting with a letter or digit, such as V100 or A100-80GB)"
)


def _type_name_problem(name: str) -> str | None:
    """Why a shorthand's `:TYPE` is no GPU type's name (None if it is one)."""
    return None if _plain_gpu_type(name) else f"GPU type '{_shown(name)}' is not {_TYPE_NAME}"


def _tiers_from_table(file: Path, lines: SpecLines, table: object) -> Tiers:
    """A [tiers] table: [tiers.machine], [tiers.rack] and [tiers.network], each with optional
    `latency_ns` (0 or more) and `bandwidth_gb_per_s` (above 0); what is left out is Dally's."""
    from roundhouse.traces.communication import DALLY_TIERS, TIER_NAMES, Tier, Tiers

    if not isinstance(table, dict):
        raise ClusterError(
            "'tiers' must be a table ([tiers], with [tiers.machine], [tiers.rack], [tiers.network])", at(file, lines, "tiers")
        )
    tiers = {}
    for key, value in table.items():
        if key not in TIER_NAMES:
            hint = did_you_mean(key, TIER_NAMES)
            raise ClusterError(
                f"[tiers]: unknown tier '{key}'" + (f" ({hint})" if hint else "") + f"; tiers are {', '.join(TIER_NAMES)}",
                at(file, lines, "tiers", key),
            )
        where = f"[tiers.{key}]"
        if not isinstance(value, dict):
            raise ClusterError(f"{where} must be a table with {' and '.join(_TIER_FIELDS)}", at(file, lines, "tiers", key))
        default = getattr(DALLY_TIERS, key)
        fields = {"latency_ns": default.latency_ns, "bandwidth_gb_per_s": default.bandwidth_gb_per_s}
        for field, number in value.items():
            path = at(file, lines, "tiers", key, field)  # (where each problem with this value is)
            if field not in fields:
                hint = did_you_mean(field, _TIER_FIELDS)
                raise ClusterError(f"{where}: unknown key '{field}'" + (f" ({hint})" if hint else ""), path)
            # (an int of any size is finite; math.isfinite would overflow converting a huge one)
            ok = not isinstance(number, bool) and (isinstance(number, int) or isinstance(number, float) and math.isfinite(number))
            # (one message for each field's whole range, whichever end a value is past)
            if field == "latency_ns" and not (ok and 0 <= number <= MAX_LATENCY_NS):
                raise ClusterError(
                    f"{where}: 'latency_ns' must be a number from 0 to {MAX_LATENCY_NS:,.0f} (1,000 s), got {_as_written(number)}",
                    path,
                )
            if field == "bandwidth_gb_per_s" and not (ok and MIN_BANDWIDTH_GB_PER_S <= number <= MAX_AMOUNT):
                raise ClusterError(
                    f"{where}: 'bandwidth_gb_per_s' must be a number from {MIN_BANDWIDTH_GB_PER_S:g} to {MAX_AMOUNT:,.0f}, "
                    f"got {_as_written(number)}",
                    path,
                )
            fields[field] = float(number) + 0.0  # (-0.0 is 0: shown so, and fingerprinted so)
        tiers[key] = Tier(**fields)
    return Tiers(**{t: tiers.get(t, getattr(DALLY_TIERS, t)) for t in TIER_NAMES})


def _group_from_table(file: Path, lines: SpecLines, index: int, table: object, gpu_types: Sequence[str] | None) -> NodeGroup:
    """The spec's group number `index + 1`; a problem with it names the line of the key at fault
    (of the group's header where none is)."""
    where = f"[[group]] #{index + 1}"
    if not isinstance(table, dict):
        raise ClusterError(f"{where} is not a table", at(file, lines, "group", index))
    values = {}
    for key, value in table.items():
        path = at(file, lines, "group", index, key)  # (where each problem with this value is)
        if key not in _GROUP_KEYS:
            hint = did_you_mean(key, _GROUP_KEYS)
            raise ClusterError(f"{where}: unknown key '{key}'" + (f" ({hint})" if hint else ""), path)
        if key in _INTS:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GPUS:
                # (the range said is the key's own: a node's GPUs go up to 64, which _check_size
                # says of a count between the two)
                top = MAX_GPUS_PER_NODE if key == "gpus_per_node" else MAX_GPUS
                raise ClusterError(f"{where}: '{key}' must be a whole number from 1 to {top:,}, got {_as_written(value)}", path)
        elif key in _FLOATS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_AMOUNT:
                raise ClusterError(
                    f"{where}: '{key}' must be a positive finite number up to {MAX_AMOUNT:,.0f}, got {_as_written(value)}",
                    path,
                )
            value = float(value)
        elif not isinstance(value, str) or not value:
            raise ClusterError(f"{where}: '{key}' must be a non-empty string, got {_as_written(value)}", path)
        elif key == "gpu_type" and not _plain_gpu_type(value):
            raise ClusterError(f"{where}: 'gpu_type' must be {_TYPE_NAME}, got {_as_written(value)}", path)
        values[key] = value
    for required in ("nodes", "gpus_per_node"):
        if required not in values:
            raise ClusterError(f"{where}: missing '{required}'", at(file, lines, "group", index))
    per_rack = values.pop("machines_per_rack", None)
    if per_rack is not None:
        path = at(file, lines, "group", index, "machines_per_rack")
        if "racks" in values:
            raise ClusterError(f"{where}: give 'racks' or 'machines_per_rack', not both", path)
        if values["nodes"] % per_rack:
            raise ClusterError(
                f"{where}: 'machines_per_rack' ({per_rack}) does not divide 'nodes' ({values['nodes']}) into whole racks", path
            )
        values["racks"] = values["nodes"] // per_rack
    group = NodeGroup(**values, own_racks="racks" in values)
    if group.racks > group.nodes:
        raise ClusterError(
            f"{where}: 'racks' ({group.racks}) is more than 'nodes' ({group.nodes})", at(file, lines, "group", index, "racks")
        )
    for key, problem in (
        ("topology", _topology_problem(group.topology, group.gpus_per_node)),
        ("gpu_type", _gpu_type_problem(group.gpu_type, gpu_types)),
        ("topology", _topology_type_problem(group.topology, group.gpu_type)),
    ):
        if problem:
            raise ClusterError(f"{where}: {problem}", at(file, lines, "group", index, key))
    return group


def rack_names(groups: Sequence[NodeGroup], path: Path | None = None, lines: SpecLines | None = None) -> list[list[str]]:
    """Each group's racks, by name: node k of a group of n nodes split into r racks is in its
    rack k·r/n (rounded down). A group given no `rack` is in "r0" (shared with the others given
    none) or, split, in racks of its own named after its place (group #2's r1-0, r1-1, ...).
    Groups given the same `rack` share it, but the racks a group is split into (by `racks` or
    `machines_per_rack`, into one too) are its own: one of those names given to another group's
    rack is an error (it would silently merge racks), and so is the `rack` a split group names
    written in another group (it would silently not share one), at the line of the later group's
    rack keys when `lines` (the spec file's) are given."""
    names: list[list[str]] = []
    owner: dict[str, tuple[int, bool]] = {}  # rack -> (first group with it, whether split from it)
    written: dict[str, tuple[int, bool]] = {}  # a `rack` as written -> (first group with it, whether split)
    for i, g in enumerate(groups):
        split = g.racks > 1 or g.own_racks
        base = g.rack or (f"r{i}" if split else "r0")
        own = [f"{base}-{j}" for j in range(g.racks)] if split else [base]
        first, first_split = written.setdefault(g.rack, (i, split)) if g.rack else (i, split)
        if first != i and first_split != split:
            # (one group in rack "a", another split into "a-0", "a-1": the same `rack` written in
            # both says they share one, which no rack of theirs is)
            parted = groups[first] if first_split else g
            racks = f"'{g.rack}-0'" + (f" to '{g.rack}-{parted.racks - 1}'" if parted.racks > 1 else "")
            raise ClusterError(
                f"[[group]] #{i + 1}: rack '{g.rack}' is also the 'rack' of [[group]] #{first + 1}, but "
                f"[[group]] #{(first if first_split else i) + 1} is split into racks of its own "
                f"({racks}), which no other group shares: give the groups "
                "different 'rack' names (groups share a rack when each names it in 'rack' and is not split)",
                None if path is None else at(path, lines, "group", i, "rack"),
            )
        for name in own:
            first, first_split = owner.setdefault(name, (i, split))
            if first != i and (first_split or split):
                raise ClusterError(
                    f"[[group]] #{i + 1}: rack '{name}' is also a rack of [[group]] #{first + 1}, but the racks a group "
                    "is split into ('racks', 'machines_per_rack') are its own: give the groups different 'rack' names "
                    "(groups share a rack when each names it in 'rack' and is not split)",
                    None if path is None else at(path, lines, "group", i, _rack_key(lines, i)),
                )
        names.append(own)
    return names


def _rack_key(lines: SpecLines | None, index: int) -> str:
    """The key that gives group number `index + 1` its racks, as the spec writes it: `rack` first."""
    keys = ("rack", "racks", "machines_per_rack")
    return next((k for k in keys if lines is not None and lines.written("group", index, k)), "")


def _check_size(where: str, groups: Sequence[NodeGroup], path: Path | None = None, lines: SpecLines | None = None) -> None:
    """Refuse clusters too large to hold (before any per-GPU table is built). For a spec file
    (`path`), a node too large is said at its group's `gpus_per_node`."""
    lead = f"{where}: " if where else ""
    for i, g in enumerate(groups):
        if g.gpus_per_node > MAX_GPUS_PER_NODE:
            group = f"[[group]] #{i + 1}: " if path is not None else ""
            raise ClusterError(
                f"{lead}{group}{g.gpus_per_node:,} GPUs per node is more than the {MAX_GPUS_PER_NODE} a node may have",
                None if path is None else at(path, lines, "group", i, "gpus_per_node"),
            )
    total = sum(g.nodes * g.gpus_per_node for g in groups)
    if total > MAX_GPUS:
        raise ClusterError(f"{lead}{total:,} GPUs is more than the {MAX_GPUS:,} a cluster may have", path)
    if any(g.topology for g in groups):
        nodes, largest = sum(g.nodes for g in groups), max(g.gpus_per_node for g in groups)
        if nodes * largest * largest > MAX_LINK_ENTRIES:
            raise ClusterError(
                f"{lead}a cluster with topologies holds a link table of nodes x GPUs per node squared numbers, "
                f"at most {MAX_LINK_ENTRIES:,}: {nodes:,} nodes of up to {largest} GPUs make {nodes * largest * largest:,}",
                path,
            )


class KnownGpuTypes(tuple):
    """The GPU type names a cluster may have, with what makes a name one of them (`why`), which
    the error for any other name adds to the names, and the names (lower case) whose near miss
    `why` names already (`told`: the error then gives no hint of its own, one being enough)."""

    why: str
    told: frozenset[str]

    def __new__(cls, names: Sequence[str], why: str = "", told: Iterable[str] = ()) -> KnownGpuTypes:
        known = super().__new__(cls, names)
        known.why = why
        known.told = frozenset(t.lower() for t in told)
        return known


def _gpu_type_problem(name: str, gpu_types: Sequence[str] | None) -> str | None:
    """Why a group cannot have this GPU type (None if it can, or if no list is given). A near
    miss of a known type is told it by the rule of docs/clusters.md (runtime/near_gpu_types.py:
    a character added, dropped or swapped with its neighbour, O read as 0; not one replaced, as
    real types differ so: A100 is no misspelling of V100)."""
    if gpu_types is None or name.lower() in {t.lower() for t in gpu_types}:
        return None
    near = [] if name.lower() in getattr(gpu_types, "told", ()) else near_types(name, gpu_types)
    hint = "did you mean " + " or ".join(f"'{t}'" for t in near) + "?" if near else None
    why = getattr(gpu_types, "why", "")
    return (
        f"unknown GPU type '{name}'"
        + (f" ({hint})" if hint else "")
        + f"; known: {', '.join(gpu_types)}"
        + (f" ({why})" if why else "")
    )


def _topology_problem(name: str, gpus_per_node: int) -> str | None:
    """Why a group cannot have this topology (None if it can; "" names none)."""
    from roundhouse.runtime.topologies import TOPOLOGIES

    if not name:
        return None
    if name not in TOPOLOGIES:
        hint = did_you_mean(name, TOPOLOGIES)
        return f"unknown topology '{name}'" + (f" ({hint})" if hint else f"; known: {', '.join(TOPOLOGIES)}")
    size = len(TOPOLOGIES[name])
    if size != gpus_per_node:
        return f"topology '{name}' has {size} GPUs per node, the group {gpus_per_node}"
    return None


def _topology_type_problem(name: str, gpu_type: str) -> str | None:
    """Why a group of this GPU type cannot have this (known) topology: it is an instance of
    another type's GPUs, whose links (NVLink) a node of these would be taken to have."""
    from roundhouse.runtime.topologies import TOPOLOGIES, TOPOLOGY_GPU_TYPES

    theirs = TOPOLOGY_GPU_TYPES.get(name)
    if theirs is None or theirs.lower() == gpu_type.lower():
        return None
    return (
        f"topology '{name}' is an instance of {len(TOPOLOGIES[name])} {theirs} GPUs and their links, the group's GPUs are "
        f"{gpu_type}: leave the topology out for nodes of other GPUs (their links are then unknown)"
    )


def _check_built(spec: ClusterSpec) -> None:
    """A spec built in Python (`Cluster(ClusterSpec(...))`) holds what the per-GPU tables are
    made from: a group with no node or no GPU, a count that is no whole number, an unknown
    topology, or more GPUs than a cluster may have is a ClusterError naming the group, rather
    than numpy's complaint or a cluster of 0 GPUs. (Other values no spec file takes, such as
    `cpus = 0`, are the object's own: docs/simulation-api.md.)"""
    from roundhouse.runtime.topologies import TOPOLOGIES

    if not isinstance(spec, ClusterSpec):
        hint = "; a spec's text or file is read by Cluster.parse" if isinstance(spec, str | Path) else ""
        raise ClusterError(f"Cluster: expected a ClusterSpec, got {type(spec).__name__}{hint}")
    groups = spec.groups
    if not isinstance(groups, tuple | list) or not groups:
        raise ClusterError(f"Cluster: a ClusterSpec needs a tuple of one NodeGroup or more, got {groups!r}")
    for i, g in enumerate(groups):
        where = f"Cluster: group #{i + 1}"
        if not isinstance(g, NodeGroup):
            raise ClusterError(f"{where}: expected a NodeGroup(nodes=..., gpus_per_node=...), got {g!r}")
        for key in ("nodes", "gpus_per_node", "racks"):
            value = getattr(g, key)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ClusterError(f"{where}: '{key}' must be a whole number of at least 1, got {value!r}")
        if g.topology and g.topology not in TOPOLOGIES:
            hint = did_you_mean(str(g.topology), list(TOPOLOGIES))
            raise ClusterError(
                f"{where}: unknown topology {g.topology!r}" + (f" ({hint})" if hint else "") + f"; known: {', '.join(TOPOLOGIES)}"
            )
    _check_size("Cluster", groups)


class Cluster:
    """The cluster's fixed facts, one row per GPU and one per node (numpy columns).

    GPU ids are global and contiguous per node: node k's GPUs are
    `node_first_gpu[k] .. node_first_gpu[k] + node_gpus[k] - 1`.
    """

    def __init__(self, spec: ClusterSpec):
        _check_built(spec)
        # GPU types are compared without regard to case: spellings that differ only in case are
        # one type, spelt as first written, so placers see one type where the spec means one.
        spelling: dict[str, str] = {}
        for g in spec.groups:
            spelling.setdefault(g.gpu_type.lower(), g.gpu_type)
        if any(spelling[g.gpu_type.lower()] != g.gpu_type for g in spec.groups):
            groups = tuple(attrs.evolve(g, gpu_type=spelling[g.gpu_type.lower()]) for g in spec.groups)
            spec = attrs.evolve(spec, groups=groups)
        self.spec = spec
        self.gpu_types: tuple[str, ...] = tuple(dict.fromkeys(g.gpu_type for g in spec.groups))
        racks: dict[str, int] = {}  # rack -> its number, in the order first met (a dict: a cluster may have many)
        node_gpus, node_type, node_rack, cpus, memory, gpu_memory, network = [], [], [], [], [], [], []
        for g, names in zip(spec.groups, rack_names(spec.groups)):
            type_code = self.gpu_types.index(g.gpu_type)
            for k in range(g.nodes):
                rack = names[k * g.racks // g.nodes]
                node_gpus.append(g.gpus_per_node)
                node_type.append(type_code)
                node_rack.append(racks.setdefault(rack, len(racks)))
                cpus.append(g.cpus)
                memory.append(g.memory_gb)
                gpu_memory.append(g.gpu_memory_gb)
                network.append(g.network_gbps)
        self.racks: tuple[str, ...] = tuple(racks)
        self.n_racks = len(racks)
        self.tiers: Tiers | None = spec.tiers  # None: no network tiers, no communication model
        self.node_gpus = _ro(np.array(node_gpus, dtype=np.int64))
        self.node_type = _ro(np.array(node_type, dtype=np.int64))
        self.node_rack = _ro(np.array(node_rack, dtype=np.int64))
        self.node_cpus = _ro(np.array(cpus, dtype=np.int64))
        self.node_memory_gb = _ro(np.array(memory, dtype=np.float64))
        self.node_network_gbps = _ro(np.array(network, dtype=np.float64))
        self.node_first_gpu = _ro(np.concatenate([[0], np.cumsum(self.node_gpus)[:-1]]).astype(np.int64))
        self.gpu_node = _ro(np.repeat(np.arange(len(node_gpus)), self.node_gpus))
        self.gpu_local = _ro(np.arange(len(self.gpu_node)) - self.node_first_gpu[self.gpu_node])
        self.gpu_type = _ro(self.node_type[self.gpu_node])
        self.gpu_rack = _ro(self.node_rack[self.gpu_node])
        self.gpu_memory_gb = _ro(np.array(gpu_memory, dtype=np.float64)[self.gpu_node])
        self.n_gpus = int(len(self.gpu_node))
        self.n_nodes = int(len(node_gpus))
        self.type_mask = tuple(_ro(self.gpu_type == t) for t in range(len(self.gpu_types)))
        self.gpus_by_type = _ro(np.bincount(self.gpu_type, minlength=len(self.gpu_types)))
        self.max_gpus_per_node = int(self.node_gpus.max())
        self.uniform_nodes = bool((self.node_gpus == self.max_gpus_per_node).all())
        self.node_link_gbps = _ro(self._links(spec))
        # With 1, 2, 4 or 8 GPUs on every node, one node's flags in a per-GPU bool mask are the
        # bytes of one unsigned word, so counting them is a single bit count (see per_node).
        words = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
        self._node_word = words.get(self.max_gpus_per_node) if self.uniform_nodes else None

    def nodes_needed(self, gpus):
        """The fewest nodes a job of this many GPUs spans (an int, or an array of them): it is
        consolidated on that many, and spread over more. On nodes of several sizes, the largest
        first (a 28-GPU job spans five nodes of 2x8 and 3x4); more than there are for a job
        larger than the cluster."""
        if self.uniform_nodes:
            return -(-gpus // self.max_gpus_per_node)
        return np.sort(self.node_gpus)[::-1].cumsum().searchsorted(gpus) + 1

    def per_node(self, mask: np.ndarray) -> np.ndarray:
        """How many GPUs of each node `mask` (one bool per GPU) marks."""
        if self._node_word is not None and mask.flags.c_contiguous and mask.dtype == np.bool_:
            return np.bitwise_count(mask.view(self._node_word)).astype(np.int64)
        return np.add.reduceat(mask, self.node_first_gpu, dtype=np.int64)

    def _links(self, spec: ClusterSpec) -> np.ndarray:
        """(nodes, G, G) link bandwidths in Gbps between a node's GPUs (local indices), G the
        largest node; NaN where the topology is unknown. Without topologies that is one NaN
        seen through every index (no memory); with them, a table `_check_size` bounds."""
        from roundhouse.runtime.topologies import TOPOLOGIES

        g = self.max_gpus_per_node
        if not any(group.topology for group in spec.groups):
            return np.broadcast_to(np.float64(np.nan), (self.n_nodes, g, g))
        links = np.full((self.n_nodes, g, g), np.nan)
        k = 0
        for group in spec.groups:
            if group.topology:
                links[k : k + group.nodes, : group.gpus_per_node, : group.gpus_per_node] = TOPOLOGIES[group.topology]
            k += group.nodes
        return links

    @classmethod
    def parse(cls, text: str, gpu_types: Sequence[str] | None = None) -> Cluster:
        return cls(ClusterSpec.parse(text, gpu_types))

    def type_code(self, name: str) -> int:
        try:
            return self.gpu_types.index(name)
        except ValueError:
            return -1

    def spread(self, gpu_ids) -> str:
        """How a set of GPUs is spread: 'node' (one node), 'rack' (one rack) or 'cluster'."""
        ids = np.asarray(gpu_ids)
        nodes = self.gpu_node[ids]
        if (nodes == nodes[0]).all():
            return "node"
        racks = self.gpu_rack[ids]
        return "rack" if (racks == racks[0]).all() else "cluster"

    def __repr__(self) -> str:  # (the one line describe gives, not an object's address)
        return f"Cluster({self.describe()})"

    def describe(self) -> str:
        """The cluster in one line; with network tiers, also its racks and each tier's links."""
        parts = [f"{g.nodes}x{g.gpus_per_node}:{g.gpu_type}" + (f"@{g.topology}" if g.topology else "") for g in self.spec.groups]
        # (Counts with thousands separators, as other messages write them; a group's shorthand
        # stays as written, so that it can be given back to --cluster.)
        gpus, nodes = (
            f"{self.n_gpus:,} GPU" + ("s" if self.n_gpus != 1 else ""),
            f"{self.n_nodes:,} node" + ("s" if self.n_nodes != 1 else ""),
        )
        text = f"{gpus} on {nodes} ({', '.join(parts)})"
        if self.tiers is None:
            return text
        from roundhouse.traces.communication import TIER_NAMES

        per_rack = np.bincount(self.node_rack, minlength=self.n_racks)
        low, high = int(per_rack.min()), int(per_rack.max())
        machines = (f"{low:,}" if low == high else f"{low:,}-{high:,}") + (" machine" if high == 1 else " machines")
        racks = f"{self.n_racks:,} rack" + ("s" if self.n_racks > 1 else "")
        links = ", ".join(
            f"{name} {tier.latency_ns:,g} ns {tier.bandwidth_gb_per_s:,g} GB/s"
            for name, tier in zip(TIER_NAMES, self.tiers.all())
        )
        return f"{text} in {racks} of {machines}; tiers: {links}"

    def fingerprint(self) -> str:
        """A digest of everything the cluster tells elements, node by node: GPUs, their type and
        memory, rack, cores, memory, network, intra-node links and tiers. Clusters written
        differently but alike (`4x4:V100` and `2x4:V100,2x4:V100`) share it; clusters that
        `describe` alike but differ in a node fact or a rack do not. (GPU types by name, without
        regard to case, as the spec compares them.)"""
        import hashlib

        digest = hashlib.sha256()
        types = [t.lower() for t in self.gpu_types]
        digest.update(json.dumps([types[t] for t in self.node_type.tolist()]).encode())
        tables = (self.node_gpus, self.node_rack, self.node_cpus, self.node_memory_gb, self.gpu_memory_gb, self.node_network_gbps)
        for table in tables:
            digest.update(np.ascontiguousarray(table).tobytes())
        if not np.isnan(self.node_link_gbps).all():
            digest.update(np.ascontiguousarray(self.node_link_gbps).tobytes())
        digest.update(repr(self.tiers).encode())
        return digest.hexdigest()

    def frame(self):
        import polars as pl

        return pl.DataFrame(
            {
                "gpu_id": np.arange(self.n_gpus),
                "node": self.gpu_node,
                "local_gpu": self.gpu_local,
                "rack": [self.racks[r] for r in self.gpu_rack],
                "gpu_type": [self.gpu_types[t] for t in self.gpu_type],
                "memory_gb": self.gpu_memory_gb,
            }
        )


def described_alike(one: str, other: str) -> bool:
    """Whether two of `Cluster.describe`'s lines describe the same cluster, either written by an
    earlier version (a journal's): those wrote "1 nodes" and "1 GPUs", and counts without
    thousands separators."""

    def plain(text: str) -> str:
        return re.sub(r"(?<=\d),(?=\d{3}\b)", "", re.sub(r"\b1 (node|GPU)s\b", r"1 \1", text))

    return plain(one) == plain(other)


def _ro(a: np.ndarray) -> np.ndarray:
    """A cluster array every element reads: a face that cannot be made writeable again."""
    return read_only(a)
