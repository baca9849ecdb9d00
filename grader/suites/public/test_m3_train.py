"""Public checks for milestone 3: teacher forcing on a small example, and the lesson's losses.

The checks run in this order, and a student's release shows the first that fails: the lesson's losses, a bare
number that any of these bugs changes, come last, after the checks that name a cause.
"""

import torch
import torch.nn.functional as F

from grader.suites import checks, wiring

LESSON_LOSSES = {1: 4.0511, 5: 3.4078, 10: 2.7282, 20: 1.5836}
# The lesson's data: torch.randint(0, 50, (8, 8)) right after torch.manual_seed(42) and TinyGPT(50, 64, 4, 2, 8).
LESSON_DATA = [
    [37, 36, 41, 36, 4, 7, 42, 33],
    [23, 11, 3, 33, 18, 0, 32, 43],
    [35, 27, 43, 43, 38, 23, 49, 5],
    [8, 4, 0, 21, 1, 15, 32, 31],
    [45, 8, 30, 2, 32, 40, 22, 36],
    [6, 31, 2, 1, 30, 5, 13, 27],
    [31, 44, 38, 13, 3, 2, 0, 38],
    [49, 37, 16, 24, 3, 30, 24, 44],
]


def test_public_inputs_targets(m3):
    """(public) clm_inputs_targets([[1, 2, 3, 4]]) is ([[1, 2, 3]], [[2, 3, 4]])"""
    pair = m3.call("clm_inputs_targets", torch.tensor([[1, 2, 3, 4]]))
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        checks.fail(f"clm_inputs_targets should return (inp, tgt), not {checks.describe(pair)}")
    checks.equal(checks.tensor(pair[0], "inp", (1, 3), torch.long).tolist(), [[1, 2, 3]], "inp")
    tgt = checks.tensor(pair[1], "tgt", (1, 3), torch.long).tolist()
    if tgt == [[1, 2, 3]]:
        checks.fail(
            "tgt is [[1, 2, 3]], the inputs themselves: the targets are not shifted. The target of position i "
            "is the next token, i + 1 (data[:, 1:])"
        )
    checks.equal(tgt, [[2, 3, 4]], "tgt")


# Three sequences of 7 tokens (inputs and targets of 6) for the grader's stand-in model: vocabulary 19, context 6.
STILL_DATA = [[3, 14, 7, 1, 9, 12, 5], [8, 2, 16, 11, 4, 0, 13], [6, 10, 18, 15, 1, 7, 2]]


def test_public_gradients_reset_each_step(m3):
    """(public) at lr=0 the weights never move, so 3 steps leave the same gradient on them as 1 step does"""
    left = {}
    for steps in (1, 3):
        model = m3.standin(19, 8, 6, seed=5)  # the grader's small stand-in language model, not your TinyGPT
        losses = m3.call("train", model, torch.tensor(STILL_DATA), steps=steps, lr=0.0)
        if not (isinstance(losses, list) and len(losses) == steps):
            checks.fail(
                f"train(model, data, steps={steps}) should return {steps} losses, not {checks.describe(losses)}"
            )
        losses = [checks.number(x, "a loss") for x in losses]
        if max(losses) - min(losses) > 1e-5:
            checks.fail(
                f"at lr=0 the losses still changed, {[round(x, 4) for x in losses]}: does train pass its lr "
                "to torch.optim.Adam?"
            )
        # What the last backward left in .grad (None, as after zero_grad(set_to_none=True), counts as zeros).
        grad = model.call("get_parameter", "head.bias", keep=True).attr("grad")
        left[steps] = torch.zeros(19) if grad is None else checks.tensor(grad, "head.bias.grad", (19,))
    one, three = left[1], left[3]
    if torch.allclose(three, one, atol=1e-6, rtol=1e-5):
        return
    added = (
        " (3 times what 1 step leaves: the steps' gradients added up)"
        if torch.allclose(three, 3 * one, atol=1e-6, rtol=1e-4)
        else ""
    )
    checks.fail(
        f"at lr=0, after 3 steps the stand-in's head.bias.grad differs from after 1 step{added}. Are the "
        "gradients zeroed at the start of every step, inside the loop (opt.zero_grad())? backward() adds "
        "to whatever .grad already holds"
    )


def test_public_first_loss_is_on_the_next_tokens(m3):
    """(public) train's first loss is the stand-in's mean cross-entropy on the next tokens, before any step"""
    model = m3.standin(19, 8, 6, seed=5)  # the grader's small stand-in language model, not your TinyGPT
    data = torch.tensor(STILL_DATA)
    logits = checks.tensor(model(data[:, :-1], grad=False), "the stand-in's logits", (3, 6, 19))
    on_next, on_same = (
        F.cross_entropy(logits.reshape(-1, 19), t.reshape(-1)).item() for t in (data[:, 1:], data[:, :-1])
    )
    losses = m3.call("train", model, data, steps=1, lr=0.0)
    if not (isinstance(losses, list) and len(losses) == 1):
        checks.fail(f"train(model, data, steps=1) should return 1 loss, not {checks.describe(losses)}")
    first = checks.number(losses[0], "the first loss")
    if not checks.differs(first, on_next, 1e-4):
        return
    if not checks.differs(first, on_same, 1e-4):
        checks.fail(
            f"train's first loss, {first:.4f}, is the model's loss at predicting each input token itself: the "
            "targets inside train are not shifted. Position i must predict token i + 1: train on "
            f"clm_inputs_targets(data), whose loss here is {on_next:.4f}"
        )
    checks.fail(
        f"train's first loss is {first:.4f}, but before any step the stand-in's mean cross-entropy on the next "
        f"tokens is {on_next:.4f}: the first loss is computed before the first update, on (inputs, targets) "
        "from clm_inputs_targets"
    )


def test_public_lesson_losses(m3):
    """(public) seed 42, your TinyGPT(50, 64, 4, 2, 8): losses 4.0511, 3.4078, 2.7282, 1.5836 at steps 1, 5, 10, 20"""
    model = m3.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model")
    data = torch.tensor(LESSON_DATA)
    losses = m3.call("train", model, data, 20)
    if not (isinstance(losses, list) and len(losses) == 20):
        checks.fail(f"train(model, data, 20) should return 20 losses, not {checks.describe(losses)}")
    for step, want in LESSON_LOSSES.items():
        got = checks.number(losses[step - 1], f"step {step}'s loss")
        if checks.differs(got, want, 2e-3):
            checks.fail(f"step {step}'s loss is {got:.4f}; in the lesson, {want}: {lesson_loss_cause(m3, step)}")


def lesson_loss_cause(view, step: int) -> str:
    """What the first of the lesson's losses to differ points at: milestones 1 and 2 read part by part where one
    of their readings fails, else what the step says (the first loss is the untrained model's; a later one, the
    training step's)."""
    if cause := wiring.earlier_fault(view):
        return cause
    if step == 1:
        return (
            "step 1's loss is the untrained model's loss on the lesson's data, and your model's parts read right "
            "(its heads, scale, blocks, norms, positions and seeded weights): look at the loss and the targets train "
            "uses (the mean cross-entropy over every position, each target the next token)"
        )
    return (
        "step 1's loss is the lesson's, so the model and the loss are right; the training step differs: each step "
        "zeroes the gradients, computes the loss, calls backward, then takes a step of torch.optim.Adam (lr=1e-3)"
    )
