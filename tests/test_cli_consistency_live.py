"""Options the live commands would ignore, or the scheduler alone would check, are refused on
the command line with the option's name: `run`'s live options without --live, --no-explain
without --out, `submit`'s job numbers, `agent --nodes` with options about job processes; a
--set number with a bad unit hints at the units, not at quotes; `whatif` with the wrong cluster
says that cluster is not the run's; and `run --live --quiet` prints nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.loopback import free_port
from tests.conftest import fails

GRAPHS = Path(__file__).resolve().parent.parent / "graphs"
GRAPH = str(GRAPHS / "fifo.sched")
LIVE_GRAPH = str(GRAPHS / "live-loopback.sched")


def test_run_refuses_live_options_without_live(capsys):
    err = fails(
        capsys, "run", GRAPH, "--until", "1h", "--heartbeat", "bogus", "--ports", "5..1", "--retries", "-4", "--keys", "/nonexist"
    )
    assert "--keys, --heartbeat, --retries, --ports are only for a live run: give --live ADDR" in err
    err = fails(capsys, "run", GRAPH, "--until", "1h", "--stop-agents")
    assert "--stop-agents is only for a live run" in err
    # Given at all, even at its default value, a live option is refused: the run would ignore it.
    err = fails(capsys, "run", GRAPH, "--until", "1h", "--quiet", "--heartbeat", "2s", "--log-level", "info")
    assert "--heartbeat, --log-level are only for a live run" in err


def test_run_no_explain_needs_out(capsys, tmp_path):
    assert "--no-explain needs --out" in fails(capsys, "run", GRAPH, "--until", "1h", "--no-explain")
    assert main(["run", GRAPH, "--until", "1h", "--quiet", "--no-explain", "--out", str(tmp_path / "r")]) == 0
    assert not (tmp_path / "r" / "explain.parquet").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--batch-size", "-3"], "--batch-size -3: must be a whole number from 1 to 2,147,483,648"),
        (["--batch-size", "0"], "--batch-size 0: must be a whole number from 1"),
        (["--job-id", "-1"], "--job-id -1: must be a whole number from 0 to 4,611,686,018,427,387,904"),
        (["--iterations", "0"], "--iterations 0: must be a whole number from 1"),
        (
            ["--iterations", "99999999999999999999999"],
            "--iterations 99999999999999999999999: must be a whole number from 1 to 9,007,199,254,740,992",
        ),
        (["--gpus", "5000"], "--gpus 5000: must be a whole number from 1 to 4,096"),
    ],
)
def test_submit_checks_job_numbers_before_sending(capsys, extra, message):
    # (nothing listens on the port: a value sent would end in "no answer", not this message)
    argv = ["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--timeout", "1s", "--model", "ResNet-18"]
    given = dict(zip(extra[::2], extra[1::2]))
    argv += [] if "--iterations" in given else ["--iterations", "10"]
    err = fails(capsys, *argv, *extra)
    assert message in err
    assert "no answer" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--revoke-grace", "5m"], "--revoke-grace: unknown time unit 'm'"),
        (["--threads-per-gpu", "-3"], "--threads-per-gpu must be 0 to 256"),
        (["--workdir", ""], "--workdir: the folder name is empty"),
        (["--revoke-grace", "5s"], "--nodes 2 with --revoke-grace: emulated nodes run no job processes"),
        (["--workdir", "w", "--keep-workdir"], "--nodes 2 with --workdir, --keep-workdir: emulated nodes run no job processes"),
        (["--threads-per-gpu", "2"], "--nodes 2 with --threads-per-gpu: emulated nodes"),
    ],
)
def test_emulated_nodes_refuse_options_about_job_processes(capsys, extra, message):
    argv = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--fake-gpus", "4:V100", "--emulate"]
    assert message in fails(capsys, *argv, "--nodes", "2", *extra)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("round=5m", "unknown unit 'm' in '5m'"),
        ("arrivals.rate=8/H", "unknown time unit 'H' in rate '8/H'"),
        ("round=-3q", "unknown unit 'q'"),
    ],
)
def test_a_set_number_with_a_bad_unit_hints_at_the_units(capsys, value, message):
    err = fails(capsys, "run", GRAPH, "--until", "1h", "--set", value)
    assert message in err
    assert "time units are ms, s, min, h, d" in err
    assert "quotes" not in err


def test_a_set_number_too_large_gets_no_quoting_hint(capsys):
    err = fails(capsys, "run", GRAPH, "--until", "1h", "--set", "seed=99999999999999999999999")
    assert "is too large" in err and "quotes" not in err


def test_set_text_that_is_no_number_still_hints_at_quotes(capsys):
    assert "written in quotes: '\"1data/f.csv\"'" in fails(capsys, "run", GRAPH, "--set", "source.path=1data/f.csv")


def test_whatif_with_another_cluster_says_it_is_not_the_runs(capsys, tmp_path):
    from tests.test_journal_reading import make_journal

    journal = make_journal(tmp_path, jobs=2, cluster="1x2:V100")
    err = fails(capsys, "whatif", journal, "--cluster", "8x4:V100")
    assert "the cluster 32 GPUs on 8 nodes (8x4:V100) is not the run's, which was 2 GPUs on 1 node (1x2:V100)" in err
    assert "give it with --cluster" not in err


@pytest.mark.live
def test_run_live_quiet_prints_nothing(capsys, tmp_path):
    argv = ["run", LIVE_GRAPH, "--live", f"tcp://127.0.0.1:{free_port()}", "--insecure"]
    argv += ["--checkpoints", str(tmp_path / "ck"), "--wait-for-agents", "0.5s", "--until", "2s", "--quiet"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == ""
