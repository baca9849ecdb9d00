"""The suite side by side (tests/side_by_side.py): who takes the machine lock, how many processes ``-n auto`` starts."""

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
