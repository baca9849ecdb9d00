"""The suite's machine lock (tests/conftest.py): who takes it side by side."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace


def _load_suite_conftest():
    """tests/conftest.py as a module of its own: side by side, the name ``conftest`` may be another folder's."""
    spec = importlib.util.spec_from_file_location("suite_conftest", Path(__file__).parents[1] / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conftest = _load_suite_conftest()


def test_a_pytest_that_a_test_starts_takes_no_lock(monkeypatch):
    """It inherits the xdist worker's environment, the run's id included. Were it to take the lock, it would wait
    at the gate behind a serial test that waits for the test that started it: the whole run would hang."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "a-run")
    assert conftest._machine_locks(SimpleNamespace()) is None


def test_auto_is_one_worker_more_than_the_cores_within_the_memory(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(conftest.os, "sched_getaffinity", lambda pid: {0, 1})
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (24 << 30) // 4096}
    monkeypatch.setattr(conftest.os, "sysconf", lambda name: pages[name])
    assert conftest.pytest_xdist_auto_num_workers(None) == 3
    pages["SC_PHYS_PAGES"] = (8 << 30) // 4096  # two workers' worth of memory
    assert conftest.pytest_xdist_auto_num_workers(None) == 2
