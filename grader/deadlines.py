"""Due dates and the late policy: a small TOML the instructor passes (``--late-policy FILE``), where each
submission's time comes from, and what a late one loses.

The file (docs/instructors.md, "Due dates and late penalties")::

    due = "2026-12-01T23:59:00+00:00"      # every assignment's, unless [assignments] names it
    [assignments]
    hw1 = "2026-12-08T23:59:00+00:00"
    [late]
    per = "day"            # or "hour": each started day (hour) past the due date costs `penalty`
    penalty = 10           # percent of the student's score per day (hour) late
    cap = 50               # percent at most
    grace_minutes = 15     # this late costs nothing (past it, the time counts from the due date)
    [extensions]
    alice = "2026-12-04T23:59:00+00:00"   # her own due date
    bob = 48                              # hours past the due date
    "carol/hw1" = 24                      # one assignment's

A time without a zone is UTC. A submission's time is taken from where it really is: nbgrader's
``timestamp.txt`` in its submitted layout, Gradescope's ``submission_metadata.json`` (``created_at``, and the
due date there), a batch folder's newest file's modification time only when the instructor asks for it. Where
it is unknown, no penalty is applied, and the note says so: a time is never guessed.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader import nofollow
from grader.errors import BadUsage

UNKNOWN = "submission time unknown: no late penalty applied"
PER = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


class PolicyError(BadUsage):
    """A late-policy file the grader cannot use: the message names what to fix."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time, or nbgrader's "2026-12-02 10:11:12.123456 UTC"; one without a zone is UTC."""
    value = text.strip()
    if value.endswith((" UTC", " GMT")):
        value = value[:-4]
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        when = datetime.strptime(value, "%Y-%m-%d %H:%M:%S.%f")  # raises ValueError, as the caller expects
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Lateness:
    """What a submission's time made of its score: ``percent`` off (0 on time, in the grace, or time unknown)."""

    submitted: datetime | None
    due: datetime | None
    percent: float = 0.0
    note: str = ""

    @property
    def late(self) -> timedelta | None:
        if self.submitted is None or self.due is None:
            return None
        return max(self.submitted - self.due, timedelta(0))

    def apply(self, score: float) -> float:
        return round(score * (1 - self.percent / 100), 2)


@dataclass(frozen=True)
class LatePolicy:
    due: datetime | None = None
    assignments: dict[str, datetime] = field(default_factory=dict)
    extensions: dict[str, datetime | timedelta] = field(default_factory=dict)
    per: str = "day"
    penalty: float = 0.0
    cap: float = 100.0
    grace: timedelta = timedelta(0)

    def deadline(self, student: str, assignment: str | None = None, due: datetime | None = None) -> datetime | None:
        """The student's due date: their extension for this assignment, else for every one, else the
        assignment's (the file's, else ``due``, where the platform gave one), else the file's ``due``."""
        base = self.assignments.get(assignment or "") or due or self.due
        for key in ([f"{student}/{assignment}"] if assignment else []) + [student]:
            if key in self.extensions:
                ext = self.extensions[key]
                if isinstance(ext, datetime):
                    return ext
                return None if base is None else base + ext
        return base

    def judge(
        self, student: str, submitted: datetime | None, assignment: str | None = None, due: datetime | None = None
    ) -> Lateness:
        """How late ``submitted`` is for ``student`` and what it costs, with a note that says so in words."""
        deadline = self.deadline(student, assignment, due)
        if submitted is None:
            return Lateness(None, deadline, 0.0, UNKNOWN)
        if deadline is None:
            return Lateness(submitted, None, 0.0, "no due date for this submission: no late penalty applied")
        late = submitted - deadline
        extended = (
            " (with an extension)" if any(k in self.extensions for k in (student, f"{student}/{assignment}")) else ""
        )
        if late <= timedelta(0):
            return Lateness(submitted, deadline, 0.0, f"on time{extended}")
        if late <= self.grace:
            return Lateness(
                submitted, deadline, 0.0, f"{_duration(late)} late{extended}, within the grace period: no penalty"
            )
        units = math.ceil(late / PER[self.per])
        percent = min(self.cap, units * self.penalty)
        capped = f", capped at {self.cap:g}%" if units * self.penalty > self.cap else ""
        return Lateness(
            submitted,
            deadline,
            percent,
            f"{_duration(late)} late{extended} (due {deadline.isoformat()}): {units} {self.per}{'s' * (units != 1)} "
            f"x {self.penalty:g}% = {percent:g}% off the score{capped}",
        )


def _duration(late: timedelta) -> str:
    minutes = late.total_seconds() / 60
    if minutes < 120:
        return f"{minutes:.0f} min"
    if minutes < 48 * 60:
        return f"{minutes / 60:.1f} h"
    return f"{minutes / 1440:.1f} days"


def _read(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise PolicyError(f"{path}: cannot read the late policy: {e}") from None


def _when(path: Path, key: str, value: object) -> datetime:
    example = "2026-12-01T23:59:00+00:00"
    if not isinstance(value, str):
        raise PolicyError(f"{path}: {key} must be a time such as {example!r}, not {value!r}")
    try:
        return parse_time(value)
    except ValueError:
        raise PolicyError(f"{path}: {key} = {value!r} is not a time (ISO 8601, e.g. {example})") from None


def _number(path: Path, key: str, value: object, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise PolicyError(f"{path}: {key} must be a number >= 0, not {value!r}")
    return float(value)


def load(path: Path) -> LatePolicy:
    """The late policy in the TOML file ``path``; a mistake raises PolicyError naming the key."""
    data = _read(path)
    unknown = set(data) - {"due", "assignments", "late", "extensions"}
    if unknown:
        raise PolicyError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (due, assignments, late, extensions)")
    late = data.get("late", {})
    if not isinstance(late, dict) or set(late) - {"per", "penalty", "cap", "grace_minutes"}:
        raise PolicyError(f"{path}: [late] takes per, penalty, cap and grace_minutes")
    per = late.get("per", "day")
    if per not in PER:
        raise PolicyError(f'{path}: late.per must be "hour" or "day", not {per!r}')
    extensions: dict[str, datetime | timedelta] = {
        student: _when(path, f"extensions.{student}", value)
        if isinstance(value, str)
        else timedelta(hours=_number(path, f"extensions.{student} (hours)", value, 0))
        for student, value in data.get("extensions", {}).items()
    }
    return LatePolicy(
        due=_when(path, "due", data["due"]) if "due" in data else None,
        assignments={a: _when(path, f"assignments.{a}", v) for a, v in data.get("assignments", {}).items()},
        extensions=extensions,
        per=per,
        penalty=_number(path, "late.penalty", late.get("penalty"), 0.0),
        cap=_number(path, "late.cap", late.get("cap"), 100.0),
        grace=timedelta(minutes=_number(path, "late.grace_minutes", late.get("grace_minutes"), 0.0)),
    )


# ---------------------------------------------------------------- where a submission's time is

NBGRADER_TIMESTAMP = "timestamp.txt"


def nbgrader_time(source: Path) -> tuple[datetime | None, str | None]:
    """(time, assignment) from nbgrader's submitted layout, submitted/STUDENT/ASSIGNMENT/timestamp.txt, for a
    submission at ``source`` (the assignment's folder, a notebook in it, or a folder in it); (None, None) where
    there is none or it does not read as a time."""
    folder = source if source.is_dir() else source.parent
    # The outer folder first: nbgrader writes its stamp in the assignment's folder, and a folder inside it is the
    # student's, where a timestamp.txt of their own would claim any time they like.
    for place in (folder.parent, folder):
        stamp = place / NBGRADER_TIMESTAMP
        try:
            text = nofollow.read_bytes(stamp, 4096).decode("utf-8")
        except FileNotFoundError:
            continue
        except (OSError, ValueError):  # a link, not a file, too large, not text: no time, said so
            return None, place.name
        try:
            return parse_time(text), place.name
        except ValueError:
            return None, place.name
    return None, None


def newest_mtime(source: Path) -> datetime | None:
    """The newest modification time of the files at ``source`` (a file, or a folder's files, links not
    followed): a batch folder's only clue, used only when the instructor asks for it."""
    if source.is_file():
        return datetime.fromtimestamp(source.lstat().st_mtime, timezone.utc)
    try:  # the bounded walk the grader uses: a tree too deep or too wide has no time, not a crash
        times = [
            os.stat(e.path.name, dir_fd=e.dir_fd, follow_symlinks=False).st_mtime
            for e in nofollow.walk(source)
            if e.kind == nofollow.FILE
        ]
    except (OSError, ValueError):  # TreeTooLarge, LinkFound, or a folder that went away
        return None
    return datetime.fromtimestamp(max(times), timezone.utc) if times else None


def submission_time(source: Path, use_mtime: bool = False) -> tuple[datetime | None, str | None, str]:
    """(time, assignment, where it came from) for a batch submission at ``source``: nbgrader's timestamp.txt,
    else (``use_mtime``) the files' newest modification time, else unknown."""
    when, assignment = nbgrader_time(source)
    if when is not None:
        return when, assignment, "nbgrader's timestamp.txt"
    if use_mtime and source.exists():
        return newest_mtime(source), assignment, "the files' modification time"
    return None, assignment, "unknown"


def gradescope_time(metadata: Path) -> tuple[datetime | None, datetime | None]:
    """(submitted at, due date) from Gradescope's submission_metadata.json: ``created_at``, and the due date of
    the submitter (their extension, ``users[].assignment.due_date``) or of the assignment. None where absent."""
    try:
        data = json.loads(metadata.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None

    def at(value: object) -> datetime | None:
        try:
            return parse_time(value) if isinstance(value, str) else None
        except ValueError:
            return None

    submitted = at(data.get("created_at"))
    due = None
    for user in data.get("users") or []:
        if isinstance(user, dict) and isinstance(user.get("assignment"), dict):
            due = at(user["assignment"].get("due_date")) or due
    if due is None and isinstance(data.get("assignment"), dict):
        due = at(data["assignment"].get("due_date"))
    return submitted, due
