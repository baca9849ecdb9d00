"""The contest's roster, ``roster.csv``: one row per student, in a ``student`` column (other columns are the
coach's own and are kept out of the way). Names are the students' ids everywhere: tokens, extra time, the
scoreboard, so an empty or repeated one is an error, with its line."""

from __future__ import annotations

import csv
from pathlib import Path


class RosterError(Exception):
    """A roster that cannot be used; the message names the file and the line."""


def read_roster(path: Path) -> tuple[str, ...]:
    """The student names in ``path``, in file order."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise RosterError(
            f"there is no {path}: write one with a student column (grade contest init makes one)"
        ) from None
    except OSError as e:
        raise RosterError(f"{path}: cannot read it: {e.strerror or e}") from None
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or "student" not in [f.strip() for f in reader.fieldnames]:
        raise RosterError(
            f"{path.name}, line 1: the header needs a student column, not {reader.fieldnames or 'nothing'}"
        )
    column = next(f for f in reader.fieldnames if f.strip() == "student")
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        name = (row.get(column) or "").strip()
        if not name:
            raise RosterError(f"{path.name}, line {line}: the student name is empty")
        if name in seen:
            raise RosterError(
                f"{path.name}, line {line}: {name!r} is already on line {seen[name]}: names must be unique"
            )
        seen[name] = line
    if not seen:
        raise RosterError(f"{path.name}: no students: add one name per line under the student header")
    return tuple(seen)
