"""Public checks for milestone 4: the lesson's generated tokens, and a prompt longer than the model's context."""

import torch

from grader.suites import checks

# Two prompts of 7 tokens for the grader's stand-in model (vocabulary 23, context model.T = 5).
LONG_PROMPT = [[4, 17, 9, 2, 21, 13, 6], [11, 0, 15, 8, 3, 19, 7]]


def test_public_lesson_tokens(m4):
    """(public) seed 42, your TinyGPT(50, 64, 4, 2, 8): generate([[5, 12, 3]], 5) is [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = m4.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model")
    out = checks.tensor(
        m4.call("generate", model, torch.tensor([[5, 12, 3]]), 5), "generate's result", (1, 8), dtype=torch.long
    )
    checks.equal(
        out[0].tolist(),
        [5, 12, 3, 42, 2, 38, 35, 35],
        "the generated sequence",
        hint="this check runs your own TinyGPT, attention included: if a check of m1 or m2 fails, fix it first; if "
        "they all pass, check the scale 1 / sqrt(d_head), the GELU feed-forward, the final LayerNorm and the order "
        "the layers are created in against the stubs' docstrings",
    )


def test_public_prompt_longer_than_context(m4):
    """(public) a 7-token prompt, model.T = 5: every new token is predicted from the 5 most recent tokens"""
    model = m4.standin(23, 12, 5, seed=9)  # the grader's small stand-in language model, not your TinyGPT
    start = torch.tensor(LONG_PROMPT)
    out = checks.tensor(m4.call("generate", model, start, 4), "generate's result", (2, 11), dtype=torch.long)
    checks.equal(out[:, :7].tolist(), LONG_PROMPT, "the result's first 7 tokens (the prompt)")
    for i in range(7, 11):
        # What the model predicts at the last position of the 5 most recent tokens, asked of the model itself.
        recent = model(out[:, i - 5 : i], grad=False)[:, -1].argmax(-1)
        if torch.equal(out[:, i], recent):
            continue
        b = int((out[:, i] != recent).nonzero()[0])
        oldest = model(out[:, :5], grad=False)[:, -1].argmax(-1)
        cause = (
            "it is the prediction from the FIRST 5 tokens (the prompt's start), which never change. Is "
            "the sequence cropped to its last model.T tokens, idx[:, -model.T:], before each call?"
            if int(out[b, i]) == int(oldest[b])
            else "take the argmax of the logits at the last position, after cropping the sequence to its last "
            "model.T tokens"
        )
        checks.fail(
            f"the token generated at position {i} of row {b} is {int(out[b, i])}, but from positions "
            f"{i - 5} to {i - 1} the model predicts {int(recent[b])}: {cause}"
        )
