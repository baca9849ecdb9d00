"""A multiple choice whose form gives its answer away: the key on one letter more often than the others, the right
option the longest (or the shortest) one, or, in a paper, the right option the one worded like the release's key.
A student who never reads a question would score above chance with "answer (a) everywhere", "pick the longest
option" or "pick the option nearest the release's key in words"; these tests hold the lesson's questions (the
stub's options, which the release checks) and 200 drawn students of a paper (options drawn from the hidden pools,
grader/suites/bank.py ``Pooled``) to chance, with a margin.

The checks (``giveaways``) are tried first on banks made to give their answers away, which they must catch, and on
a fair one, which they must pass, so that a pass below means the bank is fair and not that the checks are blind.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from grader.suites.bank import Pooled, Shuffled, stub_comment
from grader.suites.hidden import concept_questions, kv_questions
from grader.suites.questions import MultipleChoice
from grader.variants import LESSON, Variant, seed_of
from helpers import EXERCISES

BANKS = {"concepts": (concept_questions, "m12_concepts"), "kvmemory": (kv_questions, "m11_kvmemory")}
STUDENTS = 200
LETTERS = "abcd"
CHANCE = 1 / len(LETTERS)
MOST_KEYS = 0.40  # no letter is the key of more than this share of the single-answer questions
# the lesson has a dozen questions, where one more key on a letter moves a rate by 8 points; a paper's 200 students
# give thousands of draws, where a strategy that works at all stands out by far more than 5 points
LESSON_MARGIN, PAPER_MARGIN = 0.10, 0.05


@dataclass(frozen=True)
class Asked:
    """A single-answer question as one student read it: its options' texts in the order shown, the right one's
    index, and the release's key (the lesson's right option's text), which a student can find in the release."""

    id: str
    texts: tuple[str, ...]
    key: int
    release_key: str


Strategy = Callable[[Asked], Sequence[int]]  # the options a strategy picks (ties: all of them, scored by share)


def by_length(rank: int) -> Strategy:
    """Pick the option whose length is ``rank``-th from the longest (0: the longest, 3: the shortest)."""

    def pick(asked: Asked) -> list[int]:
        length = sorted((len(t) for t in asked.texts), reverse=True)[rank]
        return [i for i, t in enumerate(asked.texts) if len(t) == length]

    return pick


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_]+", text.lower()))


def likeness(a: str, b: str) -> float:
    """The share of words two texts have in common (Jaccard)."""
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def by_likeness(rank: int) -> Strategy:
    """Pick the option ``rank``-th nearest in words to the release's key (0: the nearest): the release's key carried
    across, and an attacker who guesses that the nearest is a decoy."""

    def pick(asked: Asked) -> list[int]:
        near = [likeness(t, asked.release_key) for t in asked.texts]
        value = sorted(near, reverse=True)[rank]
        return [i for i, n in enumerate(near) if n == value]

    return pick


def letter(x: str) -> Strategy:
    return lambda asked: [LETTERS.index(x)]


STRATEGIES: dict[str, Strategy] = {
    **{f"answer ({x}) everywhere": letter(x) for x in LETTERS},
    "pick the longest option": by_length(0),
    "pick the second longest": by_length(1),
    "pick the second shortest": by_length(2),
    "pick the shortest option": by_length(3),
}
WORDS: dict[str, Strategy] = {
    "pick the option worded most like the release's key": by_likeness(0),
    "pick the option worded second most like it": by_likeness(1),
    "pick the option worded third most like it": by_likeness(2),
    "pick the option worded least like it": by_likeness(3),
}


def score(asked: Sequence[Asked], strategy: Strategy) -> float:
    """The share of questions ``strategy`` gets right (a tie between options counts the share of them that is)."""
    return statistics.mean(sum(i == a.key for i in picked) / len(picked) for a in asked if (picked := strategy(a)))


def giveaways(asked: Sequence[Asked], margin: float, strategies: dict[str, Strategy] = STRATEGIES) -> list[str]:
    """What gives the answers away in ``asked``: a letter that is the key too often, or a strategy that scores more
    than chance plus ``margin``; [] for a fair bank."""
    found = []
    for x in LETTERS:
        share = statistics.mean(LETTERS[a.key] == x for a in asked)
        if share > MOST_KEYS:
            found.append(f"({x}) is the key of {share:.0%} of the questions")
    for name, strategy in strategies.items():
        if (rate := score(asked, strategy)) > CHANCE + margin:
            found.append(f"{name} scores {rate:.0%}")
    return found


# ---------------------------------------------------------------- the checks catch what they are for


def test_the_checks_catch_a_bank_whose_key_is_always_a_and_the_longest():
    told = [Asked(f"Q{i}", ("the right one, long and detailed", "short", "brief", "terse"), 0, "") for i in range(12)]
    found = giveaways(told, LESSON_MARGIN)
    assert "(a) is the key of 100% of the questions" in found
    assert "answer (a) everywhere scores 100%" in found and "pick the longest option scores 100%" in found


def test_the_checks_catch_keys_spread_over_the_letters_but_the_longest_and_not_the_others():
    spread = [
        Asked(
            f"Q{i}", tuple("a right option, the longest" if j == i % 4 else "a wrong one" for j in range(4)), i % 4, ""
        )
        for i in range(12)
    ]
    found = giveaways(spread, LESSON_MARGIN)
    assert found == ["pick the longest option scores 100%"], found


def test_the_checks_catch_a_right_option_worded_like_the_releases_key():
    key = "in one forward pass: the targets are known and the mask hides each position's future"
    texts = ("in one forward pass, the targets known, the mask hiding each position's future", "T passes", "x", "y")
    carried = [Asked(f"Q{i}", texts[i % 4 :] + texts[: i % 4], (4 - i % 4) % 4, key) for i in range(12)]
    assert all(carried[i].texts[carried[i].key] == texts[0] for i in range(12))
    assert giveaways(carried, LESSON_MARGIN, WORDS) == [
        "pick the option worded most like the release's key scores 100%"
    ]


def test_the_checks_pass_a_fair_bank():
    # 16 questions: the key on each letter 4 times, and at each rank of length once for each letter
    fair = [
        Asked(f"Q{i}", tuple(f"option {j} {'x' * ((j - i % 4 + i // 4) % 4)}" for j in range(4)), i % 4, "option")
        for i in range(16)
    ]
    assert giveaways(fair, LESSON_MARGIN) == [] and giveaways(fair, LESSON_MARGIN, WORDS) == []


# ---------------------------------------------------------------- the lesson's bank and a paper's


def single_answer(bank) -> list[MultipleChoice]:
    return [q for q in bank.FIXED if isinstance(q, MultipleChoice) and not q.several]


def lesson_options(module: str, question: MultipleChoice) -> list[str]:
    comment = stub_comment((EXERCISES / f"{module}.py").read_text(encoding="utf-8"), question.id)
    assert comment is not None, question.id
    return Shuffled(question.id, question.choices).options(comment)[1]


def lesson_asked() -> list[Asked]:
    asked = []
    for bank, module in BANKS.values():
        for question in single_answer(bank):
            texts = lesson_options(module, question)
            key = LETTERS.index(question.answer)
            asked.append(Asked(question.id, tuple(texts), key, texts[key]))
    return asked


def paper_asked() -> list[Asked]:
    """Each single-answer question as each of 200 students of a paper read it, and as the hidden grading marks it."""
    asked = []
    for bank, module in BANKS.values():
        pools = {spec.id: spec for spec in bank.REORDERED if isinstance(spec, Pooled)}
        for question in single_answer(bank):
            release_key = lesson_options(module, question)[LETTERS.index(question.answer)]
            for i in range(STUDENTS):
                variant = Variant(seed_of("fairness", "a paper", f"student{i}"))
                texts = tuple(option.text for option, _ in pools[question.id].drawn(variant))
                marked = bank.question(question.id, variant)
                asked.append(Asked(question.id, texts, LETTERS.index(marked.answer), release_key))
    return asked


def test_the_lessons_keys_are_spread_and_its_option_lengths_say_nothing():
    """The stub's own options, which a student grading alone reads and the release's locks check."""
    asked = lesson_asked()
    assert len(asked) == 12
    assert giveaways(asked, LESSON_MARGIN) == []


def test_a_papers_drawn_options_give_nothing_away_by_letter_length_or_words():
    asked = paper_asked()
    assert len(asked) == 12 * STUDENTS
    assert giveaways(asked, PAPER_MARGIN) == []
    assert giveaways(asked, LESSON_MARGIN, WORDS) == []


@pytest.mark.parametrize("exercise", list(BANKS))
def test_a_papers_several_answer_questions_draw_how_many_are_right(exercise):
    """Where several may be right, how many are is drawn too (one to three of four, each often), so the count tells
    nothing, and "every letter" is never right."""
    bank, _ = BANKS[exercise]
    for spec in [s for s in bank.REORDERED if isinstance(s, Pooled) and s.several]:
        counts = [
            len(bank.question(spec.id, Variant(seed_of("fairness", "a paper", f"student{i}"))).answer)
            for i in range(STUDENTS)
        ]
        shares = {n: counts.count(n) / STUDENTS for n in (1, 2, 3)}
        assert set(counts) == {1, 2, 3} and min(shares.values()) > 0.2, (spec.id, shares)
        assert bank.question(spec.id, LESSON).several, spec.id


def test_a_pools_options_are_statements_of_one_kind_not_catch_alls():
    """No "all of the above" or "none of the above", whose truth hangs on the other options drawn with it."""
    for bank, _ in BANKS.values():
        for spec in [s for s in bank.REORDERED if isinstance(s, Pooled)]:
            for option in (*spec.right, *spec.wrong):
                assert not re.search(r"\b(all|none|both|neither) of (the|these) (above|options)\b", option.text), option
