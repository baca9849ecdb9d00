import pytest

from helpers import Variant, grade


@pytest.fixture
def graded(tmp_path):
    """Grade a Variant (built from the reference in a temp folder) through the CLI."""
    def run(variant: Variant, *args: str):
        return grade(variant.build(tmp_path / "submission"), *args)
    return run
