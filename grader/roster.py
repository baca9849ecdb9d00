"""A class's roster, ``roster.csv`` (a contest's, or the one a paper's notebooks are rendered for): one row per
student, in a ``student`` column (other columns are the coach's own and are kept out of the way). Names are the
students' ids everywhere: tokens, extra time, the scoreboard, and each is one folder's name in the exports
(``STUDENT/results.json``), so an empty, repeated or path-like one is an error, with its line. On a paper each name
draws its student's numbers, so two names that draw the same ones are an error too."""

from __future__ import annotations

import csv
import unicodedata
from pathlib import Path

from grader.variants import student_key


class RosterError(Exception):
    """A roster that cannot be used; the message names the file and the line."""


def unsafe(name: str) -> str | None:
    """Why ``name`` cannot be one folder's name (the exports write ``NAME/results.json``: a name such as
    ``../x`` or ``a/b`` would write outside their folder), or None for a name that can."""
    if "/" in name or "\\" in name:
        return "it holds a / or \\"
    if name.startswith("."):  # ".", ".." and hidden folders alike
        return "it starts with a dot"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "it holds a control character"
    return None


def read_roster(path: Path, paper: bool = False) -> tuple[str, ...]:
    """The student names in ``path``, in file order. ``paper``: the contest is on a paper, so two names that
    differ only in letter case or spaces (one seed, the same numbers) are refused, as `grade paper render`
    refuses them."""
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
        why = unsafe(name)
        if why:
            raise RosterError(
                f"{path.name}, line {line}: {name!r} cannot be a student name: {why}, and each name is a folder's "
                "name in the exports: rename the student"
            )
        if name in seen:
            raise RosterError(
                f"{path.name}, line {line}: {name!r} is already on line {seen[name]}: names must be unique"
            )
        seen[name] = line
    if not seen:
        raise RosterError(f"{path.name}: no students: add one name per line under the student header")
    if paper:
        _one_seed_each(path, seen)
    return tuple(seen)


def _one_seed_each(path: Path, names: dict[str, int]) -> None:
    """Refuse two names that draw one paper seed (``student_key``: letter case and spaces aside)."""
    first: dict[str, str] = {}
    for name, line in names.items():
        if (other := first.setdefault(student_key(name), name)) != name:
            raise RosterError(
                f"{path.name}, line {line}: {other!r} and {name!r} differ only in letter case or spaces, so they "
                "would get the same numbers: tell them apart on the roster"
            )
