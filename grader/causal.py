"""The measure of a leak from the future, shared by the suites' causality probes (grader/suites/causality.py) and
the lmbudget evaluation (grader/lmbudget/evaluate.py): the suites import lmbudget (its hidden suite), so the one
definition sits below both."""

from __future__ import annotations

import torch


def changed_before(base: torch.Tensor, other: torch.Tensor, t: int) -> torch.Tensor:
    """(B, t): how much each output before position ``t`` differs between two runs whose inputs differ only from
    position ``t`` on; a causal forward gives zeros (up to rounding)."""
    return (other[:, :t] - base[:, :t]).abs().flatten(2).amax(-1)
