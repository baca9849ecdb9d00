"""Check yourself: short numeric and one-word answers, each with feedback on the usual wrong ones.

The answers are read from ``quiz.py`` in the worker as plain data; a number may
also come as a string ("1,234", "1e10"). The kinds of question (``grader/suites/questions.py``) mark them:
a number within its tolerance, finite; a word or one of its synonyms, read for what it says (the direction or
the order, the words around it dropped).
"""

from __future__ import annotations

import pytest

from grader.suites.questions import ABOVE, Numeric, Text, assess

BELOW = "below the diagonal are earlier positions, which may be attended to"
AFTER = "zeroing weights after the softmax leaves rows that no longer sum to 1"

# why_always=False: a wrong answer gets the feedback on it where it is a known one, else the working.
QUESTIONS = [
    Numeric(
        "Q1",
        answer=36,
        why_always=False,
        why="T (T + 1) / 2: the lower triangle and the diagonal",
        wrong={
            28: "that is the strictly lower triangle: a token may attend to itself, so the diagonal is 1",
            64: "that is every entry: the mask blocks the future",
            32: "half of 64 misses the diagonal",
        },
    ),
    Numeric(
        "Q2",
        answer=6,
        why_always=False,
        why="positions 0 to 5, itself included",
        wrong={5: "the token attends to itself as well", 3: "it attends to the past, not the future"},
    ),
    # The words are marked on what they say (questions.meaning): the direction or the order, with the context
    # words around it dropped, so "above the main diagonal", "upper triangular" and "strictly upper triangle"
    # are all "above"; "below the diagonal" is still "below".
    Text(
        "Q3",
        answer="above",
        why_always=False,
        synonyms=("upper", "over", "upper right", "top right"),
        context=(
            *("diagonal", "main", "leading", "triangle", "triangular", "strictly", "part", "half", "side"),
            *("it", "in", "of", "matrix", "mask", "entries", "scores"),
        ),
        wrong={
            "below": BELOW,
            "under": BELOW,
            "lower": BELOW,
            "lower left": BELOW,
            "bottom left": BELOW,
            "on": "the diagonal is each position itself, which it may attend to",
        },
        why="entry [i, j] with j > i is a later token, and later tokens are blocked",
    ),
    Text(
        "Q4",
        answer="before",
        why_always=False,
        synonyms=("prior to", "ahead of", "pre", "in front of"),
        context=("softmax", "soft max", "applying", "applied", "taking", "computing", "is", "it", "function"),
        wrong={"after": AFTER, "post": AFTER, "afterwards": AFTER, "following": AFTER},
        why="scores set to -inf before the softmax come out exactly 0, and each row still sums to 1",
    ),
    Numeric(
        "Q5",
        answer=198_272,
        why_always=False,
        why="12 d^2 + 13 d: two LayerNorms (2 d each), qkv 3 d^2 + 3 d, proj d^2 + d, and the "
        "feed-forward 4 d^2 + 4 d and 4 d^2 + d",
        wrong={
            196_608: "that is 12 d^2: add the biases and the LayerNorms",
            132_480: "the feed-forward is 4x wide, not 2x",
        },
    ),
    Numeric(
        "Q6",
        answer=51_463_168,
        why_always=False,
        why="the tied matrix is vocab x d = 50,257 x 1024",
        wrong={354_823_168: "that is GPT-2 medium's total: the saving is the one shared matrix"},
    ),
    Numeric(
        "Q7",
        answer=1e10,
        why_always=False,
        rtol=0.02,
        why="C = 6 N (20 N) = 120 N^2, so N = sqrt(1.2e22 / 120)",
        wrong={4.47e10: "D = 20 N is missing: C = 120 N^2, not 6 N^2", 1e20: "take the square root"},
    ),
    Numeric(
        "Q8",
        answer=2_488_796_160,
        why_always=False,
        rtol=0.02,
        why="D = 20 N = 20 x 124,439,808",
        wrong={6_221_990: "that is N / 20: tokens are 20 TIMES the parameters"},
    ),
]


@pytest.mark.points(len(QUESTIONS))
@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_answer(quiz, question):
    """the answer to the question"""
    assess(question, quiz.value(question.id), where=ABOVE)
