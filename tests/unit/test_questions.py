"""The question kinds of grader/suites/questions.py: right answers, wrong ones with their feedback, near misses,
several correct letters in any order and form, and junk that gets a clear message instead of a crash."""

from __future__ import annotations

import pytest

from grader.suites.questions import MultipleChoice, Numeric, Text, Verdict, as_number, assess, words

ONE = MultipleChoice(
    "MC1",
    answer="b",
    why="only keys and values are read again",
    wrong={"a": "a past query is never used again", "d": "weights are recomputed"},
)
SEVERAL = MultipleChoice(
    "MC2",
    answer="bd",
    choices="abcde",
    why="the batch changes how many tokens, not what one costs",
    wrong={"a": "a smaller batch caches fewer tokens", "ac": "neither changes one token's cache"},
)
NUMBER = Numeric(
    "N1",
    answer=327_680,
    rtol=1e-3,
    why="2 x 80 x 8 x 128 x 2",
    wrong={163_840: "the factor 2 is missing", 2_621_440: "use n_groups, not n_heads"},
)
ABSOLUTE = Numeric("N2", answer=0.0, atol=0.01, why="nothing is cached")
TEXT = Text(
    "T1",
    answer="mqa",
    synonyms=("multi-query attention",),
    why="one shared K/V head",
    wrong={"GQA": "a single group has its own name"},
)
JUNK = [
    {"a": 1},
    {1, 2},
    [1, 2],
    object(),
    "x" * 10_000_000,
    b"b",
    ["b", 3],
    [["b"]],
    float("nan"),
    float("inf"),
    "nan",
    "",
    "   ",
    True,
    10**5000,
    -(10**400),
    ["x" * 10_000_000],
    [list(range(100_000))],
]


def right(question, value) -> None:
    verdict = question.mark(value)
    assert verdict.correct and not verdict.message, (value, verdict)


def wrong(question, value, *fragments: str) -> str:
    verdict = question.mark(value)
    assert not verdict.correct and not verdict.unanswered, (value, verdict)
    assert all(f in verdict.message for f in fragments), verdict.message
    return verdict.message


# ---------------------------------------------------------------- multiple choice


@pytest.mark.parametrize("value", ["b", "B", " b ", "(b)", "b.", ["B"], ("b",), {"b"}, frozenset("b"), "b, b"])
def test_one_correct_letter_in_any_form(value):
    right(ONE, value)


def test_one_correct_letter_wrong_answers_get_their_feedback_and_the_why():
    message = wrong(ONE, "a", "a past query is never used again", "only keys and values are read again")
    assert message.startswith("MC1: 'a' is not right: ")
    wrong(ONE, "c", "only keys and values are read again")  # no feedback for c: the working alone
    wrong(ONE, "b, d", "exactly one choice is right")


@pytest.mark.parametrize(
    "value", ["b, d", "d,b", "BD", "db", "b and d", "D & B", "b d", ["D", "B"], ("b", "d"), {"d", "b"}, ["b", "d", "b"]]
)
def test_several_correct_in_any_order_and_case(value):
    right(SEVERAL, value)


def test_several_correct_partial_and_wrong_answers():
    wrong(SEVERAL, "b", "more than one choice is right", SEVERAL.why)
    wrong(SEVERAL, "a", "a smaller batch caches fewer tokens", "more than one choice is right")
    wrong(SEVERAL, "c, a", "neither changes one token's cache")
    wrong(SEVERAL, "b, c, d", SEVERAL.why)
    wrong(SEVERAL, "abcde", SEVERAL.why)


@pytest.mark.parametrize("value", ["f", "b, z", "bx", "key and value", ["bd"], [""], "b;;f"])
def test_letters_not_offered_are_named(value):
    verdict = SEVERAL.mark(value)
    assert not verdict.correct and "not one of the choices a, b, c, d, e" in verdict.message, verdict


def test_no_letter_at_all():
    assert "no letter is given" in ONE.mark(" , ").message
    assert "no letter is given" in ONE.mark([]).message


def test_the_letters_of_a_question_are_checked_when_it_is_written():
    with pytest.raises(AssertionError):
        MultipleChoice("bad", answer="e")
    with pytest.raises(AssertionError):
        MultipleChoice("bad", answer="a", wrong={"z": "not offered"})


# ---------------------------------------------------------------- numeric


@pytest.mark.parametrize("value", [327_680, 327_680.0, "327,680", "327_680", " 3.2768e5 ", 327_900, 327_500.5])
def test_numbers_within_tolerance(value):
    right(NUMBER, value)


@pytest.mark.parametrize("value", [328_100, 327_200, "3.3e5"])
def test_near_miss_outside_tolerance(value):
    wrong(NUMBER, value, "is not right", NUMBER.why)


def test_known_wrong_numbers_get_their_feedback_within_two_percent():
    wrong(NUMBER, 163_840, "the factor 2 is missing", NUMBER.why)
    wrong(NUMBER, "165,000", "the factor 2 is missing")  # 0.7% off the known wrong answer
    wrong(NUMBER, 2.6e6, "use n_groups, not n_heads")
    assert "factor 2" not in wrong(NUMBER, 170_000)  # 3.8% off: not recognised


def test_a_near_miss_of_the_right_answer_is_not_taken_for_a_known_wrong_one():
    """198,000 for 198,272 is the right answer rounded, though within 2% of the known wrong 196,608 (12 d^2)."""
    question = Numeric("Q", answer=198_272, why="count the biases too", wrong={196_608: "that is 12 d^2"})
    assert "12 d^2" not in wrong(question, 198_000)
    assert "that is 12 d^2" in wrong(question, 196_700)  # nearer the wrong answer: its feedback


def test_absolute_tolerance_around_zero():
    right(ABSOLUTE, 0)
    right(ABSOLUTE, -0.005)
    right(ABSOLUTE, "1e-3")
    wrong(ABSOLUTE, 0.02, "nothing is cached")


def test_number_strings():
    assert as_number("1,234") == 1234 and as_number("1e10") == 1e10 and as_number(" 2_000 ") == 2000
    assert as_number("about 5") is None and as_number(True) is None and as_number(None) is None
    assert as_number("9" * 10_000) is None  # too long to be a short answer: never parsed


def test_numbers_must_be_numbers():
    message = wrong(NUMBER, "about 300k", 'should be a number (an int, a float or a string such as "1,234")')
    assert "a str ('about 300k')" in message
    wrong(NUMBER, float("nan"), "should be a finite number")
    wrong(NUMBER, "inf", "should be a finite number")
    wrong(NUMBER, True, "should be a number")
    wrong(NUMBER, 10**400, "is not right")  # too large for a float: just wrong


# ---------------------------------------------------------------- short text


@pytest.mark.parametrize("value", ["mqa", "MQA", " Mqa ", "MQA.", "Multi-Query  Attention", "multi query attention"])
def test_text_ignores_case_spaces_and_hyphens(value):
    right(TEXT, value)


def test_text_wrong_answers():
    wrong(TEXT, "gqa", "a single group has its own name", TEXT.why)
    wrong(TEXT, "grouped", TEXT.why)
    message = wrong(TEXT, 1, "should be a word or a short phrase (a string), not a int (1)")
    assert "mqa" not in message.lower()  # refusing an answer does not give the right one away
    assert words("  Multi-Query   Attention. ") == "multi query attention"


# ---------------------------------------------------------------- every kind


@pytest.mark.parametrize("question", [ONE, SEVERAL, NUMBER, TEXT], ids=lambda q: q.id)
def test_unanswered(question):
    assert question.mark(None) == Verdict(False, f"{question.id} is still None", unanswered=True)


@pytest.mark.parametrize("question", [ONE, SEVERAL, NUMBER, ABSOLUTE, TEXT], ids=lambda q: q.id)
@pytest.mark.parametrize("value", JUNK, ids=lambda v: type(v).__name__)
def test_junk_never_crashes_and_gets_a_clear_short_message(question, value):
    verdict = question.mark(value)
    assert isinstance(verdict, Verdict) and not verdict.correct and not verdict.unanswered
    assert verdict.message.startswith(question.id) and len(verdict.message) < 500, verdict.message
    assert "should be" in verdict.message or "is not right" in verdict.message, verdict.message


def test_a_long_string_is_refused_before_it_is_read():
    message = TEXT.mark("x" * 10_000_000).message
    assert message == (
        "T1 should be a word or a short phrase (a string), in a few characters, not a string of 10,000,000"
    )


def test_a_repr_that_raises_is_no_crash():
    class Nasty:
        def __repr__(self):
            raise RuntimeError("no")

    assert "should be a number" in NUMBER.mark(Nasty()).message and "not a Nasty (<" in NUMBER.mark(Nasty()).message


def test_why_only_when_there_is_no_feedback():
    """``why_always=False``: the quiz's style, feedback for a known wrong answer or else the working."""
    quiz_style = Numeric("Q", answer=36, why="T (T + 1) / 2", wrong={28: "the diagonal is 1"}, why_always=False)
    assert quiz_style.mark(28).message == "Q: 28 is not right: the diagonal is 1"
    assert quiz_style.mark(30).message == "Q: 30 is not right: T (T + 1) / 2"


def test_assess_passes_fails_and_flags_an_unanswered_question_as_a_stub():
    assess(NUMBER, 327_680)
    with pytest.raises(AssertionError, match="the factor 2 is missing"):
        assess(NUMBER, 163_840)
    with pytest.raises(AssertionError, match=r"^not implemented yet: N1 is still None \(see the comments\)$"):
        assess(NUMBER, None, "see the comments")
