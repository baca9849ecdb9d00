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


# Probabilities out of order in the vocabulary: [0.1, 0.6, 0.05, 0.25] sorted is tokens 1, 3, 0, 2, and top_p = 0.8
# keeps 1 and 3 (0.6 + 0.25 reaches it). A mask made in sorted order and left so marks tokens 0 and 1 instead.
TOP_P_PROBS = torch.tensor([[0.1, 0.6, 0.05, 0.25]])


def test_public_top_p_keeps_the_most_probable(sampling):
    """(public) probabilities [0.1, 0.6, 0.05, 0.25], top_p = 0.8: filter_logits keeps tokens 1 and 3 unchanged"""
    logits = TOP_P_PROBS.log()
    out = checks.tensor(sampling.call("filter_logits", logits, top_p=0.8), "filter_logits's result", (1, 4))
    kept = [i for i in range(4) if out[0, i] != float("-inf")]
    if kept == [1, 3]:
        for i in kept:
            if checks.differs(float(out[0, i]), float(logits[0, i]), 1e-5):
                checks.fail(
                    f"filter_logits returned {float(out[0, i]):.4f} for kept token {i}, whose logit is "
                    f"{float(logits[0, i]):.4f}: the kept logits come back unchanged (no scaling, no softmax)"
                )
        return
    order = TOP_P_PROBS[0].argsort(descending=True)
    in_sorted_order = [i for i in range(4) if int(order[i]) in (1, 3)]  # the right mask read in sorted order
    cause = (
        "as many tokens as expected, at other ids: position j of your mask says whether the j-th MOST "
        "PROBABLE token stays, so the mask is still in sorted order. Put it back in vocabulary order before "
        "masking: drop.scatter(-1, order, drop), with order from torch.sort"
        if kept == in_sorted_order
        else "sorted, the probabilities are 0.6 (token 1), 0.25 (token 3), 0.1, 0.05: 0.6 + 0.25 reaches 0.8, so "
        "tokens 1 and 3 are kept and the others set to -inf"
    )
    checks.fail(f"top_p = 0.8 kept tokens {kept}, expected [1, 3]: {cause}")


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
        else "at temperature 0.5 the probabilities are [1/10, 9/10], and top-p at 0.8 keeps token 1 alone, so token "
        "0 must never be drawn"
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
