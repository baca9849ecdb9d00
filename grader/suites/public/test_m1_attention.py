"""Public checks for milestone 1: the lesson's worked example and the shapes."""

import torch

from grader.suites import attention_scale, causality, checks, wiring


def test_public_causal_mask(m1):
    """(public) causal_mask(4) is torch.tril(torch.ones(4, 4))"""
    mask = checks.tensor(m1.call("causal_mask", 4), "causal_mask(4)", (4, 4), dtype=None)
    ones = torch.ones(4, 4)
    if not torch.equal(mask.float(), ones.tril()):
        if torch.equal(mask.float(), ones.triu()):
            cause = "that is upper-triangular (torch.triu): row i must allow columns 0..i, torch.tril"
        elif torch.equal(mask.float(), ones.tril(-1)):
            cause = "the diagonal is 0, so a position cannot see itself: torch.tril, not tril(-1)"
        else:
            cause = "expected ones on and below the diagonal and zeros above, as torch.tril(torch.ones(4, 4))"
        checks.fail(f"causal_mask(4) is {mask.tolist()}: {cause}")


def test_public_worked_example(m1):
    """(public) seed 7: weights[0] = [1, 0, 0, 0] and out[0] = [-0.0835, -0.0235, 0.1744, 2.2983]"""
    torch.manual_seed(7)
    q, k, v = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    pair = m1.call("causal_attention", q, k, v)
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        checks.fail(f"causal_attention should return (out, weights), not {checks.describe(pair)}")
    out = checks.tensor(pair[0], "out", (4, 4))
    weights = checks.tensor(pair[1], "weights", (4, 4))
    checks.finite(weights, "weights", ("query", "key"), explain=lambda: nan_cause(weights))
    sees_the_future(weights)
    rows_sum_to_one(weights)
    checks.assert_close_where(weights[0], torch.tensor([1.0, 0, 0, 0]), "weights[0]", ("column",), atol=1e-4)
    checks.assert_close_where(
        out[0], torch.tensor([-0.0835, -0.0235, 0.1744, 2.2983]), "out[0]", ("column",), atol=1e-3
    )


def sees_the_future(weights: torch.Tensor) -> None:
    """Fails when a query gives weight to a later key: whatever else is wrong, the mask lets the future in."""
    future = weights.triu(1)
    if future.any():
        i, j = (int(x) for x in future.nonzero()[0])
        checks.fail(
            f"weights[{i}, {j}] is {float(weights[i, j]):.4f}, but key {j} comes after query {i} and must get "
            "weight 0: the mask must let each query see itself and earlier keys only (lower-triangular, "
            "torch.tril), applied to the scores before the softmax"
        )


def rows_sum_to_one(weights: torch.Tensor) -> None:
    """Fails, naming the cause, when a row of weights does not sum to 1: the first number a student reads must
    already say why, not only that weights[0] differs."""
    rows, columns = weights.sum(-1), weights.sum(-2)
    if torch.allclose(rows, torch.ones_like(rows), atol=1e-4):
        return
    i = int((rows - 1).abs().argmax())
    # columns summing to 1 (rows not) is what a softmax over the queries gives, and nothing else here does
    cause = (
        "each column sums to 1 instead: the softmax must normalise over the keys, the last dimension (dim=-1)"
        if torch.allclose(columns, torch.ones_like(columns), atol=1e-4)
        else "the weights must be a softmax over each row's scores, blocked scores filled with -inf before it"
    )
    checks.fail(f"row {i} of weights sums to {float(rows[i]):.4f}, not 1: {cause}")


def test_public_self_attention_shape(m1):
    """(public) CausalSelfAttention(16, 4) maps (2, 5, 16) to (2, 5, 16)"""
    layer = m1.new("CausalSelfAttention", 16, 4, seed=0)
    checks.tensor(layer(torch.randn(2, 5, 16)), "CausalSelfAttention's output", (2, 5, 16))


def test_public_heads_keep_their_features(m1):
    """(public) CausalSelfAttention(12, 3): each head works on its own d_head features of every position"""
    # A view or reshape straight to (B, n_heads, T, d_head) runs and has the right shapes; where it is also undone by
    # a plain reshape, no output depends on a later input either: only where the features land shows it.
    layer = m1.new("CausalSelfAttention", wiring.LAYOUT_D, wiring.LAYOUT_HEADS)
    if fault := wiring.parameter_fault(layer, wiring.attention_parameters(wiring.LAYOUT_D), "CausalSelfAttention"):
        checks.fail(fault)
    if fault := wiring.head_layout_fault(layer):
        checks.fail(fault)


def test_public_output_projection(m1):
    """(public) CausalSelfAttention(12, 3) returns proj of its merged heads"""
    layer = m1.new("CausalSelfAttention", wiring.LAYOUT_D, wiring.LAYOUT_HEADS)
    if fault := wiring.parameter_fault(layer, wiring.attention_parameters(wiring.LAYOUT_D), "CausalSelfAttention"):
        checks.fail(fault)
    if fault := wiring.projection_fault(layer, wiring.LAYOUT_D):
        checks.fail(fault)


def test_public_self_attention_is_causal(m1):
    """(public) CausalSelfAttention(16, 4): output t does not change when inputs after t do"""
    # The later milestones run on this layer: a leak caught here is not blamed on m2, m3 or m4.
    layer = m1.new("CausalSelfAttention", 16, 4, seed=0)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(5))
    out = checks.tensor(layer(x), "CausalSelfAttention's output", (2, 5, 16))
    checks.finite(out, "CausalSelfAttention's output", explain=lambda: nan_cause(out))
    causality.no_future_leak(
        layer, x, causality.perturb_floats, (2, 5, 16), "CausalSelfAttention", explain=lambda: layout_cause(m1)
    )


def layout_cause(m1) -> str | None:
    """A leak that the heads' layout makes (merged without a transpose back) is not the mask's."""
    return wiring.head_layout_fault(m1.new("CausalSelfAttention", wiring.LAYOUT_D, wiring.LAYOUT_HEADS))


def nan_cause(out: torch.Tensor) -> str | None:
    """The bug that puts NaN where it is: which positions have it tells a masked diagonal from a wrong softmax.
    ``out``: (T, ...) weights by query, or (B, T, ...) outputs by position."""
    bad = ~torch.isfinite(out)
    bad = bad.flatten(1).any(-1) if out.dim() == 2 else bad.flatten(2).any(-1).any(0)  # by position
    if bad[0] and not bad[1:].any():
        return "only position 0 is NaN: it sees no key at all, so the diagonal must be allowed (torch.tril)"
    if bad[-1] and not bad[:-1].any() and (out.dim() != 2 or not out[:-1].tril().any()):
        # the last query is the one the causal mask allows everything: filled where it allows, it sees nothing
        return (
            "only the last position is NaN, and every other query gives its weight to later keys only: the mask "
            "is used inverted, -inf filled where it allows (mask == 1, or ~mask); fill where the mask is 0"
        )
    if bad[:-1].all() and not bad[-1]:
        # masked scores are -inf at every later key: normalised over heads or batch items, those give NaN
        return (
            "every position but the last is NaN, as a softmax over the wrong dimension gives: it must normalise "
            "over the keys, the last dimension (dim=-1)"
        )
    return None


# A query that scores key 0 at 0 and key 1 at 2 (q . k for d_k = 4), and one-hot values, so out[1] = weights[1].
SCALE_Q = torch.tensor([[0.0, 0, 0, 0], [1, 1, 1, 1]])
SCALE_K = torch.tensor([[0.0, 0, 0, 0], [1, 1, 0, 0]])
SCALE_V = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0]])
SCALED_ROW = [0.2689, 0.7311]  # softmax([0, 2 / sqrt(4)]) = [1, e] / (1 + e)
UNSCALED_ROW = [0.1192, 0.8808]  # softmax([0, 2]) = [1, e^2] / (1 + e^2)
OVER_D_ROW = [0.3775, 0.6225]  # softmax([0, 2 / 4])
# The masked, scaled scores [[0, -inf], [0, 1]] normalised down each column (over the queries) instead.
OVER_QUERIES = [[0.5, 0.0], [0.5, 1.0]]


def test_public_scores_are_scaled(m1):
    """(public) d_k = 4, raw scores [0, 2] for query 1: scaled to [0, 1], its weights are [0.2689, 0.7311]"""
    pair = m1.call("causal_attention", SCALE_Q, SCALE_K, SCALE_V)
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        checks.fail(f"causal_attention should return (out, weights), not {checks.describe(pair)}")
    out = checks.tensor(pair[0], "out", (2, 4))
    weights = checks.tensor(pair[1], "weights", (2, 2))
    checks.finite(weights, "weights", ("query", "key"), explain=lambda: nan_cause(weights))
    sees_the_future(weights)
    row = weights[1]
    if not torch.allclose(row, torch.tensor(SCALED_ROW), atol=1e-4):
        # a cause is named only when that bug gives these very weights
        if torch.allclose(row, torch.tensor(UNSCALED_ROW), atol=1e-4):
            cause = (
                "that is the softmax of the raw scores [0, 2], unscaled: are the scores divided by sqrt(d_k) "
                "before the softmax?"
            )
        elif torch.allclose(row, torch.tensor(OVER_D_ROW), atol=1e-4):
            cause = "that is the softmax of [0, 2 / 4]: the scale is 1 / sqrt(d_k), not 1 / d_k"
        elif torch.allclose(weights, torch.tensor(OVER_QUERIES), atol=1e-4):
            cause = (
                "each column of weights sums to 1, not each row: the softmax must normalise over the keys, "
                "the last dimension (dim=-1)"
            )
        else:
            cause = f"expected {SCALED_ROW}, the softmax of [0, 2 / sqrt(4)]"
        checks.fail(f"weights[1] is {[round(x, 4) for x in row.tolist()]}: {cause}")
    checks.assert_close_where(out[1], torch.tensor([*SCALED_ROW, 0, 0]), "out[1]", ("column",), atol=1e-4)


def test_public_self_attention_scale(m1):
    """(public) CausalSelfAttention(36, 4) divides its scores by sqrt(d_head) = 3, read back from one output"""
    # m2, m3 and m4 run on this layer: a wrong scale caught here is not a dead end there. Last in this file, so
    # that a wrong causal_attention, which the layer calls, is named by its own checks first.
    layer = m1.new("CausalSelfAttention", attention_scale.D, attention_scale.HEADS)
    if message := attention_scale.layer_scale_fault(layer):
        checks.fail(message)
