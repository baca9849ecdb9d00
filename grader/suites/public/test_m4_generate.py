"""Public checks for milestone 4: the lesson's generated tokens, and a prompt longer than the model's context."""

import torch

from grader.suites import checks, generation

# Two prompts of 7 tokens for the grader's stand-in model (vocabulary 23, context model.T = 5).
LONG_PROMPT = [[4, 17, 9, 2, 21, 13, 6], [11, 0, 15, 8, 3, 19, 7]]


def test_public_lesson_tokens(m4):
    """(public) seed 42, your TinyGPT(50, 64, 4, 2, 8): generate([[5, 12, 3]], 5) is [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = m4.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model")
    start = torch.tensor([[5, 12, 3]])
    out = m4.call("generate", model, start, 5)
    if isinstance(out, torch.Tensor) and (cause := generation.wrong_length(out, start, 5, 50)):
        checks.fail(f"generate returned shape {tuple(out.shape)} where (1, 8) is due: {cause}")
    out = checks.tensor(out, "generate's result", (1, 8), dtype=torch.long)
    if out[0].tolist() != LESSON_TOKENS:
        checks.equal(
            out[0].tolist(), LESSON_TOKENS, "the generated sequence", hint=generation.greedy_cause(m4, model, out, 3, 8)
        )


LESSON_TOKENS = [5, 12, 3, 42, 2, 38, 35, 35]


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


def test_public_mode_is_left_as_found(m4):
    """(public) generate hands the model back in the mode it got: training stays training, eval stays eval"""
    for training in (True, False):
        model = m4.standin(23, 12, 5, seed=9)  # the grader's small stand-in language model
        model.call("train", training, keep=True)
        modes = checks.training_modes(model)
        m4.call("generate", model, torch.tensor(LONG_PROMPT), 2)
        checks.same_training_modes(model, modes, "generate")
