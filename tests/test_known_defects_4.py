"""Known defects of an earlier sitting: explain's refusal of a job id saying fewer spellings than
it reads, `check --fork` not naming where an element's class is defined, a results folder whose
name holds a control character shown otherwise than it is, and the hint naming an element of
the user's own as the likelier cause of a library element's failure; then what probes of
`render` found: a graph of thousands of sources checked source against source, for minutes."""

from __future__ import annotations

import re
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest

from roundhouse.tools.cli import main
from tests.conftest import fails, small_run_folder
from tests.own_elements import policy_file

# --- explain: the refusal says every spelling it reads ---


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    return small_run_folder(tmp_path_factory.mktemp("known4"))


def test_the_spellings_explain_s_refusal_offers_each_name_the_job(run_folder, capsys):
    err = fails(capsys, "explain", run_folder, "one")
    said = re.search(r"job ids are whole numbers written in the digits 0-9, [^(]*\(([^)]*) all name job (\d+)\)", err)
    assert said, err
    spellings, job = said.group(1).replace(" and ", ", ").split(", "), said.group(2)
    assert {"1.0", "1e0"} <= set(spellings), spellings  # (a point and an exponent, as traces may write ids)
    for spelled in spellings:
        assert main(["explain", str(run_folder), spelled]) == 0
        assert capsys.readouterr().out.startswith(f"job {job}: "), spelled


# --- check --fork names where the element's class is defined ---

UNDECLARED = policy_file(
    "Forgetful", "Rank jobs as the pool holds them.", "return Ranking(active.rows, active.gpus)", declares=None
)


def test_check_fork_names_the_line_of_the_graph_and_of_the_class(tmp_path, capsys):
    (tmp_path / "forgetful.py").write_text(UNDECLARED)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "forgetful.py";\nround = 5min;\ncluster = "1x2:V100";\n'
        "PoissonSource(rate=4/h, jobs=3, seed=1) -> AcceptAll -> JobPool -> Forgetful -> FirstFree -> Launch -> JobMetrics;\n"
    )
    err = fails(capsys, "check", "--fork", graph)
    defined = UNDECLARED.splitlines().index("@element") + 1
    assert (
        f"{graph}:4:68: error: element 'Forgetful@4' (Forgetful; "
        f"class defined at {tmp_path / 'forgetful.py'}:{defined}) cannot be forked: it declares no state"
    ) in err, err


# --- a results folder whose name holds a control character ---


@pytest.mark.parametrize(("name", "shown"), [("a\nb", r"'a\nb'"), ("a\x1b[31mb", r"'a\x1b[31mb'"), ("a\tb", r"'a\tb'")])
def test_a_folder_name_holding_a_control_character_is_refused_as_it_is(tmp_path, capsys, name, shown):
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x2:V100";\n'
        "PoissonSource(rate=4/h, jobs=3, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    out = tmp_path / name
    err = fails(capsys, "run", tmp_path / "g.sched", "--out", out)
    assert err.startswith(f"error: --out {str(out)!r}: the folder name holds "), err
    assert str(out)[: -len(name)] + shown[1:-1] in err, err  # (the name as Python's repr writes it)
    assert "\x1b" not in err and err.count("\n") == 1, err  # (shown escaped, on one line)
    assert not out.exists()  # (refused before it was made)


def test_an_existing_file_of_such_a_name_is_refused_the_same_way(tmp_path, capsys):
    out = tmp_path / "a\nb"
    out.write_text("")
    err = fails(capsys, "run", "graphs/fifo.sched", "--out", out)
    assert err.startswith(f"error: --out {str(out)!r}: the folder name holds '\\n' (its character"), err


@pytest.mark.parametrize("name", ["x[/b]y", "x[bold]y"])
def test_the_folder_a_run_wrote_to_is_named_as_given(tmp_path, capsys, name):
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x2:V100";\n'
        "PoissonSource(rate=4/h, jobs=3, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    out = tmp_path / name
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(out)]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == f"results written to {out}/"
    assert (out / "run.json").exists()


# --- a library element failing on what an element of the user's own emitted ---

EVEN_SHARES = policy_file(
    "EvenShares",
    "Give every job an equal share of each GPU type.",
    """
    types = ctx.cluster.gpu_types
    rows = active.rows + 1000  # (a slip: no rows of the job table)
    return Shares(rows, types, np.full((len(rows), len(types)), 1.0 / len(types)))
    """,
    before="import numpy as np",
    outputs=(("shares", "Shares", "the allocation."),),
    see_also="MaxMinFairness",
)


def test_a_library_element_failing_on_shares_of_the_user_s_own_names_their_element(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(EVEN_SHARES)
    graph = tmp_path / "g.sched"
    graph.write_text(
        textwrap.dedent("""\
        require "mine.py";
        round = 6min;
        cluster = "2x4:V100";
        PoissonSource(rate=4/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> EvenShares -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;
        """)
    )
    err = fails(capsys, "run", graph, "--quiet")
    assert err.startswith("error: element 'GavelRounds@5' (GavelRounds; "), err
    defined = EVEN_SHARES.splitlines().index("@element") + 1
    assert (
        f"(its input came from 'EvenShares@4' (EvenShares; declared at {graph}:4:68, class defined at "
        f"{tmp_path / 'mine.py'}:{defined}), defined outside the library: check what it emits)"
    ) in err, err


# --- a graph of thousands of sources is checked at once ---


def _source(name: str, ids) -> SimpleNamespace:
    return SimpleNamespace(name=name, declared_at=None, coming_job_ids=lambda: np.asarray(ids, dtype=np.int64))


def _refusal(sources) -> str | None:
    from roundhouse.errors import SchedError
    from roundhouse.runtime.graph_sources import refuse_shared_ids

    try:
        refuse_shared_ids(sources)
    except SchedError as err:
        return f"{err.message} | {err.hint}"
    return None


def _pairwise(sources) -> str | None:
    """The refusal as comparing each source with each earlier one finds it."""
    known = [(s, s.coming_job_ids()) for s in sources if len(s.coming_job_ids())]
    for k, (el, ids) in enumerate(known):
        for other, earlier in known[:k]:
            shared = np.intersect1d(ids, earlier)
            if len(shared):
                return (
                    f"element '{el.name}' (SimpleNamespace): job id {int(shared[0])} is also one of element "
                    f"'{other.name}'s jobs (job ids must be unique in a run) | give the traces' jobs different ids; "
                    "a generated source (PoissonSource, BurstSource, CostWorkload) numbers its jobs from its start_id"
                )
    return None


@pytest.mark.parametrize("seed", range(40))
def test_the_sources_sharing_an_id_are_those_a_pairwise_search_finds(seed):
    rng = np.random.default_rng(seed)
    sources = [_source(f"s{i}", rng.integers(0, 400, size=int(rng.integers(0, 6)))) for i in range(int(rng.integers(1, 40)))]
    assert _refusal(sources) == _pairwise(sources)


def test_thousands_of_sources_are_checked_for_shared_ids_at_once():
    sources = [_source(f"s{i}", [i]) for i in range(5000)] + [_source("late", [4998, 17])]
    started = time.process_time()
    said = _refusal(sources)
    assert said is not None and said.startswith("element 'late' (SimpleNamespace): job id 17 is also one of element 's17's jobs")
    assert time.process_time() - started < 5  # (source against source: 12.5 million comparisons, minutes)


# --- trace describe shows a trace's own text as it is ---


def test_trace_describe_shows_models_and_names_that_look_like_markup_as_written(tmp_path, capsys):
    folder = tmp_path / "runs["
    folder.mkdir()
    trace = folder / "x]b.csv"  # (the name `runs[/x]b.csv` reads as a closing tag)
    trace.write_text("job_id,arrival_s,gpus,duration_s,model\n0,0,1,10,[/b]\n1,1,1,10,[bold]x\n")
    assert main(["trace", "describe", str(trace)]) == 0
    out = capsys.readouterr().out
    assert str(trace) in "".join(out.split("│")[0].split()), out  # (the title, which rich may wrap)
    models = next(line for line in out.splitlines() if "models" in line)
    assert "[/b] 1, [bold]x 1" in models, out


# --- render's output file ---


def test_render_to_a_folder_says_it_is_one(tmp_path, capsys):
    (tmp_path / "drawings").mkdir()
    err = fails(capsys, "render", "graphs/fifo.sched", "-o", tmp_path / "drawings")
    assert err == f"error: cannot write {tmp_path / 'drawings'}: Is a directory\n", err


def test_render_refuses_an_output_name_holding_a_line_break(tmp_path, capsys):
    out = tmp_path / "g\n.dot"
    err = fails(capsys, "render", "graphs/fifo.sched", "-o", out)
    assert err.startswith(f"error: -o {str(out)!r}: the file name holds '\\n' (its character"), err
    assert not out.exists()
