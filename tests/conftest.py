import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from helpers import SOLUTIONS, Variant, close_shared_grader, grade, shared_grader


@pytest.fixture
def graded(tmp_path):
    """Grade a Variant (built from the reference in a temp folder) through the CLI."""

    def run(variant: Variant, *args: str):
        return grade(variant.build(tmp_path / "submission"), *args)

    return run


@pytest.fixture
def one_torch_thread():
    """Tiny models run far faster on one thread than on two spinning against each other on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(items):
    """Files with slow tests first, each file's tests in their own order: side by side (``--dist loadfile``
    hands out whole files in this order), the long files start at once and the quick ones fill the end, instead
    of a long file starting last while the other processes have nothing left to do."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: the order within each group is kept


WORKER_MEMORY = 4 << 30  # what a test worker may hold at once: its grader, and a sandbox worker at its 3 GiB cap


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the cores this process may use, and no more than the memory holds.

    About a fifth of the suite's time is spent waiting (sleeps and time limits, servers starting): with one
    worker per core, 2 cores were 80 % busy; with a third, 92 %, and the suite ran in less time (the figures
    are in docs/contributing.md). PYTEST_XDIST_AUTO_NUM_WORKERS still sets the number outright."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores + 1, memory // WORKER_MEMORY))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Side by side (pytest-xdist's ``-n``), a test marked ``serial`` runs with the machine to itself: it holds a
    lock every other test shares, so it waits for the tests running beside it and none starts meanwhile. Such a
    test bounds a time that a second busy core would stretch.

    The serial test goes first: it holds a gate while it waits, and a test about to start passes the gate before
    it shares the lock. Without the gate (flock favours no one) it waited until the other workers happened to be
    between tests at the same moment, which with three workers took minutes while it did nothing."""
    locks = _machine_locks(item.config)
    if locks is None:
        yield
        return
    gate, machine = locks
    if item.get_closest_marker("serial"):
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX)
        fcntl.flock(gate, fcntl.LOCK_UN)
    else:
        fcntl.flock(gate, fcntl.LOCK_SH)
        fcntl.flock(machine, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(machine, fcntl.LOCK_UN)


_locks: list[tuple[int, int]] = []


def _machine_locks(config) -> tuple[int, int] | None:
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


def pytest_configure(config):
    """The grader's disk cache (grader/cache.py) in a folder of this run's own, for every grading process the
    tests start: a test never reads entries left by an older grader, nor writes into the user's ~/.cache. Side by
    side, xdist's workers share the one their controller made (they inherit its environment): the reference's
    answers are computed once per run, not once per worker."""
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("GPTKIT_CACHE"):
        return
    config.gptkit_cache = tempfile.mkdtemp(prefix="gptkit-test-cache-")
    os.environ["GPTKIT_CACHE"] = config.gptkit_cache


@pytest.fixture(scope="session")
def grader():
    """The session's warm Grader: a test that grades in this process uses it (helpers.grade does)."""
    return shared_grader()


@pytest.fixture(scope="session")
def reference():
    """The reference graded on every milestone, once per session (``helpers.Graded``): what a test compares with."""
    return grade(SOLUTIONS)


def pytest_sessionfinish(session):
    close_shared_grader()  # its fork server and scratch folder end with the session, not at exit


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "gptkit_cache", ""), ignore_errors=True)


@pytest.fixture
def contest(tmp_path):
    """The tests' one way to make a contest folder (contest.toml, roster, tokens), under the test's tmp_path:
    ``contest(tasks, title=, name=, students=, paper=, start=, personal=, duration=, hard_end=, feedback=,
    scoreboard=, freeze_minutes=, more=)`` -> the folder (helpers.make_contest says what each one is)."""
    from helpers import make_contest

    def make(*args, **kwargs):
        return make_contest(tmp_path, *args, **kwargs)

    return make
