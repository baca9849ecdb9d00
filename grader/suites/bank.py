"""Questions whose numbers are drawn per student: a statement template, the lesson's numbers, a ``draw`` of
plausible ones, and the answer and the usual wrong answers as functions of the numbers.

A bank (for kvmemory, grader/suites/hidden/kv_questions.py: hidden, since it computes the answers) lists its
``Drawn`` questions; the hidden suite marks each student against ``question.marked(variant)``, and
``grade paper render`` writes ``question.comment(params)`` into the student's notebook in place of the stub's
comment. The stub's comment is the statement rendered with the lesson's numbers (tests/unit/test_paper.py
holds them to it), so each statement has one source.

The comment format is the stubs' own::

    # Q_NUM1. How many GiB (2^30 bytes) of KV cache does ... hold in bfloat16 for a batch
    #   of 4 sequences of 4,096 tokens?
    Q_NUM1 = None

A question that cannot be drawn, its words being fixed, is still asked of each student in their own way where its
answer is a position: ``Shuffled``, a multiple choice whose options each student sees in their own order (so the
key's letter is theirs), and ``Numbered``, a question that asks for a line of a listing, whose lines each student
sees numbered from their own first line. Both rewrite the stub's comment for a student's notebook
(``comment``) and mark the lesson's question in that student's letters or numbers (``marked``); with the
lesson's variant both leave the stub and the question as they are, so the release's locked answers (the lesson's)
still check a student grading alone.

A reordering alone keeps the options' words: the release's stub shows the lesson's options, so the key found in
the release's locks is carried across by its words. ``Pooled`` closes that: a paper's student is shown options
drawn from a pool that only the hidden bank holds (right statements and wrong ones, each with its feedback), never
the lesson's own, with the number of right ones drawn too where several may be right; and ``Numbered`` with a
``pool`` of listings shows each student one drawn listing, its wrong line a line of its own.
"""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from grader.suites.questions import MultipleChoice, Numeric, Question
from grader.variants import Variant

WIDTH = 110  # the stubs' line length
Params = dict[str, Any]


@dataclass(frozen=True)
class Drawn:
    """A numeric question with per-student numbers.

    ``statement``: a ``str.format`` template over the parameters; ``lesson``: the numbers of the lesson (the
    stub's); ``draw(rng)``: a student's; ``answer(p)``: the right number; ``wrong(p)``: (wrong number,
    feedback) for each usual mistake (equal numbers have their feedback joined); ``why``: the working.
    """

    id: str
    statement: str
    lesson: Params
    draw: Callable[[random.Random], Params]
    answer: Callable[[Params], float]
    wrong: Callable[[Params], list[tuple[float, str]]] = lambda p: []
    why: str = ""
    rtol: float = 0.01
    wrong_rtol: float = 0.02
    shown: Callable[[Params], Params] = field(default=lambda p: p)  # parameters as the statement shows them

    def params(self, variant: Variant) -> Params:
        return variant.params(self.id, self.lesson, self.draw)

    def text(self, params: Params) -> str:
        return self.statement.format(**self.shown(params))

    def comment(self, params: Params) -> str:
        """The question's comment lines, as in the stub."""
        return comment(self.id, self.text(params))

    def question(self, params: Params) -> Numeric:
        wrong: dict[float, str] = {}
        for value, feedback in self.wrong(params):
            if value not in wrong:
                wrong[value] = feedback
            elif feedback not in wrong[value]:
                wrong[value] += f"; or {feedback}"
        return Numeric(
            self.id,
            answer=self.answer(params),
            rtol=self.rtol,
            wrong_rtol=self.wrong_rtol,
            why=self.why,
            wrong=wrong,
        )

    def marked(self, variant: Variant) -> Numeric:
        """The question as ``variant``'s student was asked it."""
        return self.question(self.params(variant))

    def distinct(self, params: Params, apart: float = 0.05) -> bool:
        """Whether the answer and the usual wrong answers are all at least ``apart`` (relative) from each other:
        each wrong answer then gets its own feedback, and none is near enough to the answer to pass."""
        values = sorted([self.answer(params), *(v for v, _ in self.wrong(params))])
        return all(v > 0 for v in values) and all(b > a * (1 + apart) for a, b in zip(values, values[1:]))


def comment(question_id: str, text: str) -> str:
    """``text`` as the stub's comment of ``question_id``: ``# ID. text``, continued with ``#   ``."""
    lines = textwrap.wrap(f"{question_id}. {text}", width=WIDTH - 2, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(f"# {line}" for line in lines)


def comment_span(source: str, question_id: str) -> tuple[int, int] | None:
    """Where the comment of ``question_id`` is in ``source``: (first line, line after it), 0-based, the comment
    being the lines from ``# ID.`` down to the line before ``ID = ``; None where there is no such comment."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"# {question_id}.")), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and lines[end].startswith("#") and not lines[end].startswith("# Q"):
        end += 1
    if end >= len(lines) or not re.match(rf"{re.escape(question_id)}\s*=", lines[end]):
        return None
    return start, end


def stub_comment(source: str, question_id: str) -> str | None:
    span = comment_span(source, question_id)
    return None if span is None else "\n".join(source.splitlines()[span[0] : span[1]])


def with_statements(source: str, comments: Mapping[str, str]) -> str:
    """``source`` with each question's comment replaced by ``comments[id]`` (a question not found is left)."""
    lines = source.splitlines()
    found = [(span, text) for qid, text in comments.items() if (span := comment_span(source, qid)) is not None]
    for (start, end), text in sorted(found, reverse=True):  # from the last, so the earlier spans stay put
        lines[start:end] = text.splitlines()
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


# ---------------------------------------------------------------- fixed questions, each student's order


def _comment_text(stub: str, question_id: str) -> str:
    """The words of a question's comment (as ``stub_comment`` gives it), its ``# ID.`` and the ``#`` of each line
    dropped, runs of spaces as one."""
    words = " ".join(line.removeprefix("#") for line in stub.splitlines()).split()
    if not words or words[0] != f"{question_id}.":
        raise ValueError(f"{question_id}: the comment does not begin with '# {question_id}.'")
    return " ".join(words[1:])


@dataclass(frozen=True)
class Shuffled:
    """A multiple-choice question (``choices``: its letters) whose options a student sees in an order of their own
    (``Variant.order``): the stub's options, "(a) ... (b) ...", on one line or several, become one option per
    line in that order; the key and the feedback follow (``MultipleChoice.reordered``)."""

    id: str
    choices: str = "abcd"

    def order(self, variant: Variant) -> tuple[int, ...]:
        return variant.order(self.id, len(self.choices))

    def options(self, stub: str) -> tuple[str, list[str]]:
        """The stub comment's (``stub_comment``) question and its options' texts, in the stub's (the lesson's)
        order; ValueError where the comment does not give each letter's "(x) " once, in order."""
        text, cuts, start = _comment_text(stub, self.id), [], 0
        for letter in self.choices:
            found = re.compile(rf"(?<!\w)\({letter}\) ").search(text, start)
            if found is None:
                raise ValueError(f"{self.id}: option ({letter}) is not in its comment")
            cuts.append(found)
            start = found.end()
        ends = [c.start() for c in cuts[1:]] + [len(text)]
        return text[: cuts[0].start()].strip(), [text[c.end() : end].strip() for c, end in zip(cuts, ends)]

    def comment(self, stub: str, variant: Variant) -> str:
        """The question's comment as ``variant``'s student reads it: the stub's own (``stub``) for the lesson."""
        if variant.seed is None:
            return stub
        asked, options = self.options(stub)
        lines = comment(self.id, asked).splitlines()
        for letter, lesson in zip(self.choices, self.order(variant)):
            wrapped = textwrap.wrap(
                f"({letter}) {options[lesson]}",
                width=WIDTH - 2,
                initial_indent="  ",
                subsequent_indent="      ",
                break_on_hyphens=False,
            )
            lines += [f"# {line}" for line in wrapped]
        return "\n".join(lines)

    def marked(self, question: Question, variant: Variant) -> Question:
        """``question`` (the lesson's) as ``variant``'s student was asked it: in their letters."""
        if variant.seed is None or not isinstance(question, MultipleChoice):
            return question
        return question.reordered(self.order(variant))


# A listing's first line for a student: two digits, never the lesson's 1 (so the lesson's answer, in the release's
# locked answers, is no student's), and far enough from 1 that no line number is the lesson's.
FIRST_LINES = (10, 89)


@dataclass(frozen=True)
class Numbered:
    """A question that asks which line of a listing in its comment (``lines`` lines, numbered from 1 in the stub:
    "#   1  code") is the one: each student's listing is numbered from a first line of their own, and the answer
    and the feedback's line numbers follow. The lines keep their order: the listing is code. With a ``pool``
    (hidden listings of the same code, each wrong on a line of its own), a paper's student is shown one drawn
    listing in place of the stub's, so the stub's wrong line, found in the release, names no line of theirs."""

    id: str
    lines: int
    pool: tuple[Listing, ...] = ()

    def __post_init__(self) -> None:
        if any(len(listing.lines) != self.lines for listing in self.pool):
            raise ValueError(f"{self.id}: each listing of its pool has {self.lines} lines")

    def first(self, variant: Variant) -> int:
        drawn = variant.params(f"{self.id}:lines", {"first": 1}, lambda rng: {"first": rng.randint(*FIRST_LINES)})
        return int(drawn["first"])

    def listing(self, variant: Variant) -> Listing | None:
        """The listing of the pool ``variant``'s student is shown (None for the lesson, or with no pool)."""
        if variant.seed is None or not self.pool:
            return None
        return random.Random(f"{variant.seed}:{self.id}:listing").choice(self.pool)

    def comment(self, stub: str, variant: Variant) -> str:
        """The question's comment as ``variant``'s student reads it: the stub's own (``stub``) for the lesson."""
        if variant.seed is None:
            return stub
        shift = self.first(variant) - 1
        if (drawn := self.listing(variant)) is not None:
            stub = _with_listing(stub, drawn.lines)
        listing = re.compile(r"^(#\s+)(\d+)(\s+)(.*)$")
        out, seen = [], 0
        for line in stub.splitlines():
            found = listing.match(line)
            if found and int(found[2]) == seen + 1:
                seen += 1
                line = f"{found[1]}{seen + shift}{found[3]}{found[4]}"
            out.append(line)
        if seen != self.lines:
            raise ValueError(f"{self.id}: its comment lists {seen} numbered lines, not {self.lines}")
        return "\n".join(out)

    def marked(self, question: Question, variant: Variant) -> Question:
        """``question`` (the lesson's, a ``Numeric`` over lines 1 to ``lines``) in ``variant``'s line numbers."""
        if variant.seed is None or not isinstance(question, Numeric):
            return question
        shift = self.first(variant) - 1
        if (drawn := self.listing(variant)) is not None:
            question = replace(question, answer=drawn.bug, wrong=dict(drawn.feedback), why=drawn.why)
        return replace(
            question,
            answer=question.answer + shift,
            wrong={number + shift: feedback for number, feedback in question.wrong.items()},
            # a line number is exact: no neighbour of a usual wrong line is taken for it
            wrong_rtol=0.0,
        )


def _with_listing(stub: str, code: tuple[str, ...]) -> str:
    """``stub`` (a listing question's comment) with its numbered lines, "#   1  code", replaced by ``code``'s."""
    listing = re.compile(r"^(#\s+)(\d+)(\s+)(.*)$")
    out, seen = [], 0
    for line in stub.splitlines():
        found = listing.match(line)
        if found and int(found[2]) == seen + 1 and seen < len(code):
            line = f"{found[1]}{seen + 1}{found[3]}{code[seen]}"
            seen += 1
        out.append(line)
    if seen != len(code):
        raise ValueError(f"the comment lists {seen} numbered lines, not the listing's {len(code)}")
    return "\n".join(out)


@dataclass(frozen=True)
class Option:
    """An option of a pool: its ``text`` as the student reads it, and its ``feedback``: for a wrong option what it
    gets wrong; for a right one why it holds (the working of a single answer, the note on a right option left
    out of several)."""

    text: str
    feedback: str


@dataclass(frozen=True)
class Pooled:
    """A multiple-choice question whose options a paper's student draws from a hidden pool: ``right`` statements
    and ``wrong`` ones, none of them the lesson's (the stub's), so neither the release's letters nor its options'
    words say which of a student's options is right. One right option (``several`` False), or, where several may
    be right, a number of them drawn from 1 to ``len(choices) - 1``, so that how many are right tells nothing;
    the rest are wrong ones; all in an order of the student's own. ``asked``: the paper's question where the
    pool's options need other words than the stub's ("" keeps the stub's). ``why``: the working of a
    several-answer question (a single answer's is its right option's feedback). The lesson's variant keeps the
    stub and the lesson's question, so the release's locked answers still check a student grading alone."""

    id: str
    right: tuple[Option, ...]
    wrong: tuple[Option, ...]
    asked: str = ""
    why: str = ""
    several: bool = False
    choices: str = "abcd"

    def __post_init__(self) -> None:
        n = len(self.choices)
        most_right = n - 1 if self.several else 1
        texts = [o.text for o in (*self.right, *self.wrong)]
        if len(self.right) < most_right or len(self.wrong) < n - 1:
            raise ValueError(f"{self.id}: the pool cannot fill {n} options for every draw")
        if len(set(texts)) != len(texts) or not all(o.text and o.feedback for o in (*self.right, *self.wrong)):
            raise ValueError(f"{self.id}: each option of the pool needs its own text and its feedback")

    def drawn(self, variant: Variant) -> list[tuple[Option, bool]]:
        """``variant``'s options, in the order shown (each with whether it is right); a paper's student only."""
        if variant.seed is None:
            raise ValueError(f"{self.id}: the lesson's options are the stub's, not the pool's")
        rng = random.Random(f"{variant.seed}:{self.id}:pool")
        n = len(self.choices)
        keys = rng.randint(1, n - 1) if self.several else 1
        shown = [(o, True) for o in rng.sample(self.right, keys)] + [
            (o, False) for o in rng.sample(self.wrong, n - keys)
        ]
        rng.shuffle(shown)
        return shown

    def comment(self, stub: str, variant: Variant) -> str:
        """The question's comment as ``variant``'s student reads it: the stub's own (``stub``) for the lesson."""
        if variant.seed is None:
            return stub
        asked = self.asked or Shuffled(self.id, self.choices).options(stub)[0]
        lines = comment(self.id, asked).splitlines()
        for letter, (option, _) in zip(self.choices, self.drawn(variant)):
            lines += [f"# {line}" for line in _option_lines(letter, option.text)]
        return "\n".join(lines)

    def marked(self, question: Question, variant: Variant) -> Question:
        """``question`` (the lesson's) for the lesson; for a paper's student, the question they were asked: their
        drawn options' key, each wrong choice's feedback and the working, in their letters."""
        if variant.seed is None:
            return question
        shown = dict(zip(self.choices, self.drawn(variant)))
        answer = "".join(letter for letter, (_, right) in shown.items() if right)
        if not self.several:
            wrong = {letter: option.feedback for letter, (option, right) in shown.items() if not right}
            return MultipleChoice(
                self.id, answer=answer, choices=self.choices, wrong=wrong, why=shown[answer][0].feedback
            )
        feedback: dict[str, str] = {}
        for size in range(1, len(self.choices) + 1):
            for chosen in combinations(self.choices, size):
                if set(chosen) == set(answer):
                    continue
                notes = [f"({c}) {shown[c][0].feedback}" for c in chosen if not shown[c][1]]
                notes += [f"({c}) holds too: {shown[c][0].feedback}" for c in answer if c not in chosen]
                feedback["".join(chosen)] = "; ".join(notes)
        return MultipleChoice(self.id, answer=answer, choices=self.choices, wrong=feedback, why=self.why)


def _option_lines(letter: str, text: str) -> list[str]:
    """An option as a student's notebook shows it: "  (b) text", continued under the text."""
    return textwrap.wrap(
        f"({letter}) {text}", width=WIDTH - 2, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False
    )


@dataclass(frozen=True)
class Listing:
    """One listing of a pool (``Numbered.pool``): its ``lines`` of code, the wrong one (``bug``, from 1), the
    feedback on each other line (``feedback``, by its number from 1) and the working (``why``)."""

    lines: tuple[str, ...]
    bug: int
    feedback: Mapping[int, str]
    why: str

    def __post_init__(self) -> None:
        others = set(range(1, len(self.lines) + 1)) - {self.bug}
        if self.bug not in range(1, len(self.lines) + 1) or set(self.feedback) != others:
            raise ValueError(f"a listing needs its wrong line among its {len(self.lines)} and feedback on each other")


Reordered = Shuffled | Numbered | Pooled


def reordered(question: Question, variant: Variant, specs: list[Reordered]) -> Question:
    """``question`` as ``variant``'s student was asked it, where ``specs`` reorder it; else as it is."""
    spec = next((s for s in specs if s.id == question.id), None)
    return question if spec is None else spec.marked(question, variant)
