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
"""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grader.suites.questions import Numeric
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
