import os
import shutil
import tempfile

import pytest
import torch

from helpers import Variant, close_shared_grader, grade, shared_grader


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


def pytest_configure(config):
    """The grader's disk cache (grader/cache.py) in a folder of this run's own, for every grading process the
    tests start: a test never reads entries left by an older grader, nor writes into the user's ~/.cache."""
    config.gptkit_cache = tempfile.mkdtemp(prefix="gptkit-test-cache-")
    os.environ["GPTKIT_CACHE"] = config.gptkit_cache


@pytest.fixture(scope="session")
def grader():
    """The session's warm Grader: a test that grades in this process uses it (helpers.grade does)."""
    return shared_grader()


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
