"""Scoring pairs of students: a pair's score on a file is the share of the smaller side's fingerprints that the
other also has (:func:`file_pairs`); across files, their fingerprints in common over the smaller sides', summed
(:func:`pair_scores`), so that a file counts as much as the code it holds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from grader.similarity.common import MIN_FINGERPRINTS, Class, read_class
from grader.similarity.stubs import STUBS

THRESHOLD = 0.6  # a pair at or above this share on a file is flagged


@dataclass(frozen=True)
class Pair:
    file: str
    a: str
    b: str
    score: float  # the share of the smaller side's fingerprints the other has too, 0..1
    shared: int  # fingerprints in common
    smaller: int  # the smaller side's fingerprints (what a pair's score across files weighs this file by)


@dataclass(frozen=True)
class PairScore:
    """Two students across every file both wrote: ``score`` is their fingerprints in common over the smaller
    side's, summed over those files (so a file counts as much as the code it holds), the class's common code and
    the stubs' text left out."""

    a: str
    b: str
    score: float
    shared: int
    files: tuple[Pair, ...]  # the files behind it (at or above the threshold), highest first


def file_pairs(klass: Class, only: tuple[str, str] | None = None) -> list[Pair]:
    """Every pair's score on every file both wrote (at least ``MIN_FINGERPRINTS`` of their own each, the class's
    common ones left out), highest first; ``only``: that pair's."""
    pairs = []
    for name, by_student in klass.own.items():
        own = {
            s: prints for s, prints in by_student.items() if (not only or s in only) and len(prints) >= MIN_FINGERPRINTS
        }
        for a, b in itertools.combinations(sorted(own), 2):
            shared = len(own[a] & own[b])
            smaller = min(len(own[a]), len(own[b]))
            pairs.append(Pair(name, a, b, round(shared / smaller, 3), shared, smaller))
    return sorted(pairs, key=lambda p: (-p.score, p.file, p.a, p.b))


def pair_scores(pairs: list[Pair], threshold: float) -> list[PairScore]:
    """One row per pair with a file at or above ``threshold`` (the files behind it), ranked by the pair's score
    across every file both wrote; a pair's score cannot reach the threshold without one of its files reaching it."""
    by_pair: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        by_pair.setdefault((p.a, p.b), []).append(p)
    rows = []
    for (a, b), files in by_pair.items():
        flagged = tuple(p for p in files if p.score >= threshold)
        if flagged:
            shared, smaller = sum(p.shared for p in files), sum(p.smaller for p in files)
            rows.append(PairScore(a, b, round(shared / smaller, 3), shared, flagged))
    return sorted(rows, key=lambda r: (-r.score, -r.shared, r.a, r.b))


def compare(folder: Path, stubs: Path = STUBS, threshold: float = THRESHOLD) -> tuple[list[Pair], int]:
    """The pairs of students at or above ``threshold`` on some file, highest first, and how many students were
    compared (file by file: :func:`read_class`, :func:`file_pairs` and :func:`pair_scores` give the whole)."""
    klass = read_class(folder, stubs)
    return [p for p in file_pairs(klass) if p.score >= threshold], len(klass.students)
