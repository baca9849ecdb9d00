"""Who a token names: the students' tokens and the coach's, from the files `grade contest tokens` writes
(``grader.contest.layout.read_tokens`` reads them).

Tokens are secrets: each is compared in constant time (``hmac.compare_digest``), every known one on every check
(no early exit that a stopwatch could read), never with ``==``, ``in`` or a dict lookup, and never logged.

The files are read again whenever one of them has changed (``Tokens.check`` looks, a few system calls): a coach's
account taken away (`grade contest coach --remove`) or the tokens rotated (`grade contest tokens --rotate`) stops the
old token at once, not at the server's next start, which a leaked token could wait for.
"""

from __future__ import annotations

import csv
import dataclasses
import hmac
import os
import threading
from pathlib import Path

from grader.contest.layout import ADMIN_TOKEN, COACHES, TOKENS, read_coaches, read_tokens

COACH = "coach"

# A coach token's role (coaches.csv's "role" column). admin: every right, as admin.token. jury: answers the room
# (questions, regrade requests, announcements), never the windows, the results or the board. read-only: reads the
# coach's pages and exports, changes nothing. A row with no role (a folder from before roles) is admin: a jury
# that relied on its tokens keeps what they could do.
ADMIN, JURY, READ_ONLY = "admin", "jury", "read-only"
ROLES = (ADMIN, JURY, READ_ONLY)


@dataclasses.dataclass(frozen=True)
class Who:
    name: str  # the student's name; COACH for the coach of admin.token, a named coach's name (coaches.csv)
    coach: bool = False
    role: str | None = None  # a coach's role (ROLES); None: a student


def read_roles(folder: Path) -> dict[str, str]:
    """Each named coach's role (token -> role) from ``COACHES``: an empty or missing role is ``ADMIN`` (a file
    written before roles), a role not in ``ROLES`` is ``READ_ONLY`` (a typo grants nothing it did not name)."""
    found: dict[str, str] = {}
    path = folder / COACHES
    if path.exists():
        for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines()):
            token, role = (row.get("token") or "").strip(), (row.get("role") or "").strip().lower()
            if token:
                found[token] = (role if role in ROLES else READ_ONLY) if role else ADMIN
    return found


class Tokens:
    """The contest's tokens, to tell who a given one names."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._lock = threading.Lock()
        self._read()

    def _files(self) -> tuple[tuple[int, int, int] | None, ...]:
        """What the token files are now (inode, modification time, size; None: none), to tell a change."""
        found: list[tuple[int, int, int] | None] = []
        for name in (TOKENS, ADMIN_TOKEN, COACHES):
            try:
                info = os.stat(self.folder / name)
            except OSError:
                found.append(None)
            else:
                found.append((info.st_ino, info.st_mtime_ns, info.st_size))
        return tuple(found)

    def _read(self) -> None:
        files = self._files()  # before reading: a change while they are read is read again next time
        students, coach = read_tokens(self.folder)
        coaches = read_coaches(self.folder)  # the jury's named accounts: token -> name
        roles = read_roles(self.folder)
        named = {token: (name, roles.get(token, ADMIN)) for token, name in coaches.items()}
        self._known, self._seen = (students, coach, named), files  # one assignment: a check sees one reading

    def _current(self) -> None:
        """Read the files again if one has changed since (each is replaced whole: grader/files.py)."""
        if self._files() != self._seen:
            with self._lock:
                if self._files() != self._seen:
                    self._read()

    def names(self) -> tuple[str, ...]:
        """The students who have a token."""
        return tuple(self._known[0].values())

    def check(self, token: str) -> Who | None:
        """Who ``token`` names; None for an empty or unknown one."""
        if not token:
            return None
        self._current()
        students, admin, coaches = self._known
        given = token.encode()
        if admin and hmac.compare_digest(given, admin.encode()):
            return Who(COACH, coach=True, role=ADMIN)
        jury = None
        for known, account in coaches.items():  # every token compared, in constant time each
            if hmac.compare_digest(given, known.encode()):
                jury = account
        found = None
        for known, student in students.items():
            if hmac.compare_digest(given, known.encode()):
                found = student
        if jury:
            return Who(jury[0], coach=True, role=jury[1])
        return Who(found) if found else None
