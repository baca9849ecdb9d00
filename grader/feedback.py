"""The feedback policies: what a student sees of a graded submission, in a contest (``[feedback]`` in
contest.toml) and in a paper's practice (``feedback`` in paper.toml).

A policy is what it shows (:class:`Shows`): nothing reads a policy's name to decide what to show.
grader/contest/feedback.py filters a report by it (``filter_report``) and renders what is left (``render``,
``render_lines``) for every screen: ``grade submit``, the contest's page and ``grade practice``.
docs/contributing.md ("Adding a feedback policy") says how to add one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Shows:
    """What a policy lets a student see."""

    tasks: bool  # a row per task, with its verdict (a class such as "runtime error", which names no check)
    scores: bool  # each task's score, in the contest's points
    passed: bool  # each task: full marks or not
    checks: bool  # every check: its name, its points and, for a failed one, its message
    words: str  # what the student is told they see (``grade practice``)


class Feedback(Enum):
    """What a student sees of a graded submission."""

    FULL = "full"  # every check: name, points, message
    SCORE = "score"  # each task's score only
    PASSFAIL = "passfail"  # each task: full marks or not
    NONE = "none"  # only that the submission was received

    @property
    def shows(self) -> Shows:
        return SHOWS[self]


SHOWS = {
    Feedback.FULL: Shows(
        tasks=True,
        scores=True,
        passed=False,
        checks=True,
        words="every check: its name and, for a failed one, its message",
    ),
    Feedback.SCORE: Shows(tasks=True, scores=True, passed=False, checks=False, words="each part's score"),
    Feedback.PASSFAIL: Shows(
        tasks=True, scores=False, passed=True, checks=False, words="whether each part has full marks, not its score"
    ),
    Feedback.NONE: Shows(
        tasks=False, scores=False, passed=False, checks=False, words="only that your attempt was graded"
    ),
}
