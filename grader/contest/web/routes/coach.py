"""The coach's page and API, and their changes to the contest: a longer window, a student's extra time, a
submission voided or graded again, a metric task's leaderboard B revealed, the students' board frozen or live.
Each change is checked by the rules (``policy``) before it is stored, and logged as an event."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from grader.contest.metric import is_metric
from grader.contest.policy import change_refusal, void_refusal
from grader.contest.scoreboard import coach_view
from grader.contest.store import QUEUED
from grader.contest.web import views
from grader.contest.web.deps import Coach, State
from grader.contest.web.state import EXTEND, FREEZE_LIFTED, FROZEN_AT, REVEALED

# Forms of a few fields and no file.
router = APIRouter(form_limits={"max_files": 0, "max_fields": 5})
Minutes = Annotated[float, Form()]  # nan and inf parse: the policy refuses them (change_refusal)
Undo = Annotated[bool, Form()]  # a form's undo=1 takes the change back


@router.get("/coach", response_class=HTMLResponse)
def coach_page(who: Coach, state: State) -> Response:
    contest = state.rules()
    standings = coach_view(contest, state.submissions(contest), state.students)
    return views.render(
        state,
        "coach.html",
        standings=views.board(standings, True),
        tasks=[t.id for t in contest.tasks],
        submissions=[views.submission(state, r, contest, full=True) for r in reversed(state.store.all(reports=False))],
        people=views.people(state, contest),
        events=views.events(state)[:50],
        freeze=views.freeze(state.freeze(contest)),
        leaderboards=state.leaderboards(who, contest, standings),
        extend=state.extend_minutes(),
        queued=len(state.store.queued()),
        task_points={t.id: t.points for t in contest.tasks},
        now=views.iso(state.clock()),
    )


@router.get("/api/coach")
def coach_api(who: Coach, state: State) -> dict[str, Any]:
    contest = state.rules()
    return {
        "scoreboard": views.board(coach_view(contest, state.submissions(contest), state.students), True),
        "submissions": [views.submission(state, r, contest, full=True) for r in state.store.all(reports=False)],
        "frozen_at": state.store.setting(FROZEN_AT),  # reports: one by one, at /api/submissions/{sid}
        "freeze": views.freeze(state.freeze(contest)),
        "extend_minutes": state.extend_minutes(),
        "events": views.events(state),
    }


def refuse_change(minutes: float, why: str | None) -> None:
    """A 400 for a change of ``minutes`` the policy refuses (``why``: what it would do to a window)."""
    refused = change_refusal(minutes)
    if refused:
        raise HTTPException(400, refused)
    if why:
        raise HTTPException(400, f"{minutes:g} min is too short a change: {why}")


@router.post("/coach/extend")
def extend(request: Request, who: Coach, state: State, minutes: Minutes) -> Response:
    refuse_change(minutes, None)
    total = state.extend_minutes() + minutes
    refuse_change(minutes, state.empty_window(state.rules(extend=total)))
    state.store.set_setting(EXTEND, str(total))
    state.store.event(state.clock(), None, "extend", f"the window extended by {minutes:g} min (in all {total:g} min)")
    return views.done(request, "/coach", {"extend_minutes": total})


@router.post("/coach/extra-time")
def extra_time(
    request: Request, who: Coach, state: State, minutes: Minutes, student: Annotated[str, Form()] = ""
) -> Response:
    refuse_change(minutes, None)
    name = student.strip()
    if name not in state.students:
        raise HTTPException(400, f"{name!r} is not a student of this contest")
    wanted = state.extra_minutes()
    wanted[name] = wanted.get(name, 0.0) + minutes
    refuse_change(minutes, state.empty_window(state.rules(extra=wanted)))
    total = state.store.add_extra_minutes(name, minutes)
    state.store.event(
        state.clock(), name, "extra time", f"{minutes:g} min more (added by the coach: {total:g} min in all)"
    )
    return views.done(request, "/coach", {"student": name, "added_minutes": total})


@router.post("/coach/void/{sid}")
def void(sid: int, request: Request, who: Coach, state: State, undo: Undo = False) -> Response:
    row = state.row(sid)
    if row is None:
        raise HTTPException(404, f"no submission {sid}")
    refused = None if undo else void_refusal(sid, row.status)
    if refused:
        raise HTTPException(409, refused)
    state.store.set_voided(sid, not undo)
    state.store.event(state.clock(), None, "unvoid" if undo else "void", f"submission {sid}")
    return views.done(request, "/coach", {"id": sid, "voided": not undo})


@router.post("/coach/regrade/{sid}")
def regrade(sid: int, request: Request, who: Coach, state: State) -> Response:
    if state.row(sid) is None:
        raise HTTPException(404, f"no submission {sid}")
    if not state.store.requeue(sid):
        raise HTTPException(
            409,
            f"submission {sid} did not fail and has no checks set aside: only such a submission is graded again",
        )
    state.store.event(state.clock(), None, "regrade", f"submission {sid} queued again")
    state.enqueue(sid)
    return views.done(request, "/coach", {"id": sid, "status": QUEUED})


@router.post("/coach/regrade-task")
async def regrade_task(request: Request, who: Coach, state: State, task: Annotated[str, Form()] = "") -> Response:
    if state.rules().task(task) is None:
        raise HTTPException(400, f"{task!r} is not a task of this contest")
    ids = await run_in_threadpool(state.store.requeue_task, task)  # many rows: off the event loop
    state.store.event(state.clock(), None, "regrade", f"{task}: {len(ids)} submission(s) queued again")
    for sid in ids:
        state.enqueue(sid)
    return views.done(request, "/coach", {"task": task, "queued": ids})


@router.post("/coach/reveal/{task_id}")
def reveal(task_id: str, request: Request, who: Coach, state: State, undo: Undo = False) -> Response:
    if state.rules().task(task_id) is None or not is_metric(task_id):
        raise HTTPException(404, f"{task_id} is not a metric task of this contest: it has no split B")
    state.store.set_setting(f"{REVEALED}{task_id}", None if undo else state.clock().isoformat())
    what = "sealed again" if undo else "revealed to the students"
    state.store.event(state.clock(), None, "reveal", f"{task_id}: leaderboard B {what}")
    return views.done(request, "/coach", {"task": task_id, "revealed": not undo})


@router.post("/coach/freeze")
def freeze(request: Request, who: Coach, state: State) -> Response:
    at = state.store.setting(FROZEN_AT) or state.clock().isoformat()
    state.store.set_setting(FROZEN_AT, at)
    state.store.event(state.clock(), None, "freeze", f"the students' scoreboard frozen as of {at}")
    return views.done(request, "/coach", {"frozen_at": at, "freeze": views.freeze(state.freeze(state.rules()))})


@router.post("/coach/unfreeze")
def unfreeze(request: Request, who: Coach, state: State) -> Response:
    """Lift the freeze in effect: the coach's own, and the contest's scheduled one if it has begun (it does not
    come back; a freeze by hand still can)."""
    contest, now = state.rules(), state.clock()
    before = state.freeze(contest)
    state.store.set_setting(FROZEN_AT, None)
    if state.freeze(contest).by == "schedule":
        state.store.set_setting(FREEZE_LIFTED, now.isoformat())
    lifted = "the scheduled freeze lifted: " if before.frozen and state.freeze_lifted() else ""
    state.store.event(now, None, "unfreeze", f"{lifted}the students' scoreboard is live again")
    return views.done(request, "/coach", {"frozen_at": None, "freeze": views.freeze(state.freeze(contest))})
