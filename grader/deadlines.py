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

A time without a zone is UTC. A submission's time comes only from what the platform wrote, never from a file or a
date inside the student's own upload, and each judgement says where it came from (``Lateness.source``):

* nbgrader: ``timestamp.txt`` in the assignment's folder of its submitted layout
  (``submitted/STUDENT/ASSIGNMENT/timestamp.txt``), which ``nbgrader submit`` writes over any file of that name
  the student handed in. Only there, and only where ``grade batch`` found the class in that layout (it records
  where, ``grader/batch/discover.py``): a ``timestamp.txt`` in a folder of the student's (their folder in a plain
  batch, a folder inside their assignment's) is theirs, and says whatever they like.
* Gradescope: ``submission_metadata.json`` (``created_at``, and the due date there), which Gradescope writes
  beside the upload, not in it; the autograder reads it before any of the student's code runs.
* A batch folder, only when the instructor asks (``--times-from-mtime``): the modification time of a student's
  entry that is one file, a zip or a notebook lying in the batch folder itself, as the instructor's copy has it
  (its download, or the platform's own archive it was extracted from, dated it). Never the dates of the files
  inside a student's folder, nor of a zip's members: unzipping a student's own archive gives its files the dates
  the student chose, and nbgrader copies a student's files with their own dates.

Where it is unknown, no penalty is applied, and the note says so: a time is never guessed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader import nofollow
from grader.errors import BadUsage
from grader.roster import Roster

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
    """What a submission's time made of its score: ``percent`` off (0 on time, in the grace, or time unknown), and
    ``source``: where the time came from, or why it is unknown (``SubmissionTime.source``)."""

    submitted: datetime | None
    due: datetime | None
    percent: float = 0.0
    note: str = ""
    source: str = ""

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
        self,
        student: str,
        submitted: datetime | None,
        assignment: str | None = None,
        due: datetime | None = None,
        source: str = "",
    ) -> Lateness:
        """How late ``submitted`` is for ``student`` and what it costs, with a note that says so in words;
        ``source``: where the time came from (or why there is none), kept with the judgement."""
        judged = self._judge(student, submitted, assignment, due)
        return judged if not source else Lateness(judged.submitted, judged.due, judged.percent, judged.note, source)

    def _judge(
        self, student: str, submitted: datetime | None, assignment: str | None, due: datetime | None
    ) -> Lateness:
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

    def for_roster(self, roster: Roster) -> LatePolicy:
        """The policy with each extension keyed by the roster's id of the student it names (their id, email or
        name), so that it reaches them whichever one the platform gives; PolicyError for a key that names no one
        on the roster, or two students (a shared name): an extension that silently applies to no one is a
        penalty the instructor meant to waive."""
        extensions: dict[str, datetime | timedelta] = {}
        for key, value in self.extensions.items():
            who, slash, assignment = key.partition("/")
            found = roster.matches(who)
            if not found:
                raise PolicyError(
                    f"the late policy's extension {key!r} names no student on the roster (neither an id, an email "
                    "nor a name there): fix the key or the roster"
                )
            if len(found) > 1:
                raise PolicyError(
                    f"the late policy's extension {key!r} names {len(found)} students on the roster "
                    f"({', '.join(i.id for i in found)}): key it by their id"
                )
            extensions[f"{found[0].id}{slash}{assignment}"] = value
        return dataclasses.replace(self, extensions=extensions)

    def unmatched(self, students: Iterable[str]) -> list[str]:
        """The extension keys that name none of ``students`` (without a roster, the ids a batch knows): each
        applies to no one, which the commands say loudly."""
        known = set(students)
        return [key for key in self.extensions if key.partition("/")[0] not in known]


def unmatched_warning(keys: list[str]) -> str:
    """What a command says of extension keys that name no student it knows (``LatePolicy.unmatched``)."""
    many = len(keys) != 1
    return (
        f"warning: the late policy's extension{'s' * many} {', '.join(map(repr, keys))} name{'' if many else 's'} "
        f"no student in the gradebook, so no one gets {'them' if many else 'it'}: key an extension by the student's "
        "id (their folder's name), or give --roster, which also knows their emails and names"
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
NBGRADER_SUBMITTED = "submitted"
# Where ``grade batch`` found a submission, which decides where its time may come from: recorded with it in the
# gradebook (its ``time_from``; grader/batch/discover.py ``FoundSubmission.time_from``), because the path alone
# cannot tell nbgrader's layout from a student's folder that imitates it (``alice/submitted/alice/hw1/``).
NBGRADER = "nbgrader:"  # then the assignment's folder in nbgrader's submitted layout: its timestamp.txt
ENTRY = "file"  # a zip or a notebook lying in the batch folder: its own modification time, when asked for
FOLDER = "folder"  # a student's folder in a plain batch: no platform time, and its files' dates may be theirs
FROM_NBGRADER = f"nbgrader's {NBGRADER_TIMESTAMP}"
FROM_GRADESCOPE = "Gradescope's submission_metadata.json (created_at)"
FROM_MTIME = "the zip's or notebook's own modification time, as your copy has it (--times-from-mtime)"
NOT_RECORDED = (
    "unknown: the gradebook does not say where this submission was found (graded before it did): run grade batch again"
)
NO_PLATFORM_TIME = (
    "unknown: a batch folder has no platform time (--times-from-mtime reads a zip's or notebook's own date)"
)
STUDENTS_DATES = (
    "unknown: the dates of the files in a student's folder may be the student's own (unzipping their archive "
    "keeps the dates they chose), so --times-from-mtime does not read them"
)
NBGRADER_COPIES_DATES = (
    "--times-from-mtime does not read the files' dates (nbgrader copies a student's files with the dates they had)"
)


@dataclass(frozen=True)
class SubmissionTime:
    """A submission's time, the assignment it is for (nbgrader's folder name), and ``source``: where the time
    came from, or, with no time, why there is none (beginning "unknown: ")."""

    when: datetime | None
    assignment: str | None
    source: str


def stamp_time(assignment: Path) -> SubmissionTime:
    """The time in nbgrader's ``timestamp.txt`` of ``assignment``, a folder of nbgrader's submitted layout
    (submitted/STUDENT/ASSIGNMENT/): read without following a link, 4 KB at most; with no time, why."""
    stamp = assignment / NBGRADER_TIMESTAMP
    try:
        text = nofollow.read_bytes(stamp, 4096).decode("utf-8")
    except FileNotFoundError:
        return SubmissionTime(None, assignment.name, f"unknown: no {FROM_NBGRADER} in {assignment}")
    except nofollow.NotOwnFile as e:  # a link (to a student's own file, say) or a FIFO: no time, said so
        return SubmissionTime(None, assignment.name, f"unknown: {stamp} is not nbgrader's stamp: {e}")
    except UnicodeDecodeError:
        return SubmissionTime(None, assignment.name, f"unknown: {stamp} is not UTF-8 text")
    except ValueError:  # larger than any stamp nbgrader writes
        return SubmissionTime(None, assignment.name, f"unknown: {stamp} is larger than 4 KB")
    except OSError as e:
        return SubmissionTime(None, assignment.name, f"unknown: cannot read {stamp} ({e.strerror})")
    try:
        return SubmissionTime(parse_time(text), assignment.name, FROM_NBGRADER)
    except ValueError:
        return SubmissionTime(None, assignment.name, f"unknown: {stamp} does not read as a time")


def nbgrader_time(source: Path) -> tuple[datetime | None, str | None]:
    """(time, assignment) from nbgrader's ``timestamp.txt`` for a submission at ``source`` in nbgrader's submitted
    layout (the assignment's folder, a notebook in it, or a folder in it); (None, None) outside that layout.

    Only the assignment's own folder is read (submitted/STUDENT/ASSIGNMENT/, the one nbgrader writes its stamp
    in): a folder inside it is the student's, where a timestamp.txt of their own would claim any time they like.
    The path cannot show whether the layout is nbgrader's or a student's imitation of it: ``grade batch`` records
    that when it finds the class (``recorded_time``)."""
    folder = source if source.is_dir() else source.parent
    assignment = next((p for p in (folder, *folder.parents) if p.parent.parent.name == NBGRADER_SUBMITTED), None)
    if assignment is None:
        return None, None
    return stamp_time(assignment).when, assignment.name


def newest_mtime(source: Path) -> datetime | None:
    """The newest modification time of the files at ``source`` (a file, or a folder's files, links not
    followed). ``recorded_time`` reads only a file's own: a folder's files may carry the student's dates."""
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


def recorded_time(source: Path, time_from: str | None, use_mtime: bool = False) -> SubmissionTime:
    """The time of the batch submission at ``source``, from where ``grade batch`` found it (``time_from``: NBGRADER
    and the assignment's folder, ENTRY, FOLDER, or None where the gradebook does not say): nbgrader's stamp in its
    layout; with ``use_mtime``, the own modification time of a zip or notebook lying in the batch folder, as the
    instructor's copy has it. Nothing else: see the module's docstring."""
    if time_from is None:
        return SubmissionTime(None, None, NOT_RECORDED)
    if time_from.startswith(NBGRADER):
        found = stamp_time(Path(time_from[len(NBGRADER) :]))
        if found.when is None and use_mtime:
            return SubmissionTime(None, found.assignment, f"{found.source}; {NBGRADER_COPIES_DATES}")
        return found
    if not use_mtime:
        return SubmissionTime(None, None, NO_PLATFORM_TIME)
    if time_from != ENTRY:
        return SubmissionTime(None, None, STUDENTS_DATES)
    try:
        when = datetime.fromtimestamp(os.lstat(source).st_mtime, timezone.utc)  # the file itself, never a link's
    except OSError as e:
        return SubmissionTime(None, None, f"unknown: cannot read {source}'s date ({e.strerror})")
    return SubmissionTime(when, None, FROM_MTIME)


@dataclass(frozen=True)
class GradescopeSubmission:
    """What Gradescope's submission_metadata.json says of a submission: when it was made, its due date (the
    submitter's own where Gradescope has an extension for them), who made it (their email, else name), and
    ``source``: where the time came from, or why there is none; ``email`` and ``name``: the submitter's, as
    Gradescope gives them ("" where it does not), which a roster maps to the student's id (``who``)."""

    submitted: datetime | None
    due: datetime | None
    student: str
    source: str
    email: str = ""
    name: str = ""

    def who(self, roster: Roster | None) -> str:
        """The key a late policy judges this submitter by: their roster id, found by email, else by name; without
        a roster (or not on it), their email, else name (``student``)."""
        if roster is not None:
            for key in (self.email, self.name):
                if key and (found := roster.find(key)) is not None:
                    return found.id
        return self.student


def gradescope_submission(metadata: Path) -> GradescopeSubmission:
    """The submission as Gradescope's ``metadata`` file (/autograder/submission_metadata.json, which Gradescope
    writes beside the upload, never in it) describes it; an unreadable file or field is None, said so."""
    try:
        data = json.loads(metadata.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return GradescopeSubmission(None, None, "", f"unknown: cannot read Gradescope's {metadata} ({e})")
    if not isinstance(data, dict):
        return GradescopeSubmission(None, None, "", f"unknown: Gradescope's {metadata} is not a JSON object")

    def at(value: object) -> datetime | None:
        try:
            return parse_time(value) if isinstance(value, str) else None
        except ValueError:
            return None

    submitted = at(data.get("created_at"))
    due = None
    users = [u for u in data.get("users") or [] if isinstance(u, dict)]
    for user in users:
        if isinstance(user.get("assignment"), dict):
            due = at(user["assignment"].get("due_date")) or due
    if due is None and isinstance(data.get("assignment"), dict):
        due = at(data["assignment"].get("due_date"))
    email = str(users[0].get("email") or "") if users else ""
    name = str(users[0].get("name") or "") if users else ""
    source = FROM_GRADESCOPE if submitted else f"unknown: no created_at time in Gradescope's {metadata.name}"
    return GradescopeSubmission(submitted, due, email or name, source, email, name)


def gradescope_time(metadata: Path) -> tuple[datetime | None, datetime | None]:
    """(submitted at, due date) from Gradescope's submission_metadata.json (``gradescope_submission``)."""
    found = gradescope_submission(metadata)
    return found.submitted, found.due
