"""Two of concepts' drawn questions (grader/suites/hidden/concept_questions.py): Q_WINDOW asks both regimes of
cropping across a class, each with the wrong answer that regime invites, and Q_LOSS0 takes log V and the first
loss the lesson's code prints, in the hidden marking and the public lock alike."""

from __future__ import annotations

import math

import pytest

from grader.suites import locked
from grader.suites.hidden import concept_questions
from grader.suites.hidden.lock_answers import lock
from grader.variants import LESSON, Variant, seed_of

WINDOW, LOSS0 = concept_questions.WINDOW, concept_questions.LOSS0
CLASS = [Variant(seed_of("5" * 64, "practice-1", f"student{i}")) for i in range(500)]


def cropped(p: dict) -> bool:
    return p["prompt"] + p["n"] - 1 > p["T"]


def test_the_window_question_asks_both_regimes_about_half_each():
    drawn = [WINDOW.params(v) for v in CLASS]
    before = [p for p in drawn if not cropped(p)]
    assert 0.4 * len(drawn) < len(before) < 0.6 * len(drawn), len(before)
    assert all(WINDOW.answer(p) == p["T"] for p in drawn if cropped(p))
    assert all(WINDOW.answer(p) == p["prompt"] + p["n"] - 1 < p["T"] for p in before)


@pytest.mark.parametrize("regime", ["cropped", "not cropped yet"])
def test_each_regime_names_the_mistake_it_invites(regime):
    variant, params = next((v, p) for v in CLASS if cropped(p := WINDOW.params(v)) == (regime == "cropped"))
    question = WINDOW.marked(variant)
    assert question.mark(WINDOW.answer(params)).correct
    held = params["prompt"] + params["n"] - 1
    # the mistake: the whole sequence once it outgrew the context; the whole context before it did
    mistake, feedback = (held, "cropped to the last") if regime == "cropped" else (params["T"], "keeps them all")
    verdict = question.mark(mistake)
    assert not verdict.correct and feedback in verdict.message, verdict


def test_the_lessons_window_is_unchanged():
    question = WINDOW.marked(LESSON)
    assert question.mark(8).correct
    assert "cropped to the last 8" in question.mark(9).message


@pytest.mark.parametrize("value", [math.log(50), 3.912, 3.91, 4.0511, 4.2])
def test_the_first_loss_takes_log_v_and_what_the_lessons_code_prints(value):
    """m3's first loss on the lesson's TinyGPT is 4.0511: what the question asks the first step will print."""
    question = LOSS0.marked(LESSON)
    assert question.mark(value).correct, question.mark(value)
    assert locked.is_right("Q_LOSS0", value, lock(question))


@pytest.mark.parametrize(
    "value,feedback",
    [(math.log2(50), "in bits"), (math.log10(50), "log base 10"), (50, "not V itself"), (4.6, "spread raises")],
)
def test_a_first_loss_far_from_log_v_is_wrong_and_says_why(value, feedback):
    verdict = LOSS0.marked(LESSON).mark(value)
    assert not verdict.correct and feedback in verdict.message, verdict


def test_every_students_first_loss_band_runs_from_just_below_to_a_tenth_above_log_v():
    for variant in CLASS[:100]:
        params = LOSS0.params(variant)
        question, log_v = LOSS0.marked(variant), math.log(params["vocab"])
        assert question.mark(log_v).correct and question.mark(log_v * 1.09).correct
        assert not question.mark(log_v * 0.97).correct and not question.mark(log_v * 1.11).correct
