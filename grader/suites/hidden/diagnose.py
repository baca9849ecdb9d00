"""Known student bugs, recomputed in the grading process to name the likely cause of a mismatch.

Each entry is a plain-words explanation and the keyword arguments that make a
parametrised implementation reproduce that bug. When a submission's output
matches one of them, the failure message says so.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F


def first_match(
    actual: torch.Tensor, candidates: Iterable[tuple[str, Callable[[], torch.Tensor]]], atol: float = 1e-4
) -> str | None:
    for explanation, compute in candidates:
        try:
            expected = compute()
        except (RuntimeError, IndexError):  # a variant that does not apply to these shapes
            continue
        if expected.shape == actual.shape and torch.allclose(actual, expected, atol=atol, rtol=1e-4, equal_nan=True):
            return explanation
    return None


def first_bug(
    actual: torch.Tensor, bugs: dict[str, dict[str, Any]], variant: Callable[..., torch.Tensor], atol: float = 1e-4
) -> str | None:
    """The explanation of the first of ``bugs`` (explanation -> ``variant``'s keyword arguments that make that
    bug) whose variant computes ``actual``."""
    return first_match(actual, ((why, functools.partial(variant, **kw)) for why, kw in bugs.items()), atol)


def _allowed(T: int, mask: str) -> torch.Tensor:
    ones = torch.ones(T, T)
    return {"tril": ones.tril(), "triu": ones.triu(), "strict": ones.tril(-1)}[mask].bool()


def attention(q, k, v, *, mask="tril", scale="sqrt", dim=-1, after=False):
    T, d_k = q.shape[-2], q.shape[-1]
    divisor = {"sqrt": math.sqrt(d_k), "d": float(d_k), None: 1.0}[scale]
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
    return first_bug(actual, ATTENTION_BUGS, lambda **kw: attention(q, k, v, **kw)[part])


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
):
    B, T, d = x.shape
    dh = d // n_heads
    chunks = F.linear(x, state["qkv.weight"], state["qkv.bias"]).split(d, dim=-1)
    q, k, v = (chunks[i] for i in order)
    if split == "transpose":
        q, k, v = (t.view(B, T, n_heads, dh).transpose(1, 2) for t in (q, k, v))
    else:
        q, k, v = (t.reshape(B, n_heads, T, dh) for t in (q, k, v))
    divisor = {"d_head": math.sqrt(dh), "d": math.sqrt(d), "d_head_unrooted": float(dh), None: 1.0}[scale]
    scores = (q @ k.transpose(-2, -1) / divisor).masked_fill(~_allowed(T, mask), float("-inf"))
    out = F.softmax(scores, dim=dim) @ v
    out = out.transpose(1, 2).reshape(B, T, d) if merge == "transpose" else out.reshape(B, T, d)
    return F.linear(out, state["proj.weight"], state["proj.bias"]) if proj else out


SELF_ATTENTION_BUGS: dict[str, dict[str, Any]] = {
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
    return first_bug(actual, SELF_ATTENTION_BUGS, lambda **kw: self_attention(x, state, n_heads, **kw))


def block(x, ref_block, *, prenorm=True, act=F.gelu, residual=(True, True)):
    ffn = lambda h: ref_block.ffn[2](act(ref_block.ffn[0](h)))  # noqa: E731
    for norm, sublayer, keep in ((ref_block.ln1, ref_block.attn, residual[0]), (ref_block.ln2, ffn, residual[1])):
        if prenorm:
            x = (x if keep else 0) + sublayer(norm(x))
        else:
            x = norm((x if keep else 0) + sublayer(x))
    return x


BLOCK_BUGS: dict[str, dict[str, Any]] = {
    "post-norm: the lesson's block normalises before each sublayer, x = x + attn(ln1(x))": {"prenorm": False},
    "ReLU in the feed-forward network: the lesson uses GELU": {"act": F.relu},
    "no residual connections: x = x + attn(ln1(x)), then x = x + ffn(ln2(x))": {"residual": (False, False)},
    "the attention's residual connection is missing: x = x + attn(ln1(x))": {"residual": (False, True)},
    "the feed-forward's residual connection is missing: x = x + ffn(ln2(x))": {"residual": (True, False)},
}


def explain_block(actual: torch.Tensor, x, ref_block) -> str | None:
    with torch.no_grad():
        return first_bug(actual, BLOCK_BUGS, lambda **kw: block(x, ref_block, **kw))


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
