"""Bad addresses, durations and paths given to the live commands: a clear message and exit
status 2, promptly (never a traceback, never a hang in ZeroMQ)."""

from __future__ import annotations

import time

import pytest

from roundhouse.tools.loopback import free_port
from tests.conftest import refused


@pytest.fixture
def afile(tmp_path):
    path = tmp_path / "afile"
    path.write_text("not a folder")
    return path


def test_serve_with_an_address_it_cannot_bind_says_so_and_exits(live_graph, tmp_path, capsys):
    started = time.monotonic()
    refused(
        capsys,
        ["serve", live_graph, "--bind", "tcp://127.0.0.1:notaport", "--insecure", "--checkpoints", tmp_path / "ck"],
        "cannot listen on tcp://127.0.0.1:notaport",
    )
    assert time.monotonic() - started < 10  # it used to hang in Context.term()
    # ZeroMQ takes a port past 65535 modulo 65536: it would listen elsewhere than it says.
    refused(
        capsys,
        ["serve", live_graph, "--bind", "tcp://127.0.0.1:112646", "--insecure", "--checkpoints", tmp_path / "ck"],
        "tcp://127.0.0.1:112646: port 112646 is not a TCP port (1 to 65535)",
    )


def test_serve_that_cannot_start_leaves_no_journal_or_folder_behind(live_graph, tmp_path, capsys):
    """A journal made for a run that never began would be taken for one to resume."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ck = tmp_path / "ck"
        refused(
            capsys,
            ["serve", live_graph, "--bind", f"tcp://127.0.0.1:{port}", "--insecure", "--checkpoints", ck],
            "Address already in use",
        )
        assert not ck.exists()
        refused(
            capsys,
            [
                "serve",
                live_graph,
                "--bind",
                f"tcp://127.0.0.1:{port}",
                "--insecure",
                "--checkpoints",
                ck,
                "--out",
                tmp_path / "o",
            ],
            "Address already in use",
        )
        assert not ck.exists() and not (tmp_path / "o").exists()
        # A folder that was there stays, and so does a journal that was there.
        ck.mkdir()
        old = tmp_path / "old.sqlite"
        old.write_bytes(b"")
        for journal in ([], ["--journal", old]):
            refused(
                capsys,
                ["serve", live_graph, "--bind", f"tcp://127.0.0.1:{port}", "--insecure", "--checkpoints", ck, *journal],
                "Address already in use",
            )
        assert ck.is_dir() and not any(ck.iterdir()) and old.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "tcp://127.0.0.1:notaport", "--insecure", "--status"],
        ["agent", "--scheduler", "tcp://127.0.0.1:notaport", "--insecure", "--name", "a", "--fake-gpus", "1:V100"],
    ],
)
def test_clients_with_a_bad_address_say_so(capsys, args):
    refused(capsys, args, "cannot connect to tcp://127.0.0.1:notaport")
    refused(capsys, [a.replace("notaport", "99999") for a in args], "port 99999 is not a TCP port")


def test_emulate_needs_fake_gpus(capsys):
    refused(
        capsys,
        ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--emulate"],
        "--emulate needs --fake-gpus",
    )


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--nodes", "0", "--fake-gpus", "8:V100", "--emulate"], "--nodes 0: give 1 or more"),
        (["--nodes", "4", "--fake-gpus", "8:V100"], "--nodes needs --fake-gpus and --emulate"),
    ],
)
def test_many_nodes_need_emulated_gpus(capsys, extra, message):
    refused(capsys, ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", *extra], message)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--status", "--timeout", "1e999s"], "1e999s"),  # refused as it is read, or by its bounds
        (["--status", "--timeout", "1e300s"], "--timeout 1e300s: must be more than 0 and at most 1d"),
        # (a negative one was told "0 or more", which 0 is not; a long one the bound as 3.1536e+08s)
        (["--status", "--timeout", "-1"], "--timeout -1: must be more than 0"),
        (["--command", "sleep 1", "--duration", "-3s"], "--duration -3s: must be more than 0"),
        (["--command", "sleep 1", "--duration", "11000d"], "--duration 11000d: must be more than 0 and at most 3650d"),
        (["--status", "--timeout", "0s"], "--timeout 0s: must be more than 0"),
        (["--command", "sleep 1", "--duration", "1e999s"], "1e999s"),
        (["--command", "sleep 1", "--duration", "0s"], "--duration 0s: must be more than 0"),
        (["--model", "LM", "--iterations", "5", "--count", "1000000000"], "--count 1000000000: must be 1 to"),
    ],
)
def test_submit_refuses_absurd_values_before_sending(capsys, extra, message):
    flag = next(a for a in extra if a in ("--timeout", "--duration", "--count"))
    refused(capsys, ["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", *extra], message)
    refused(capsys, ["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", *extra], flag)


def test_output_paths_that_are_files_or_missing_folders(live_graph, tmp_path, afile, capsys):
    port = f"tcp://127.0.0.1:{free_port()}"
    refused(capsys, ["keys", afile, "node1"], f"key folder {afile}: exists and is not a folder")
    refused(capsys, ["keys", tmp_path / "k", "../x"], "key name '../x'")
    assert not (tmp_path / "k").exists()  # names are checked before anything is made
    refused(capsys, ["serve", live_graph, "--bind", port, "--insecure", "--checkpoints", afile], f"--checkpoints {afile}")
    missing = tmp_path / "nonexistent" / "j.sqlite"
    refused(
        capsys,
        ["serve", live_graph, "--bind", port, "--insecure", "--journal", missing, "--checkpoints", tmp_path / "ck"],
        f"--journal {missing}: no folder",
    )
    assert not missing.parent.exists() and not (tmp_path / "ck").exists()  # nor the folder checked after it
    refused(
        capsys,
        ["serve", live_graph, "--bind", port, "--insecure", "--out", afile, "--checkpoints", tmp_path / "ck"],
        f"--out {afile}",
    )
    assert not (tmp_path / "ck").exists()
    agent = ["agent", "--scheduler", port, "--insecure", "--fake-gpus", "1:V100"]
    refused(capsys, [*agent, "--name", "a", "--workdir", afile], f"--workdir {afile}: exists and is not a folder")
    refused(capsys, [*agent, "--name", "../x"], "--name '../x'")
    refused(capsys, ["submit", port, "--insecure", "--status", "--name", "a/b"], "--name 'a/b'")


def test_profile_checks_its_output_before_measuring(tmp_path, capsys):
    started = time.monotonic()
    refused(capsys, ["profile", "--out", tmp_path / "nonexistent" / "p.csv"], "no folder")
    refused(capsys, ["profile", "--out", tmp_path], "is a folder")
    assert time.monotonic() - started < 10  # nothing was measured


def test_a_journal_that_never_began_is_kept_if_it_accepted_a_job(tmp_path):
    """Stopped while waiting for agents, serve removes the journal it made only if nothing was
    written to it: a job accepted meanwhile is delivered at the next start."""
    from roundhouse.runtime.journal import Journal
    from roundhouse.runtime.serve import _close

    empty, accepted = Journal(tmp_path / "empty.sqlite"), Journal(tmp_path / "accepted.sqlite")
    accepted.add_submission(0, {"gpus": 1}, 0.0)
    accepted.commit()
    _close(empty, created=True)
    _close(accepted, created=True)
    assert not (tmp_path / "empty.sqlite").exists() and (tmp_path / "accepted.sqlite").exists()
    assert [job for job, _, _ in Journal(tmp_path / "accepted.sqlite").pending_submissions()] == [0]
