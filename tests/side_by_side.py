"""The suite side by side (pytest-xdist's ``-n``): how many test processes ``-n auto`` starts, and the machine lock
that a test marked ``serial`` holds alone (tests/conftest.py's hooks call these)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

WORKER_MEMORY = 4 << 30  # what a test worker may hold at once: its grader, and a sandbox worker at its 3 GiB cap


def auto_workers() -> int:
    """``-n auto``: one worker more than the cores this process may use, and no more than the memory holds.

    About a fifth of the suite's time is spent waiting (sleeps and time limits, servers starting): with one
    worker per core, 2 cores were 80 % busy; with a third, 92 %, and the suite ran in less time (the figures
    are in docs/contributing.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores + 1, memory // WORKER_MEMORY))


_locks: list[tuple[int, int]] = []


def machine_locks(config: object) -> tuple[int, int] | None:
    """The run's gate and lock files, shared by its xdist workers (None: not an xdist worker). A pytest that a
    test starts inherits the worker's environment, the run's id included, but takes no lock: its test holds one
    already, and it would wait at the gate behind a serial test that waits for that test."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or not hasattr(config, "workerinput"):
        return None
    if not _locks:
        folder = Path(tempfile.gettempdir())
        gate, machine = (
            os.open(folder / f"gptkit-tests-{run}.{name}", os.O_RDWR | os.O_CREAT, 0o600) for name in ("gate", "lock")
        )
        _locks.append((gate, machine))
    return _locks[0]


@contextmanager
def holding(locks: tuple[int, int], serial: bool) -> Iterator[None]:
    """The machine lock, for one test: alone (``serial``) or shared with every other test.

    The serial test goes first: it holds the gate while it waits, and a test about to start passes the gate before
    it shares the lock. Without the gate (flock favours no one) it waited until the other workers happened to be
    between tests at the same moment, which with three workers took minutes while it did nothing."""
    gate, machine = locks
    fcntl.flock(gate, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
    fcntl.flock(machine, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
    fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(machine, fcntl.LOCK_UN)
