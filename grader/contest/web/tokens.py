"""Who a token names: the students' tokens and the coach's, from the files `grade contest tokens` writes
(``grader.contest.layout.read_tokens`` reads them).

Tokens are secrets: each is compared in constant time (``hmac.compare_digest``), every known one on every check
(no early exit that a stopwatch could read), never with ``==``, ``in`` or a dict lookup, and never logged.
"""

from __future__ import annotations

import dataclasses
import hmac
from pathlib import Path

from grader.contest.layout import read_coaches, read_tokens

COACH = "coach"


@dataclasses.dataclass(frozen=True)
class Who:
    name: str  # the student's name; COACH for the coach of admin.token, a named coach's name (coaches.csv)
    coach: bool = False


class Tokens:
    """The contest's tokens, to tell who a given one names."""

    def __init__(self, folder: Path):
        self._students, self._coach = read_tokens(folder)
        self._coaches = read_coaches(folder)  # the jury's named accounts: token -> name

    def names(self) -> tuple[str, ...]:
        """The students who have a token."""
        return tuple(self._students.values())

    def check(self, token: str) -> Who | None:
        """Who ``token`` names; None for an empty or unknown one."""
        if not token:
            return None
        given = token.encode()
        if self._coach and hmac.compare_digest(given, self._coach.encode()):
            return Who(COACH, coach=True)
        jury = None
        for known, name in self._coaches.items():  # every token compared, in constant time each
            if hmac.compare_digest(given, known.encode()):
                jury = name
        found = None
        for known, student in self._students.items():
            if hmac.compare_digest(given, known.encode()):
                found = student
        if jury:
            return Who(jury, coach=True)
        return Who(found) if found else None
