"""A contest folder's files, by name, and the tokens read back from them: what `grade contest` writes
(``commands``) and the server reads (``web``), in one module below both, so that neither imports the other
for a file's name.

The records' own files are named where they are kept: ``store.DATABASE`` and ``store.UPLOADS`` (the sqlite
database and the uploads folder), ``reaper.PIDFILE`` (the grading processes still running), ``export.GRADEBOOK``.
"""

from __future__ import annotations

import csv
from pathlib import Path

CONTEST_FILE = "contest.toml"
ROSTER = "roster.csv"
TOKENS = "tokens.csv"
ADMIN_TOKEN = "admin.token"
COACHES = "coaches.csv"  # the jury's named accounts (`grade contest coach`): token,coach
SERVE_LOCK = "serve.lock"  # held (flock) by the one `grade contest serve` of the folder while it runs


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


def read_coaches(folder: Path) -> dict[str, str]:
    """The named coaches' tokens (token -> name) from ``COACHES``; none without the file."""
    found: dict[str, str] = {}
    path = folder / COACHES
    if path.exists():
        for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines()):
            token, name = (row.get("token") or "").strip(), (row.get("coach") or "").strip()
            if token and name:
                found[token] = name
    return found
