"""Ctrl-C during a practice session."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def interrupts() -> Iterator[list[bool]]:
    """Ctrl-C raises KeyboardInterrupt and is remembered (``[True]``): pytest turns one during grading into an
    exit code, which must end the session, not count as the grader's failure."""
    seen = [False]

    def handler(signum: int, frame: Any) -> None:
        seen[0] = True
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield seen
        return
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
