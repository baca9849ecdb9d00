"""What the pages and the API show: the contest's records shaped for a viewer (a submission as its student may
see it, the board, the coach's lists), and the answer to a browser (a page, rendered from ``pages``' templates,
or a redirect back) or to a script (JSON). No decision is taken here: what a student may see of a report is
``feedback``'s, the board's freeze ``scoreboard``'s.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from grader.contest import testruns
from grader.contest.config import Contest
from grader.contest.export import result_points, set_aside_of
from grader.contest.feedback import policy_at, visible_report
from grader.contest.metric import finals_allowed, is_metric
from grader.contest.policy import Phase, closed_reason, task_points, window_state
from grader.contest.scoreboard import Freeze, Standings
from grader.contest.store import FAILED, FAILED_RUN, GRADED, NOT_COUNTED, QUEUED, REJECTED, Row
from grader.contest.uploads import allowed_files
from grader.milestones import GRADABLE
from grader.sandbox.testrun import OUTPUT_KEPT

if TYPE_CHECKING:
    from grader.contest.web.state import ContestState

TEST_RUNS_SHOWN = 10  # a student's newest test runs on their page, each up to 64 KB of output: the page stays light
EVENTS_READ = 500  # the latest events the coach's view collapses (runs of identical ones) and shows the first of


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def render(state: ContestState, name: str, status: int = 200, **values: Any) -> HTMLResponse:
    page = state.templates.get_template(name).render(title=state.base.title, **values)
    return HTMLResponse(page, status_code=status)


def done(request: Request, url: str, payload: dict[str, Any], status: int = 200) -> Response:
    """A change made: a browser is sent back to ``url`` (a form's page), a script gets ``payload``."""
    if wants_html(request):
        return RedirectResponse(url, status_code=303)
    return JSONResponse(payload, status_code=status)


def submission(state: ContestState, row: Row, contest: Contest, full: bool = False) -> dict[str, Any]:
    """A submission as its student may see it now (``full``: as the coach sees it)."""
    entry: dict[str, Any] = {
        "id": row.id,
        "task": row.task,
        "received_at": iso(row.received_at),
        "status": row.status,
        "selected": row.selected,
        "voided": row.voided,
    }
    if full:
        entry.update(
            student=row.student,
            points=row.points(contest),
            error=row.error,
            report=row.report,
            graded_at=iso(row.graded_at),
            set_aside=set_aside_of(row, contest),  # the coach's flag: a score that rests on fewer checks
        )
        return entry
    if row.voided:
        entry["message"] = "voided by the coach: it does not count"
    elif row.status == GRADED and row.report is not None:
        now = window_state(contest, row.student, state.clock(), state.store.first_login(row.student))
        entry["feedback"] = visible_report(contest, row.report, now, state.sealed(contest))
    elif row.status == FAILED and (row.error or "").startswith(NOT_COUNTED):
        entry["message"] = f"{row.error}: it does not count against your submissions; fix it and submit again"
    elif row.status == FAILED:
        entry["message"] = "the grader failed on this submission: it costs you nothing; submit again"
    elif row.status == REJECTED:
        entry["message"] = f"refused: {row.error}"
    elif row.status == QUEUED:
        entry["message"] = "waiting to be graded"
    return entry


def board(
    standings: Standings, live: bool, counts: dict[str, dict[str, dict[str, int]]] | None = None
) -> dict[str, Any]:
    """The standings as the pages and the API give them; ``counts`` (see :func:`attempts`): each row's attempts
    per task, and while frozen the submissions made since (``pending``, a "?" on the board)."""
    counts = counts or {}
    return {
        "live": live,
        "frozen_at": iso(standings.frozen_at),
        "hidden": standings.hidden,
        "rows": [
            {
                "rank": row.rank,
                "student": row.student,
                "total": row.total,
                "tasks": row.tasks,
                "last_improvement": iso(row.last_improvement),
                "attempts": {t: c["attempts"] for t, c in counts.get(row.student, {}).items()},
                "pending": {t: c["pending"] for t, c in counts.get(row.student, {}).items() if c["pending"]},
            }
            for row in standings.rows
        ],
    }


def attempts(
    state: ContestState, contest: Contest, frozen_at: datetime | None = None
) -> dict[str, dict[str, dict[str, int]]]:
    """Per student and task: ``attempts``, the submissions that count or will (graded or queued, not voided),
    received before ``frozen_at`` if given; ``pending``, those received since (the board does not show them),
    but where the resolver has revealed the student's task."""
    counts: dict[str, dict[str, dict[str, int]]] = {}
    resolved = state.resolved() if frozen_at is not None else frozenset()
    for row in state.store.all(reports=False):
        if row.voided or row.status not in (GRADED, QUEUED) or contest.task(row.task) is None:
            continue
        entry = counts.setdefault(row.student, {}).setdefault(row.task, {"attempts": 0, "pending": 0})
        hidden = frozen_at is not None and row.received_at >= frozen_at and (row.student, row.task) not in resolved
        entry["pending" if hidden else "attempts"] += 1
    return counts


def filtered(rows: list[Row], student: str, task: str, status: str) -> list[Row]:
    """The submissions the coach's filters keep: ``student`` a part of the name (any case), ``task`` exact,
    ``status`` one of the store's, or "voided"."""
    found = [r for r in rows if student.strip().lower() in r.student.lower()]
    if task:
        found = [r for r in found if r.task == task]
    if status == "voided":
        return [r for r in found if r.voided]
    return [r for r in found if r.status == status] if status else found


def regrades(state: ContestState, contest: Contest) -> list[dict[str, Any]]:
    """The submissions the coach had graded again, newest first: the points before and after (None while the
    new grade is not in), and the change."""
    found = []
    for sid, before in state.store.previous().items():
        row = state.row(sid)
        task = contest.task(row.task) if row else None
        if row is None or task is None:
            continue
        old = (
            task_points(task, before["score"] or 0.0, before["max_score"] or 0.0) if before["status"] == GRADED else 0.0
        )
        new = row.points(contest) if row.status != QUEUED else None
        found.append(
            {
                "id": sid,
                "student": row.student,
                "task": row.task,
                "old_status": before["status"],
                "old_points": old,
                "status": row.status,
                "new_points": new,
                "change": None if new is None else round(new - old, 2),
                "requeued_at": before["requeued_at"],
            }
        )
    return found[::-1]


def regrade_requests(state: ContestState, contest: Contest, student: str | None = None) -> list[dict[str, Any]]:
    """The regrade requests, newest first: every one (the coach), or ``student``'s. Each with its points before and
    after the regrade in the contest's points (``new_points`` None until graded again); a student sees them only
    where the contest shows them their scores now (its feedback policy), as their submissions' feedback does."""
    found = state.store.regrade_requests(student)
    if student is not None:
        now = window_state(contest, student, state.clock(), state.store.first_login(student))
        scores = policy_at(contest, now).shows.scores
    shown = []
    for r in found:
        task = contest.task(r["task"])
        entry = {k: r[k] for k in ("id", "submission", "task", "reason", "asked_at", "status", "answer", "answered_at")}
        if student is None:
            entry.update(student=r["student"], answered_by=r["answered_by"])
        if (student is None or scores) and task is not None:
            entry["old_points"] = result_points(task, r["old_status"], r["old_score"], r["old_max_score"])
            entry["new_points"] = result_points(task, r["new_status"], r["new_score"], r["new_max_score"])
        entry["regraded"] = r["regraded_at"] is not None  # an accepted request's new result is in
        shown.append(entry)
    return shown


def freeze(state: Freeze) -> dict[str, Any]:
    """The freeze for the coach: ``frozen``, ``at``, ``by`` ("coach", "schedule"), ``lifts``, ``scheduled``."""
    return {
        "frozen": state.frozen,
        "at": iso(state.at),
        "by": state.by,
        "lifts": iso(state.lifts),
        "scheduled": iso(state.scheduled),
    }


def collapsed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` (newest first) with each run of identical consecutive ones (same student, kind and detail) as
    one, its ``count`` the run's length and ``first_at`` its earliest time: twelve identical refusals are a line
    "×12", not a screenful."""
    runs: list[dict[str, Any]] = []
    for event in events:
        last = runs[-1] if runs else None
        if last and (last["student"], last["kind"], last["detail"]) == (
            event["student"],
            event["kind"],
            event["detail"],
        ):
            last["count"] += 1
            last["first_at"] = event["at"]
        else:
            runs.append({**event, "count": 1, "first_at": event["at"]})
    return runs


def events(state: ContestState) -> list[dict[str, Any]]:
    """The latest events, collapsed, newest first."""
    return collapsed(state.store.events(limit=EVENTS_READ))


def me(state: ContestState, name: str) -> dict[str, Any]:
    """The student's own page: their window, the tasks with what they have used, their submissions. Its visit
    is a login (it opens a personal window)."""
    contest, window = state.window(name, login=True)
    rows = state.store.of(name)
    runs = state.store.test_runs_of(name)
    tasks = []
    locked = window.phase is Phase.NOT_STARTED  # the statements are handed out when the window opens
    for task in () if locked else contest.tasks:
        used = sum(1 for r in rows if r.task == task.id and r.status == GRADED and not r.voided)
        waiting = sum(1 for r in rows if r.task == task.id and r.status == QUEUED and not r.voided)
        # what the cap still allows: a queued one counts (policy: queued_as_graded), a failed or voided one not
        left = None if task.max_submissions is None else max(0, task.max_submissions - used - waiting)
        tasks.append(
            {
                "id": task.id,
                "title": GRADABLE[task.id].title,
                "points": task.points,
                "scoring": task.scoring.value,
                "metric": is_metric(task.id),
                "finals": finals_allowed(task),
                "select": task.select,
                "max_submissions": task.max_submissions,
                "min_interval_seconds": task.min_interval.total_seconds(),
                "used": used,
                "waiting": waiting,
                "left": left,  # None: no cap
                "files": allowed_files(task.id),
                # apart from the submissions: never scored, and a run the grader failed on costs nothing
                "test_runs_left": max(0, task.test_runs - testruns.used(task.id, runs)),
            }
        )
    return {
        "student": name,
        "phase": window.phase.value,
        "start": iso(window.start),
        "end": iso(window.end),
        "remaining_seconds": round(window.remaining.total_seconds()),
        "closed": closed_reason(window, state.clock()),  # why the student may not submit now; None while open
        "locked": locked,  # before the window: no task, no statement, no notebook
        "starts_in_seconds": round((window.start - state.clock()).total_seconds()) if locked and window.start else None,
        "tasks": tasks,
        "submissions": [submission(state, r, contest) for r in reversed(rows)],
        "paper": state.base.paper is not None,
        "paper_parts": [part.id for part in state.base.paper.parts] if state.base.paper else [],
        "test_runs": [test_run(run) for run in runs[:TEST_RUNS_SHOWN]],  # the rest at /api/test-runs/ID
        "regrade_requests": regrade_requests(state, contest, name),
        "regrade_requests_left": max(0, contest.regrade_requests - len(state.store.regrade_requests(name))),
    }


def test_run(run: dict[str, Any]) -> dict[str, Any]:
    """A test run as its student sees it (and the coach): what it printed, its verdict, its time."""
    shown = {k: run[k] for k in ("id", "task", "status", "verdict", "error", "output", "cut", "seconds")}
    shown["received_at"] = run["received_at"]
    if run["cut"]:
        shown["message"] = f"only the last {OUTPUT_KEPT >> 10} KB of the output is kept"
    if run["verdict"] == FAILED_RUN:
        shown["message"] = f"the grader failed on this test run ({run['error']}): it costs you nothing; send it again"
    return shown


def people(state: ContestState, contest: Contest) -> list[dict[str, Any]]:
    """Each student's window as the coach's page lists it."""
    logins, now = state.store.first_logins(), state.clock()
    found = []
    for name in state.students:
        window = window_state(contest, name, now, logins.get(name))
        found.append(
            {
                "name": name,
                "phase": window.phase.value,
                "end": iso(window.end),
                "extra": contest.extra_time.get(name, timedelta(0)).total_seconds() / 60,
                "delay": contest.start_delay.get(name, timedelta(0)).total_seconds() / 60,
                "start": iso(window.start),
                "first_login": iso(logins.get(name)),
            }
        )
    return found


JURY_ONLY = ("claimed_by", "claimed_at")  # who on the jury took a question on: the jury's business alone


def messages(state: ContestState, who: Any) -> dict[str, Any]:
    """The announcements and the clarifications ``who`` may read: a student their own questions and those the
    coach answered to everyone (without who asked); the coach every question."""
    questions = state.store.clarifications(None if who.coach else who.name)
    if not who.coach:
        questions = [
            {
                **{k: v for k, v in q.items() if k not in JURY_ONLY},
                "student": q["student"] if q["student"] == who.name else None,
            }
            for q in questions
        ]
    return {"announcements": state.store.announcements(), "clarifications": questions}
