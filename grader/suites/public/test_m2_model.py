"""Public checks for milestone 2: the lesson's parameter count and the logits' shape, then the block's and the
model's wiring read back part by part with weights chosen to show each (grader/suites/wiring.py): the residuals,
the feed-forward's nonlinearity, the LayerNorms, the final LayerNorm and the positions, and the lesson's initial
weights. In the student release these run on your own milestone 1."""

import math

import torch

from grader.sandbox.client import StudentError
from grader.suites import checks, wiring

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
    try:
        logits = model(torch.randint(0, 50, (2, 8)))
    except StudentError as e:
        # 8 tokens fill the position table: an index past it is where the positions are counted from
        positions = wiring.ModelProbe(lambda: m2.new("TinyGPT", *wiring.MODEL)).fault("positions")
        if e.type == "IndexError" and positions and "position table" in positions:
            checks.fail(f"your code raised IndexError ({e.message:.80}) on 8 tokens, as many as max_T: {positions}")
        raise
    checks.tensor(logits, "the logits", (2, 8, 50))


def block_probe(m2) -> wiring.BlockProbe:
    return wiring.BlockProbe(lambda: m2.new("GPTBlock", wiring.BLOCK_D, wiring.BLOCK_HEADS))


def test_public_block_residuals(m2):
    """(public) GPTBlock(12, 3) adds each sublayer's output to the un-normalised x: x + attn(ln1(x)), then + ffn"""
    block_probe(m2).check("parameters", "random", "sublayers", "residuals")


def test_public_block_activation(m2):
    """(public) GPTBlock(12, 3)'s feed-forward applies GELU between its two Linears"""
    block_probe(m2).check("activation")


def test_public_block_norms(m2):
    """(public) GPTBlock(12, 3) feeds attn ln1(x) and ffn ln2(x): LayerNorms with eps 1e-5 inside the square root"""
    block_probe(m2).check("ln2", "ln1")


def test_public_model_wiring(m2):
    """(public) TinyGPT(20, 12, 3, 2, 6) adds pos(arange(t)) to tok(idx), runs its blocks, then ln, then head"""
    wiring.ModelProbe(lambda: m2.new("TinyGPT", *wiring.MODEL)).check("parameters", "random", "final_norm", "positions")


def test_public_lesson_initialisation(m2):
    """(public) seeded with 42, TinyGPT(50, 64, 4, 2, 8) creates its layers in the stub's order"""
    model = m2.new("TinyGPT", 50, 64, 4, 2, 8, seed=42)
    if fault := wiring.parameter_fault(model, wiring.model_parameters(50, 64, 2, 8), "TinyGPT(50, 64, 4, 2, 8)"):
        checks.fail(fault)
    if fault := wiring.initial_weights_fault(model, (50, 64, 4, 2, 8), 42, "TinyGPT(50, 64, 4, 2, 8)"):
        checks.fail(fault)
