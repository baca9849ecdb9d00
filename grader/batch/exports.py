"""A gradebook's rows as the files other tools read: one CSV for the class, one Gradescope results.json per
student. ``grade export`` writes them; the contest's coach page serves them."""

from __future__ import annotations

import csv
import io
from typing import Any

from grader.batch.summary import points
from grader.deadlines import Lateness
from grader.milestones import GRADABLE
from grader.results import CheckResult, gradescope_results
from grader.submission import SubmissionError

LATE_COLUMNS = ["submitted_at", "due", "late_penalty_percent", "score_after_penalty", "late_note"]


def csv_text(rows: list[dict], checks: list[dict], lateness: dict[str, Lateness] | None = None) -> str:
    """One row per submission: student, score, max_score, status, then each graded milestone's score; with
    ``lateness`` (a late policy's judgement of each student), when it was submitted, its due date, the percent
    off, the score after it and the note that says why (an unknown time: no penalty, and said so)."""
    ids = [m for m in GRADABLE if any(c["milestone"] == m for c in checks)]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["student", "score", "max_score", "status", *ids, *(LATE_COLUMNS if lateness is not None else [])])
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
            ]
        writer.writerow(
            [
                row["student"],
                points(row["score"]),
                points(row["max_score"]),
                row["status"],
                *(points(sum(c["score"] for c in mine if c["milestone"] == m)) if mine else "" for m in ids),
                *late,
            ]
        )
    return buffer.getvalue()


def gradescope_json(row: dict, checks: list[dict], lateness: Lateness | None = None) -> dict[str, Any]:
    """The student's latest grading in Gradescope's results.json schema; with ``lateness``, the score after its
    penalty and its note in the output."""
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
        output=student_output(row["error"]),
    )
    return with_lateness(results, lateness) if lateness is not None else results


def with_lateness(results: dict[str, Any], lateness: Lateness) -> dict[str, Any]:
    """A results.json with the late policy applied: the score after the penalty, the note in the output."""
    results["score"] = lateness.apply(results["score"])
    note = f"Late policy: {lateness.note}."
    results["output"] = f"{results['output']} {note}".strip()
    return results


def student_output(error: str | None) -> str:
    """A row's error as its student reads it: grade batch records a submission it could not grade as
    ``{exception's class}: {message}``; a SubmissionError's message is the student's to act on (it names
    their file, not the instructor's path), and its class name means nothing to them."""
    prefix = f"{SubmissionError.__name__}: "
    return (error or "").removeprefix(prefix)
