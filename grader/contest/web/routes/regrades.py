"""Regrade requests, as Gradescope and PrairieLearn have them: a student asks, with a reason, that one
of their graded submissions be graded again; the coach answers with a text, and either regrades it (queued again
as the coach's own regrade does, the request then holding its old and its new result) or declines. Each answer is
in the audit trail with its author. A student has ``[regrades] per_student`` requests (contest.toml, default 5)
and one open request per submission; the texts are bounded, rate-limited and escaped as every message is."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import Response

from grader.contest.store import Refused
from grader.contest.web import views
from grader.contest.web.deps import Anyone, Jury, State, Student
from grader.contest.web.routes.messages import MOST_TEXT, checked
from grader.contest.web.routes.student import own
from grader.contest.web.state import SQLITE_IDS

router = APIRouter(form_limits={"max_files": 0, "max_fields": 5})
MOST_REASON = 1000  # characters of a student's reason
ACTIONS = ("regrade", "decline")
Text = Annotated[str, Form()]


@router.post("/request-regrade/{sid}")
def request_regrade(sid: int, request: Request, who: Student, state: State, reason: Text = "") -> Response:
    """The student asks that their graded submission ``sid`` be graded again (another's: the same 404 as none)."""
    row = own(state, sid, who)
    text = checked(state, who, reason, MOST_REASON, "reason")
    try:
        rid = state.store.request_regrade(who.name, row.id, state.clock(), text, state.rules().regrade_requests)
    except Refused as e:
        raise HTTPException(409, str(e)) from None
    state.store.event(state.clock(), who.name, "regrade request", f"#{rid} for submission {sid} ({row.task})")
    return views.done(request, f"/me#submission-{sid}", {"id": rid, "submission": sid, "status": "open"}, status=201)


@router.post("/coach/regrade-requests/{rid}")
def answer_request(
    rid: int, request: Request, who: Jury, state: State, action: Text = "", answer: Text = ""
) -> Response:
    """Answer request ``rid``: ``action`` "regrade" (the submission queued again) or "decline", with ``answer``,
    the text its student reads."""
    if action not in ACTIONS:
        raise HTTPException(400, f"action must be {' or '.join(ACTIONS)}, not {action!r}")
    if rid not in SQLITE_IDS:  # no database holds it: unknown, not an overflow
        raise HTTPException(404, f"no regrade request {rid}")
    text = checked(state, who, answer, MOST_TEXT, "answer")
    try:
        done = state.store.answer_regrade(rid, state.clock(), text, who.name, accept=action == "regrade")
    except LookupError as e:
        raise HTTPException(404, str(e)) from None
    except Refused as e:
        raise HTTPException(409, str(e)) from None
    sid = done["submission"]
    if action == "regrade":  # the coach's regrade: its kind, so the events and the audit list it as one
        detail = f"submission {sid} queued again: regrade request #{rid} accepted: {text[:80]}"
        state.store.event(state.clock(), done["student"], "regrade", detail, author=who.name)
        state.enqueue(sid)
    else:
        detail = f"regrade request #{rid} (submission {sid}) declined: {text[:80]}"
        state.store.event(state.clock(), done["student"], "regrade declined", detail, author=who.name)
    return views.done(request, "/coach#regrade-requests", {"id": rid, "status": done["status"], "submission": sid})


@router.get("/api/regrade-requests")
def requests(who: Anyone, state: State) -> list[dict[str, Any]]:
    """The regrade requests ``who`` may read: a student their own, the coach every one."""
    return views.regrade_requests(state, state.rules(), None if who.coach else who.name)
