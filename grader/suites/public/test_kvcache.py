"""Public checks for `kvcache`: the lesson's counts and tokens."""

import torch

from grader.suites import checks


def test_public_positions(kvcache):
    """(public) positions_processed(10, 20, ...) is 390 without a cache and 29 with one"""
    checks.equal(kvcache.call("positions_processed", 10, 20, False), 390, "positions_processed(10, 20, False)")
    checks.equal(kvcache.call("positions_processed", 10, 20, True), 29, "positions_processed(10, 20, True)")


def test_public_lesson_tokens(kvcache):
    """(public) seed 42, your TinyGPT(50, 64, 4, 2, 8): generate_cached gives [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = kvcache.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model")
    out = checks.tensor(
        kvcache.call("generate_cached", model, torch.tensor([[5, 12, 3]]), 5),
        "generate_cached's result",
        (1, 8),
        dtype=torch.long,
    )
    checks.equal(out[0].tolist(), [5, 12, 3, 42, 2, 38, 35, 35], "the generated sequence")
