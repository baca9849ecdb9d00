"""Known student bugs, recomputed in the grading process to name the likely cause of a mismatch.

Each entry is a plain-words explanation and the keyword arguments that make a
parametrised implementation reproduce that bug. When a submission's output
matches one of them, the failure message says so.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F

from grader.suites import differences


def first_match(
    actual: torch.Tensor,
    candidates: Iterable[tuple[str, Callable[[], torch.Tensor]]],
    atol: float = 1e-4,
    rtol: float = 1e-4,
    unless: torch.Tensor | None = None,
) -> str | None:
    """The first candidate's explanation whose output is ``actual``'s. ``unless``, the right output: a candidate
    that also gives that (within the same tolerance) explains nothing, as a bug that changes nothing on these
    inputs would match any output close to the right one."""
    for explanation, compute in candidates:
        try:
            expected = compute()
        except (RuntimeError, IndexError):  # a variant that does not apply to these shapes
            continue
        if expected.shape != actual.shape:
            continue
        if unless is not None and torch.allclose(unless, expected, atol=atol, rtol=rtol, equal_nan=True):
            continue
        if torch.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True):
            return explanation
    return None


def first_bug(
    actual: torch.Tensor,
    bugs: dict[str, dict[str, Any]],
    variant: Callable[..., torch.Tensor],
    atol: float = 1e-4,
    rtol: float = 1e-4,
) -> str | None:
    """The explanation of the first of ``bugs`` (explanation -> ``variant``'s keyword arguments that make that
    bug) whose variant computes ``actual``."""
    return first_match(actual, ((why, functools.partial(variant, **kw)) for why, kw in bugs.items()), atol, rtol)


def _allowed(T: int, mask: str) -> torch.Tensor:
    ones = torch.ones(T, T)
    return {"tril": ones.tril(), "triu": ones.triu(), "strict": ones.tril(-1), "inverted": ones.triu(1)}[mask].bool()


def attention(q, k, v, *, mask="tril", scale="sqrt", dim=-1, after=False, divisor=None):
    T, d_k = q.shape[-2], q.shape[-1]
    divisor = divisor or {"sqrt": math.sqrt(d_k), "d": float(d_k), None: 1.0}[scale]
    scores = q @ k.transpose(-2, -1) / divisor
    if after:
        weights = F.softmax(scores, dim=dim) * _allowed(T, mask)
    else:
        weights = F.softmax(scores.masked_fill(~_allowed(T, mask), float("-inf")), dim=dim)
    return weights @ v, weights


# Softmax over another axis than the keys: -2 (the queries) first, as for a 2-D input dim=0 is that same axis;
# then the leading axes of batched inputs, dim=0 and dim=-3 (the same axis for a 3-D input, not for a 4-D one).
# An index the input lacks raises, and first_match skips that candidate.
ATTENTION_BUGS: dict[str, dict[str, Any]] = {
    "the mask is used inverted: -inf is filled where it allows (mask == 1, or ~mask), so each query sees only "
    "later keys and the last sees none (its row is NaN); fill where the mask is 0": {"mask": "inverted"},
    "the mask is upper-triangular (torch.triu): positions attend to the future instead of the past; use torch.tril": {
        "mask": "triu"
    },
    "the diagonal is masked too: a position must attend to itself (tril, not tril(-1))": {"mask": "strict"},
    "the scores are not divided by sqrt(d_k)": {"scale": None},
    "the scores are divided by d_k, not sqrt(d_k): scale them by 1 / math.sqrt(d_k)": {"scale": "d"},
    "the mask is applied after the softmax, so rows no longer sum to 1: fill blocked scores with -inf before it": {
        "after": True
    },
    "the softmax runs over the wrong dimension: normalise each row over the keys (dim=-1)": {"dim": -2},
    "the softmax runs over the first dimension (dim=0, a batch or head axis) instead of the keys: normalise "
    "each row over the keys (dim=-1)": {"dim": 0},
    "the softmax runs over a leading batch or head dimension (dim=-3) instead of the keys: normalise each row "
    "over the keys (dim=-1)": {"dim": -3},
}


def explain_attention(actual: torch.Tensor, q, k, v, part: int) -> str | None:
    """``part`` 0 compares outputs, 1 compares weights."""
    return first_bug(actual, ATTENTION_BUGS, lambda **kw: attention(q, k, v, **kw)[part]) or wrong_scale(
        actual,
        lambda divisor: attention(q, k, v, divisor=divisor)[part],
        {"d_k": q.shape[-1], "T": q.shape[-2]},
        "sqrt(d_k)",
    )


# What each size is, for a message that names a wrong divisor of the scores.
SIZE_MEANINGS = {
    "T": "the sequence length (the number of positions)",
    "d": "the model's width",
    "d_k": "the size of each key",
    "d_head": "the size of each head, d // n_heads",
    "head_size": "the size of each head, d // n_heads",
    "n_heads": "the number of heads",
    "r": "the latent's size (the rank of w_down)",
}


def wrong_scale(
    actual: torch.Tensor, compute: Callable[[float], torch.Tensor], sizes: dict[str, int], right: str
) -> str | None:
    """The scores' divisor that gives ``actual``, among the sizes and their roots, products and ratios (and 1),
    in words, when it is not ``right``: a scale that depends on the wrong size is a constant factor inside the
    softmax, which no list of known bugs can enumerate."""
    values = dict(differences.size_expressions({k: float(v) for k, v in sizes.items()}))
    if right not in values:  # a size of 1: every divisor of it is 1
        return None
    candidates = [(name, v) for name, v in values.items() if not math.isclose(v, values[right])]
    found = first_match(actual, ((name, functools.partial(compute, v)) for name, v in [*candidates, ("1", 1.0)]))
    if found is None:
        return None
    named = set(re.findall(r"\w+", found)) - {"sqrt"}
    used = [f"{n} = {sizes[n]} is {SIZE_MEANINGS.get(n, n)}" for n in sizes if n in named]
    right_size = right.removeprefix("sqrt(").removesuffix(")")
    return (
        f"the scores are divided by {found} (= {dict(candidates).get(found, 1.0):.4g}) instead of {right} "
        f"(= {values[right]:.4g})"
        + (f", where {', '.join(used)}" if used else ": they are not scaled at all")
        + f". The scale is 1 / {right}, with {right_size} {SIZE_MEANINGS.get(right_size, right_size)}: it keeps "
        "the scores' spread near 1 whatever that size"
    )


def self_attention(
    x,
    state: dict,
    n_heads: int,
    *,
    scale="d_head",
    order=(0, 1, 2),
    split="transpose",
    merge="transpose",
    proj=True,
    mask="tril",
    dim=-1,
    divisor=None,
):
    B, T, d = x.shape
    dh = d // n_heads
    chunks = F.linear(x, state["qkv.weight"], state["qkv.bias"]).split(d, dim=-1)
    q, k, v = (chunks[i] for i in order)
    if split == "transpose":
        q, k, v = (t.view(B, T, n_heads, dh).transpose(1, 2) for t in (q, k, v))
    else:
        q, k, v = (t.reshape(B, n_heads, T, dh) for t in (q, k, v))
    divisor = divisor or {"d_head": math.sqrt(dh), "d": math.sqrt(d), "d_head_unrooted": float(dh), None: 1.0}[scale]
    scores = (q @ k.transpose(-2, -1) / divisor).masked_fill(~_allowed(T, mask), float("-inf"))
    out = F.softmax(scores, dim=dim) @ v
    out = out.transpose(1, 2).reshape(B, T, d) if merge == "transpose" else out.reshape(B, T, d)
    return F.linear(out, state["proj.weight"], state["proj.bias"]) if proj else out


SELF_ATTENTION_BUGS: dict[str, dict[str, Any]] = {
    "the mask is used inverted: -inf is filled where it allows (mask == 1, or ~mask), so each query sees only "
    "later keys and the last sees none (its row is NaN); fill where the mask is 0": {"mask": "inverted"},
    "the scores are scaled by 1/sqrt(d) instead of 1/sqrt(d_head), d_head = d // n_heads": {"scale": "d"},
    "the scores are not scaled by 1/sqrt(d_head)": {"scale": None},
    "the scores are divided by d_head, not sqrt(d_head): scale them by 1 / math.sqrt(d_head)": {
        "scale": "d_head_unrooted"
    },
    "the heads are split with a plain view to (B, n_heads, T, d_head): view to (B, T, n_heads, d_head), "
    "then transpose(1, 2)": {"split": "view"},
    "the heads are merged without transposing back: transpose(1, 2) before reshaping to (B, T, d)": {"merge": "view"},
    "q and k are swapped: qkv splits into q, k, v in that order": {"order": (1, 0, 2)},
    "q and v are swapped: qkv splits into q, k, v in that order": {"order": (2, 1, 0)},
    "k and v are swapped: qkv splits into q, k, v in that order": {"order": (0, 2, 1)},
    "the mask is upper-triangular (torch.triu): use torch.tril": {"mask": "triu"},
    "the output projection proj is never applied": {"proj": False},
    # the heads' scores are (B, n_heads, T, T): dim=-2 is the queries, 0 the batch, 1 (= -3) the heads
    "the softmax runs over the wrong dimension (the queries, dim=-2): normalise each row over the keys (dim=-1)": {
        "dim": -2
    },
    "the softmax runs over the batch dimension (dim=0) instead of the keys: normalise each row over the keys "
    "(dim=-1)": {"dim": 0},
    "the softmax runs over the heads dimension (dim=1, or -3) instead of the keys: normalise each row over the "
    "keys (dim=-1)": {"dim": 1},
}


def explain_self_attention(actual: torch.Tensor, x, state: dict, n_heads: int) -> str | None:
    B, T, d = x.shape
    return first_bug(actual, SELF_ATTENTION_BUGS, lambda **kw: self_attention(x, state, n_heads, **kw)) or wrong_scale(
        actual,
        lambda divisor: self_attention(x, state, n_heads, divisor=divisor),
        {"d_head": d // n_heads, "d": d, "n_heads": n_heads, "T": T},
        "sqrt(d_head)",
    )


def block(
    x,
    ref_block,
    *,
    prenorm=True,
    act=F.gelu,
    residual=(True, True),
    eps=None,
    norm_bias=(True, True),
    second_from_input=False,
):
    """The reference block's layers wired as the lesson's block, or with one known bug."""
    ffn = lambda h: ref_block.ffn[2](act(ref_block.ffn[0](h)))  # noqa: E731
    start = x
    layers = ((ref_block.ln1, ref_block.attn, residual[0]), (ref_block.ln2, ffn, residual[1]))
    for i, (ln, sublayer, keep) in enumerate(layers):
        bias = ln.bias if norm_bias[i] else None
        epsilon = ln.eps if eps is None else eps[i]
        skip = start if i == 1 and second_from_input else x
        if prenorm:
            x = (skip if keep else 0) + sublayer(F.layer_norm(x, ln.normalized_shape, ln.weight, bias, epsilon))
        else:
            x = F.layer_norm((skip if keep else 0) + sublayer(x), ln.normalized_shape, ln.weight, bias, epsilon)
    return x


BLOCK_BUGS: dict[str, dict[str, Any]] = {
    "post-norm: the lesson's block normalises before each sublayer, x = x + attn(ln1(x))": {"prenorm": False},
    "ReLU in the feed-forward network: the lesson uses GELU": {"act": F.relu},
    "no residual connections: x = x + attn(ln1(x)), then x = x + ffn(ln2(x))": {"residual": (False, False)},
    "the attention's residual connection is missing: x = x + attn(ln1(x))": {"residual": (False, True)},
    "the feed-forward's residual connection is missing: x = x + ffn(ln2(x))": {"residual": (True, False)},
    "the feed-forward's residual adds the block's input, not the first sublayer's output: h = x + attn(ln1(x)), "
    "then the block returns h + ffn(ln2(h)), so the attention's contribution must be carried into the second "
    "residual": {"second_from_input": True},
    "the feed-forward uses GELU's tanh approximation (approximate='tanh'): the lesson's nn.GELU() is the exact "
    "one, and the two differ by up to 5e-4": {"act": functools.partial(F.gelu, approximate="tanh")},
    "ln1's bias is left out (F.layer_norm without ln1.bias?): a LayerNorm applies its weight AND its bias": {
        "norm_bias": (False, True)
    },
    "ln2's bias is left out (F.layer_norm without ln2.bias?): a LayerNorm applies its weight AND its bias": {
        "norm_bias": (True, False)
    },
    **{
        f"{which} eps is {eps:g}, not nn.LayerNorm's default 1e-5: a LayerNorm divides by sqrt(var + eps), so the "
        "eps shows where the variance is small": {"eps": pair}
        for eps in (1e-6, 1e-12, 1e-8, 1e-3, 1e-4, 0.0)
        for which, pair in (("the LayerNorms'", (eps, eps)), ("ln1's", (eps, 1e-5)), ("ln2's", (1e-5, eps)))
    },
}


def explain_block(actual: torch.Tensor, x, ref_block) -> str | None:
    # tight: some of these bugs (an eps, GELU's tanh form) move the output by less than 1e-4
    with torch.no_grad():
        return first_bug(actual, BLOCK_BUGS, lambda **kw: block(x, ref_block, **kw), atol=2e-6, rtol=2e-5)


TRAIN_BUGS: dict[str, dict[str, Any]] = {
    "the gradients are never zeroed, so they pile up across steps: call zero_grad() every step": {"zero_grad": False},
    "the optimiser is SGD: the lesson uses torch.optim.Adam": {"optimizer": torch.optim.SGD},
    "the targets are not shifted: the target of position i is token i + 1 (data[:, 1:])": {"shift": False},
    "the loss is summed over positions instead of averaged": {"reduction": "sum"},
}


def train_variant(
    model, data, steps, lr, *, zero_grad=True, optimizer=torch.optim.Adam, shift=True, reduction="mean"
) -> list[float]:
    opt = optimizer(model.parameters(), lr=lr)
    inp = data[:, :-1]
    tgt = data[:, 1:] if shift else inp
    losses = []
    for _ in range(steps):
        if zero_grad:
            opt.zero_grad()
        logits = model(inp)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction=reduction)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def explain_training(losses: torch.Tensor, make_model: Callable[[], torch.nn.Module], data, steps, lr) -> str | None:
    return first_bug(
        losses,
        TRAIN_BUGS,
        lambda **kw: torch.tensor(train_variant(make_model(), data, steps, lr, **kw), dtype=torch.float64),
        atol=1e-3,
    )
