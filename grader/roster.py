"""A class's roster, ``roster.csv`` (a contest's, a paper's, a batch's): one row per student, in a ``student``
column, with optional ``email`` and ``name`` columns (other columns are the coach's own and are kept out of the
way). Names are the students' ids everywhere: tokens, extra time, the scoreboard, and each is one folder's name in
the exports (``STUDENT/results.json``), so an empty, repeated or path-like one is an error, with its line. On a
paper each name draws its student's numbers, so two names that draw the same ones are an error too.

A class's batch (``grade batch``/``report``/``export --roster``) and its Gradescope zip read the roster as
identities (``read_identities``): one student known by an id, an email and a name, so that a late policy keyed by
any of them reaches the student whichever one a platform gives (Gradescope gives the submitter's email and name)."""

from __future__ import annotations

import csv
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.errors import InputError
from grader.variants import student_key


class RosterError(InputError):
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


@dataclass(frozen=True)
class Identity:
    """One student as the roster gives them: ``id`` (the ``student`` column: their folder's name in a batch),
    and their ``email`` and ``name`` where the roster has those columns ("" where not)."""

    id: str
    email: str = ""
    name: str = ""

    def keys(self) -> tuple[str, ...]:
        """What a late policy or a platform may call this student: the id, the email (any letter case), the name."""
        return tuple(k for k in (self.id, self.email.lower(), self.name) if k)


class Roster:
    """A roster's identities, looked up by id, email (any letter case) or name."""

    def __init__(self, identities: Iterable[Identity]):
        self.identities = tuple(identities)
        self._by_key: dict[str, list[Identity]] = {}
        for identity in self.identities:
            for key in dict.fromkeys(identity.keys()):
                self._by_key.setdefault(key, []).append(identity)

    def matches(self, key: str) -> list[Identity]:
        """Every student ``key`` names (an id, an email or a name): two where two students share a name."""
        key = key.strip()
        return self._by_key.get(key) or self._by_key.get(key.lower()) or []

    def find(self, key: str) -> Identity | None:
        """The one student ``key`` names, or None (no one, or a name two students share)."""
        found = self.matches(key)
        return found[0] if len(found) == 1 else None

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(i.id for i in self.identities)


def read_roster(path: Path, paper: bool = False) -> tuple[str, ...]:
    """The student names in ``path``, in file order. ``paper``: the contest is on a paper, so two names that
    differ only in letter case or spaces (one seed, the same numbers) are refused, as `grade paper render`
    refuses them."""
    return tuple(i.id for i in read_identities(path, paper))


def read_identities(path: Path, paper: bool = False) -> tuple[Identity, ...]:
    """The students in ``path`` as identities, in file order (``read_roster``'s checks, ``paper`` included); an
    email given twice, or one without an @, is an error with its line: it would send one student's extension to
    another."""
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
    optional = {f.strip(): f for f in reader.fieldnames if f.strip() in ("email", "name")}
    seen: dict[str, int] = {}
    emails: dict[str, int] = {}
    identities = []
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
        email = _email(path, line, (row.get(optional["email"]) or "") if "email" in optional else "", emails)
        full_name = (row.get(optional["name"]) or "").strip() if "name" in optional else ""
        identities.append(Identity(name, email, full_name))
    if not seen:
        raise RosterError(f"{path.name}: no students: add one name per line under the student header")
    if paper:
        _one_seed_each(path, seen)
    return tuple(identities)


def _email(path: Path, line: int, text: str, emails: dict[str, int]) -> str:
    """The email on ``line`` ("" for none), checked: an address, and not one an earlier line (in ``emails``, which
    gains it) gave another student."""
    email = text.strip()
    if not email:
        return ""
    if "@" not in email:
        raise RosterError(f"{path.name}, line {line}: {email!r} is not an email address")
    if email.lower() in emails:
        raise RosterError(
            f"{path.name}, line {line}: the email {email!r} is already on line {emails[email.lower()]}: "
            "each student has their own"
        )
    emails[email.lower()] = line
    return email


def _one_seed_each(path: Path, names: dict[str, int]) -> None:
    """Refuse two names that draw one paper seed (``student_key``: letter case and spaces aside)."""
    first: dict[str, str] = {}
    for name, line in names.items():
        if (other := first.setdefault(student_key(name), name)) != name:
            raise RosterError(
                f"{path.name}, line {line}: {other!r} and {name!r} differ only in letter case or spaces, so they "
                "would get the same numbers: tell them apart on the roster"
            )
