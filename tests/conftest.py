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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Side by side (pytest-xdist's ``-n``), a test marked ``serial`` runs with the machine to itself: it holds a
    lock every other test shares, so it waits for the test running beside it and none starts meanwhile. Such a test
    counts the processes of the machine's workers, or bounds a time that a second busy core would stretch."""
    lock = _machine_lock()
    if lock is None:
        yield
        return
    fcntl.flock(lock, fcntl.LOCK_EX if item.get_closest_marker("serial") else fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


_lock: list[int] = []


def _machine_lock() -> int | None:
    """The run's lock file, shared by its xdist workers (None: not run side by side)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return None
    if not _lock:
        _lock.append(os.open(Path(tempfile.gettempdir()) / f"gptkit-tests-{run}.lock", os.O_RDWR | os.O_CREAT, 0o600))
    return _lock[0]


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
