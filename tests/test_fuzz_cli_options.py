"""Bad values a user might type, fed to the options of every command that reads a number, a
duration, a format or a file: each is refused with exit 2, no traceback, and a message naming the
option (or, for a file, the path). The values are a seeded sample, the same on every run, of
empty and blank text, negatives, NaN, infinities, numbers past any float or past 64 bits, units
missing or wrong, other scripts' digits, control characters, and a folder, a device or a path in
a missing folder where a file is meant; every command is run in this process, refused before it
binds, connects or simulates."""

from __future__ import annotations

import random

import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO

GRAPHS = REPO / "graphs"
SEED = 20261207
PER_OPTION = 6  # (values drawn for each option: about 250 commands in all)

COMMON = ["", " ", "nan", "1e400", "3GB", "٣", "\x01", "a\tb\n", "/dev/null"]
BAD = {
    "duration": [*COMMON, "-1", "5 minutes", "5mins", "1e999h"],
    "whole": [*COMMON, "-1", "inf", "5mins", "1_000", "1.5", "10**30"],
    "rate": [*COMMON, "-1/h", "inf/h", "5/minutes", "8 per hour"],
    "format": [*COMMON, "-1", "0", "inf", "csv", "{dir}", "{missing}"],
    "trace": ["", " ", "{dir}", "{missing}", "/dev/null", "nan", "٣"],
    "cluster": ["", " ", "-1", "0", "nan", "3GB", "٣", "\x01", "{dir}", "{missing}", "/dev/null"],
    "fake_gpus": ["", " ", "-1", "0", "nan", "1e400", "3GB", "٣", "\x01", "4:", ":V100"],
    "address": ["", " ", "a b", "\x01", "a\tb\n", "host\n"],
}

PATH_OPTIONS = ("--trace", "--cluster")

# (command line before the option, the option, the kind of its value)
OPTIONS = [
    (["run", "{graph}", "--trace", "{trace}"], "--until", "duration"),
    (["run", "{graph}"], "--trace", "trace"),
    (["run", "{graph}", "--trace", "{trace}"], "--cluster", "cluster"),
    (["run", "{graph}", "--trace", "{trace}"], "--retries", "whole"),
    (["check", "{graph}"], "--cluster", "cluster"),
    (["sweep", "{graph}", "--trace", "{trace}", "--vary", "round=5min,10min"], "--seeds", "whole"),
    (["sweep", "{graph}", "--trace", "{trace}", "--vary", "round=5min,10min"], "--workers", "whole"),
    (["sweep", "{graph}", "--trace", "{trace}", "--vary", "round=5min,10min"], "--timeout", "duration"),
    (["sweep", "{graph}", "--trace", "{trace}", "--vary", "round=5min,10min"], "--until", "duration"),
    (["sweep", "{graph}", "--vary", "round=5min,10min"], "--trace", "trace"),
    (["trace", "describe", "{trace}"], "--format", "format"),
    (["trace", "convert", "{trace}", "{out}/c.csv"], "--from", "format"),
    (["trace", "convert", "{trace}", "{out}/c.csv"], "--to", "format"),
    (["trace", "generate", "-o", "{out}/g.csv", "--rate", "8/h", "--seed", "1"], "--jobs", "whole"),
    (["trace", "generate", "-o", "{out}/g.csv", "--jobs", "3", "--rate", "8/h"], "--seed", "whole"),
    (["trace", "generate", "-o", "{out}/g.csv", "--jobs", "3", "--seed", "1"], "--rate", "rate"),
    (["trace", "generate", "-o", "{out}/g.csv", "--jobs", "3", "--rate", "8/h", "--seed", "1"], "--start-id", "whole"),
    (["whatif", "{snapshot}"], "--horizon", "duration"),
    (["whatif", "{snapshot}"], "--cluster", "cluster"),  # (a snapshot holds its own: any is refused)
]
# The live commands: every value here is refused before a socket is bound or connected.
SERVE = ["serve", "{live}", "--bind", "tcp://127.0.0.1:1", "--insecure", "--checkpoints", "{out}/ck"]
AGENT = ["agent", "--scheduler", "tcp://127.0.0.1:1", "--insecure", "--fake-gpus", "1:V100"]
SUBMIT = ["submit", "tcp://127.0.0.1:1", "--insecure", "--timeout", "1s", "--model", "ResNet-18", "--iterations", "10"]
OPTIONS += [(SERVE, flag, "duration") for flag in ("--heartbeat", "--heartbeat-timeout", "--wait-for-agents", "--until")]
OPTIONS += [(SERVE, "--retries", "whole"), (AGENT, "--revoke-grace", "duration"), (AGENT, "--address", "address")]
OPTIONS += [(AGENT[:-2], "--fake-gpus", "fake_gpus"), (AGENT, "--threads-per-gpu", "whole")]
OPTIONS += [(AGENT[:-2] + ["--fake-gpus", "1:V100", "--emulate"], "--nodes", "whole")]
OPTIONS += [(SUBMIT, flag, "whole") for flag in ("--count", "--gpus", "--batch-size", "--job-id")]
OPTIONS += [(SUBMIT[:-2], "--iterations", "whole"), (SUBMIT, "--duration", "duration")]
# (without a --timeout before it: given twice, the option would be refused as such, its value unread)
OPTIONS += [(["submit", "tcp://127.0.0.1:1", "--insecure"], "--timeout", "duration")]
OPTIONS += [(["submit", "tcp://127.0.0.1:1", "--insecure", "{trace}"], "--format", "format")]


def _cases():
    draw = random.Random(SEED)
    for before, flag, kind in OPTIONS:
        for value in draw.sample(BAD[kind], min(PER_OPTION, len(BAD[kind]))):
            command = " ".join(before[:2]) if before[0] == "trace" else before[0]
            yield pytest.param(before, flag, value, id=f"{command} {flag} {value!r}")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The smallest real inputs: a trace of five jobs, and a snapshot of a run of it."""
    from roundhouse import Simulation

    folder = tmp_path_factory.mktemp("inputs")
    trace = folder / "t.csv"
    assert main(["trace", "generate", "-o", str(trace), "--jobs", "5", "--rate", "10/h", "--seed", "1"]) == 0
    simulation = Simulation(GRAPHS / "fifo.sched", trace=trace)
    simulation.run_until(3600)
    snapshot = simulation.save(folder / "run.rhsnap")
    (folder / "dir").mkdir()
    return {"graph": GRAPHS / "fifo.sched", "live": GRAPHS / "live-loopback.sched", "trace": trace, "snapshot": snapshot}


@pytest.fixture(autouse=True)
def _in_a_folder_of_its_own(tmp_path, monkeypatch):
    # (a value wrongly taken would have the command write there: a sweep's results, say)
    monkeypatch.chdir(tmp_path)


def _status(argv) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # (argparse's own refusal)
        return stop.code


@pytest.mark.parametrize(("before", "flag", "value"), list(_cases()))
def test_a_bad_value_is_refused_naming_its_option(inputs, tmp_path, capsys, before, flag, value):
    given = {**inputs, "out": tmp_path, "dir": inputs["trace"].parent / "dir", "missing": tmp_path / "missing" / "x"}
    value = value.format(**given) if value.startswith("{") else value
    argv = [str(part).format(**given) for part in before] + [f"{flag}={value}"]
    assert _status(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    # (a file that is not one is named by its path, the form of every file's error)
    assert flag in err or (flag in PATH_OPTIONS and value.strip() and value in err), err


# --- the defects the sample found, each on its own ---


def test_a_device_given_as_the_trace_is_refused_as_such_not_blamed_on_an_override(inputs, capsys):
    argv = ["run", str(inputs["graph"]), "--trace", "/dev/null"]
    assert _status(argv) == 2
    err = capsys.readouterr().err
    assert "/dev/null: error: is not a regular file" in err and "--set" not in err, err


def test_an_empty_trace_path_names_the_option(inputs, capsys):
    assert _status(["run", str(inputs["graph"]), "--trace", ""]) == 2
    assert "error: --trace: the trace path is empty" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        SUBMIT + ["--count", "٣"],
        SERVE + ["--retries", "٣"],
        AGENT + ["--threads-per-gpu", "٣"],
        ["sweep", "{graph}", "--vary", "round=5min,10min", "--seeds", "٣"],
        ["trace", "generate", "-o", "{out}/g.csv", "--jobs", "٣", "--rate", "8/h", "--seed", "1"],
    ],
    ids=["submit --count", "serve --retries", "agent --threads-per-gpu", "sweep --seeds", "generate --jobs"],
)
def test_whole_numbers_are_read_in_the_digits_0_to_9_only(inputs, tmp_path, capsys, argv):
    # (int() reads '٣' as 3; a duration, a rate or a .sched file's number refuses it)
    argv = [str(part).format(**inputs, out=tmp_path) for part in argv]
    assert _status(argv) == 2
    err = capsys.readouterr().err
    assert "'٣'" in err and "whole number" in err, err


@pytest.mark.parametrize("value", ["\x01", "5\x1bs"])
def test_a_control_character_in_a_duration_is_shown_escaped(inputs, capsys, value):
    assert _status(["run", str(inputs["graph"]), "--trace", str(inputs["trace"]), "--until", value]) == 2
    err = capsys.readouterr().err
    assert f"--until: {value!r} is not a duration" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--address", "a b", '--address "a b": holds " "'),
        ("--address", "node\x01", '--address "node\\u0001": holds "\\u0001"'),
        ("--fake-gpus", "", "--fake-gpus: empty"),
    ],
)
def test_the_agent_refuses_an_address_or_fake_gpus_no_node_could_have(capsys, option, value, said):
    argv = AGENT[:-2] + ["--fake-gpus", "1:V100"] if option != "--fake-gpus" else AGENT[:-2]
    assert _status([*argv, option, value]) == 2
    assert said in capsys.readouterr().err


def test_an_empty_format_is_refused_not_taken_for_detection(inputs, capsys):
    assert _status(SUBMIT + ["--format", ""]) == 2
    assert "--format '' names a trace file's format" in capsys.readouterr().err
    assert _status(["submit", "tcp://127.0.0.1:1", "--insecure", str(inputs["trace"]), "--format", ""]) == 2
    assert "--format: unknown trace format ''" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["trace", "describe", "{trace}", "--format", "csv"], "--format: unknown trace format 'csv'"),
        (["trace", "convert", "{trace}", "{out}/c.csv", "--from", "gavl"], "--from: unknown trace format 'gavl'"),
        (["trace", "convert", "{trace}", "{out}/c.csv", "--to", "pai"], "--to: convert writes"),
    ],
)
def test_an_unknown_trace_format_names_its_option(inputs, tmp_path, capsys, argv, said):
    assert _status([str(part).format(**inputs, out=tmp_path) for part in argv]) == 2
    assert said in capsys.readouterr().err


def test_an_empty_cluster_given_with_a_snapshot_is_refused_as_any_other(inputs, capsys):
    assert _status(["whatif", str(inputs["snapshot"]), "--cluster", ""]) == 2
    assert "--cluster: only for a live scheduler's journal" in capsys.readouterr().err
