"""The `.sched` language as a new user writing their own graphs meets it: whole numbers written
with an exponent, optional list arguments with one bad item, and large graphs checked in time
that grows with their size, not its square."""

import pytest

from roundhouse.errors import SchedError, SchedErrors
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.wiring import Connection, jobs_given_twice
from tests.own_elements import policy_file

HEAD = 'round = 5min;\ncluster = "2x4:V100";\n'
CHAIN = "-> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"

OWN_ELEMENT = policy_file(
    "Marks",
    "Rank jobs by the GPUs they ask for, fewest first.",
    """
    order = np.argsort(active.gpus, kind="stable")
    return Ranking(active.rows[order], active.gpus[order], backfill=True)
    """,
    before="import attrs\nimport numpy as np\n\nfrom roundhouse.runtime.values import Duration\n",
    outputs=(("ranking", "Ranking", "the jobs, fewest GPUs first."),),
    arguments=(
        ("marks", "list[Duration] | None = attrs.field(default=None)", "service marks, if any."),
        ("sizes", "int | list[int] = attrs.field(default=1)", "GPU counts or one count."),
    ),
)


def write(folder, name, text):
    path = folder / name
    path.write_text(text)
    return path


def errors_of(path):
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path)
    return info.value.errors if isinstance(info.value, SchedErrors) else [info.value]


# --- whole numbers written with an exponent ---


def test_a_whole_number_may_be_written_with_an_exponent(tmp_path):
    path = write(tmp_path, "g.sched", HEAD + "src :: PoissonSource(rate=8/h, jobs=1e3, seed=0);\nsrc " + CHAIN)
    graph = compile_file(path)
    assert graph.elements["src"].jobs == 1000 and type(graph.elements["src"].jobs) is int
    path = write(tmp_path, "g.sched", HEAD + "seed = 2.5e1;\nsrc :: PoissonSource(rate=8/h, jobs=5, seed=0);\nsrc " + CHAIN)
    assert compile_file(path).settings.seed == 25


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("1.5e0", "expects a whole number, got 1.5e0"),  # (not whole)
        ("2.0", "expects a whole number, got 2.0"),  # (no exponent: written as a fraction)
        ("1e20", "whole numbers must lie within"),  # (whole, but past 64 bits)
    ],
)
def test_a_number_with_an_exponent_that_is_no_whole_number_is_refused(tmp_path, written, said):
    path = write(tmp_path, "g.sched", HEAD + f"src :: PoissonSource(rate=8/h, jobs={written}, seed=0);\nsrc " + CHAIN)
    (error,) = errors_of(path)
    assert said in error.message and "'jobs'" in error.message
    assert (error.location.line, error.location.column) == (3, 37)


# --- optional and union arguments: a bad item of a list is said at the item ---


def test_a_bad_item_of_an_optional_list_is_said_at_the_item(tmp_path):
    write(tmp_path, "marks.py", OWN_ELEMENT)
    body = 'require "marks.py";\n' + HEAD + "src :: PoissonSource(rate=8/h, jobs=5, seed=0);\n"
    path = write(tmp_path, "g.sched", body + "src -> AcceptAll -> JobPool -> Marks(marks=[1h, 2h]) -> FirstFree -> Launch;\n")
    assert compile_file(path).elements["Marks@3"].marks == [3600.0, 7200.0]
    path = write(tmp_path, "g.sched", body + "src -> AcceptAll -> JobPool -> Marks(marks=[1h, fast]) -> FirstFree -> Launch;\n")
    (error,) = errors_of(path)
    assert "argument 'marks' of Marks expects a duration such as 300s or 5min, got fast (a name)" in error.message
    assert (error.location.line, error.location.column) == (5, 49)
    # A list of another union: the option that takes lists says what is wrong in it.
    path = write(tmp_path, "g.sched", body + 'src -> AcceptAll -> JobPool -> Marks(sizes=[1, "x"]) -> FirstFree -> Launch;\n')
    (error,) = errors_of(path)
    assert "argument 'sizes' of Marks expects a whole number, got \"x\" (a string)" in error.message
    assert (error.location.line, error.location.column) == (5, 48)
    # A value that is no list is still told every option.
    path = write(tmp_path, "g.sched", body + 'src -> AcceptAll -> JobPool -> Marks(sizes="x") -> FirstFree -> Launch;\n')
    (error,) = errors_of(path)
    assert 'expects a whole number or list of integer, got "x" (a string)' in error.message


# --- large graphs: checked in time that grows with their size ---


class CountedScans(list):
    """A list of connections that counts how often it is read through."""

    scans = 0

    def __iter__(self):
        CountedScans.scans += 1
        return super().__iter__()


def _chain_graph(folder, n):
    body = HEAD + "src :: PoissonSource(rate=8/h, jobs=5, seed=0);\nsrc -> " + " -> ".join(["AcceptAll"] * n)
    return write(folder, f"long{n}.sched", body + " -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n")


class CountedConnection(Connection):
    """A connection that counts how often its ends are read."""

    __slots__ = ()
    reads = 0

    def __getattribute__(self, name):
        if name in ("src", "dst"):
            CountedConnection.reads += 1
        return super().__getattribute__(name)


@pytest.mark.parametrize("n", [20, 400])
def test_the_path_check_reads_each_connection_a_few_times_whatever_their_number(tmp_path, n):
    # (Reading them all once per element made checking a graph of 10,000 elements take half a minute.)
    graph = compile_file(_chain_graph(tmp_path, n))
    connections = [CountedConnection(c.src, c.src_port, c.dst, c.dst_port, c.location) for c in graph.connections]
    CountedConnection.reads = 0
    assert jobs_given_twice(graph.elements, connections) == []
    assert CountedConnection.reads <= 12 * len(connections)
    # The check still finds two paths among many connections.
    twice = connections + [Connection("src", "jobs", f"AcceptAll@{n}", "jobs", None)]
    (error,) = jobs_given_twice(graph.elements, twice)
    assert "'src' gives its jobs to the pool" in error.message and f"src -> AcceptAll@{n} -> JobPool@{n + 1}" in error.message


@pytest.mark.parametrize("n", [20, 400])
def test_an_elements_sources_are_found_without_reading_every_connection_each_time(tmp_path, n):
    graph = compile_file(_chain_graph(tmp_path, n))
    graph.connections = CountedScans(graph.connections)
    CountedScans.scans = 0
    found = {name: graph.sources_of(name, port.name) for name, el in graph.elements.items() for port in el.inputs}
    assert CountedScans.scans <= 2
    assert found[f"JobPool@{n + 1}"] == [(f"AcceptAll@{n}", "admitted")] and found["AcceptAll@1"] == [("src", "jobs")]
    # Connections replaced or added: found anew.
    graph.connections = list(graph.connections)[1:]
    assert graph.sources_of("AcceptAll@1", "jobs") == []
