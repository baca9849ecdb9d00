"""Public checks for the lesson group: your four files together, and the numbers the lesson prints (public anyway:
each exercise's `__main__` prints them beside the lesson's values)."""

import torch

from grader.suites import checks, generation
from grader.suites.public.test_m3_train import LESSON_DATA, LESSON_LOSSES, lesson_loss_cause

LESSON = (50, 64, 4, 2, 8)
LESSON_TOKENS = [5, 12, 3, 42, 2, 38, 35, 35]


def test_public_files_work_together(lesson):
    """(public) your TinyGPT, built from your attention, has the lesson's 107,008 parameters"""
    model = lesson.new("TinyGPT", *LESSON, module="m2_model")
    checks.equal(lesson.call("count_parameters", model, module="m2_model"), 107_008, "the parameter count")


def test_public_lesson_losses(lesson):
    """(public) seed 42, your four files: train prints the losses 4.0511, 3.4078, 2.7282, 1.5836"""
    model = lesson.new("TinyGPT", *LESSON, seed=42, module="m2_model")
    losses = lesson.call("train", model, torch.tensor(LESSON_DATA), 20, module="m3_train")
    if not (isinstance(losses, list) and len(losses) == 20):
        checks.fail(f"train(model, data, 20) should return 20 losses, not {checks.describe(losses)}")
    for step, want in LESSON_LOSSES.items():
        got = checks.number(losses[step - 1], f"step {step}'s loss")
        if checks.differs(got, want, 2e-3):
            checks.fail(f"step {step}'s loss is {got:.4f}; the lesson prints {want}: {lesson_loss_cause(lesson, step)}")


def test_public_lesson_tokens(lesson):
    """(public) seed 42, your four files: generate([[5, 12, 3]], 5) prints [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = lesson.new("TinyGPT", *LESSON, seed=42, module="m2_model")
    out = lesson.call("generate", model, torch.tensor([[5, 12, 3]]), 5, module="m4_generate")
    got = checks.tensor(out, "generate's result", (1, 8), dtype=None)
    if got[0].tolist() != LESSON_TOKENS:
        hint = generation.greedy_cause(lesson, model, got, 3, LESSON[-1])
        checks.equal(got[0].tolist(), LESSON_TOKENS, "the generated sequence", hint=hint)
