"""Locked answers: the public checks say right or wrong per question without shipping the answers (as okpy's
locked tests do).

Each right answer is kept only as salted, slow hashes of its canonical keys (``locked_answers.py``, written from
the hidden questions by ``python -m grader.suites.hidden.lock_answers``). A student's answer is read the way the
hidden grading reads it, turned into its key and hashed: right when the hash is among the kept ones.

- A word: ``questions.meaning`` of it, the question's context words (kept with the lock: they say what the
  question is about, not its answer) dropped; the answer and each synonym are kept.
- Letters: the chosen letters, sorted (``"b, d"``, ``["D", "B"]`` and ``{"d", "b"}`` are all ``bd``).
- A number with a relative tolerance ``rtol``: its bucket on a logarithmic grid of ratio ``1 + rtol``, and its
  sign. The kept buckets are those the answer's tolerance band ``[a (1 - rtol), a (1 + rtol)]`` touches, so
  every number the hidden grading accepts is accepted here too; a number up to one bucket (about ``rtol``
  relative) beyond the band may be called right here and wrong there, where the hidden grading decides.

What the lock does not do: keep an answer from a determined student. The salt ships, so a student can hash
guesses: each costs one PBKDF2 of ``ITERATIONS`` rounds (some milliseconds), which makes a search over millions
of buckets take days, but a word, a few letters, a small integer or a coarse tolerance (a few thousand buckets
between 1 and 10^12 at rtol 0.02) falls in seconds to minutes. It keeps the answers out of plain sight, so that
"all passed" means the answers are right, not merely present. The locks are the lesson's: in a paper each student's
drawn numbers, options' order and listing's line numbers are their own (``per_student``), so a lock searched out
of the release answers the lesson's question, not theirs (``judges``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from grader.suites.questions import LETTER_SEPARATORS, MAX_CHARS, as_number, meaning

SALT = b"gptkit locked answers, v1"
ITERATIONS = 20_000  # per guess: a few milliseconds, so a check is quick and a search over many buckets is not


def digest(question_id: str, key: str) -> str:
    """The kept form of one canonical key: salted with the question's id, so equal answers look different."""
    return hashlib.pbkdf2_hmac("sha256", f"{question_id}:{key}".encode(), SALT, ITERATIONS).hex()[:32]


def number_key(number: float, rtol: float) -> str:
    """A finite number's bucket: its sign and the floor of log|x| on a grid of ratio 1 + rtol."""
    if number == 0:
        return "0"
    sign = "-" if number < 0 else "+"
    return f"{sign}{math.floor(math.log(abs(number)) / math.log1p(rtol))}"


def band_keys(answer: float, rtol: float) -> list[str]:
    """The buckets of every number within rtol x |answer| of ``answer`` (the hidden grading's tolerance)."""
    low, high = sorted((answer * (1 - rtol), answer * (1 + rtol)))
    if low <= 0 <= high:  # only an answer of 0 (rtol < 1): no grid reaches it
        return ["0"]
    ends = [int(number_key(x, rtol)[1:]) for x in (abs(low), abs(high))]
    sign = "-" if answer < 0 else "+"
    return [f"{sign}{b}" for b in range(min(ends), max(ends) + 1)]


def letters_key(value: Any, choices: str) -> str | None:
    """The chosen letters, sorted; None when ``value`` names no letter among ``choices`` (as the hidden reading)."""
    if isinstance(value, str) and len(value) <= MAX_CHARS:
        text = value.strip().lower()
        for bracket in "()[]{}'\"":
            text = text.replace(bracket, " ")
        parts = [p for p in LETTER_SEPARATORS.split(text) if p]
        if len(parts) == 1 and len(parts[0]) > 1 and set(parts[0]) <= set(choices):
            parts = list(parts[0])
    elif type(value) in (list, tuple, set, frozenset) and all(isinstance(x, str) for x in value):
        parts = [x.strip().lower() for x in value]
    else:
        return None
    if not parts or any(len(p) != 1 or p not in choices for p in parts):
        return None
    return "".join(sorted(set(parts)))


def key(value: Any, lock: dict[str, Any]) -> str | None:
    """``value``'s canonical key for a question locked as ``lock``; None when it is no answer of that kind."""
    kind = lock["kind"]
    if kind == "word":
        return meaning(value, lock.get("context", ())) if isinstance(value, str) and len(value) <= MAX_CHARS else None
    if kind == "letters":
        return letters_key(value, lock["choices"])
    number = as_number(value)
    try:
        finite = number is not None and math.isfinite(number)
    except OverflowError:  # an int too large for a float: finite, far off, and in no kept bucket
        return "huge"
    return number_key(number, lock["rtol"]) if finite and number is not None else None


WITHHELD = {"withheld": True}  # the lock of a release built without answers (`grade release --no-answer-locks`)


def judges(lock: dict[str, Any], seeded: bool = False) -> bool:
    """Whether ``lock`` can tell a right answer from a wrong one: always with the lesson's numbers; in a paper
    (``seeded``: a student's own variant) only for a question asked of every student alike, since a lock marked
    ``per_student`` holds the lesson's numbers, letters or line numbers, not that student's; never for a lock
    withheld from the release (any lock a release holds answers a search, the words of a shuffled option too)."""
    return not lock.get("withheld") and not (seeded and lock.get("per_student"))


def is_right(question_id: str, value: Any, lock: dict[str, Any]) -> bool:
    found = key(value, lock)
    return found is not None and digest(question_id, found) in lock["hashes"]


def module_text(locks: dict[str, dict[str, dict[str, Any]]], written_by: str) -> str:
    """grader/suites/locked_answers.py's text holding ``locks``: the kit's (``written_by`` the command that wrote
    it), or a release's whose answers are withheld."""
    from pprint import pformat  # only where the file is written

    return (
        "\"\"\"The quiz's, kvmemory's and concepts' answers, locked (grader/suites/locked.py). Written by\n"
        f'{written_by}: do not edit."""\n\n'
        "from typing import Any\n\n"
        f"LOCKED: dict[str, dict[str, dict[str, Any]]] = {pformat(locks, width=110, sort_dicts=True)}\n"
    )


def withheld(locks: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``locks`` with every answer taken out: the same questions, each lock ``WITHHELD``."""
    return {exercise: {question: dict(WITHHELD) for question in questions} for exercise, questions in locks.items()}
