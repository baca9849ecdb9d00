"""One fork server for a whole batch, copied for each grading process.

Starting a fork server costs a few CPU seconds (torch and its compiler load), once per
grading process. ``grade batch`` starts a single one with a listening socket; each of
its grading processes connects, and the server forks one copy of itself per
connection, which serves that process alone, exactly as a server of its own would.

The copies are forked only once every expected process has connected (or the wait ran
out), after the socket is closed and removed: no worker, so no submission, exists
while it can be reached. A process that came too late starts a server of its own.

Loaded by path into the fork server (imports nothing from ``grader``).
"""

from __future__ import annotations

import os
import select
import socket
import time
from typing import NoReturn

WAIT_SECONDS = 60.0  # for the grading processes to connect, all of them starting at once


def serve_each_client(
    control: socket.socket, listener: socket.socket, clients: int, path: str, hello: dict, wire
) -> socket.socket:
    """Returns, in each copy, the connection it serves. The original never returns: it waits for its
    owner to close ``control``, then for every copy to end (so their CPU time is counted), and exits."""
    connections = _accept(control, listener, clients)
    listener.close()
    try:
        os.unlink(path)
    except OSError:
        pass
    copies = []
    for connection in connections:
        pid = os.fork()
        if pid == 0:
            return _become_copy(control, connections, connection, hello, wire)
        copies.append(pid)
    _serve_until_closed(control, connections, copies, hello, wire)


def _accept(control: socket.socket, listener: socket.socket, clients: int) -> list[socket.socket]:
    """The connections of up to ``clients`` grading processes, accepted until all have come, WAIT_SECONDS have
    passed, or the owner closed ``control``."""
    connections: list[socket.socket] = []
    deadline = time.monotonic() + WAIT_SECONDS
    while len(connections) < clients:
        ready, _, _ = select.select([listener, control], [], [], max(0.0, deadline - time.monotonic()))
        if listener not in ready:
            break  # the wait ran out, or the owner closed: the batch is over
        connections.append(listener.accept()[0])
    return connections


def _become_copy(
    control: socket.socket, connections: list[socket.socket], connection: socket.socket, hello: dict, wire
) -> socket.socket:
    """In a forked copy: keep ``connection`` alone (the owner's control and the other processes' connections
    closed), greet it, and return it."""
    control.close()
    for other in connections:
        if other is not connection:
            other.close()
    wire.send(connection, hello)
    return connection


def _serve_until_closed(
    control: socket.socket, connections: list[socket.socket], copies: list[int], hello: dict, wire
) -> NoReturn:
    """In the original, once every copy is forked: close the connections (the copies have them), greet the owner,
    wait for it to close ``control``, then for every copy to end, and exit."""
    for connection in connections:
        connection.close()
    wire.send(control, hello)  # the owner may ask for the protections too
    while control.recv(4096):
        pass
    for pid in copies:
        os.waitpid(pid, 0)
    os._exit(0)
