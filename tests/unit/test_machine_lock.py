"""The suite side by side (tests/side_by_side.py): who takes the machine lock, how many processes ``-n auto`` starts."""

import fcntl
import os
from types import SimpleNamespace

import side_by_side


def test_a_pytest_that_a_test_starts_takes_no_lock(monkeypatch):
    """It inherits the xdist worker's environment, the run's id included. Were it to take the lock, it would wait
    at the gate behind a serial test that waits for the test that started it: the whole run would hang."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "a-run")
    assert side_by_side.machine_locks(SimpleNamespace()) is None


def test_auto_is_one_worker_more_than_the_cores_within_the_memory(monkeypatch):
    monkeypatch.setattr(side_by_side.os, "sched_getaffinity", lambda pid: {0, 1})
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (24 << 30) // 4096}
    monkeypatch.setattr(side_by_side.os, "sysconf", lambda name: pages[name])
    assert side_by_side.auto_workers() == 3
    pages["SC_PHYS_PAGES"] = (8 << 30) // 4096  # two workers' worth of memory
    assert side_by_side.auto_workers() == 2


def _open_pair(folder) -> tuple[int, int]:
    """A test process's gate and lock: files of their own per open, as each xdist worker opens them."""
    return tuple(os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o600) for name in ("gate", "lock"))  # type: ignore[return-value]


def _can(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def test_a_serial_test_holds_the_machine_alone_and_leaves_the_gate_open(tmp_path):
    mine, other = _open_pair(tmp_path), _open_pair(tmp_path)
    with side_by_side.holding(mine, serial=True):
        assert not _can(other[1], fcntl.LOCK_SH), "a test started beside a serial one"
        assert _can(other[0], fcntl.LOCK_EX), "the gate stays shut while the serial test runs: nobody queues"
    assert _can(other[1], fcntl.LOCK_EX), "the lock is kept after the serial test"


def test_tests_share_the_machine_and_a_serial_one_waits_for_them(tmp_path):
    mine, other = _open_pair(tmp_path), _open_pair(tmp_path)
    with side_by_side.holding(mine, serial=False):
        assert _can(other[1], fcntl.LOCK_SH), "two ordinary tests could not run side by side"
        assert not _can(other[1], fcntl.LOCK_EX), "a serial test started beside a running one"
    assert _can(other[1], fcntl.LOCK_EX)
