"""A gradebook's rows as the files other tools read: one CSV for the class, one Gradescope results.json per
student. ``grade export`` writes them; the contest's coach page serves them."""

from __future__ import annotations

import csv
import io
from typing import Any

from grader.batch.summary import points
from grader.milestones import GRADABLE
from grader.results import CheckResult, gradescope_results
from grader.submission import SubmissionError


def csv_text(rows: list[dict], checks: list[dict]) -> str:
    """One row per submission: student, score, max_score, status, then each graded milestone's score."""
    ids = [m for m in GRADABLE if any(c["milestone"] == m for c in checks)]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["student", "score", "max_score", "status", *ids])
    for row in rows:
        mine = [c for c in checks if c["student"] == row["student"]]
        writer.writerow(
            [
                row["student"],
                points(row["score"]),
                points(row["max_score"]),
                row["status"],
                *(points(sum(c["score"] for c in mine if c["milestone"] == m)) if mine else "" for m in ids),
            ]
        )
    return buffer.getvalue()


def gradescope_json(row: dict, checks: list[dict]) -> dict[str, Any]:
    """The student's latest grading in Gradescope's results.json schema."""
    mine = [c for c in checks if c["student"] == row["student"]]
    return gradescope_results(
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


def student_output(error: str | None) -> str:
    """A row's error as its student reads it: grade batch records a submission it could not grade as
    ``{exception's class}: {message}``; a SubmissionError's message is the student's to act on (it names
    their file, not the instructor's path), and its class name means nothing to them."""
    prefix = f"{SubmissionError.__name__}: "
    return (error or "").removeprefix(prefix)
