"""Public checks for `concepts`: the functions on the lesson's TinyGPT and small inputs, and every question
answered, and right or wrong (from its locked hash, grader/suites/locked.py: the release ships no answer)."""

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from grader.suites import checks, wiring
from grader.suites.locked import is_right, judges
from grader.suites.locked_answers import LOCKED
from grader.suites.loss_faults import FED_AT, all_zero, below_zero, called, fed, fed_fault
from grader.suites.questions import shown

LESSON_MODEL = (50, 64, 4, 2, 8)


def test_public_decoder_layer_extra_is_a_count(concepts):
    """(public) decoder_layer_extra returns a positive whole number that grows with d and ignores the heads"""
    small = checks.number(concepts.call("decoder_layer_extra", 64, 4, 256), "decoder_layer_extra(64, 4, 256)")
    if not small > 0 or small != int(small):
        checks.fail(f"decoder_layer_extra(64, 4, 256) should be a positive whole number of parameters, not {small}")
    heads = checks.number(concepts.call("decoder_layer_extra", 64, 8, 256), "decoder_layer_extra(64, 8, 256)")
    if heads != small:
        checks.fail(
            f"decoder_layer_extra(64, 8, 256) is {heads}, but {small} with 4 heads: heads split the width d, so "
            "their number changes no parameter count"
        )
    wider = checks.number(concepts.call("decoder_layer_extra", 128, 4, 256), "decoder_layer_extra(128, 4, 256)")
    if not wider > small:
        said = f"decoder_layer_extra(128, 4, 256) is {wider}, not more than {small} at d = 64"
        if wider == small:  # a count of tensors is the same at every width; a count of their elements is not
            checks.fail(
                f"{said}: a count that ignores the width counts parameter tensors (each weight or bias as one), "
                "not their elements: sum(p.numel() for p in layer.parameters())"
            )
        checks.fail(said)


def test_public_one_pass_equals_one_pass_per_prefix(concepts):
    """(public) on the lesson's TinyGPT, teacher_forced_losses and prefix_losses give the same 8 losses"""
    model = concepts.new("TinyGPT", *LESSON_MODEL, seed=42, module="m2_model")
    counter = counted(model)
    seq = torch.arange(9) * 5 % 50

    def fault(one_pass: bool, skip: int = 0) -> Callable[[], str | None]:
        """What the passes since the ``skip`` first say (a model without a token table to count on: nothing)."""
        return lambda: None if counter is None else fed_fault(fed(counter)[skip:], 9, LESSON_MODEL[4], one_pass)

    one = called(concepts, "teacher_forced_losses", (model, seq), "teacher_forced_losses", fault(True))
    one = checks.tensor(one, "teacher_forced_losses", (8,))
    seen = 0 if counter is None else len(fed(counter))
    many = checks.tensor(
        called(concepts, "prefix_losses", (model, seq), "prefix_losses", fault(False, seen)), "prefix_losses", (8,)
    )
    for name, losses in (("teacher_forced_losses", one), ("prefix_losses", many)):
        if cause := below_zero(losses) or all_zero(losses):
            checks.fail(f"{name} on the lesson's TinyGPT: {cause}")
    gap = (one - many).abs().max().item()
    if not gap < 1e-4:
        said = f"one pass and one pass per prefix differ by up to {gap:.3g}"
        # they agree only on a model whose output at t sees tokens 0..t alone, whatever their length
        if cause := wiring.earlier_fault(concepts):
            checks.fail(f"{said}: {cause}")
        # with a causal model, a change to the last input token moves no earlier position's loss, unless the
        # losses are normalised across positions
        changed = seq.clone()
        changed[-2] = (changed[-2] + 1) % 50
        other = checks.tensor(
            concepts.call("teacher_forced_losses", model, changed, grad=False), "teacher_forced_losses", (8,)
        )
        if not torch.allclose(one[:-2], other[:-2], atol=1e-5):
            checks.fail(
                f"{said}: teacher_forced_losses's entries for earlier positions changed when only the last input "
                "token did, so its softmax runs across the positions; normalise each position over the vocabulary, "
                "the last axis"
            )
        checks.fail(
            f"{said}: with a causal model they give the same losses, so one of the two scores the wrong position "
            "or the wrong target"
        )
    if not 3.0 < one.mean().item() < 5.0:
        checks.fail(f"the mean loss of an untrained model is {one.mean().item():.3f}: expected close to log 50")


def counted(model) -> Any:
    """A counter of what ``model`` is fed (grader/suites/loss_faults.py), or None where it cannot count."""
    try:
        return model.count_positions(FED_AT)
    except Exception:  # noqa: BLE001 - a model without the lesson's token table: nothing to count on
        return None


def plain_attention(x: torch.Tensor, causal: bool) -> torch.Tensor:
    T, d = x.shape
    scores = x @ x.T / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ x


def test_public_counterexample_breaks_unmasked_attention(concepts):
    """(public) counterexample(4, 4): two inputs with the same first token; unmasked attention's first output moves"""
    pair = concepts.call("counterexample", 4, 4)
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        checks.fail(f"counterexample(4, 4) should return a pair of (4, 4) tensors, not {checks.describe(pair)}")
    x1, x2 = (checks.tensor(x, "each input", (4, 4)) for x in pair)
    if not torch.equal(x1[0], x2[0]):
        checks.fail("the two inputs should share their first token; only later tokens may differ")
    if not (plain_attention(x1, False)[0] - plain_attention(x2, False)[0]).abs().max() > 1e-3:
        checks.fail("attend(x, causal=False) gives nearly the same first output for your two inputs")


def test_public_overflow_error_names_an_exception(concepts):
    """(public) overflow_error on the lesson's TinyGPT names an exception class"""
    model = concepts.new("TinyGPT", *LESSON_MODEL, seed=42, module="m2_model")
    got = concepts.call("overflow_error", model)
    if not isinstance(got, str) or not got.isidentifier():
        said = f"overflow_error should return the exception's class name, type(e).__name__, not {checks.describe(got)}"
        # the exception comes from the model: one that never raises may be the model's doing, not this function's
        checks.fail(f"{said}: {cause}" if (cause := wiring.earlier_fault(concepts)) else said)


QUESTIONS = [
    "Q_BLOCK",
    "Q_FAMILIES",
    "Q_CROSS",
    "Q_PARALLEL",
    "Q_MASKED",
    "Q_BUGLINE",
    "Q_MASKDIR",
    "Q_SHAPE",
    "Q_MISSING",
    "Q_REVERSE",
    "Q_ABILITIES",
    "Q_FEWSHOT",
    "Q_LIE",
    "Q_LOSS0",
    "Q_WINDOW",
    "Q_OMIT",
    "Q_OVERFLOW",
    "Q_PAD",
    "Q_EXPOSURE",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_public_answered(concepts, variant, question):
    """(public) the question has an answer, and it is right"""
    value = concepts.value(question)
    if value is None:
        checks.not_implemented(f"{question} is still None")
    if getattr(value, "short_type", None) in ("set", "frozenset"):  # a set is no plain data: listed in the worker
        value = concepts.call("list", value, module="builtins")
    # the locks hold the lesson's numbers, letters and line numbers: a paper's student, asked their own (a lock
    # marked per_student), is told only that they answered
    lock = LOCKED["concepts"][question]
    if judges(lock, variant.seed is not None) and not is_right(question, value, lock):
        checks.fail(
            f"{question}: {shown(value)} is not right (this public check knows right from wrong but not why: "
            "work it through again from the question's comment)"
        )
