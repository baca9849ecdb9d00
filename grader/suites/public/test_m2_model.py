"""Public checks for milestone 2: the lesson's parameter count and the logits' shape."""

import torch

from grader.suites import checks


def test_public_parameter_count(m2):
    """(public) your TinyGPT(50, 64, 4, 2, 8) has the lesson's 107,008 parameters"""
    checks.equal(
        m2.call("count_parameters", m2.new("TinyGPT", 50, 64, 4, 2, 8)), 107_008, "the lesson model's parameter count"
    )


def test_public_logits_shape(m2):
    """(public) TinyGPT(50, 64, 4, 2, 8) maps (2, 8) token ids to (2, 8, 50) logits"""
    model = m2.new("TinyGPT", 50, 64, 4, 2, 8, seed=0)
    checks.tensor(model(torch.randint(0, 50, (2, 8))), "the logits", (2, 8, 50))
