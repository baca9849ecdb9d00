"""Public checks for `padding`: the docstring's example."""
import torch

from grader.suites import checks


def test_public_pad_batch(padding):
    """(public) pad_batch([[5, 12, 3], [7]], 0) is [[5, 12, 3], [7, 0, 0]]"""
    out = checks.tensor(padding.call("pad_batch", [torch.tensor([5, 12, 3]), torch.tensor([7])], 0),
                        "pad_batch's result", (2, 3), dtype=torch.long)
    checks.equal(out.tolist(), [[5, 12, 3], [7, 0, 0]], "the padded batch")
