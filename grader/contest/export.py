"""The contest as a batch gradebook, ``DIR/grades.sqlite``, so that ``grade export`` (CSV, Gradescope) and
``grade report`` (summary, charts) work on a session exactly as on a class batch.

Each student gets one gradebook row: for every task, the checks of the submission that counts under the task's
scoring rule (``policy.task_score``: best, last or selected; voided ones never), scaled so that a task's checks
add up to its contest points. A row's score is then the student's scoreboard total, out of the contest's total.
The file is rebuilt whole from ``contest.sqlite`` each time and swapped in atomically: it is a view, never
edited by hand, and safe to delete. The students' answered regrade requests go in too, in contest points, so that
``grade report`` lists them as it lists a batch's.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path
from typing import Any

from grader import __version__
from grader.batch.exports import csv_text
from grader.batch.gradebook import SOURCE_PREFIX, Gradebook
from grader.batch.summary import NOT_SUBMITTED
from grader.contest.config import Contest, Task
from grader.contest.feedback import scaled  # the one conversion to contest points, as the feedback's
from grader.contest.policy import task_points, task_score
from grader.contest.scoreboard import task_total
from grader.contest.store import GRADED, OPEN, Row, Store
from grader.files import atomic_path
from grader.fingerprint import grader_fingerprint

GRADEBOOK = "grades.sqlite"
NO_SUBMISSION = "no graded submission"  # why a student with no counted submission at all has 0 points


def counted(contest: Contest, rows: list[Row]) -> dict[str, Row]:
    """One student's submissions that count, by task: the one ``task_score`` picks under the task's rule."""
    chosen = {}
    for task in contest.tasks:
        mine = [(row.as_policy(contest), row) for row in rows if row.task == task.id]
        pick = task_score(task, [s for s, _ in mine]).submission
        for submission, row in mine:
            if submission is pick:
                chosen[task.id] = row
    return chosen


def not_submitted(task: str, points: float) -> dict[str, Any]:
    """A task with no submission that counts, as a milestone worth 0 of its points: the class's mean on a task
    is over every student, as a batch's is over every student's stubs, not only over those who submitted."""
    check = {
        "name": NOT_SUBMITTED,
        "milestone": task,
        "score": 0.0,
        "max_score": float(points),
        "passed": False,
        "message": "no graded submission for this task",
        "counted": True,
    }
    return {"id": task, "title": task, "score": 0.0, "max_score": float(points), "checks": [check]}


def combined_report(contest: Contest, chosen: dict[str, Row]) -> dict[str, Any]:
    """The counted submissions' task milestones as one grader report, in contest points."""
    milestones = []
    for task in contest.tasks:
        row = chosen.get(task.id)
        if row is None or row.report is None or not row.max_score:
            milestones.append(not_submitted(task.id, task.points))
            continue
        scale = task.points / row.max_score
        for entry in row.report.get("milestones", []):
            if entry["id"] != task.id:
                continue
            milestones.append({**scaled(entry, scale), "checks": [scaled(c, scale) for c in entry["checks"]]})
    reports = [row.report for row in chosen.values() if row.report]
    return {
        # the scoreboard's rule (scoreboard.total): each task's points rounded to 0.01, then added up, so that
        # the export's total and the board's are the same number (a rounded sum could differ by 0.01)
        "score": total(contest, chosen),
        "max_score": sum(task.points for task in contest.tasks),
        "seconds": sum(r.get("seconds") or 0 for r in reports),
        "worker_cpu_seconds": sum(r.get("worker_cpu_seconds") or 0 for r in reports),
        "protections": reports[0].get("protections", []) if reports else [],
        "milestones": milestones,
    }


def total(contest: Contest, chosen: dict[str, Row]) -> float:
    """The student's total as the scoreboard gives it: the sum of each counted task's points (``task_points``,
    rounded to 0.01 each), rounded."""
    return task_total(row.points(contest) for task, row in chosen.items() if contest.task(task) is not None)


def write_gradebook(folder: Path, contest: Contest, store: Store, students: tuple[str, ...]) -> Path:
    """Rebuild ``folder/grades.sqlite`` from the contest's records; returns its path.

    Every student on the roster gets a row: one with nothing counted has 0 points and the status "nothing to
    grade" (NO_SUBMISSION says why), as ``grade batch`` records an empty folder, so the CSV lists them too.
    """
    by_student: dict[str, list[Row]] = {name: [] for name in students}
    for row in store.all():
        by_student.setdefault(row.student, []).append(row)
    path = folder / GRADEBOOK
    current = grader_fingerprint()
    with atomic_path(path) as tmp:
        tmp.unlink()  # sqlite makes its own file; the temporary name is only reserved
        book = Gradebook(tmp)
        try:
            for name, rows in by_student.items():
                chosen = counted(contest, rows)
                ids = ",".join(f"{task}={row.id}" for task, row in sorted(chosen.items()))
                fingerprints = {str(row.report.get("grader_fingerprint")) for row in chosen.values() if row.report}
                source, digest = f"{SOURCE_PREFIX}{name}", hashlib.sha256(ids.encode()).hexdigest()[:16]
                tasks = [task.id for task in contest.tasks]
                if not chosen:  # 0 points, as on the scoreboard, and said why: as `grade batch` an empty folder
                    book.record_empty(name, source, digest, __version__, tasks, NO_SUBMISSION, fingerprint=current)
                    continue
                book.record(
                    name,
                    source,
                    digest,
                    __version__,
                    tasks,
                    combined_report(contest, chosen),
                    None,
                    # one grader graded all that counts: its fingerprint; several: none, so `grade export` says so
                    fingerprint=fingerprints.pop() if len(fingerprints) == 1 else "mixed" if fingerprints else current,
                )
            for request in reversed(
                store.regrade_requests()
            ):  # the answered ones, oldest first, as `grade report` lists
                if request["status"] != OPEN:
                    book.record_answer(answered_request(contest, request))
        finally:
            book.db.execute("PRAGMA journal_mode=DELETE")  # one self-contained file to move, no -wal beside it
            book.close()
    return path


def result_points(task: Task, status: str | None, score: float | None, max_score: float | None) -> float | None:
    """A result's contest points: None where there is none (not answered, not graded again yet), 0 if it failed."""
    if status is None:
        return None
    return task_points(task, score or 0.0, max_score or 0.0) if status == GRADED else 0.0


def answered_request(contest: Contest, request: dict[str, Any]) -> dict[str, Any]:
    """An answered regrade request of the contest's store as the gradebook keeps one (grade regrades' columns),
    its scores in the contest's points on its task."""
    task = contest.task(request["task"])
    old = result_points(task, request["old_status"], request["old_score"], request["old_max_score"]) if task else None
    new = result_points(task, request["new_status"], request["new_score"], request["new_max_score"]) if task else None
    return {
        **{k: request[k] for k in ("student", "reason", "status", "answer", "answered_at", "answered_by")},
        "milestone": request["task"],
        "old_score": old,
        "old_max_score": task.points if task and old is not None else None,
        "new_score": new,
        "new_max_score": task.points if task and new is not None else None,
    }


def set_aside_of(row: Row, contest: Contest) -> dict[str, Any] | None:
    """What the grader set aside in ``row``'s grading, for the coach: how many checks (``internal_errors`` of
    them the grader's own failures), their ``points`` in the task's contest points (the share of the task's
    points that was never judged: the score is over the other checks alone), and the grader's note. None when
    nothing was set aside."""
    aside, task = row.set_aside, contest.task(row.task)
    if not aside or task is None:
        return None
    unjudged = float(aside.get("points") or 0)
    stake = unjudged + float(row.max_score or 0)  # the report's max_score is over the counted checks only
    return {
        "checks": int(aside.get("checks") or 0),
        "points": round(task.points * unjudged / stake, 2) if stake > 0 else 0.0,
        "internal_errors": int(aside.get("internal_errors") or 0),
        "note": str(aside.get("note") or ""),
    }


SET_ASIDE_COLUMNS = ("set_aside_checks", "set_aside_points", "set_aside_submissions")


def results_csv(contest: Contest, store: Store, rows: list[dict], checks: list[dict]) -> str:
    """The gradebook's CSV (``grade export``'s, from ``rows`` and ``checks``) with three columns more, so that a
    coach sees which totals rest on checks the grader set aside, and regrades those submissions: for each
    student's counted submissions, the checks set aside, their contest points, and which ("m1=4 m2=7")."""
    mine: dict[str, list[Row]] = {}
    for row in store.all(reports=False):
        mine.setdefault(row.student, []).append(row)
    table = list(csv.reader(io.StringIO(csv_text(rows, checks))))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*table[0], *SET_ASIDE_COLUMNS])
    for line in table[1:]:
        chosen = counted(contest, mine.get(line[0], []))
        flagged = [(task, row, aside) for task, row in sorted(chosen.items()) if (aside := set_aside_of(row, contest))]
        checks_aside = sum(aside["checks"] for *_, aside in flagged)
        points_aside = round(sum(aside["points"] for *_, aside in flagged), 2)
        ids = " ".join(f"{task}={row.id}" for task, row, _ in flagged)
        writer.writerow([*line, checks_aside, f"{points_aside:g}", ids])
    return out.getvalue()
