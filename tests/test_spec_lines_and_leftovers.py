"""Problems a first user met: a cluster spec file's problem names the line it is on; a
ProfiledPlacer tolerance below 1 (no slowdown is) is refused, and a SkewAwarePlacer packlimit of 1
or more (no skew is: it is a share); `reproduce --out` names the
experiment whose output a folder holds."""

from __future__ import annotations

import math

import pytest

from roundhouse.elements.placement.tiresias import ProfiledPlacer, SkewAwarePlacer
from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import Cluster, ClusterSpec
from roundhouse.runtime.spec_lines import SpecLines
from tests.conftest import REPO, fails

HERE = "# <- here"  # marks the line a spec's problem is on


def written(tmp_path, text: str, newline: str = "\n"):
    """The spec file `text` (with HERE on the line of its problem), and that line's number."""
    lines = text.strip("\n").split("\n")
    (line,) = [n for n, body in enumerate(lines, start=1) if HERE in body]
    path = tmp_path / "spec.toml"
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    return path, line


def problem(path, gpu_types=("V100", "P100", "K80")) -> ClusterError:
    with pytest.raises(ClusterError) as err:
        Cluster.parse(str(path), gpu_types)
    return err.value


GROUPS = """
name = "long"   # a spec with comments

# the first group
[[group]]
nodes = 2
gpus_per_node = 4

[[group]]
# second
nodes = 1
"""

CASES = [
    (GROUPS + f"gpus_per_node = 0   {HERE}\n", "[[group]] #2: 'gpus_per_node' must be a whole number from 1 to"),
    (GROUPS + f"gpus_per_node = 4\nmemory_gb = -1   {HERE}\n", "[[group]] #2: 'memory_gb' must be a positive finite"),
    (GROUPS + f'gpus_per_node = 4\ngpu_type = "V10"  {HERE}\n', "[[group]] #2: unknown GPU type 'V10'"),
    (GROUPS + f'gpus_per_node = 4\ngpu_type = "A 1"  {HERE}\n', "[[group]] #2: 'gpu_type' must be a GPU type's name"),
    (GROUPS + f"gpus_per_node = 4\ngpus = 4  {HERE}\n", "[[group]] #2: unknown key 'gpus'"),
    (GROUPS + f'gpus_per_node = 4\ntopology = "p3"  {HERE}\n', "[[group]] #2: unknown topology 'p3'"),
    (GROUPS + f"gpus_per_node = 4\nracks = 3  {HERE}\n", "[[group]] #2: 'racks' (3) is more than 'nodes' (1)"),
    (GROUPS + f"gpus_per_node = 100  {HERE}\n", "[[group]] #2: 100 GPUs per node is more than the 64"),
    (GROUPS.replace("nodes = 1", "nodes = 3") + f"gpus_per_node = 4\nmachines_per_rack = 2  {HERE}\n", "does not divide"),
    (GROUPS + f"gpus_per_node = 4\nracks = 1\nmachines_per_rack = 1  {HERE}\n", "give 'racks' or 'machines_per_rack'"),
    # a problem with no key of its own: at the group's header
    ("[[group]]\nnodes = 1\ngpus_per_node = 4\n" + f"[[group]]  {HERE}\ngpus_per_node = 4\n", "[[group]] #2: missing 'nodes'"),
    # a rack another group's racks own: at the later group's rack
    (
        'name = "r"\n[[group]]\nnodes = 2\ngpus_per_node = 4\nrack = "a"\nracks = 2\n'
        f'[[group]]\nnodes = 1\ngpus_per_node = 4\nrack = "a-1"  {HERE}\n',
        "[[group]] #2: rack 'a-1' is also a rack of [[group]] #1",
    ),
    (f"name = 3  {HERE}\n[[group]]\nnodes = 1\ngpus_per_node = 4\n", "'name' must be a string"),
    (f"[[group]]\nnodes = 1\ngpus_per_node = 4\n\nnaem = 3  {HERE}\n[tiers]\n", "unknown key 'naem'"),
    # [tiers]: each problem at its key, or at the tier's table
    (f"[[group]]\nnodes = 1\ngpus_per_node = 4\n[tiers.rack]\n\nlatency_ns = -1  {HERE}\n", "[tiers.rack]: 'latency_ns'"),
    (f"[[group]]\nnodes = 1\ngpus_per_node = 4\n[tiers.racks]  {HERE}\nlatency_ns = 1\n", "[tiers]: unknown tier 'racks'"),
    (f"[[group]]\nnodes = 1\ngpus_per_node = 4\n[tiers]\nrack.bandwidth = 1  {HERE}\n", "[tiers.rack]: unknown key 'bandwidth'"),
    (f"[[group]]\nnodes = 1\ngpus_per_node = 4\n[tiers]\nnetwork = 3  {HERE}\n", "[tiers.network] must be a table"),
    # a key of an inline table: at the line the table is written on
    (
        f"[[group]]\nnodes = 1\ngpus_per_node = 4\n[tiers]\nrack = {{ bandwidth_gb_per_s = 0 }}  {HERE}\n",
        "[tiers.rack]: 'bandwidth_gb_per_s' must be a number from 1e-06 to 1,000,000, got 0",
    ),
]


@pytest.mark.parametrize(("text", "message"), CASES)
def test_a_spec_files_problem_names_its_line(tmp_path, text, message):
    path, line = written(tmp_path, text)
    err = problem(path)
    assert err.path == f"{path}:{line}"
    assert message in err.message
    assert str(err).startswith(f"{path}:{line}: error: ")


def test_the_line_is_found_past_strings_arrays_and_quoted_keys(tmp_path):
    # Text that looks like a group inside a multi-line string, an array over several lines, a
    # quoted header and key: none of it moves the line off the real key.
    text = (
        'name = """\n[[group]]\nnodes = 0\n"""\n'
        "extra_note = '''\n# [[group]]\n'''\n"
        '[[ "group" ]]   # the only group\n'
        "nodes = 2\n"
        f'"gpus_per_node" = 0  {HERE}\n'
    )
    path, line = written(tmp_path, text.replace("extra_note", "name2"))
    lines = SpecLines(path.read_text())
    assert lines.line("group", 0) == 8 and lines.line("group", 0, "nodes") == 9
    assert lines.line("group", 0, "gpus_per_node") == line == 10
    text = (
        "[[group]]\nnodes = 1\ngpus_per_node = 4\n"
        'notes = [\n  "x",  # ]\n  "[[group]]", [\n  1, { cpus = 2 }],\n]\n'
        f"[[group]]\nnodes = 1\ngpus_per_node = 4\ncpus = 0  {HERE}\n"
    )
    path, line = written(tmp_path, text)
    lines = SpecLines(path.read_text())
    assert lines.line("group", 0, "notes") == 4 and lines.line("group", 1) == 9
    assert lines.line("group", 1, "cpus") == line == 12 and not lines.written("group", 0, "cpus")


def test_crlf_lines_count_as_lines(tmp_path):
    path, line = written(tmp_path, GROUPS + f"gpus_per_node = 0   {HERE}\n", newline="\r\n")
    assert problem(path).path == f"{path}:{line}"


def test_groups_written_as_an_inline_array_fall_back_to_its_line(tmp_path):
    path, line = written(tmp_path, f'name = "x"\n\ngroup = [  {HERE}\n  {{ nodes = 1, gpus_per_node = 0 }},\n]\n')
    err = problem(path)
    assert err.path == f"{path}:{line}" and err.message.startswith("[[group]] #1: 'gpus_per_node'")


def test_a_default_gpu_type_not_known_is_said_at_the_groups_header(tmp_path):
    path, line = written(tmp_path, f"[[group]]\nnodes = 1\ngpus_per_node = 4\n[[group]]  {HERE}\nnodes = 1\ngpus_per_node = 4\n")
    path.write_text(path.read_text().replace("[[group]]\nnodes = 1", '[[group]]\ngpu_type = "K80"\nnodes = 1', 1))
    err = problem(path, ("K80",))
    assert err.path == f"{path}:{line + 1}" and err.message.startswith("[[group]] #2: unknown GPU type 'V100'")


def test_a_problem_of_the_whole_cluster_names_the_file_alone(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("[[group]]\nnodes = 1000000\ngpus_per_node = 2\n")
    err = problem(path)
    assert err.path == str(path) and "GPUs is more than the 1,000,000" in err.message


def test_a_good_spec_with_comments_reads_as_before(tmp_path):
    path, _ = written(tmp_path, GROUPS + f"gpus_per_node = 4  {HERE}\n")
    spec = ClusterSpec.parse(str(path))
    assert [(g.nodes, g.gpus_per_node) for g in spec.groups] == [(2, 4), (1, 4)]


GRAPH = """round = 5min;
cluster = "spec.toml";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=0);
arrivals -> JobPool -> order :: Las -> PLACER -> Launch -> report :: JobMetrics;
"""


def test_check_and_run_name_the_spec_files_line(tmp_path, capsys):
    path, line = written(tmp_path, GROUPS + f"gpus_per_node = 0   {HERE}\n")
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.replace("PLACER", "Consolidated"))
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:2:11: error: setting 'cluster': {path}:{line}: [[group]] #2: 'gpus_per_node' must be")
    err = fails(capsys, "run", REPO / "graphs" / "las.sched", "--cluster", path, "--out", tmp_path / "out")
    assert err.startswith(f"{path}:{line}: error: [[group]] #2: 'gpus_per_node' must be")


# --- ProfiledPlacer's tolerance is a slowdown: 1 or more ---


@pytest.mark.parametrize("tolerance", ["0.5", "0.99", "0", "-1"])
def test_a_tolerance_below_1_is_refused_at_the_argument(tmp_path, capsys, tolerance):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.replace('"spec.toml"', '"2x4:V100"').replace("PLACER", f"ProfiledPlacer(tolerance={tolerance})"))
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:4:")
    assert f"argument 'tolerance' of ProfiledPlacer must be at least 1, got {float(tolerance):g}" in err
    assert "slowdown" in err


@pytest.mark.parametrize("tolerance", [1, 1.05, math.inf])
def test_a_tolerance_of_1_or_more_is_taken(tolerance):
    assert ProfiledPlacer(tolerance=tolerance).tolerance == tolerance


def test_a_nan_tolerance_is_refused():
    with pytest.raises(ValueError, match="must be at least 1, got nan"):
        ProfiledPlacer(tolerance=math.nan)


# --- SkewAwarePlacer's packlimit is a share of the model: below 1 ---


@pytest.mark.parametrize("packlimit", ["30", "1", "1.5"])
def test_a_packlimit_of_1_or_more_is_refused_at_the_argument(tmp_path, capsys, packlimit):
    """A percentage written for a share would consolidate only the jobs of unknown skew."""
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.replace('"spec.toml"', '"2x4:V100"').replace("PLACER", f"SkewAwarePlacer(packlimit={packlimit})"))
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{graph}:4:")
    assert f"argument 'packlimit' of SkewAwarePlacer must be below 1, got {float(packlimit):g}" in err
    assert "share of the model" in err


@pytest.mark.parametrize("packlimit", [0.12, 0.3, 0.99])
def test_a_packlimit_below_1_is_taken(packlimit):
    assert SkewAwarePlacer(packlimit=packlimit).packlimit == packlimit


def test_a_nan_packlimit_is_refused():
    with pytest.raises(ValueError, match="must be"):
        SkewAwarePlacer(packlimit=math.nan)
