"""The class read for comparing (:func:`read_class`): every student's files normalised and fingerprinted, and the
code most of the class wrote the same way (the quiz's answers, the line everyone opens a function with) taken out
of each student's own fingerprints (:func:`_discounted`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.batch.discover import discover
from grader.similarity.files import student_files
from grader.similarity.fingerprints import _located
from grader.similarity.normalise import defined_names, normalise
from grader.similarity.stubs import STUBS, Stub, read_stubs

MIN_FINGERPRINTS = 8  # a file with fewer of its own (a stub barely touched) is compared with no one

# A fingerprint more than half of the students who wrote a file hold (and at least three of them: a pair alone is
# never "the class", however small it is) is the class's, not the pair's: the quiz's answers, the line everyone
# opens a function with. It counts for no one, as the stub's text does not.
COMMON_SHARE = 0.5
COMMON_MIN = 3


@dataclass(frozen=True)
class Written:
    """One student's file: as handed in, as compared (:func:`normalise`) and its own fingerprints (the stub's
    taken out)."""

    code: str
    normalised: str
    prints: frozenset[int]
    covers: dict[int, frozenset[str]]  # each fingerprint's lines of the normalised text (stripped)
    lines: frozenset[str]  # the normalised text's lines (stripped)


@dataclass
class Class:
    """A class read for comparing: each file's texts by student, and the fingerprints most of the class holds."""

    students: list[str]  # every student found, sorted
    files: dict[str, dict[str, Written]]  # file name -> student -> their file
    own: dict[str, dict[str, frozenset[int]]]  # file name -> student -> fingerprints less the class's common code
    common: dict[str, frozenset[int]]  # file name -> the fingerprints taken out as the class's common code
    no_files: list[str]  # found (or on the roster) with no exercise file to compare
    not_on_roster: list[str]  # found, but not on the roster given


def read_class(folder: Path, stubs: Path = STUBS, roster: Iterable[str] | None = None) -> Class:
    """Every student's exercise files in ``folder`` (a class, as `grade batch` reads it), normalised and
    fingerprinted; ``roster``: the names expected, to say who has no files and which folders are on no roster."""
    boiler = read_stubs(stubs)
    done: dict[tuple[str, str], Written] = {}  # the same text (an untouched stub, a shared file) is read once
    files: dict[str, dict[str, Written]] = {}
    students, empty = [], []
    for f in discover(folder, empty=True):
        students.append(f.student)
        texts = student_files(f.path) if f.problem is None else {}
        if not texts:
            empty.append(f.student)
        for name, code in texts.items():
            if (name, code) not in done:
                stub = boiler.get(name, Stub())
                normalised = normalise(code, stub.names or defined_names(code))
                covers = {h: c for h, c in _located(normalised).items() if h not in stub.prints}
                lines = frozenset(line.strip() for line in normalised.splitlines())
                done[name, code] = Written(code, normalised, frozenset(covers), covers, lines)
            files.setdefault(name, {})[f.student] = done[name, code]
    not_on_roster: list[str] = []
    if roster is not None:
        expected = set(roster)
        # nbgrader's layout names a submission "student/assignment": the student is the first part
        found = {s.partition("/")[0] for s in students if s not in empty}
        empty = sorted(set(empty) | (expected - found))
        not_on_roster = sorted(s for s in students if s.partition("/")[0] not in expected)
    own, common = {}, {}
    for name, by_student in files.items():
        own[name] = _discounted(by_student)
        common[name] = frozenset().union(*(w.prints - own[name][s] for s, w in by_student.items()))
    return Class(sorted(students), files, own, common, empty, not_on_roster)


def _discounted(by_student: dict[str, Written]) -> dict[str, frozenset[int]]:
    """Each student's fingerprints of one file less the class's common code: a fingerprint held by more than
    ``COMMON_SHARE`` of the students who wrote this file (at least ``MIN_FINGERPRINTS`` of their own: an untouched
    stub wrote nothing) and by at least ``COMMON_MIN``, or one whose lines are each held by that many. The second
    catches what the first misses: two students who both answered the quiz right share ``Q3 = 'above'`` and
    ``Q4 = 'before'``, each line most of the class's, but a k-gram spans several answers, and fewer than half of
    the class got every one of them right."""
    writers = [w for w in by_student.values() if len(w.prints) >= MIN_FINGERPRINTS]
    need = max(COMMON_MIN, math.floor(len(writers) * COMMON_SHARE) + 1)
    counts = Counter(h for w in writers for h in w.prints)
    prints = {h for h, n in counts.items() if n >= need}
    lines = {line for line, n in Counter(line for w in writers for line in w.lines).items() if n >= need}
    return {
        s: frozenset(h for h in w.prints if h not in prints and not w.covers[h] <= lines) for s, w in by_student.items()
    }
