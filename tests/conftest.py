import pytest
import torch

from helpers import Variant, grade


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
