"""Public checks for `padding`: the docstring's example, and a padded batch's loss against its sequences alone."""

import torch

from grader.suites import checks

# Two sequences for the grader's stand-in model (vocabulary 17, context 6), without the pad id 0:
# 4 targets and 1 target; padded together, the short one gets 3 padding targets.
LONG, SHORT = [5, 12, 3, 9, 4], [7, 2]


def test_public_pad_batch(padding):
    """(public) pad_batch([[5, 12, 3], [7]], 0) is [[5, 12, 3], [7, 0, 0]]"""
    out = checks.tensor(
        padding.call("pad_batch", [torch.tensor([5, 12, 3]), torch.tensor([7])], 0),
        "pad_batch's result",
        (2, 3),
        dtype=torch.long,
    )
    checks.equal(out.tolist(), [[5, 12, 3], [7, 0, 0]], "the padded batch")


def test_public_padding_does_not_count(padding):
    """(public) padded_loss of two sequences averages their 5 real targets: (4 x alone + 1 x alone) / 5"""
    model = padding.standin(17, 12, 6, seed=8)  # the grader's small stand-in language model, not your TinyGPT

    def loss(seqs: list[list[int]]) -> float:
        value = padding.call("padded_loss", model, [torch.tensor(s) for s in seqs], 0)
        return float(checks.tensor(value, "padded_loss's result", ()))

    alone_long, alone_short, together = loss([LONG]), loss([SHORT]), loss([LONG, SHORT])
    want = (4 * alone_long + alone_short) / 5
    if checks.differs(together, want, 1e-4 * max(1.0, abs(want))):
        checks.fail(
            f"padded_loss({LONG}, {SHORT}) is {together:.5f}, but alone (no padding) they give "
            f"{alone_long:.5f} over 4 targets and {alone_short:.5f} over 1, so {want:.5f} over the 5 real "
            "targets together: do the 3 padding targets count in the mean? Pass ignore_index=pad_id to "
            "the loss"
        )
