"""A batch's or a side-by-side grading's socket under a long TMPDIR (a test's, a CI's): bound and reached anyway."""

from __future__ import annotations

import socket

import pytest

from grader.sandbox.client import MAX_UNIX_NAME, unix_name


@pytest.fixture
def long_folder(tmp_path):
    folder = tmp_path / ("f" * 60) / ("g" * 60)
    folder.mkdir(parents=True)
    return folder


def test_a_long_path_is_too_long_for_a_socket_name(long_folder):
    """The case is real: bound by its path, the socket fails (`grade check -j 2` did, with a traceback)."""
    path = str(long_folder / "server.sock")
    assert len(path) > MAX_UNIX_NAME
    with socket.socket(socket.AF_UNIX) as s, pytest.raises(OSError, match="too long"):
        s.bind(path)


def test_a_socket_under_a_long_path_is_bound_and_reached(long_folder):
    path = str(long_folder / "server.sock")
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        with unix_name(path) as name:
            server.bind(name)
        server.listen(1)
        assert (long_folder / "server.sock").is_socket(), "bound where asked, not elsewhere"
        with unix_name(path) as name:
            client.connect(name)
        accepted, _ = server.accept()
        with accepted:
            client.sendall(b"hello")
            assert accepted.recv(5) == b"hello"


def test_a_short_path_is_used_as_it_is(tmp_path):
    with unix_name("/tmp/s.sock") as name:
        assert name == "/tmp/s.sock"
