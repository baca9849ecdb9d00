"""Writes grader/suites/locked_answers.py, the quiz's, kvmemory's and concepts' answers locked (see
grader/suites/locked.py), from the hidden questions: `python -m grader.suites.hidden.lock_answers`.
tests/unit/test_locked.py checks that the file is up to date.

kvmemory's and concepts' questions are locked as the lesson asks them, a student grading alone's: its numbers, its
options' order, its listing's line numbers. In a paper a student is asked their own (drawn numbers, options in
their own order, their own line numbers): those locks are marked ``per_student``, and there the public check only
says whether each is answered (``locked.judges``); the lesson's key is not that student's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from grader.suites import locked
from grader.suites.hidden import concept_questions, kv_questions
from grader.suites.hidden.test_quiz import QUESTIONS as QUIZ
from grader.suites.questions import MultipleChoice, Numeric, Question, Text
from grader.variants import LESSON

TARGET = Path(locked.__file__).with_name("locked_answers.py")


def lock(question: Question) -> dict[str, Any]:
    """How ``question`` is locked: its kind, what reading its answers needs, and the hashes of its right keys."""
    if isinstance(question, Text):
        keys = sorted(question.accepted)
        entry: dict[str, Any] = {"kind": "word", **({"context": list(question.context)} if question.context else {})}
    elif isinstance(question, MultipleChoice):
        keys = ["".join(sorted(set(question.answer)))]
        entry = {"kind": "letters", "choices": question.choices}
    elif isinstance(question, Numeric):
        # the grid is relative: an absolute tolerance would need another (none of these questions has one)
        assert question.atol == 0, f"{question.id}: an absolute tolerance cannot be locked on a relative grid"
        keys = locked.band_keys(question.answer, question.rtol)
        entry = {"kind": "number", "rtol": question.rtol}
    else:
        raise TypeError(f"{question.id}: no lock for a {type(question).__name__}")
    return {**entry, "hashes": sorted(locked.digest(question.id, k) for k in keys)}


def per_student(bank: Any) -> set[str]:
    """The questions of ``bank`` a paper asks each student in their own way: drawn numbers, or reordered."""
    return {q.id for q in bank.DRAWN} | {r.id for r in bank.REORDERED}


def locks() -> dict[str, dict[str, dict[str, Any]]]:
    found: dict[str, dict[str, dict[str, Any]]] = {"quiz": {q.id: lock(q) for q in QUIZ}}
    for name, bank in (("kvmemory", kv_questions), ("concepts", concept_questions)):
        own = per_student(bank)
        found[name] = {
            i: {**lock(bank.question(i, LESSON)), **({"per_student": True} if i in own else {})} for i in bank.IDS
        }
    return found


def source() -> str:
    return locked.module_text(locks(), "`python -m grader.suites.hidden.lock_answers`")


if __name__ == "__main__":
    TARGET.write_text(source())
    sys.stdout.write(f"wrote {TARGET}\n")
