"""A gradebook's rows as the files other tools read: one CSV for the class, one Gradescope results.json per
student. ``grade export`` writes them; the contest's coach page serves them."""

from __future__ import annotations

import csv
import io
from typing import Any

from grader.batch.gradebook import NO_SUBMISSION
from grader.batch.summary import UNTRUSTED, points, untrusted_scores
from grader.deadlines import Lateness
from grader.milestones import GRADABLE
from grader.results import GRADESCOPE_SHOWN, CheckResult, gradescope_results
from grader.roster import Identity
from grader.submission import SubmissionError

# time_from: where submitted_at came from, or why it is unknown (grader/deadlines.py)
LATE_COLUMNS = ["submitted_at", "due", "late_penalty_percent", "score_after_penalty", "late_note", "time_from"]
# Where a metric task's scores prove nothing (grader/batch/summary.py untrusted_scores): a last column saying so.
WARNING_COLUMN = "warning"
# With a roster that has them: each student's email and name, so the CSV joins an LMS's gradebook by either.
IDENTITY_COLUMNS = ["email", "name"]
# What a student with no submission reads in their results.json (grade export --gradescope with a roster).
NO_SUBMISSION_OUTPUT = "No submission of yours was found: 0 points. Ask your instructor if you did hand one in."


def csv_text(
    rows: list[dict],
    checks: list[dict],
    lateness: dict[str, Lateness] | None = None,
    identities: list[Identity] | None = None,
) -> str:
    """One row per submission: student, score, max_score, status, then each graded milestone's score; with
    ``lateness`` (a late policy's judgement of each student), when it was submitted, its due date, the percent
    off, the score after it, the note that says why (an unknown time: no penalty, and said so) and where the time
    came from. Where a metric task's scores prove nothing, a last column says so on each row that has one. With
    ``identities`` (the roster) that give emails or names, the last two columns are each student's."""
    ids = [m for m in GRADABLE if any(c["milestone"] == m for c in checks)]
    known = {i.id: i for i in identities or []}
    named = any(i.email or i.name for i in known.values())
    untrusted = untrusted_scores(checks)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "student",
            "score",
            "max_score",
            "status",
            *ids,
            *(LATE_COLUMNS if lateness is not None else []),
            *([WARNING_COLUMN] if untrusted else []),
            *(IDENTITY_COLUMNS if named else []),
        ]
    )
    for row in rows:
        mine = [c for c in checks if c["student"] == row["student"]]
        late = []
        if lateness is not None and (judged := lateness.get(row["student"])) is not None:
            late = [
                judged.submitted.isoformat() if judged.submitted else "",
                judged.due.isoformat() if judged.due else "",
                f"{judged.percent:g}",
                points(judged.apply(row["score"] or 0)),
                judged.note,
                judged.source,
            ]
        elif lateness is not None:
            late = [""] * len(LATE_COLUMNS)
        warning = []
        if untrusted:
            mine_untrusted = [m for m, who in untrusted.items() if row["student"] in who]
            warning = [f"{', '.join(mine_untrusted)}: {UNTRUSTED}" if mine_untrusted else ""]
        writer.writerow(
            [
                row["student"],
                points(row["score"]),
                points(row["max_score"]),
                row["status"],
                *(points(sum(c["score"] for c in mine if c["milestone"] == m)) if mine else "" for m in ids),
                *late,
                *warning,
                *(_identity(known, row["student"]) if named else []),
            ]
        )
    return buffer.getvalue()


def _identity(known: dict[str, Identity], student: str) -> list[str]:
    """The email and name of the row's student (nbgrader's "student/assignment" too), "" where the roster has none."""
    identity = known.get(student.split("/")[0])
    return [identity.email, identity.name] if identity else ["", ""]


def gradescope_json(
    row: dict,
    checks: list[dict],
    lateness: Lateness | None = None,
    *,
    visibility: str = "visible",
    layout: str = "check",
) -> dict[str, Any]:
    """The student's latest grading in Gradescope's results.json schema; with ``lateness``, the score after its
    penalty and its note in the output. ``visibility`` and ``layout``: as the autograder zip's (``grade export``
    passes --visibility and --tests, whose defaults are the zip's); the defaults here are the older export's."""
    mine = [c for c in checks if c["student"] == row["student"]]
    results = gradescope_results(
        [
            CheckResult(
                name=c["name"],
                milestone=c["milestone"],
                score=float(c["score"]),  # not rounded: the tests add up to the score, as the autograder's do
                max_score=float(c["max_score"]),
                passed=bool(c["passed"]),
                message=c["message"],
                internal_error=bool(c["internal_error"]),
                counted=bool(c["counted"]),
                case=c.get("case_id") or "",
            )
            for c in mine
        ],
        score=points(row["score"]) or 0,
        seconds=row["seconds"] or 0,
        output=NO_SUBMISSION_OUTPUT if row["status"] == NO_SUBMISSION else student_output(row["error"]),
        visibility=visibility,
        layout=layout,
    )
    if mine and visibility in GRADESCOPE_SHOWN:  # as the autograder says it: when the scored checks show
        results["output"] = f"{results['output']} {GRADESCOPE_SHOWN[visibility]}.".strip()
    if untrusted := [m for m, who in untrusted_scores(mine).items() if row["student"] in who]:
        results["output"] = f"{results['output']} Warning: {', '.join(untrusted)} was {UNTRUSTED}.".strip()
    return with_lateness(results, lateness) if lateness is not None else results


def with_lateness(results: dict[str, Any], lateness: Lateness) -> dict[str, Any]:
    """A results.json with the late policy applied: the score after the penalty, the note in the output, and
    where the submission's time came from."""
    results["score"] = lateness.apply(results["score"])
    note = f"Late policy: {lateness.note}."
    if lateness.source:
        note += f" Submission time: {lateness.source}."
    results["output"] = f"{results['output']} {note}".strip()
    return results


def student_output(error: str | None) -> str:
    """A row's error as its student reads it: grade batch records a submission it could not grade as
    ``{exception's class}: {message}``; a SubmissionError's message is the student's to act on (it names
    their file, not the instructor's path), and its class name means nothing to them."""
    prefix = f"{SubmissionError.__name__}: "
    return (error or "").removeprefix(prefix)
