"""Milestone problems: four multi-part problems (problem_questions.py), each part a checkpoint marked on the
student's own numbers, and softmax_xent_grad, a NumPy part under the numpy-only rule.

The code part's inputs are made in the worker as NumPy arrays (numpy.array on plain lists), so the student's
function never receives a tensor; its result is read back as plain data. Its rule (grader/suites/rules.py
``NumpyOnly``) is judged once per submission: the source (torch imported or named in the function or its
helpers), the run (a torch function dispatched), and what it returns (a torch tensor). A broken rule fails
every check of the function, so the code part scores 0. A wrong number is explained by recomputing the usual
mistakes (y - p, the sum for the mean, p without the target's -1, the loss's sign, an overflowing exp).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from grader.results import RuleBroken
from grader.sandbox.client import Remote
from grader.suites import checks, questions, rules
from grader.suites.hidden import problem_questions

FUNCTION = "softmax_xent_grad"
RULE = rules.NumpyOnly(
    advice="Write it with NumPy alone: subtract each row's max, np.exp, np.log of the row sums, and index the "
    "targets' entries with np.arange(B)"
)
RULES = (RULE,)  # the rules this suite applies, by name (grader/paper/config.py RULES names them)
NUMPY_SCALARS = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "bool_")


# ---------------------------------------------------------------- the NumPy part


def inputs(seed: int, batch: int, classes: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Logits (batch, classes) spread like a model's (standard deviation 2), ``shift`` added to each; targets."""
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 2.0, (batch, classes)) + shift, rng.integers(0, classes, batch)


def in_worker(view, logits: np.ndarray, targets: np.ndarray) -> tuple[Remote, Remote]:
    """The two arrays made in the worker by numpy itself (``numpy.array`` of plain lists): handles to pass on."""
    return (
        view.call("array", logits.tolist(), module="numpy"),
        view.call("array", targets.tolist(), module="numpy"),
    )


def part(view) -> rules.Part:
    """The function under its rule, with two calls (a batch of 2 and of 8) to watch while they run."""
    calls = []
    for batch in (2, 8):
        logits, targets = inputs(77 + batch, batch, 5)
        calls.append(rules.Call(in_worker(view, logits, targets), f"B = {batch}"))
    return rules.Part(FUNCTION, (RULE,), (rules.Growth("the batch", *calls),))


@pytest.fixture(scope="module")
def verdicts(grading_context) -> rules.Verdicts:
    # A paper may lift the rule for this part (grader/paper/); the lesson keeps it.
    return rules.Verdicts(grading_context.submission, active=grading_context.rules_for("problems"))


JUDGED = rules.Part(FUNCTION, (RULE,), ())  # the function once its verdict is known: nothing left to watch


def broken(why: str) -> RuleBroken:
    """A broken rule seen in what the function returned, worded as the rules' own verdicts are."""
    return RuleBroken(rules.Verdicts._message(JUDGED, RULE, f"{FUNCTION} {why}"))


def returns_torch(value: Any) -> bool:
    return isinstance(value, torch.Tensor) or (
        isinstance(value, tuple | list) and any(isinstance(v, torch.Tensor) for v in value)
    )


def call(view, verdicts: rules.Verdicts, logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """``softmax_xent_grad`` on the arrays, once it is known to follow its rule: (the loss, the gradient), checked
    to be a number and a float array of the logits' shape."""
    in_force = verdicts.active is None or RULE.name in verdicts.active
    if in_force:  # judged once (the calls it watches are made then); later checks read the verdict
        verdicts.require(view, JUDGED if FUNCTION in verdicts.broken else part(view))
    result = view.call(FUNCTION, *in_worker(view, logits, targets))
    if in_force and returns_torch(result):
        verdicts.broken[FUNCTION] = str(broken("returned a torch tensor; return a float and a NumPy array"))
        raise RuleBroken(verdicts.broken[FUNCTION])
    what = f"{FUNCTION}(logits {tuple(logits.shape)}, targets {tuple(targets.shape)})"
    if type(result) not in (tuple, list) or len(result) != 2:
        checks.fail(f"{what} should return a pair (loss, grad), not {checks.describe(result)}")
    loss, grad = result
    if isinstance(loss, Remote) and loss.short_type in NUMPY_SCALARS:
        loss = loss.call("item")  # a NumPy scalar is a number too
    if type(loss) not in (int, float):  # not checks.number: an overflow's inf is the later checks' to explain
        checks.fail(f"{what}'s loss should be a plain Python float, not {checks.describe(loss)}")
    if not (isinstance(grad, Remote) and grad.short_type == "ndarray"):
        checks.fail(f"{what}'s grad should be a NumPy array of shape {tuple(logits.shape)}, not {grad!r}")
    shape, kind = tuple(grad.attr("shape")), grad.attr("dtype").attr("kind")
    if shape != tuple(logits.shape) or kind != "f":
        checks.fail(
            f"{what}'s grad should be a float array of shape {tuple(logits.shape)} (one entry per logit), not one "
            f"of shape {shape} and dtype kind {kind!r}"
        )
    return float(loss), np.array(grad.call("tolist"), dtype=np.float64)


def explain_grad(got: np.ndarray, logits: np.ndarray, targets: np.ndarray, want: np.ndarray) -> str:
    """What the usual mistake that gives ``got`` missed; the formula where none does."""
    batch = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    usual = [
        (-want, "the sign is flipped: the gradient is p - y, not y - p"),
        (want * batch, "the loss is a mean over the B rows, so its gradient is (p - y) / B, not the sum's p - y"),
        (p / batch, "y is one-hot at the target: subtract 1 there, then divide by the B rows"),
        (p, "subtract 1 at each row's target, then divide by the B rows"),
    ]
    for value, why in usual:
        if np.allclose(got, value, atol=1e-6):
            return why
    return "the gradient of the mean cross-entropy is softmax(logits) - one_hot(targets), over the B rows"


CASES = [(0, 5, 7), (1, 1, 3), (2, 4, 50)]  # (seed, B, V): a batch of one has no mean to take


@pytest.mark.points(3)
@pytest.mark.parametrize("seed,batch,classes", CASES, ids=[f"B{b}-V{v}" for _, b, v in CASES])
def test_softmax_xent_grad_matches_the_reference(problems, ref, verdicts, seed, batch, classes):
    """softmax_xent_grad gives the mean cross-entropy and its gradient (p - y) / B, with NumPy alone"""
    logits, targets = inputs(seed, batch, classes)
    loss, grad = call(problems, verdicts, logits, targets)
    want_loss, want_grad = ref.m13_problems.softmax_xent_grad(logits, targets)
    if checks.differs(loss, want_loss, 1e-6 * max(1.0, abs(want_loss))):
        causes = {
            -want_loss: "the sign: the loss is -log p of the target, a positive number",
            want_loss * batch: "the loss is the mean over the B rows, not their sum",
        }
        cause = next((w for v, w in causes.items() if math.isclose(loss, v, rel_tol=1e-6)), "")
        checks.fail(
            f"the loss is {loss:.6g}, expected {want_loss:.6g}: "
            + (cause or "the mean over the rows of -log softmax(logits)[target]")
        )
    if not np.allclose(grad, want_grad, atol=1e-6):
        checks.fail(
            f"the gradient differs from (p - y) / B by up to {np.abs(grad - want_grad).max():.3g}: "
            + explain_grad(grad, logits, targets, want_grad)
        )


@pytest.mark.points(2)
def test_softmax_xent_grad_survives_large_logits(problems, ref, verdicts):
    """softmax_xent_grad stays finite and right for logits near 1000 (exp would overflow without the max taken)"""
    logits, targets = inputs(5, 3, 6, shift=1000.0)
    logits[1] *= 20  # a row spread over thousands: only subtracting the max keeps every exp in range
    loss, grad = call(problems, verdicts, logits, targets)
    want_loss, want_grad = ref.m13_problems.softmax_xent_grad(logits, targets)
    if not (math.isfinite(loss) and np.isfinite(grad).all()):
        checks.fail(
            f"for logits near 1000 the loss is {loss!r} and the gradient has {int((~np.isfinite(grad)).sum())} "
            "entries that are not finite: exp(1000) overflows. Subtract each row's maximum before exp (softmax "
            "does not change), then log-sum-exp"
        )
    if checks.differs(loss, want_loss, 1e-6 * abs(want_loss)) or not np.allclose(grad, want_grad, atol=1e-6):
        checks.fail(
            f"for logits near 1000 the loss is {loss:.6g} (expected {want_loss:.6g}) and the gradient is off by "
            f"{np.abs(grad - want_grad).max():.3g}: subtract each row's maximum, then compute log-softmax exactly"
        )


# ---------------------------------------------------------------- the problems' checkpoints

QUESTION_IDS = problem_questions.IDS
assert len(QUESTION_IDS) == 15, "the checkpoints' points below assume 15 of them"


def answer(view, name: str) -> Any:
    """The module-level answer, as plain data: a NumPy number as its value, a set listed in the worker."""
    value = view.value(name)
    if getattr(value, "short_type", None) in NUMPY_SCALARS:
        value = value.call("item")
    elif getattr(value, "short_type", None) in ("set", "frozenset"):
        value = view.call("list", value, module="builtins")
    return value


@pytest.fixture(scope="session")
def notebook(grading_context) -> bool:
    """Whether the submission is a notebook: grader/submission.py runs its cells from notebook_code.py."""
    return (grading_context.submission / "notebook_code.py").is_file()


@pytest.mark.points(30)  # 2 a checkpoint
@pytest.mark.parametrize("question_id", QUESTION_IDS)
def test_checkpoint(problems, variant, notebook, question_id):
    """the answer to the problem's part"""
    question = problem_questions.question(question_id, variant)
    questions.assess(question, answer(problems, question_id), problem_questions.where(notebook))
