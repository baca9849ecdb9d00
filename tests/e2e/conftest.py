from pathlib import Path

import pytest

from helpers import cli, make_contest


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """The student release as `grade release` builds it; one per test module, which may add files to it."""
    out = tmp_path_factory.mktemp("release") / "gptkit-release"
    proc = cli("release", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def module_contest(tmp_path_factory):
    """``contest`` (tests/conftest.py) for one module's tests together: its folders outlive a test, for a server or
    an app the module's tests share (helpers.make_contest)."""
    parent = tmp_path_factory.mktemp("contests")

    def make(*args, **kwargs):
        return make_contest(parent, *args, **kwargs)

    return make
