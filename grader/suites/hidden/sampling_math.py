"""The sampling contract recomputed in float64, a chi-square test, and the known bugs' distributions.

Used by the `sampling` suite; nothing here talks to a worker.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

# The distribution the draws are checked against: 8 tokens, deliberately not in sorted order.
BASE = torch.tensor([0.5, 0.8, 0.1, -0.3, 2.2, -0.2, -0.1, 1.8])
DRAWS = 20_000
Z_1E6 = 4.753424  # the standard normal's upper 1e-6 quantile
MARGIN = 1e-3  # no cumulative probability this close to p in any top-p case


def keep_mask(
    logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None, crossing: bool = True
) -> torch.Tensor:
    """Which tokens the contract keeps: top-k, then top-p on the softmax of what is left (float64).

    ``crossing=False`` is the classic bug: top-p without the token that takes the sum to p.
    """
    x = logits.double()
    keep = torch.ones_like(x, dtype=torch.bool)
    if top_k is not None:
        kth = x.topk(min(top_k, x.shape[-1]), dim=-1).values[..., -1:]
        keep &= x >= kth
    if top_p is not None:
        probs, order = x.masked_fill(~keep, float("-inf")).softmax(dim=-1).sort(dim=-1, descending=True)
        cum = probs.cumsum(dim=-1)
        near = ((cum[..., :-1] - top_p).abs() < MARGIN) & (probs[..., 1:] > 0)
        if near.any():
            raise RuntimeError(f"grader bug: an ambiguous top-p case (p = {top_p})")
        drop = (cum - probs if crossing else cum) >= top_p
        keep &= ~drop.scatter(-1, order, drop)
    return keep


def distribution(
    logits: torch.Tensor, temperature: float, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """softmax(filter(logits / temperature)) in float64."""
    scaled = logits.double() / temperature
    return scaled.masked_fill(~keep_mask(scaled, top_k, top_p), float("-inf")).softmax(dim=-1)


def chi_square_bound(df: int) -> float:
    """The chi-square critical value at p = 1e-6 (Wilson-Hilferty)."""
    a = 2 / (9 * df)
    return df * (1 - a + Z_1E6 * math.sqrt(a)) ** 3


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int]:
    """(statistic, degrees of freedom); infinite when a token of probability 0 was drawn."""
    if (counts[probs == 0] > 0).any():
        return math.inf, 1
    support = probs > 0
    expected = counts.sum() * probs[support]
    return float(((counts[support] - expected) ** 2 / expected).sum()), max(int(support.sum()) - 1, 1)


def fits(counts: torch.Tensor, probs: torch.Tensor) -> bool:
    stat, df = chi_square(counts, probs)
    return stat <= chi_square_bound(df)


def likely_cause(
    counts: torch.Tensor, want: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None
) -> str:
    """The known bug whose distribution (unlike the right one) fits the counts, in plain words."""
    scaled = BASE.double() / temperature

    def masked(keep: torch.Tensor) -> torch.Tensor:
        return scaled.masked_fill(~keep, float("-inf")).softmax(dim=-1)

    def one_short() -> torch.Tensor:
        if not top_k or top_k < 2:
            raise RuntimeError("no top-k to be one short of")  # explains nothing: skipped as such
        return masked(keep_mask(scaled, top_k - 1, top_p))

    candidates: tuple[tuple[str, Callable[[], torch.Tensor]], ...] = (
        (
            "temperature multiplied the logits: divide by it (logits / temperature)",
            lambda: distribution(BASE * temperature**2, temperature, top_k, top_p),
        ),
        (
            "the temperature had no effect: divide the logits by it BEFORE the softmax (scaling the probabilities "
            "changes nothing once they are renormalised)",
            lambda: distribution(BASE, 1.0, top_k, top_p),
        ),
        (
            "the filters ran before the temperature: divide by the temperature first, then filter (top-p depends on "
            "the scaled probabilities)",
            lambda: masked(keep_mask(BASE, top_k, top_p)),
        ),
        (
            "top-p used the probabilities of all V tokens: apply it after top-k, to the softmax of what is left",
            lambda: masked(keep_mask(scaled, top_k) & keep_mask(scaled, None, top_p)),
        ),
        (
            "top-p dropped the token that crosses p: keep the smallest set whose probability REACHES p",
            lambda: masked(keep_mask(scaled, top_k, top_p, crossing=False)),
        ),
        # where it drops the same token as the top-p bug, both are named: these counts cannot tell them apart
        ("top-k kept k - 1 tokens: the k-th largest logit itself stays (drop only those below it)", one_short),
        ("the draws ignore top_k / top_p: filter the scaled logits before the softmax", lambda: scaled.softmax(dim=-1)),
    )
    causes = []
    for why, candidate in candidates:
        try:
            probs = candidate()
        except RuntimeError:  # an ambiguous top-p set for this bug: it explains nothing
            continue
        if not torch.allclose(probs, want, atol=1e-3) and fits(counts, probs):
            causes.append(why)
    return "; or ".join(causes) or (
        "draw from softmax(filter_logits(logits / temperature, top_k, top_p)) with torch.multinomial"
    )
