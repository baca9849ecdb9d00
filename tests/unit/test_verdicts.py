"""A failed check's verdict, the class a contest shows where it hides the message: from the exception that
failed it, looking through a check's own explanation to the student's error it explains."""

from __future__ import annotations

import pytest

from grader.results import RuleBroken, Unanswered, Verdict, rule_broken_message, shown_verdict
from grader.runner import verdict_of
from grader.sandbox.client import StudentError, WorkerCrash
from grader.sandbox.session import ImportFailure, MissingName


def explained(error: Exception) -> AssertionError:
    """What a check raises when it catches the student's error and fails with a teaching message."""
    try:
        try:
            raise error
        except Exception:
            raise AssertionError("your code raised at a legitimate input: ...") from None
    except AssertionError as failure:
        return failure


@pytest.mark.parametrize(
    "error,verdict",
    [
        (AssertionError("weights differ from the reference"), Verdict.WRONG_ANSWER),
        (StudentError("ValueError", "boom", []), Verdict.RUNTIME_ERROR),
        (StudentError("NotImplementedError", "", []), Verdict.NOT_IMPLEMENTED),
        (StudentError("MissingName", "no causal_mask", []), Verdict.IMPORT_ERROR),
        (StudentError("MemoryError", "", []), Verdict.MEMORY_LIMIT),
        (
            StudentError("RuntimeError", "DefaultCPUAllocator: can't allocate memory: you tried to allocate 4", []),
            Verdict.MEMORY_LIMIT,
        ),
        (WorkerCrash("no answer within 20.0 s", limit="time"), Verdict.TIME_LIMIT),
        (WorkerCrash("the worker was killed (SIGKILL)", limit="memory"), Verdict.MEMORY_LIMIT),
        (WorkerCrash("the worker crashed with a segmentation fault"), Verdict.RUNTIME_ERROR),
        (ImportFailure("the submission's files could not be imported"), Verdict.IMPORT_ERROR),
        (MissingName("m1_attention.py defines no causal_mask"), Verdict.IMPORT_ERROR),
        (Unanswered("not implemented yet: q3 is still None"), Verdict.NOT_ANSWERED),
        (RuleBroken("rule broken (no loops), so every check of f fails: ..."), Verdict.RULE_BROKEN),
    ],
    ids=lambda x: x if isinstance(x, str) else type(x).__name__,
)
def test_the_verdict_is_the_class_of_the_failure(error, verdict):
    assert verdict_of(error) is verdict


@pytest.mark.parametrize(
    "error,verdict",
    [
        (StudentError("ValueError", "boom", []), Verdict.RUNTIME_ERROR),
        (WorkerCrash("no answer within 20.0 s", limit="time"), Verdict.TIME_LIMIT),
    ],
)
def test_a_crash_a_check_explains_is_still_a_crash_not_a_wrong_answer(error, verdict):
    assert verdict_of(explained(error)) is verdict


def test_a_failed_run_of_the_metric_task_is_a_counted_verdict_of_its_limit():
    from grader.lmbudget.task import RunFailed

    assert verdict_of(RunFailed("time limit exceeded: 40 of 30 CPU s", limit="time")) is Verdict.TIME_LIMIT
    assert verdict_of(RunFailed("runtime error while evaluating your model", limit="")) is Verdict.RUNTIME_ERROR


def test_a_broken_rule_is_shown_with_the_rule_and_other_verdicts_as_they_are():
    message = rule_broken_message("no library attention", "so every check of f fails: it calls F.sdpa")
    assert shown_verdict({"verdict": "rule broken", "message": message}) == "rule broken: no library attention"
    assert shown_verdict({"verdict": "not answered", "message": "not implemented yet: q3"}) == "not answered"
    assert shown_verdict({"verdict": "wrong answer", "message": message}) == "wrong answer"
