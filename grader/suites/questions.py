"""Question kinds for check-yourself sections and contest papers: multiple choice, numeric and short text.

A question marks an answer, read from a submission as plain data, and says what is wrong with it:
feedback written for a common wrong answer, and the working (``why``). Nothing here raises on any
answer whatever (a dict, a 10 MB string, ``nan``): a value that is not an answer of the question's
kind gets a message that says what kind of answer is expected.

- ``MultipleChoice``: one correct letter, or several (``answer="bd"``). The answer may be a letter,
  a string of letters (``"b, d"``, ``"bd"``, ``"B and D"``) or a list, tuple or set of letters;
  order, case, repeats and spaces are ignored.
- ``Numeric``: within a relative and/or absolute tolerance; an int, a float, or a string such as
  ``"1,234"``, ``"1_234"`` or ``"1e10"``. A known wrong answer is recognised within ``wrong_rtol``
  (where it is nearer than the right answer).
- ``Text``: a short word or phrase, compared on what it says: without regard to case, hyphens, punctuation
  and spaces, the words the question is about (its ``context``) dropped, with synonyms.

``Question.mark(value)`` returns a ``Verdict``; ``assess(question, value)`` turns it into a passed or
failed check (see ``checks``).
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

MAX_CHARS = 200  # a longer string is no short answer: refused before it is parsed
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdict = 6
_REPR.maxlevel = 3


def shown(value: Any) -> str:
    """A short, safe repr of any answer (long strings and deep or huge containers are cut)."""
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr raises
        return f"<{type(value).__name__}>"


def describe(value: Any) -> str:
    return f"a {type(value).__name__} ({shown(value)})"


# Where an unanswered question is, in the quiz and kvmemory alike: its comment is just above it, in the exercise
# file or, in a paper's notebook (grade paper render), in the same cell.
ABOVE = "the question is in the comment just above it"


@dataclass(frozen=True)
class Verdict:
    """How an answer fared: ``correct``; ``unanswered`` when it is still ``None``; else ``message`` says why not."""

    correct: bool
    message: str = ""
    unanswered: bool = False


RIGHT = Verdict(True)


@dataclass(frozen=True)
class Question:
    """What every kind shares. ``why`` is the working; ``wrong`` maps a common wrong answer to feedback;
    ``why_always`` shows the working after that feedback too (otherwise only when there is none)."""

    id: str
    why: str = ""
    wrong: Mapping[Any, str] = field(default_factory=dict)
    why_always: bool = True

    def mark(self, value: Any) -> Verdict:
        if value is None:
            return Verdict(False, f"{self.id} is still None", unanswered=True)
        if isinstance(value, str) and len(value) > MAX_CHARS:
            return Verdict(
                False, f"{self.id} should be {self.expected}, in a few characters, not a string of {len(value):,}"
            )
        return self.compare(value)

    @property
    def expected(self) -> str:
        """What kind of answer the question takes, in words."""
        raise NotImplementedError

    def compare(self, value: Any) -> Verdict:
        raise NotImplementedError

    def refuse(self, value: Any) -> Verdict:
        return Verdict(False, f"{self.id} should be {self.expected}, not {describe(value)}")

    def wrong_answer(self, value: Any, feedback: str | None, note: str = "") -> Verdict:
        parts = [p for p in (feedback, note) if p]
        if self.why and (self.why_always or not parts):
            parts.append(self.why)
        return Verdict(False, f"{self.id}: {shown(value)} is not right" + (f": {'; '.join(parts)}" if parts else ""))


# ---------------------------------------------------------------- multiple choice

LETTER_SEPARATORS = re.compile(r"(?:[\s,;/+&|.]|\band\b)+")
# An option named in feedback, "(c) holds too": relettered with the options (``MultipleChoice.reordered``).
OPTION_NAMED = re.compile(r"(?<!\w)\(([a-z])\)")


@dataclass(frozen=True)
class MultipleChoice(Question):
    """``answer``: the correct letters (``"b"``, or ``"bd"`` when several are right); ``choices``: all the
    letters offered. ``wrong`` maps letters (``"c"``, ``"ab"``) to feedback for exactly that choice."""

    answer: str = ""
    choices: str = "abcd"

    def __post_init__(self) -> None:
        assert self.answer and set(self.answer) <= set(self.choices), f"{self.id}: answer not among the choices"
        assert all(set(k) <= set(self.choices) for k in self.wrong), f"{self.id}: feedback for a letter not offered"

    @property
    def several(self) -> bool:
        return len(set(self.answer)) > 1

    def reordered(self, order: Sequence[int]) -> MultipleChoice:
        """The question as a student sees it with the options in ``order`` (``order[i]``: the index in
        ``choices`` of the option shown at letter ``choices[i]``; grader/variants.py ``Variant.order``): its key,
        its feedback's keys and the options its messages name, "(c) holds too", all in the letters that student
        reads. Marking a student's letters against this is marking them mapped back to the lesson's letters
        against the lesson's key, with each message in their letters."""
        if sorted(order) != list(range(len(self.choices))):
            raise ValueError(f"{self.id}: {list(order)} is no order of the {len(self.choices)} options")
        shown = {self.choices[lesson]: self.choices[i] for i, lesson in enumerate(order)}

        def letters(key: str) -> str:
            return "".join(sorted(shown[c] for c in key))

        def text(message: str) -> str:
            return OPTION_NAMED.sub(lambda m: f"({shown.get(m[1], m[1])})", message)

        return replace(
            self,
            answer=letters(self.answer),
            wrong={letters(k): text(v) for k, v in self.wrong.items()},
            why=text(self.why),
        )

    @property
    def expected(self) -> str:
        offered = ", ".join(self.choices)
        if self.several:
            return f'the letters of all the right choices ({offered}), such as "a, c" or ["a", "c"]'
        return f'one letter ({offered}), such as "a"'

    def letters(self, value: Any) -> frozenset[str] | str:
        """The letters chosen, or why ``value`` names no letters."""
        if isinstance(value, str):
            text = value.strip().lower()
            for bracket in "()[]{}'\"":
                text = text.replace(bracket, " ")
            parts = [p for p in LETTER_SEPARATORS.split(text) if p]
            if len(parts) == 1 and len(parts[0]) > 1 and set(parts[0]) <= set(self.choices):
                parts = list(parts[0])  # "bd"
        elif type(value) in (list, tuple, set, frozenset):
            if not all(isinstance(x, str) and len(x) <= MAX_CHARS for x in value):
                return "each item should be a letter (a string)"
            parts = [x.strip().lower() for x in value]
        else:
            return ""
        if not parts:
            return "no letter is given"
        unknown = [p for p in parts if p not in self.choices or len(p) != 1]
        if unknown:
            return f"{shown(unknown[0])} is not one of the choices {', '.join(self.choices)}"
        return frozenset(parts)

    def compare(self, value: Any) -> Verdict:
        chosen = self.letters(value)
        if isinstance(chosen, str):
            if not chosen:
                return self.refuse(value)
            return Verdict(False, f"{self.id} should be {self.expected}, not {shown(value)}: {chosen}")
        if chosen == frozenset(self.answer):
            return RIGHT
        feedback = next((f for k, f in self.wrong.items() if frozenset(k) == chosen), None)
        note = "more than one choice is right" if self.several and len(chosen) == 1 else ""
        if not self.several and len(chosen) > 1:
            note = "exactly one choice is right"
        return self.wrong_answer(value, feedback, note)


# ---------------------------------------------------------------- numeric


def as_number(value: Any) -> float | None:
    """An int or float, or a string that reads as one ("1,234", "1_234", " 1e10 "); None otherwise."""
    if type(value) in (int, float):
        return value
    if isinstance(value, str) and len(value) <= MAX_CHARS:
        try:
            return float(value.replace(",", "").replace("_", "").strip())
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class Numeric(Question):
    """Right when within ``max(atol, rtol x |answer|)`` of ``answer``. ``wrong`` maps wrong numbers to
    feedback, each recognised within ``wrong_rtol`` of itself."""

    answer: float = 0.0
    rtol: float = 1e-6
    atol: float = 0.0
    wrong_rtol: float = 0.02

    @property
    def expected(self) -> str:
        return 'a number (an int, a float or a string such as "1,234")'

    def compare(self, value: Any) -> Verdict:
        number = as_number(value)
        if number is None:
            return self.refuse(value)
        try:
            finite = math.isfinite(number)
        except OverflowError:  # an int too large for a float: finite, and far off
            finite = True
            number = math.inf if number > 0 else -math.inf
        if not finite:
            return Verdict(False, f"{self.id} should be a finite number, not {shown(value)}")
        if abs(number - self.answer) <= max(self.atol, self.rtol * abs(self.answer)):
            return RIGHT
        feedback = next((f for w, f in self.wrong.items() if self._is(number, w)), None)
        return self.wrong_answer(value, feedback)

    def _is(self, number: float, wrong: float) -> bool:
        """``number`` is the known wrong answer ``wrong``: within ``wrong_rtol`` of it, and nearer it than the
        right answer (10,000 for 10,050 is a rounding of the right answer, not a wrong 9,900)."""
        near = abs(number - wrong)
        return near <= self.wrong_rtol * abs(wrong) and near < abs(number - self.answer)


# ---------------------------------------------------------------- short text


def words(value: str) -> str:
    """Lowercase, hyphens as spaces, runs of spaces as one, a final full stop dropped."""
    return " ".join(value.lower().replace("-", " ").split()).removesuffix(".").strip()


ARTICLES = ("a", "an", "the")  # never what an answer says


def meaning(value: str, context: Sequence[str] = ()) -> str:
    """What a short answer says: ``words`` of it with punctuation read as spaces, and the articles and the
    ``context`` words (what the question is about: "diagonal", "softmax") dropped. "Above the main diagonal."
    and "upper-triangular" read as "above" and "upper" when "main", "diagonal" and "triangular" are context;
    "not above" stays "not above"."""
    dropped = {*ARTICLES, *(words(w) for w in context)}
    return " ".join(w for w in re.sub(r"[^\w\s]", " ", words(value)).split() if w not in dropped)


@dataclass(frozen=True)
class Text(Question):
    """A word or short phrase, marked on what it says: its ``meaning`` (the words that are not ``context``) must
    be the ``answer``'s or one of the ``synonyms``'; ``wrong`` maps wrong words to feedback, read the same way.
    The question lists every accepted form: the synonyms are the other words for the answer ("upper", "prior to"),
    the context the words an answer may add around it ("the main diagonal", "the softmax")."""

    answer: str = ""
    synonyms: tuple[str, ...] = ()
    context: tuple[str, ...] = ()

    @property
    def expected(self) -> str:
        return "a word or a short phrase (a string)"

    def key(self, value: str) -> str:
        """``value``'s meaning, as compared with the accepted forms' (and the locked answers' key)."""
        return meaning(value, self.context)

    @property
    def accepted(self) -> set[str]:
        return {self.key(a) for a in (self.answer, *self.synonyms)}

    def compare(self, value: Any) -> Verdict:
        if not isinstance(value, str):
            return self.refuse(value)
        said = self.key(value)
        if said and said in self.accepted:
            return RIGHT
        feedback = next((f for w, f in self.wrong.items() if said and self.key(w) == said), None)
        return self.wrong_answer(value, feedback)


def assess(question: Question, value: Any, where: str = "") -> None:
    """A check: pass, or fail with the verdict's message (as an untouched stub's when unanswered; ``where``
    says where the question is, e.g. "the questions are in m11_kvmemory.py's comments")."""
    from grader.suites import checks  # the grading process's checks (torch); the kinds above need neither

    verdict = question.mark(value)
    if verdict.unanswered:
        checks.not_implemented(verdict.message + (f" ({where})" if where else ""))
    if not verdict.correct:
        checks.fail(verdict.message)
