"""A class as its instructor reads it: every student on the roster, each score after the late penalty.

``grade batch``, ``grade report`` and ``grade export`` (and the per-student pages) read the gradebook through
these functions, so that a student looks the same everywhere:

* ``identities``: the roster (``roster.csv``: a ``student`` column, optional ``email`` and ``name``), one
  identity per student.
* ``with_roster``: the gradebook's rows plus a row for each student on the roster with no submission (0 points,
  status ``NO_SUBMISSION``), and the submissions whose student is not on the roster, named.
* ``late_penalty``: one row's judgement under a late policy, the one every command applies.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from grader import deadlines
from grader.batch.gradebook import EMPTY, NO_SUBMISSION, SOURCE_PREFIX
from grader.deadlines import Lateness, LatePolicy
from grader.roster import Identity, Roster, read_identities

# Where `grade batch`, `report` and `export` look for a roster without --roster: beside the gradebook (the class
# folder, for grade batch's default SUBMISSIONS/grades.sqlite).
ROSTER = "roster.csv"
# A contest's gradebook (grade contest export): its window decided what was on time, and no late policy applies.
CONTEST_TIME = "unknown: a contest's submission, which its window accepted or refused (no late policy applies)"


def identities(path: Path) -> list[Identity]:
    """The roster at ``path`` as a list of identities (id, email, name), in its order; RosterError names the line
    of a mistake."""
    return list(read_identities(path))


def student_of(row_student: str) -> str:
    """The student of a gradebook row: nbgrader's layout with several assignments records "student/assignment"."""
    return row_student.split("/")[0]


@dataclass(frozen=True)
class ClassRows:
    """The rows the instructor reads: the gradebook's, then one per student on the roster with no submission
    (``missing``); ``strangers``: the gradebook's students that are not on the roster (kept, and named)."""

    rows: list[dict]
    missing: list[str]
    strangers: list[str]


def full_marks(rows: list[dict]) -> float | None:
    """The class's maximum: the most common max_score of the graded rows (None where nothing was graded)."""
    tops = Counter(r["max_score"] for r in rows if r["status"] == "graded" and r["max_score"])
    return tops.most_common(1)[0][0] if tops else None


def missing_row(student: str, max_score: float | None) -> dict:
    """A gradebook-shaped row for a student on the roster who handed nothing in: 0 points of the class's maximum."""
    return {
        "student": student,
        "source": "",
        "hash": "",
        "grader_version": "",
        "milestones": "[]",
        "status": NO_SUBMISSION,
        "error": f"{NO_SUBMISSION}: on the roster, but nothing of theirs was found in the class folder",
        "score": 0.0,
        "max_score": max_score,
        "n_checks": 0,
        "seconds": 0.0,
        "protections": None,
        "graded_at": "",
        "worker_cpu": None,
        "grader_hash": None,
        "attempt": None,
        "time_from": None,
    }


def with_roster(rows: list[dict], roster: list[Identity] | None) -> ClassRows:
    """``rows`` with a NO_SUBMISSION row for each student on ``roster`` who has none (sorted in with the others),
    and the rows' students not on it; without a roster, ``rows`` as they are."""
    if roster is None:
        return ClassRows(rows, [], [])
    ids = {i.id for i in roster}
    present = {student_of(r["student"]) for r in rows}
    missing = [i.id for i in roster if i.id not in present]
    strangers = sorted({student_of(r["student"]) for r in rows} - ids)
    top = full_marks(rows)
    everyone = sorted([*rows, *(missing_row(s, top) for s in missing)], key=lambda r: r["student"])
    return ClassRows(everyone, missing, strangers)


def strangers_line(strangers: list[str], roster: Path | str) -> str:
    """The loud line for submissions whose student is not on the roster: graded and kept, never dropped."""
    n = len(strangers)
    shown = ", ".join(strangers[:10]) + (f" and {n - 10} more" if n > 10 else "")
    return (
        f"WARNING: {n} submission{'s' * (n != 1)} not on the roster {roster}: {shown}. "
        f"{'They are' if n != 1 else 'It is'} graded and listed, but check the folder's name against the roster "
        "(a typo, or a student to add)"
    )


def missing_line(missing: list[str]) -> str:
    """The students on the roster with no submission, listed with 0 points."""
    n = len(missing)
    shown = ", ".join(missing[:10]) + (f" and {n - 10} more" if n > 10 else "")
    return f"{n} student{'s' * (n != 1)} on the roster with {NO_SUBMISSION}, listed with 0 points: {shown}"


def late_penalty(row: dict, policy: LatePolicy, *, use_mtime: bool = False) -> Lateness:
    """The late policy's judgement of one gradebook row (``Lateness.apply`` gives the score after it), as `grade
    export`, `grade report`, its charts and the per-student pages apply it. Its time comes from where `grade
    batch` found the submission (nbgrader's timestamp.txt in its layout; with ``use_mtime``, a zip's or notebook's
    own date; never a date of the student's: grader/deadlines.py). ``policy``: keyed by roster ids where a roster
    is given (``LatePolicy.for_roster``). A row with no time (nothing graded, no submission, a contest's) costs
    nothing, and its note says why."""
    student = student_of(row["student"])
    if row["source"].startswith(SOURCE_PREFIX):
        return policy.judge(student, None, source=CONTEST_TIME)
    if row["status"] == NO_SUBMISSION:
        return policy.judge(student, None, source=f"unknown: {NO_SUBMISSION}")
    if row["status"] == EMPTY:
        return policy.judge(student, None, source="unknown: nothing was graded")
    found = deadlines.recorded_time(Path(row["source"]), row.get("time_from"), use_mtime)
    return policy.judge(student, found.when, found.assignment, source=found.source)


def load_policy(path: Path, roster: list[Identity] | None, students: list[str]) -> tuple[LatePolicy, list[str]]:
    """The late policy at ``path``, keyed by roster ids (a key naming no one on ``roster`` is a PolicyError);
    without a roster, also the extension keys that name none of ``students`` (the caller warns of them)."""
    policy = deadlines.load(path)
    if roster is not None:
        return policy.for_roster(Roster(roster)), []
    return policy, policy.unmatched(student_of(s) for s in students)


def penalised(rows: list[dict], lateness: dict[str, Lateness] | None) -> list[dict]:
    """``rows`` with each score after its late penalty (copies; the gradebook's rows are left as they are)."""
    if lateness is None:
        return rows
    return [
        {**r, "score": lateness[r["student"]].apply(r["score"] or 0)} if r["student"] in lateness else r for r in rows
    ]
