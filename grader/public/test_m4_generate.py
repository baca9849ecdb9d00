"""Public check for milestone 4: the lesson's generated tokens."""
import torch

from grader.suites import checks


def test_public_lesson_tokens(m4):
    """(public) seed 42, your TinyGPT(50, 64, 4, 2, 8): generate([[5, 12, 3]], 5) is [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = m4.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model")
    out = checks.tensor(m4.call("generate", model, torch.tensor([[5, 12, 3]]), 5), "generate's result", (1, 8),
                        dtype=torch.long)
    checks.equal(out[0].tolist(), [5, 12, 3, 42, 2, 38, 35, 35], "the generated tokens",
                 hint="this check uses your TinyGPT too: if milestone 2's checks fail, fix those first")
