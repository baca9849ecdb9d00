"""The student's commands during a practice session, a line at a time from stdin."""

from __future__ import annotations

import os
import sys
import time

import click


class Commands:
    """The student's commands, a line at a time, from the file descriptor ``fd`` (stdin): read unbuffered, so
    that waiting for the next line with a timeout never misses lines already read into a buffer."""

    def __init__(self, fd: int | None = 0):
        self.fd = fd  # None: no file descriptor (an in-memory stdin): read lines as they come
        self.pending = b""
        self.closed = False

    def next(self, timeout: float) -> str | None:
        """The next line, stripped and lower-cased; None at the end of input; "timeout" when no line came
        within ``timeout`` seconds."""
        try:
            import select
        except ImportError:  # pragma: no cover - no select on stdin (Windows): wait for the line
            fd = None
        else:
            fd = self.fd
        if fd is None:
            line = sys.stdin.readline()
            return line.strip().lower() if line else None
        while b"\n" not in self.pending and not self.closed:
            if timeout <= 0:
                return "timeout"
            started = time.monotonic()
            try:
                ready, _, _ = select.select([fd], [], [], timeout)
            except (OSError, ValueError):  # a stdin select cannot wait on (Windows): wait for the line
                line = sys.stdin.readline()
                return line.strip().lower() if line else None
            timeout -= time.monotonic() - started
            if not ready:
                return "timeout"
            chunk = os.read(fd, 4096)
            self.pending += chunk
            self.closed = not chunk
        if not self.pending:
            return None
        line, _, self.pending = self.pending.partition(b"\n")
        text = line.decode("utf-8", errors="replace")
        if not os.isatty(fd):  # piped: show what was read, as a terminal would
            click.echo(text)
        return text.strip().lower()
