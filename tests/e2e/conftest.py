from pathlib import Path

import pytest

from helpers import cli


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """The student release as `grade release` builds it; one per test module, which may add files to it."""
    out = tmp_path_factory.mktemp("release") / "gptkit-release"
    proc = cli("release", str(out))
    assert proc.returncode == 0, proc.stderr
    return out
