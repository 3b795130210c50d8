"""Key folders as an operator handles them: a node's key made again is admitted without a
restart, bad key files are refused naming the file and what to do, a secret key others can read
is said, and `roundhouse keys` over an existing folder says which kept keys are not admitted."""

from __future__ import annotations

import logging
import os
import shutil

import pytest
import zmq.auth

from roundhouse.errors import UsageError
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import ClientSecurity, ServerSecurity, _KnownKeys


def _other_secret(secret_file):
    """The text of `secret_file` with another secret key in it (valid Z85, a wrong key)."""
    text = secret_file.read_text()
    _, secret = zmq.auth.load_certificate(str(secret_file))
    return text.replace(secret.decode(), zmq.curve_keypair()[1].decode())


def _public(path):
    return zmq.auth.load_certificate(str(path))[0]


def test_a_node_s_key_made_again_is_admitted_and_its_old_one_refused_without_a_restart(tmp_path):
    make_keys(tmp_path, ["n1"])
    known = _KnownKeys(tmp_path / "authorized", logging.getLogger("test"))
    old = _public(tmp_path / "n1.key")
    assert known.callback("*", old)
    os.remove(tmp_path / "n1.key")  # as `roundhouse keys` says: remove a pair to make it again
    os.remove(tmp_path / "n1.key_secret")
    make_keys(tmp_path, ["n1"])
    new = _public(tmp_path / "n1.key")
    assert known.callback("*", new)
    assert not known.callback("*", old)


def test_a_key_file_written_over_in_place_is_read_again(tmp_path):
    make_keys(tmp_path, ["n1"])
    zmq.auth.create_certificates(str(tmp_path), "other")
    known = _KnownKeys(tmp_path / "authorized", logging.getLogger("test"))
    text = (tmp_path / "other.key").read_text()
    with open(tmp_path / "authorized" / "n1.key", "w") as out:  # (read while cut short, then finished)
        out.write(text[:100])
        out.flush()
        assert not known.callback("*", _public(tmp_path / "other.key"))
        out.write(text[100:])
    assert known.callback("*", _public(tmp_path / "other.key"))
    assert not known.callback("*", _public(tmp_path / "n1.key"))


def test_a_secret_key_others_can_read_is_said_naming_the_file(tmp_path, caplog):
    make_keys(tmp_path, ["n1"])
    with caplog.at_level(logging.WARNING):
        ClientSecurity.choose(str(tmp_path), "n1", False, "tcp://127.0.0.1:5555")
        ServerSecurity.choose(str(tmp_path), False, "tcp://127.0.0.1:5555")
    assert "secret key can be read" not in caplog.text  # as `roundhouse keys` writes them
    os.chmod(tmp_path / "n1.key_secret", 0o644)
    os.chmod(tmp_path / "scheduler.key_secret", 0o640)
    with caplog.at_level(logging.WARNING):
        ClientSecurity.choose(str(tmp_path), "n1", False, "tcp://127.0.0.1:5555")
        ServerSecurity.choose(str(tmp_path), False, "tcp://127.0.0.1:5555")
    assert f"chmod 600 {tmp_path / 'n1.key_secret'}" in caplog.text
    assert f"chmod 600 {tmp_path / 'scheduler.key_secret'}" in caplog.text


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (lambda f: (f.unlink(), f.mkdir()), "is a folder, not a key file"),
        (lambda f: f.write_text(""), "the file is empty"),
        (lambda f: shutil.copy(f.with_suffix(".key"), f), "holds a public key only"),
        (lambda f: f.write_text(_other_secret(f)), "its public key is not its secret key's"),
    ],
)
def test_a_bad_secret_key_file_is_named_with_what_to_do(tmp_path, spoil, said):
    make_keys(tmp_path, ["n1"])
    spoil(tmp_path / "n1.key_secret")
    with pytest.raises(UsageError, match=said) as err:
        ClientSecurity.choose(str(tmp_path), "n1", False, "tcp://127.0.0.1:5555")
    assert str(tmp_path / "n1.key_secret") in str(err.value)


def test_a_keys_folder_that_is_not_one_is_said(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is not a folder"):
        ServerSecurity.choose(str(tmp_path / "file"), False, "tcp://127.0.0.1:5555")
    with pytest.raises(UsageError, match="no such folder"):
        ClientSecurity.choose(str(tmp_path / "none"), "n1", False, "tcp://127.0.0.1:5555")


def test_the_scheduler_s_own_key_is_no_client_s(tmp_path):
    make_keys(tmp_path, ["n1"])
    with pytest.raises(UsageError, match="'scheduler' is the scheduler's own key"):
        ClientSecurity.choose(str(tmp_path), "scheduler", False, "tcp://127.0.0.1:5555")


def test_keys_again_says_which_kept_keys_are_not_admitted(tmp_path, capsys):
    assert main(["keys", str(tmp_path), "n1", "n2", "n3", "--submitters", "alice"]) == 0
    capsys.readouterr()
    (tmp_path / "authorized" / "n1.key").unlink()  # turned away
    shutil.copy(tmp_path / "n3.key", tmp_path / "authorized" / "n2.key")  # another key under n2's name
    os.chmod(tmp_path / "alice.key_secret", 0o644)
    assert main(["keys", str(tmp_path), "n1", "n2", "n3", "--submitters", "alice"]) == 0
    out = capsys.readouterr().out
    assert "'n1' is not admitted: no authorized/n1.key" in out
    assert f"{tmp_path / 'authorized' / 'n2.key'} is not the public key of n2.key_secret" in out
    assert f"chmod 600 {tmp_path / 'alice.key_secret'}" in out
    assert "'n3'" not in out
    assert not (tmp_path / "authorized" / "n1.key").exists()  # a key turned away stays so


def test_keys_again_refuses_a_kept_pair_whose_secret_is_another_key_s(tmp_path, capsys):
    make_keys(tmp_path, ["n1"])
    secret = tmp_path / "n1.key_secret"
    secret.write_text(_other_secret(secret))
    assert main(["keys", str(tmp_path), "n1"]) == 2
    assert "n1.key is not the public key of n1.key_secret" in capsys.readouterr().err


def test_a_scheduler_that_admits_no_key_says_so(tmp_path, caplog):
    make_keys(tmp_path, [])
    with caplog.at_level(logging.WARNING):
        _KnownKeys(tmp_path / "authorized", logging.getLogger("test"))
    assert f"{tmp_path / 'authorized'} holds no public key: every agent and submitter is refused" in caplog.text
    make_keys(tmp_path, ["n1"])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _KnownKeys(tmp_path / "authorized", logging.getLogger("test"))
    assert "holds no public key" not in caplog.text


def test_a_blank_key_folder_is_refused_not_taken_as_none_or_as_here(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "", "n1"]) == 2
    assert "key folder: the name is empty" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match="--keys: the name is empty"):
        ClientSecurity.choose("", "n1", True, "tcp://127.0.0.1:5555")
    with pytest.raises(UsageError, match="--keys: the name is empty"):
        ServerSecurity.choose(" ", True, "tcp://127.0.0.1:5555")


def test_submitters_given_twice_add_up(tmp_path, capsys):
    main(["keys", str(tmp_path), "n1", "--submitters", "a", "b", "--submitters", "c"])
    made = {p.name for p in tmp_path.iterdir()}
    assert {"a.key", "b.key", "c.key", "n1.key"} <= made, made
