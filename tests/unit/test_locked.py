"""The locked answers (grader/suites/locked.py): up to date with the hidden questions, and in agreement with the
hidden marking on right versus wrong for the reference's answers and every answer the corpus writes."""

from __future__ import annotations

import re
import runpy

import pytest

from corpus import concepts, kvmemory, quiz
from grader.milestones import MILESTONES
from grader.suites import locked
from grader.suites.hidden import concept_questions, kv_questions, lock_answers
from grader.suites.hidden.test_quiz import QUESTIONS as QUIZ
from grader.suites.locked_answers import LOCKED
from grader.variants import LESSON
from helpers import SOLUTIONS

HIDDEN = {
    "quiz": {q.id: q for q in QUIZ},
    "kvmemory": {i: kv_questions.question(i, LESSON) for i in kv_questions.IDS},
    "concepts": {i: concept_questions.question(i, LESSON) for i in concept_questions.IDS},
}
FILES = {
    exercise: f"{MILESTONES[exercise].modules[0]}.py" for exercise in HIDDEN
}  # quiz.py, m11_kvmemory.py, m12_concepts.py
ASSIGNMENT = re.compile(r"^(Q\w*) = (.+?)(?:\s+#.*)?$")


def corpus_answers() -> list[tuple[str, str, object]]:
    """(exercise, question, value) for the reference's answers and each answer a corpus variant writes."""
    found = []
    for exercise, file in FILES.items():
        reference = runpy.run_path(str(SOLUTIONS / file))
        found += [(exercise, q, reference[q]) for q in HIDDEN[exercise]]
        for variant in (
            *quiz.BUGGY,
            *quiz.CORRECT,
            *kvmemory.BUGGY,
            *kvmemory.CORRECT,
            *concepts.BUGGY,
            *concepts.CORRECT,
        ):
            for _, new in variant.edits.get(file, []):
                match = ASSIGNMENT.match(new.strip())
                if match and match[1] in HIDDEN[exercise]:
                    # the corpus's answers are literals and small expressions (2**34 / 2**30, float("nan"))
                    value = eval(match[2], {"__builtins__": {}, "float": float})  # noqa: S307 - our own corpus
                    found.append((exercise, match[1], value))
    return found


def test_the_locks_are_up_to_date():
    """Run `python -m grader.suites.hidden.lock_answers` after changing a question."""
    assert lock_answers.locks() == LOCKED


@pytest.mark.parametrize("exercise,question,value", corpus_answers(), ids=lambda x: x if isinstance(x, str) else "")
def test_public_and_hidden_agree(exercise, question, value):
    right = HIDDEN[exercise][question].mark(value).correct
    assert locked.is_right(question, value, LOCKED[exercise][question]) == right, (question, value, right)


@pytest.mark.parametrize("exercise,question", [(e, q) for e, qs in HIDDEN.items() for q in qs])
def test_every_number_the_hidden_marking_accepts_is_right_here(exercise, question):
    numeric = HIDDEN[exercise][question]
    if not hasattr(numeric, "rtol"):
        pytest.skip("not a number")
    for factor in (1 - numeric.rtol * 0.999, 1.0, 1 + numeric.rtol * 0.999):
        value = numeric.answer * factor
        assert numeric.mark(value).correct
        assert locked.is_right(question, value, LOCKED[exercise][question]), value


def test_a_kept_hash_is_no_answer_in_plain_sight():
    """The kept strings are hex digests only, salted by question: the same answer hashes differently per question."""
    assert locked.digest("Q1", "+1") != locked.digest("Q2", "+1")
    for locks in LOCKED.values():
        for lock in locks.values():
            assert all(re.fullmatch(r"[0-9a-f]{32}", h) for h in lock["hashes"])
