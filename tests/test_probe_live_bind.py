"""`roundhouse serve --bind` given an address it cannot listen on: the message names the address
and what is wrong with it once, in a user's words (not ZeroMQ's advice to programmers, nor the
address repeated), and nothing is left behind."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import refused


def _serve(live_graph, tmp_path, bind: str) -> list:
    return ["serve", live_graph, "--bind", bind, "--insecure", "--checkpoints", tmp_path / "ck", "--until", "1s"]


def test_an_ipc_path_too_long_for_a_socket_is_refused_saying_how_long_it_may_be(live_graph, tmp_path, capsys):
    bind = f"ipc://{tmp_path}/{'x' * 200}.sock"
    err = refused(capsys, _serve(live_graph, tmp_path, bind), f"cannot listen on {bind} (--bind): the path is ")
    assert "at most 107 bytes" in err, err
    assert "IPC_PATH_MAX_LEN" not in err and "sockaddr_un" not in err and "(addr=" not in err, err
    assert not (tmp_path / "ck").exists()


def test_an_ipc_path_in_a_missing_folder_names_the_folder(live_graph, tmp_path, capsys):
    bind = f"ipc://{tmp_path}/nowhere/s.sock"
    err = refused(capsys, _serve(live_graph, tmp_path, bind), f"cannot listen on {bind} (--bind): no folder {tmp_path}/nowhere")
    assert "(addr=" not in err, err
    assert not (tmp_path / "ck").exists()


def test_an_address_in_use_is_said_once(live_graph, tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        bind = f"tcp://127.0.0.1:{taken.getsockname()[1]}"
        err = refused(capsys, _serve(live_graph, tmp_path, bind), f"cannot listen on {bind}: Address already in use")
    assert err.count(bind) == 1, err


@pytest.mark.parametrize("good", ["ipc://relative.sock", "ipc://@abstract-name", "ipc://*"])
def test_ipc_paths_zeromq_takes_are_still_taken(good):
    from roundhouse.tools.live_run import check_bind

    check_bind(good)
