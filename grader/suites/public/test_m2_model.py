"""Public checks for milestone 2: the lesson's parameter count and the logits' shape."""

import math

import torch

from grader.suites import checks

LESSON_COUNT = 107_008


def test_public_parameter_count(m2):
    """(public) your TinyGPT(50, 64, 4, 2, 8) has the lesson's 107,008 parameters"""
    model = m2.new("TinyGPT", 50, 64, 4, 2, 8)
    count = m2.call("count_parameters", model)
    if count != LESSON_COUNT:
        checks.equal(count, LESSON_COUNT, "the lesson model's parameter count", hint=count_cause(model.describe()))


def count_cause(described: dict) -> str:
    """Why the count is off, read from the model's own parameters (names, shapes, and each one's uses)."""
    try:
        names = {str(k): [int(n) for n in v] for k, v in described["parameters"].items()}
        uses = len(described["all_parameters"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return ""
    held = sum(math.prod(shape) for shape in names.values())
    if not any(k.startswith("blocks.") for k in names):
        return (
            "no parameter of the blocks is registered: keep them in an nn.ModuleList (a plain Python list hides them)"
        )
    if uses != len(names):
        return "one GPTBlock object is used for every layer ([GPTBlock(...)] * n_layers): build each layer's own"
    if "head.bias" in names:
        return "the head has a bias (50 numbers more): nn.Linear(d, vocab_size, bias=False)"
    if held == LESSON_COUNT:
        return f"the model holds {held:,} numbers, so count_parameters miscounts them: sum p.numel() over parameters()"
    return ""


def test_public_logits_shape(m2):
    """(public) TinyGPT(50, 64, 4, 2, 8) maps (2, 8) token ids to (2, 8, 50) logits"""
    model = m2.new("TinyGPT", 50, 64, 4, 2, 8, seed=0)
    checks.tensor(model(torch.randint(0, 50, (2, 8))), "the logits", (2, 8, 50))
