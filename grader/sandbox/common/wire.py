"""Message framing between the grading process and the worker (no torch needed).

A message is a 4-byte length, a JSON header, then raw byte blobs (tensor data).
Nothing is ever pickled. This module imports only the standard library, so the
grading process can start the worker before it loads torch itself, and the
worker loads it by path without importing the ``grader`` package.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Sequence

MAX_HEADER_BYTES = 4 << 20
MAX_MESSAGE_BYTES = 512 << 20
# Blobs in one message: a reply's tensors, one blob each (a state_dict's tens, lmbudget's logits one). A header of
# 4 MB listing two million one-byte blobs cost the grading process 3 CPU seconds and 120 MB to read, once per
# check; past this many, the message is refused before one is read.
MAX_BLOBS = 100_000


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class TooLarge(ProtocolError):
    """A message past the size limits, left unread: the connection is of no further use. ``size``: the bytes it
    would have held, where it was refused for the caller's ``limit`` (else 0, a limit of this module's own)."""

    def __init__(self, message: str, size: int = 0, limit: int = 0):
        super().__init__(message)
        self.size, self.limit = size, limit


def send(sock: socket.socket, header: dict, blobs: Sequence[bytes] = ()) -> None:
    data = json.dumps(dict(header, blobs=[len(b) for b in blobs])).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)
    for blob in blobs:
        sock.sendall(blob)


def _read_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:  # one deadline for the whole message, however slowly it drips in
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("message not complete in time")
            sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, deadline: float | None = None) -> tuple[dict, list[bytes]]:
    """Read one message; with a deadline (time.monotonic), raise socket.timeout once it passes."""
    header, blobs, _ = recv_measured(sock, deadline)
    return header, blobs


def recv_measured(
    sock: socket.socket, deadline: float | None = None, limit: int = MAX_MESSAGE_BYTES
) -> tuple[dict, list[bytes], int]:
    """``recv``, refusing a message of more than ``limit`` bytes (its header and its blobs together), and saying
    how many it held. Each part is measured before it is read (the header by its length prefix, the blobs by
    the header's list of their sizes), so a message past ``limit`` is refused (``TooLarge``, with its ``size``)
    before a byte of that part is allocated."""
    (n,) = struct.unpack("!I", _read_exact(sock, 4, deadline))
    if n > MAX_MESSAGE_BYTES:  # no reply's plain data is that large: bytes forged onto the socket, most likely
        raise TooLarge(
            f"malformed data (a header claiming {n / (1 << 20):.1f} MB); the grader reads at most "
            f"{MAX_HEADER_BYTES >> 20} MB"
        )
    if n > MAX_HEADER_BYTES:
        raise TooLarge(
            f"a reply of {n / (1 << 20):.1f} MB of plain data; the grader reads at most {MAX_HEADER_BYTES >> 20} MB"
        )
    if n > limit:
        raise TooLarge(f"a reply of {n} bytes of plain data; the grader reads at most {limit} bytes", n, limit)
    try:
        header = json.loads(_read_exact(sock, n, deadline))
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"unreadable message header: {e}") from None
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if isinstance(sizes, list) and len(sizes) > MAX_BLOBS:  # no reply holds this many tensors: refused unread
        raise TooLarge(f"{len(sizes):,} tensors in one reply; the grader reads at most {MAX_BLOBS:,}")
    if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
        raise ProtocolError("message header has no valid blob list")
    limit = min(limit, MAX_MESSAGE_BYTES)
    if n + sum(sizes) > limit:
        raise TooLarge(
            f"{sum(sizes) / (1 << 20):.1f} MB of tensor data; the grader reads at most {limit / (1 << 20):.1f} MB",
            n + sum(sizes),
            limit,
        )
    return header, [_read_exact(sock, s, deadline) for s in sizes], n + sum(sizes)
