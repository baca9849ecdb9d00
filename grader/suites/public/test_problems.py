"""Public checks for `problems`: softmax_xent_grad on two rows worked by hand and with NumPy alone, and every
checkpoint answered (the release ships no answer: whether an answer is right is the full grader's to say)."""

import math

import pytest

from grader.suites import checks, rules

RULES = (rules.NumpyOnly(advice="This part is NumPy only: leave torch out of the function and its helpers"),)


@pytest.fixture(scope="module")
def verdicts(grading_context) -> rules.Verdicts:
    # A paper may lift the rule for this part (grader/paper/); the lesson keeps it.
    return rules.Verdicts(grading_context.submission, active=grading_context.rules_for("problems"))


def worked_example(problems):
    """softmax_xent_grad on logits [[0, 0], [0, ln 3]] and targets [0, 1], made as NumPy arrays in the worker."""
    logits = problems.call("array", [[0.0, 0.0], [0.0, math.log(3.0)]], module="numpy")
    targets = problems.call("array", [0, 1], module="numpy")
    result = problems.call("softmax_xent_grad", logits, targets)
    if type(result) not in (tuple, list) or len(result) != 2:
        checks.fail(
            f"softmax_xent_grad returns two values, the loss and the gradient; it gave {checks.describe(result)}"
        )
    return result


def test_public_numpy_only(problems, verdicts):
    """(public) softmax_xent_grad uses NumPy alone: no torch imported, named or called"""
    calls = []
    for batch in (2, 4):
        logits = problems.call("array", [[0.0, float(i)] for i in range(batch)], module="numpy")
        targets = problems.call("array", [i % 2 for i in range(batch)], module="numpy")
        calls.append(rules.Call((logits, targets), f"B = {batch}"))
    verdicts.require(problems, rules.Part("softmax_xent_grad", RULES, (rules.Growth("the batch", *calls),)))


def test_public_worked_example(problems):
    """(public) two rows: probabilities [1/2, 1/2] and [1/4, 3/4]; the mean loss is (ln 2 + ln 4/3) / 2 and the
    gradient (p - y) / 2 is [[-1/4, 1/4], [1/8, -1/8]]"""
    loss, grad = worked_example(problems)
    if getattr(loss, "short_type", None) == "float64":
        loss = loss.call("item")
    want = (math.log(2.0) + math.log(4.0 / 3.0)) / 2
    checks.relative_close(checks.number(loss, "the loss"), want, "the loss", 1e-6)
    if getattr(grad, "short_type", None) != "ndarray":
        checks.fail(f"grad should be a NumPy array of shape (2, 2), not {grad!r}")
    got = grad.call("tolist")
    expected = [[-0.25, 0.25], [0.125, -0.125]]
    if not all(math.isclose(g, e, abs_tol=1e-9) for row, erow in zip(got, expected) for g, e in zip(row, erow)):
        checks.fail(f"grad is {got}, expected {expected}")


@pytest.mark.parametrize(
    "question",
    ["Q_A1", "Q_A2", "Q_A3", "Q_A4", "Q_A5", "Q_B1", "Q_B2", "Q_B3", "Q_B4", "Q_C1", "Q_C2", "Q_C3", "Q_D1", "Q_D2"]
    + ["Q_D3"],
)
def test_public_answered(problems, question):
    """(public) the checkpoint has an answer (whether it is right, the full grader says)"""
    if problems.value(question) is None:
        checks.not_implemented(f"{question} is still None")
