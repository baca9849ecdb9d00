"""The number an attention layer divides its scores by, read back from one output, for the public checks: they
compare properties, never the reference's numbers.

With q = k = v = x and no output mixing (identity weights, zero biases), position 0 all zeros and position 1
holding ``A`` in the first feature of each head, query 1 scores key 0 at 0 and key 1 at A^2 in every head, so
out[1] is sigmoid(A^2 / s) x[1] per head: s, the divisor, comes back as A^2 / logit(out[1] / A). The sizes make
sqrt(d_head), d_head, sqrt(d) and d all different: 3, 9, 6 and 36.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from grader.suites import checks, differences

D, HEADS = 36, 4
D_HEAD = D // HEADS
A = 3.0


def probe_input() -> torch.Tensor:
    """x (1, 2, D): position 0 zeros, position 1 ``A`` at the first feature of each head."""
    x = torch.zeros(1, 2, D)
    x[0, 1, ::D_HEAD] = A
    return x


def divisors(out: torch.Tensor) -> list[float] | None:
    """Each head's divisor, from out (1, 2, D); None where the output has not the shape q = k = v = x gives (a
    position 0 that is not zero, a weight outside (0, 1), features outside the first of each head)."""
    if tuple(out.shape) != (1, 2, D) or not torch.isfinite(out).all():
        return None
    first = out[0, 1, ::D_HEAD]
    rest = out[0, 1].clone()
    rest[::D_HEAD] = 0
    if out[0, 0].abs().max() > 1e-5 or rest.abs().max() > 1e-5:
        return None
    weights = (first / A).tolist()
    if not all(1e-6 < w < 1 - 1e-6 for w in weights):
        return None
    return [A * A / math.log(w / (1 - w)) for w in weights]


def wrong_scale(out: torch.Tensor, what: str) -> str | None:
    """The failure message when ``what``'s output says its scores are divided by another number than
    sqrt(d_head), naming that number's size where one gives it; None when the scale is right or unreadable."""
    found = divisors(out)
    if found is None or all(math.isclose(s, math.sqrt(D_HEAD), rel_tol=1e-3) for s in found):
        return None
    s = found[0]
    sizes = {"d_head": D_HEAD, "d": D, "n_heads": HEADS, "T": 2}
    name = differences.name_of(s, sizes) or ("1: no scaling" if math.isclose(s, 1.0, rel_tol=1e-3) else None)
    said = f" = {name}" if name else ""
    return (
        f"{what} with d = {D} and {HEADS} heads, q = k = v = x and identity weights divides the scores by "
        f"{s:.3g}{said}, read back from its output: the scale is 1 / sqrt(d_head), each head's own size, "
        f"d_head = d // n_heads = {D_HEAD}, so the divisor is {math.sqrt(D_HEAD):g}"
        + (", not sqrt(d), the whole width" if name == "sqrt(d)" else "")
    )


def layer_scale_fault(layer: Any, what: str = "CausalSelfAttention") -> str | None:
    """``wrong_scale`` read from ``layer``, a CausalSelfAttention(D, HEADS) in the worker, given identity weights."""
    eye, zero = torch.eye(D), torch.zeros(D)
    layer.load({"qkv.weight": eye.repeat(3, 1), "qkv.bias": zero.repeat(3), "proj.weight": eye, "proj.bias": zero})
    x = probe_input()
    return wrong_scale(checks.tensor(layer(x), f"{what}'s output", tuple(x.shape)), what)
