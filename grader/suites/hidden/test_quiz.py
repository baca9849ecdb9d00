"""Check yourself: short numeric and one-word answers, each with feedback on the usual wrong ones.

The answers are read from ``quiz.py`` in the worker as plain data; a number may
also come as a string ("1,234", "1e10").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from grader.suites import checks


@dataclass(frozen=True)
class Question:
    id: str
    answer: float | str
    rtol: float = 1e-6
    why: str = ""  # the working, shown on a wrong answer
    wrong: dict = field(default_factory=dict)  # a common wrong answer -> what it misses
    synonyms: tuple[str, ...] = ()


QUESTIONS = [
    Question(
        "Q1",
        36,
        why="T (T + 1) / 2: the lower triangle and the diagonal",
        wrong={
            28: "that is the strictly lower triangle: a token may attend to itself, so the diagonal is 1",
            64: "that is every entry: the mask blocks the future",
            32: "half of 64 misses the diagonal",
        },
    ),
    Question(
        "Q2",
        6,
        why="positions 0 to 5, itself included",
        wrong={5: "the token attends to itself as well", 3: "it attends to the past, not the future"},
    ),
    Question(
        "Q3",
        "above",
        synonyms=("above the diagonal", "upper", "upper triangle", "upper right"),
        wrong={"below": "below the diagonal are earlier positions, which may be attended to"},
        why="entry [i, j] with j > i is a later token, and later tokens are blocked",
    ),
    Question(
        "Q4",
        "before",
        synonyms=("before the softmax",),
        wrong={"after": "zeroing weights after the softmax leaves rows that no longer sum to 1"},
        why="scores set to -inf before the softmax come out exactly 0, and each row still sums to 1",
    ),
    Question(
        "Q5",
        198_272,
        why="12 d^2 + 13 d: two LayerNorms (2 d each), qkv 3 d^2 + 3 d, proj d^2 + d, and the "
        "feed-forward 4 d^2 + 4 d and 4 d^2 + d",
        wrong={
            196_608: "that is 12 d^2: add the biases and the LayerNorms",
            132_480: "the feed-forward is 4x wide, not 2x",
        },
    ),
    Question(
        "Q6",
        51_463_168,
        why="the tied matrix is vocab x d = 50,257 x 1024",
        wrong={354_823_168: "that is GPT-2 medium's total: the saving is the one shared matrix"},
    ),
    Question(
        "Q7",
        1e10,
        rtol=0.02,
        why="C = 6 N (20 N) = 120 N^2, so N = sqrt(1.2e22 / 120)",
        wrong={4.47e10: "D = 20 N is missing: C = 120 N^2, not 6 N^2", 1e20: "take the square root"},
    ),
    Question(
        "Q8",
        2_488_796_160,
        rtol=0.02,
        why="D = 20 N = 20 x 124,439,808",
        wrong={6_221_990: "that is N / 20: tokens are 20 TIMES the parameters"},
    ),
]


def as_number(value) -> float | None:
    if type(value) in (int, float):
        return value
    if isinstance(value, str):
        try:
            return float(value.replace(",", "").replace("_", "").strip())
        except ValueError:
            return None
    return None


def words(value: str) -> str:
    return " ".join(value.lower().replace("-", " ").split())


@pytest.mark.points(len(QUESTIONS))
@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_answer(quiz, question):
    """the answer to the question"""
    value = quiz.value(question.id)
    if value is None:
        checks.not_implemented(f"{question.id} is still None (the question is in the comment just above it)")
    if isinstance(question.answer, str):
        if not isinstance(value, str):
            checks.fail(
                f"{question.id} should be a word (a string such as {question.answer!r}), not {checks.describe(value)}"
            )
        if words(value) not in (question.answer, *question.synonyms):
            hint = question.wrong.get(words(value), question.why)
            checks.fail(f"{question.id}: {value!r} is not right: {hint}")
        return
    number = as_number(value)
    if number is None:
        checks.fail(
            f'{question.id} should be a number (an int, a float or a string such as "1,234"), '
            f"not {checks.describe(value)}"
        )
    if abs(number - question.answer) > question.rtol * abs(question.answer):
        hint = next((h for w, h in question.wrong.items() if abs(number - w) <= 0.02 * abs(w)), question.why)
        checks.fail(f"{question.id}: {value!r} is not right: {hint}")
