"""The measure of a leak from the future, shared by the suites' causality probes (grader/suites/causality.py) and
the lmbudget evaluation (grader/lmbudget/evaluate.py): the suites import lmbudget (its hidden suite), so the one
definition sits below both.

Logits are compared as log-probabilities (``log_probs``: each row minus its log-sum-exp), never as they come: a
softmax ignores a constant added to a row, so a model may add any constant, and a tolerance that grew with the
logits' size let a model that added 1e6 to every logit hide a lookahead of many nats under it. The
tolerance on log-probabilities is absolute (``LOG_PROB_TOLERANCE``).
"""

from __future__ import annotations

import torch

# How far (in nats) a causal model's log-probabilities before a probe's cut may move between two runs. Rounding
# alone: float32's spacing is 2**-13 (1.2e-4) for logits under 1024 in size, and a log-probability is a difference
# of two such numbers (the logit and its row's log-sum-exp), so an honest model whose logits reach 1e3 moves by
# 2.4e-4 at most when another batch or row rounds differently; 1e-3 leaves four times that (a model shifted by 1e4
# passes too where its earlier positions are computed alike in both runs, as the tests' honest shifted models
# are). It is set by the leaks it must see: a mask that lets a freshly initialised TinyGPT (seed 1) see the next
# token moves log-probabilities by 0.075 nats, one with no mask by 0.096: 75 times this (1e-2 left 7.5 times).
# What a leak can gain under it is bounded: if no log-probability moves by more than this when the later inputs
# are replaced, the model's loss is at most this many nats per character below that of a predictor that saw
# other later text (1e-3 nats = 0.0014 bits/char, 0.014 of lmbudget's 10 points), whatever constant it adds to
# its logits.
LOG_PROB_TOLERANCE = 1e-3


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Each row of ``logits`` (the last axis) minus its log-sum-exp, in double precision: what a softmax sees,
    the same whatever constant a row was shifted by. A non-finite row stays non-finite (NaN or -inf), so it
    cannot pass for "no change" (``changed_before``)."""
    return torch.log_softmax(logits.double(), dim=-1)


def changed_before(base: torch.Tensor, other: torch.Tensor, t: int) -> torch.Tensor:
    """(B, t): how much each output before position ``t`` differs between two runs whose inputs differ only from
    position ``t`` on; a causal forward gives zeros (up to rounding). Equal values differ by 0 (two -inf log-
    probabilities of a token both runs rule out included); NaN, or an infinity against anything else, by
    infinity: a comparison with NaN is False, so NaN must never pass for "no change"."""
    a, b = base[:, :t].double(), other[:, :t].double()
    diff = torch.where(a == b, torch.zeros_like(a), (a - b).abs().nan_to_num(nan=torch.inf, posinf=torch.inf))
    return diff.flatten(2).amax(-1) if diff.dim() > 2 else diff
