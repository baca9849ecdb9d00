"""Public checks for `padding`: the docstring's example, and a padded batch's loss against its sequences alone."""

import torch
import torch.nn.functional as F

from grader.sandbox.worker.standin import make_standin
from grader.suites import checks

# Two sequences for the grader's stand-in model (vocabulary 17, context 6), without the pad id 0:
# 4 targets and 1 target; padded together, the short one gets 3 padding targets.
LONG, SHORT = [5, 12, 3, 9, 4], [7, 2]
STANDIN = (17, 12, 6, 8)  # vocabulary, width, context, seed


def next_token_loss(tokens: list[int]) -> float:
    """The stand-in's mean cross-entropy on one sequence's next tokens, computed here: no padding involved."""
    model = make_standin(*STANDIN)
    ids = torch.tensor([tokens])
    with torch.no_grad():
        return float(F.cross_entropy(model(ids[:, :-1])[0], ids[0, 1:]))


def test_public_pad_batch(padding):
    """(public) pad_batch([[5, 12, 3], [7]], 0) is [[5, 12, 3], [7, 0, 0]]"""
    out = checks.tensor(
        padding.call("pad_batch", [torch.tensor([5, 12, 3]), torch.tensor([7])], 0),
        "pad_batch's result",
        (2, 3),
        dtype=torch.long,
    )
    hint = "the padding is on the left: pad at the end, on the right" if out.tolist() == LEFT_PADDED else ""
    checks.equal(out.tolist(), [[5, 12, 3], [7, 0, 0]], "the padded batch", hint=hint)


LEFT_PADDED = [[5, 12, 3], [0, 0, 7]]


def test_public_padding_does_not_count(padding):
    """(public) padded_loss of two sequences averages their 5 real targets: (4 x alone + 1 x alone) / 5"""
    model = padding.standin(*STANDIN)  # the grader's small stand-in language model, not your TinyGPT

    def loss(seqs: list[list[int]]) -> float:
        value = padding.call("padded_loss", model, [torch.tensor(s) for s in seqs], 0)
        return float(checks.tensor(value, "padded_loss's result", ()))

    alone_long, alone_short, together = loss([LONG]), loss([SHORT]), loss([LONG, SHORT])
    reference = next_token_loss(LONG)
    if checks.differs(alone_long, reference, 1e-4 * max(1.0, abs(reference))):
        checks.fail(
            f"padded_loss of {LONG} alone (no padding) is {alone_long:.5f}, but the mean cross-entropy of the "
            f"stand-in model's 4 next-token predictions is {reference:.5f}: are the targets the inputs shifted "
            "by one (inp = batch[:, :-1], tgt = batch[:, 1:]) and the loss their mean?"
        )
    want = (4 * alone_long + alone_short) / 5
    if checks.differs(together, want, 1e-4 * max(1.0, abs(want))):
        batch = padding.call("pad_batch", [torch.tensor(LONG), torch.tensor(SHORT)], 0)
        left = isinstance(batch, torch.Tensor) and batch[1, -len(SHORT) :].tolist() == SHORT and batch[1, 0] == 0
        cause = (
            "your pad_batch pads on the left, which moves the short sequence's tokens to other positions: "
            "pad on the right"
            if left
            else "do the 3 padding targets count in the mean? Pass ignore_index=pad_id to the loss"
        )
        checks.fail(
            f"padded_loss({LONG}, {SHORT}) is {together:.5f}, but alone (no padding) they give "
            f"{alone_long:.5f} over 4 targets and {alone_short:.5f} over 1, so {want:.5f} over the 5 real "
            f"targets together: {cause}"
        )
