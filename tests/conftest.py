import os
import shutil
import tempfile

import pytest
import torch

import side_by_side
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


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the cores, within the memory (side_by_side.auto_workers).
    PYTEST_XDIST_AUTO_NUM_WORKERS still sets the number outright."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return side_by_side.auto_workers()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Side by side (pytest-xdist's ``-n``), a test marked ``serial`` runs with the machine to itself: it holds a
    lock every other test shares, so it waits for the tests running beside it and none starts meanwhile. Such a
    test bounds a time that a second busy core would stretch (side_by_side.holding)."""
    locks = side_by_side.machine_locks(item.config)
    if locks is None:
        yield
        return
    with side_by_side.holding(locks, serial=item.get_closest_marker("serial") is not None):
        yield


def pytest_configure(config):
    """The grader's disk cache (grader/cache.py) in a folder of this run's own, for every grading process the
    tests start: a test never reads entries left by an older grader, nor writes into the user's ~/.cache. Side by
    side, xdist's workers share the one their controller made (they inherit its environment): the reference's
    answers are computed once per run, not once per worker.

    Side by side, the files go out in the order pytest_collection_modifyitems gives them: xdist would hand out the
    files with the most tests first, which left the slow files of one or two tests (a browser, a server killed)
    running last, one process busy while the others had finished."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
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
