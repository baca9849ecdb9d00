"""Who a token names: the students' tokens and the coach's, read from the files `grade contest tokens` writes.

Tokens are secrets: each is compared in constant time (``hmac.compare_digest``), every known one on every check
(no early exit that a stopwatch could read), never with ``==``, ``in`` or a dict lookup, and never logged.
"""

from __future__ import annotations

import csv
import dataclasses
import hmac
from pathlib import Path

from grader.contest.commands import ADMIN_TOKEN, TOKENS

COACH = "coach"


@dataclasses.dataclass(frozen=True)
class Who:
    name: str  # the student's name; COACH for the coach
    coach: bool = False


def read_tokens(folder: Path) -> tuple[dict[str, str], str | None]:
    """The students' tokens (token -> student) and the coach's token, from the files `grade contest tokens`
    writes; a missing file is no tokens."""
    students: dict[str, str] = {}
    path = folder / TOKENS
    if path.exists():
        for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines()):
            token, student = (row.get("token") or "").strip(), (row.get("student") or "").strip()
            if token and student:
                students[token] = student
    admin = folder / ADMIN_TOKEN
    coach = admin.read_text(encoding="utf-8").strip() if admin.exists() else None
    return students, coach or None


class Tokens:
    """The contest's tokens, to tell who a given one names."""

    def __init__(self, folder: Path):
        self._students, self._coach = read_tokens(folder)

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
        found = None
        for known, student in self._students.items():  # every token compared, in constant time each
            if hmac.compare_digest(given, known.encode()):
                found = student
        return Who(found) if found else None
