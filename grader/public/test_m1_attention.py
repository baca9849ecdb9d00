"""Public checks for milestone 1: the lesson's worked example and the shapes."""
import torch

from grader.suites import checks


def test_public_causal_mask(m1):
    """(public) causal_mask(4) is torch.tril(torch.ones(4, 4))"""
    mask = checks.tensor(m1.call("causal_mask", 4), "causal_mask(4)", (4, 4), dtype=None)
    if not torch.equal(mask.float(), torch.tril(torch.ones(4, 4))):
        checks.fail(f"causal_mask(4) is {mask.tolist()}: ones on and below the diagonal, zeros above")


def test_public_worked_example(m1):
    """(public) seed 7: weights[0] = [1, 0, 0, 0] and out[0] = [-0.0835, -0.0235, 0.1744, 2.2983]"""
    torch.manual_seed(7)
    q, k, v = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    pair = m1.call("causal_attention", q, k, v)
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        checks.fail(f"causal_attention should return (out, weights), not {checks.describe(pair)}")
    out = checks.tensor(pair[0], "out", (4, 4))
    weights = checks.tensor(pair[1], "weights", (4, 4))
    checks.close(weights[0], torch.tensor([1.0, 0, 0, 0]), "weights[0]", ("column",), atol=1e-4)
    checks.close(out[0], torch.tensor([-0.0835, -0.0235, 0.1744, 2.2983]), "out[0]", ("column",), atol=1e-3)


def test_public_self_attention_shape(m1):
    """(public) CausalSelfAttention(16, 4) maps (2, 5, 16) to (2, 5, 16)"""
    layer = m1.new("CausalSelfAttention", 16, 4, seed=0)
    checks.tensor(layer(torch.randn(2, 5, 16)), "CausalSelfAttention's output", (2, 5, 16))
