"""Public checks for `tying`: GPT-2 small's tied count and LibraryGPT's shape."""

import math

import torch

from grader.suites import checks


def test_public_gpt2_small_count(tying):
    """(public) LibraryGPT at GPT-2 small's size has 124,439,808 parameters"""
    described = tying.new("LibraryGPT", 50257, 768, 12, 12, 1024, meta=True).describe()
    count = sum(math.prod(shape) for shape in described["parameters"].values())
    checks.equal(count, 124_439_808, "LibraryGPT(50257, 768, 12, 12, 1024)'s parameter count")


def test_public_library_gpt_shape(tying):
    """(public) LibraryGPT(50, 64, 4, 2, 8) maps (2, 8) token ids to (2, 8, 50) logits"""
    model = tying.new("LibraryGPT", 50, 64, 4, 2, 8, seed=0)
    checks.tensor(model(torch.randint(0, 50, (2, 8))), "the logits", (2, 8, 50))
