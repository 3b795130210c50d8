"""Sweeps and runs given what they cannot use, refused before any run, naming the option or the
setting's place that gave it: a throughput profile that cannot be read (by --vary, --set, or the
graph's own setting), as a pair profile's problem is; --seeds that would run past the largest
seed, naming --seeds and where the first seed came from (never a `--set seed=...` the user did
not give), with nothing written; a value with a ';' inside."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO, fails

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"
LARGEST = 2**63 - 1


def tiny_graph(folder: Path, setting: str = "") -> Path:
    graph = folder / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "4x4:V100";\n{setting}'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=3);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph


def bad_profile(folder: Path) -> Path:
    path = folder / "bad.csv"
    path.write_text("a,b\n1,2\n")
    return path


def test_a_varied_profile_without_its_columns_names_the_vary(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = bad_profile(tmp_path)
    out = tmp_path / "out"
    err = fails(capsys, "sweep", tiny_graph(tmp_path), "--vary", f'profile="{bad.name}"', "--out", out)
    assert err.startswith(f"error: --vary profile: {bad}: missing column 'model'"), err
    assert not (out / "summary.csv").exists() and not list((out / "results").glob("*.parquet"))


def test_a_set_profile_without_its_columns_names_the_set(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = bad_profile(tmp_path)
    err = fails(capsys, "sweep", tiny_graph(tmp_path), "--set", f'profile="{bad.name}"', "--vary", "round=5min,10min")
    assert err.startswith(f"error: --set profile: {bad}: missing column 'model'"), err


def test_the_graphs_own_profile_without_its_columns_names_the_setting(tmp_path, capsys):
    bad = bad_profile(tmp_path)
    graph = tiny_graph(tmp_path, 'profile = "bad.csv";\n')
    err = fails(capsys, "sweep", graph, "--vary", "round=5min,10min")
    assert f"{graph}:3:" in err and f"setting 'profile': {bad}: missing column 'model'" in err, err


def test_seeds_past_the_largest_from_the_graphs_seed_name_seeds_and_the_graph(tmp_path, capsys):
    graph = tiny_graph(tmp_path, f"seed = {LARGEST - 1};\n")
    out = tmp_path / "out"
    err = fails(capsys, "sweep", graph, "--seeds", "3", "--out", out)
    assert "--set" not in err  # (no option the user did not give)
    assert f"--seeds 3: the seeds would run from {LARGEST - 1} (the graph's seed) to {LARGEST + 1}" in err
    assert f"the largest seed is {LARGEST}" in err
    assert not (out / "summary.csv").exists() and not list((out / "results").glob("*.parquet"))


def test_seeds_past_the_largest_from_a_set_seed_name_both(tmp_path, capsys):
    graph = tiny_graph(tmp_path)
    err = fails(capsys, "sweep", graph, "--set", f"seed={LARGEST}", "--seeds", "2")
    assert f"--set seed={LARGEST + 1}" not in err  # (no option of a value the user did not give)
    assert f"--seeds 2: the seeds would run from {LARGEST} (--set seed={LARGEST}) to {LARGEST + 1}" in err


def test_seeds_up_to_the_largest_run(tmp_path, capsys):
    from roundhouse.tools.cli import main

    graph = tiny_graph(tmp_path, f"seed = {LARGEST - 1};\n")
    assert main(["sweep", str(graph), "--seeds", "2"]) == 0
    err = capsys.readouterr().err
    assert f"seed={LARGEST}" in err and f"seed={LARGEST - 1}" in err


def test_a_run_given_a_profile_it_cannot_read_names_the_set_or_the_setting(tmp_path, capsys, monkeypatch):
    bad = bad_profile(tmp_path)
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, "run", tiny_graph(tmp_path), "--set", f'profile="{bad.name}"')
    assert "error: --set profile: " in err and "missing column 'model'" in err
    graph = tiny_graph(tmp_path, 'profile = "bad.csv";\n')
    err = fails(capsys, "run", graph)
    assert f"{graph}:3:" in err and "setting 'profile': " in err and "missing column 'model'" in err


def test_a_value_with_a_semicolon_inside_is_not_one_value(tmp_path, capsys):
    for option in ("--set", "--vary"):
        err = fails(capsys, "sweep" if option == "--vary" else "run", tiny_graph(tmp_path), option, "round=5min;10min")
        assert "'5min;10min' is not a single value" in err
        assert "elementclass" not in err
