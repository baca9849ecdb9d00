"""The feedback policies: what a student sees of a graded submission, in a contest (``[feedback]`` in
contest.toml) and in a paper's practice (``feedback`` in paper.toml).

grader/contest/feedback.py filters a report by a policy and renders the result (``filter_report``,
``render``): every view of a student's feedback (``grade submit``, the contest page, ``grade practice``) goes
through them. docs/contributing.md says how to add a policy.
"""

from __future__ import annotations

from enum import Enum


class Feedback(Enum):
    """What a student sees of a graded submission."""

    FULL = "full"  # every check: name, points, message
    SCORE = "score"  # each task's score only
    PASSFAIL = "passfail"  # each task: full marks or not
    NONE = "none"  # only that the submission was received
