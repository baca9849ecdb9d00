"""Short text answers are marked on what they say (grader/suites/questions.py ``meaning``): the quiz's direction and
order words in the phrasings a student writes pass, the opposite direction or order fails with its own feedback,
and the public lock (grader/suites/locked.py) calls right exactly what the hidden marking does."""

from __future__ import annotations

import pytest

from grader.suites import locked
from grader.suites.hidden import kv_questions
from grader.suites.hidden.lock_answers import lock
from grader.suites.hidden.test_quiz import AFTER, BELOW, QUESTIONS
from grader.suites.questions import Text, meaning

BY_ID = {q.id: q for q in QUESTIONS}
Q3, Q4 = BY_ID["Q3"], BY_ID["Q4"]

ABOVE = [
    "above",
    "Above.",
    "above the diagonal",
    "above the main diagonal",
    "Above diagonal",
    "upper",
    "upper triangular",
    "upper-triangular",
    "the upper triangle",
    "strictly upper triangle",
    "the strictly upper triangular part",
    "upper right",
    "in the upper triangle of the matrix",
]
BEFORE = ["before", "Before the softmax", "before softmax", "prior to the softmax", "ahead of softmax", "pre-softmax"]
# a wrong direction or order, however it is phrased, with the feedback it must get
WRONG = [
    (Q3, "below", BELOW),
    (Q3, "below the diagonal", BELOW),
    (Q3, "below the main diagonal", BELOW),
    (Q3, "lower triangular", BELOW),
    (Q3, "the strictly lower triangle", BELOW),
    (Q4, "after", AFTER),
    (Q4, "after the softmax", AFTER),
    (Q4, "post-softmax", AFTER),
    (Q4, "after applying softmax", AFTER),
]
# neither the answer nor a known wrong one: not right, and no known mistake's feedback
UNCLEAR = [(Q3, "not above"), (Q3, "above and below"), (Q3, "diagonal"), (Q3, "the"), (Q4, "not before"), (Q4, "")]


@pytest.mark.parametrize("value", ABOVE)
def test_above_in_any_phrasing_is_right(value):
    assert Q3.mark(value).correct, Q3.mark(value)


@pytest.mark.parametrize("value", BEFORE)
def test_before_in_any_phrasing_is_right(value):
    assert Q4.mark(value).correct, Q4.mark(value)


@pytest.mark.parametrize("question,value,feedback", WRONG, ids=[v for _, v, _ in WRONG])
def test_the_wrong_direction_or_order_is_wrong_with_its_feedback(question, value, feedback):
    verdict = question.mark(value)
    assert not verdict.correct and feedback in verdict.message, verdict


@pytest.mark.parametrize("question,value", UNCLEAR, ids=[v or "empty" for _, v in UNCLEAR])
def test_a_negation_or_an_answer_of_both_is_not_right(question, value):
    verdict = question.mark(value)
    assert not verdict.correct and BELOW not in verdict.message and AFTER not in verdict.message, verdict


def test_meaning_drops_articles_punctuation_and_the_context_only():
    assert meaning("Above, the MAIN diagonal!", ("main", "diagonal")) == "above"
    assert meaning("not above", ("diagonal",)) == "not above"
    assert meaning("grouped-query attention") == "grouped query attention"


@pytest.mark.parametrize("question", [Q3, Q4], ids=["Q3", "Q4"])
def test_the_public_lock_calls_right_what_the_hidden_marking_does(question):
    kept = lock(question)
    answers = [*ABOVE, *BEFORE, *(v for q, v, _ in WRONG), *(v for _, v in UNCLEAR)]
    for value in answers:
        assert locked.is_right(question.id, value, kept) == question.mark(value).correct, value


def test_every_text_question_of_the_banks_keeps_its_own_forms():
    """kvmemory's words question (no context of its own) still takes its answer and synonyms as written, and its
    wrong ones still get their feedback."""
    texts = [q for q in kv_questions.FIXED if isinstance(q, Text)]
    assert texts
    for question in texts:
        for form in (question.answer, *question.synonyms, f"The {question.answer.upper()}."):
            assert question.mark(form).correct, (question.id, form)
        for wrong, feedback in question.wrong.items():
            verdict = question.mark(wrong)
            assert not verdict.correct and feedback in verdict.message
