"""Public checks for `sampling`: greedy at temperature 0, shapes, a seeded generator, and the temperature."""

import functools
import math

import torch

from grader.sandbox.common.protocol import SeededGenerator
from grader.suites import checks
from grader.suites.shape_hints import shape_hint

LOGITS = torch.tensor([[0.5, 2.0, -1.0, 0.1], [1.5, -0.5, 0.3, 3.0]])


def sample_next(sampling, *args, **kwargs):
    """The student's sample_next, a shape error in it explained for sampling, not for masks."""
    with shape_hint("sample_next"):
        return sampling.call("sample_next", *args, **kwargs)


def test_public_temperature_zero(sampling):
    """(public) sample_next at temperature 0 is the argmax: [1, 3]"""
    out = checks.tensor(
        sample_next(sampling, LOGITS, SeededGenerator(0), temperature=0.0),
        "sample_next's result",
        (2,),
        dtype=torch.long,
    )
    checks.equal(out.tolist(), [1, 3], "the tokens at temperature 0")


def test_public_seeded(sampling):
    """(public) the same generator seed gives the same draws"""
    draws = [sample_next(sampling, LOGITS.repeat(50, 1), SeededGenerator(3)) for _ in range(2)]
    first, second = (checks.tensor(d, "sample_next's result", (100,), dtype=torch.long) for d in draws)
    if not torch.equal(first, second):
        checks.fail("two generators seeded alike gave different draws: draw with the generator passed in")


def test_public_temperature_sharpens(sampling):
    """(public) logits [0, ln 3] give token 1 with probability 3/4; at temperature 0.5, 9/10 (4,000 draws)"""
    logits = torch.tensor([[0.0, math.log(3)]]).repeat(4000, 1)
    out = checks.tensor(
        sample_next(sampling, logits, SeededGenerator(11), temperature=0.5),
        "sample_next's result",
        (4000,),
        dtype=torch.long,
    )
    share = float((out == 1).double().mean())
    if abs(share - 0.9) <= 0.03:  # 0.03 is over 6 standard deviations of the share in 4,000 draws
        return
    if abs(share - 0.75) <= 0.03:
        cause = (
            "that is the share at temperature 1: the temperature changed nothing. Is the temperature "
            "dividing the logits before the softmax? Dividing the probabilities after it does nothing once "
            "they are renormalised"
        )
    elif abs(share - 1 / (1 + 3**-0.5)) <= 0.03:
        cause = (
            "that is the share at temperature 2. Is the temperature dividing the logits before the "
            "softmax (not multiplying them)?"
        )
    else:
        cause = "softmax([0, ln 3] / 0.5) = [1/10, 9/10]. Is the temperature dividing the logits before the softmax?"
    checks.fail(f"at temperature 0.5, token 1 came up in {share:.1%} of 4,000 draws, expected about 90%: {cause}")


def test_public_temperature_before_top_p(sampling):
    """(public) logits [0, ln 3], temperature 0.5, top_p = 0.8: only token 1 may be drawn (4,000 draws)"""
    # At temperature 0.5 the probabilities are [1/10, 9/10], and 9/10 alone reaches 0.8; at temperature 1 they
    # are [1/4, 3/4], and 3/4 does not. So the draws show which came first, the temperature or top-p.
    logits = torch.tensor([[0.0, math.log(3)]]).repeat(4000, 1)
    out = checks.tensor(
        sample_next(sampling, logits, SeededGenerator(12), temperature=0.5, top_p=0.8),
        "sample_next's result",
        (4000,),
        dtype=torch.long,
    )
    zeros = float((out == 0).double().mean())
    if zeros == 0:
        return
    cause = (
        "about 1 in 10, what top-p on the unscaled probabilities [1/4, 3/4] keeps and the temperature then "
        "sharpens: top-p ran before the temperature. Divide the logits by the temperature first, then filter: "
        "filter_logits(logits / temperature, top_k, top_p)"
        if abs(zeros - 0.1) <= 0.03
        else "top-p at 0.8 on [1/10, 9/10] keeps token 1 alone: divide the logits by the temperature, then filter"
    )
    checks.fail(f"with temperature 0.5 and top_p = 0.8, token 0 came up in {zeros:.1%} of 4,000 draws: {cause}")


def test_public_top_k_below_one_raises(sampling):
    """(public) top_k = 0 and top_k = -1 raise ValueError, in sample_next and in filter_logits alike"""
    for top_k in (0, -1):
        checks.raises_value_error(
            functools.partial(sample_next, sampling, LOGITS, SeededGenerator(0), top_k=top_k),
            f"sample_next(logits, generator, top_k={top_k})",
            "the stub asks for ValueError whenever top_k < 1",
        )
        checks.raises_value_error(
            functools.partial(sampling.call, "filter_logits", LOGITS, top_k=top_k),
            f"filter_logits(logits, top_k={top_k})",
            "the stub asks for ValueError whenever top_k < 1",
        )
