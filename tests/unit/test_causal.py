"""The leak measure (grader/causal.py) and the probes built on it: logits compared as
log-probabilities with an absolute tolerance, so a constant added to every logit neither hides a lookahead nor
fails an honest model; NaN and infinities never pass for "no change"."""

from __future__ import annotations

import pytest
import torch

from grader.causal import LOG_PROB_TOLERANCE, changed_before, log_probs
from grader.lmbudget.evaluate import NotCausal, probe
from grader.suites import causality

V, T = 12, 9
INF, NAN = float("inf"), float("nan")


def causal_logits(idx: torch.Tensor) -> torch.Tensor:
    """Logits at t from the tokens up to t only: a running sum of a fixed embedding."""
    table = torch.randn(V, V, generator=torch.Generator().manual_seed(0))
    return table[idx].cumsum(1) / torch.arange(1, idx.shape[1] + 1)[:, None]


def lookahead(idx: torch.Tensor, strength: float = 8.0) -> torch.Tensor:
    """The next token's logit raised by ``strength`` nats: the answer read from ``idx[:, t + 1]``."""
    logits = causal_logits(idx).clone()
    logits[:, :-1] += strength * torch.nn.functional.one_hot(idx[:, 1:], V).float()
    return logits


def shifted(forward, shift: float = 0.0, scale: float = 1.0):
    return lambda idx: forward(idx) * scale + shift


def tokens(seed: int, batch: int = 3) -> torch.Tensor:
    return causality.random_tokens(seed, batch, T, V)


# --- the measure itself --------------------------------------------------------------------------------------------


def test_log_probs_ignore_a_constant_added_to_a_row():
    logits = causal_logits(tokens(1))
    assert (log_probs(logits + 1e4) - log_probs(logits)).abs().max() < 2e-3
    assert log_probs(logits).dtype == torch.float64


def test_equal_outputs_differ_by_nothing_even_where_a_token_is_ruled_out():
    a = log_probs(torch.tensor([[[0.0, -INF, 1.0], [2.0, 0.0, -INF]]]))
    assert changed_before(a, a.clone(), 2).max() == 0


@pytest.mark.parametrize(
    "bad",
    [[NAN, 0.0, 0.0], [INF, 0.0, 0.0], [-INF, -INF, -INF], [0.0, -INF, 0.0]],
    ids=["nan", "+inf", "all--inf", "one--inf-against-a-finite-row"],
)
def test_a_non_finite_output_is_a_change_never_a_pass(bad):
    good = torch.tensor([[[0.0, 1.0, 2.0]]])
    changed = changed_before(log_probs(good), log_probs(torch.tensor([[bad]])), 1)
    assert changed.max() == INF


def test_nan_against_nan_is_a_change():
    nan = torch.full((1, 1, 3), NAN)
    assert changed_before(nan, nan.clone(), 1).max() == INF


# --- lmbudget's probe: the window's logits against the probe's, before the cut ---------------------------------------


@pytest.mark.parametrize("shift,scale", [(0.0, 1.0), (1e4, 1.0), (-1e4, 1.0), (0.0, 100.0), (3e3, 10.0)])
def test_an_honest_model_passes_the_probe_whatever_it_adds_to_its_logits(shift, scale):
    x = tokens(2, batch=1)
    other = x.clone()
    other[0, 5:] = (other[0, 5:] + 1) % V
    forward = shifted(causal_logits, shift, scale)
    # rounding as another batch would give it: the unshifted logits a few ulps apart before the shift
    base = forward(x)[0]
    noisy = (causal_logits(other) * (1 + 3e-7)) * scale + shift
    probe(base, noisy[0], 5)


@pytest.mark.parametrize("shift", [0.0, 1e3, 1e6, -3e6])
def test_a_lookahead_fails_the_probe_whatever_it_adds_to_its_logits(shift):
    x = tokens(3, batch=1)
    other = x.clone()
    other[0, 5:] = (other[0, 5:] + 1) % V
    forward = shifted(lookahead, shift)
    with pytest.raises(NotCausal):
        probe(forward(x)[0], forward(other)[0], 5)


def test_a_lookahead_just_over_the_tolerance_fails_and_one_under_it_passes():
    x = tokens(4, batch=1)
    other = x.clone()
    other[0, 5:] = (other[0, 5:] + 1) % V
    # a one-hot bump of s nats on one token moves that log-probability by about s (1 - p): a little less than s
    with pytest.raises(NotCausal):
        probe(lookahead(x, 2 * LOG_PROB_TOLERANCE)[0], lookahead(other, 2 * LOG_PROB_TOLERANCE)[0], 5)
    probe(lookahead(x, LOG_PROB_TOLERANCE / 2)[0], lookahead(other, LOG_PROB_TOLERANCE / 2)[0], 5)


@pytest.mark.parametrize("bad", [NAN, INF])
def test_a_non_finite_logit_before_the_cut_fails_the_probe(bad):
    x = tokens(5, batch=1)
    base = causal_logits(x)[0]
    broken = base.clone()
    broken[:5] = bad
    with pytest.raises(NotCausal):
        probe(broken, broken.clone(), 5)  # the same NaN on both sides is no agreement


# --- the milestones' probes (grader/suites/causality.py) -----------------------------------------------------------


PROBES = causality.OUTPUT_PROBES


def run_probe(check: str, forward) -> None:
    x, other, shape = tokens(6), tokens(7), (3, T, V)
    causality.output_probe(check, forward, x, other, causality.token_perturbation(V), shape, "logits", logits=True)


@pytest.mark.parametrize("check", PROBES)
@pytest.mark.parametrize("shift,scale", [(0.0, 1.0), (1e4, 1.0), (0.0, 300.0)])
def test_an_honest_model_with_shifted_or_scaled_logits_passes(check, shift, scale):
    run_probe(check, shifted(causal_logits, shift, scale))


@pytest.mark.parametrize("shift", [0.0, 1e6, -3e6])
def test_a_lookahead_fails_no_future_leak_whatever_it_adds(shift):
    with pytest.raises(AssertionError, match="nats of log-probability when the inputs from position"):
        run_probe("no_future_leak", shifted(lookahead, shift))


def test_a_caller_tolerance_is_absolute_not_a_share_of_the_outputs():
    """The old probe scaled ``tol`` by the outputs' size: 1e-6 of 3e7 let a lookahead of 8 nats through (float32
    still holds it there: its spacing at 3e7 is 2)."""
    forward = shifted(lookahead, 3e7)
    with pytest.raises(AssertionError, match="changes by"):
        causality.no_future_leak(forward, tokens(6), causality.token_perturbation(V), (3, T, V), "x", tol=1e-6)


def test_a_lookahead_fails_prefix_consistent_with_the_leak_named():
    with pytest.raises(AssertionError, match="leaks from the future"):
        run_probe("prefix_consistent", shifted(lookahead, 1e6))


def test_a_model_that_mixes_the_batch_fails_batch_independent_whatever_it_adds():
    def mixes(idx: torch.Tensor) -> torch.Tensor:
        logits = causal_logits(idx)
        return logits + 1e6 + logits.mean(0, keepdim=True)

    with pytest.raises(AssertionError, match="batch item 0 changes"):
        run_probe("batch_independent", mixes)


def test_an_attention_output_shifted_by_a_huge_constant_gets_no_wider_tolerance():
    """Outputs that are not logits are compared as they are, with an absolute tolerance."""
    feats = torch.randn(2, T, 4, generator=torch.Generator().manual_seed(8))

    def leaks(x: torch.Tensor) -> torch.Tensor:
        out = x.cumsum(1)
        out[:, :-1] += 0.5 * x[:, 1:]  # a little of the next position
        return out + 1e5  # float32 still holds the leak there (its spacing at 1e5 is 0.008)

    with pytest.raises(AssertionError, match="changes by"):
        causality.no_future_leak(
            leaks, feats, causality.perturb_floats, (2, T, 4), "out", tol=causality.SCALED_INPUT_TOLERANCE
        )
