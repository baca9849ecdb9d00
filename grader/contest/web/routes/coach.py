"""The coach's page and API, and their changes to the contest: a longer window, a student's extra time, a
submission voided or graded again, a metric task's leaderboard B revealed, the students' board frozen or live.
Each change is checked by the rules (``policy``) before it is stored, and logged as an event."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from grader.contest.config import Contest
from grader.contest.metric import is_metric
from grader.contest.policy import Phase, added_minutes, change_refusal, delay_refusal, set_refusal, void_refusal
from grader.contest.scoreboard import coach_view, freeze_note, resolve_next
from grader.contest.store import QUEUED
from grader.contest.web import views
from grader.contest.web.deps import Admin, Coach, State, role_of
from grader.contest.web.pages import plain_time
from grader.contest.web.state import EXTEND, FREEZE_LIFTED, FROZEN_AT, REVEALED, ContestState
from grader.contest.web.tokens import ADMIN, Who

# Forms of a few fields and no file.
router = APIRouter(form_limits={"max_files": 0, "max_fields": 5})
STATUSES = ("queued", "graded", "failed", "rejected", "voided")  # the coach's page filters by these
Minutes = Annotated[float, Form()]  # nan and inf parse: the policy refuses them (change_refusal)
Undo = Annotated[bool, Form()]  # a form's undo=1 takes the change back
Force = Annotated[bool, Form()]  # a form's force=1 runs the resolver while a window is still open
PAGE = 25  # submissions, or students, to a page of the coach's


def one_page(items: list[Any], page: int) -> tuple[list[Any], dict[str, Any]]:
    """Page ``page`` (from 1; one past either end: the nearest) of ``items``, ``PAGE`` to a page, and where it
    lies: a room of 200 students keeps the coach's page a few screens long, not dozens."""
    pages = max(1, -(-len(items) // PAGE))
    page = min(max(page, 1), pages)
    return items[(page - 1) * PAGE : page * PAGE], {"page": page, "pages": pages, "total": len(items)}


def page_links(query: dict[str, Any], key: str, page: int, pages: int, anchor: str) -> dict[str, str | None]:
    """The coach page's links to the page before and after ``page`` of ``key``, the other filters kept."""

    def link(n: int) -> str | None:
        return f"/coach?{urlencode({**query, key: n})}{anchor}" if 1 <= n <= pages else None

    return {"previous": link(page - 1), "next": link(page + 1)}


@router.get("/coach", response_class=HTMLResponse)
def coach_page(
    who: Coach,
    state: State,
    student: str = "",
    task: str = "",
    status: str = "",
    page: int = 1,
    people_page: int = 1,
) -> Response:
    """The coach's page; ``student``, ``task`` and ``status`` filter its submissions (a part of a name will do);
    ``page`` and ``people_page``: which page of the submissions and of the students it shows."""
    contest = state.rules()
    standings = coach_view(contest, state.submissions(contest), state.students)
    rows = views.filtered(state.store.all(reports=False), student, task, status)
    shown, paging = one_page(list(reversed(rows)), page)
    people = views.people(state, contest)
    people_shown, people_paging = one_page(people, people_page)
    query = {"student": student, "task": task, "status": status, "page": paging["page"]}
    query["people_page"] = people_paging["page"]
    paging.update(page_links(query, "page", paging["page"], paging["pages"], "#filters"))
    people_paging.update(page_links(query, "people_page", people_paging["page"], people_paging["pages"], "#students"))
    return views.render(
        state,
        "coach.html",
        standings=views.board(standings, True, views.attempts(state, contest)),
        tasks=[t.id for t in contest.tasks],
        submissions=[views.submission(state, r, contest, full=True) for r in shown],
        paging=paging,
        filters={"student": student, "task": task, "status": status},
        statuses=STATUSES,
        people=people,
        people_shown=people_shown,
        people_paging=people_paging,
        role=role_of(who),
        events=views.events(state)[:50],
        freeze=views.freeze(state.freeze(contest)),
        freeze_note=freeze_note(contest),
        leaderboards=state.leaderboards(who, contest, standings),
        extend=state.extend_minutes(),
        health=state.health(),
        messages=views.messages(state, who),
        regrades=views.regrades(state, contest)[:50],
        regrade_requests=views.regrade_requests(state, contest),
        personal=contest.window.personal,
        task_points={t.id: t.points for t in contest.tasks},
        still_open=still_open(state, contest),
        audit=state.store.audit(50),
        canned=contest.canned,
        coach_name=who.name,
        now=views.iso(state.clock()),
        test_runs=state.store.test_run_counts(),
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
        "health": state.health(),
        "regrades": views.regrades(state, contest),
        "regrade_requests": views.regrade_requests(state, contest),  # the students' requests and their answers
        "audit": state.store.audit(),  # each coach's action, with its author (the jury's trail)
        "coach": who.name,
        "test_runs": state.store.test_run_counts(),  # each student's, never scored (grader/contest/testruns.py)
    }


@router.get("/coach/student/{name}", response_class=HTMLResponse)
def student_page(name: str, who: Coach, state: State) -> Response:
    """One student: their window and the coach's changes to it, their submissions, their questions, events."""
    contest = state.rules()
    if name not in state.students:
        raise HTTPException(404, f"{name!r} is not a student of this contest")
    person = next(p for p in views.people(state, contest) if p["name"] == name)
    rows = state.store.of(name)
    return views.render(
        state,
        "coach_student.html",
        person=person,
        tasks=[t.id for t in contest.tasks],
        standings=views.board(coach_view(contest, state.submissions(contest), state.students), True),
        submissions=[views.submission(state, r, contest, full=True) for r in reversed(rows)],
        questions=[q for q in state.store.clarifications() if q["student"] == name],
        events=views.collapsed(state.store.events(name, limit=200)),
        regrades=[r for r in views.regrades(state, contest) if r["student"] == name],
        regrade_requests=[r for r in views.regrade_requests(state, contest) if r["student"] == name],
        task_points={t.id: t.points for t in contest.tasks},
        now=views.iso(state.clock()),
        role=role_of(who),
    )


def refuse_change(minutes: float, why: str | None) -> None:
    """A 400 for a change of ``minutes`` the policy refuses (``why``: what it would do to a window)."""
    refused = change_refusal(minutes)
    if refused:
        raise HTTPException(400, refused)
    if why:
        raise HTTPException(400, f"{minutes:g} min is too short a change: {why}")


@router.post("/coach/extend")
def extend(request: Request, who: Admin, state: State, minutes: Minutes) -> Response:
    refuse_change(minutes, None)
    total = state.extend_minutes() + minutes
    refuse_change(minutes, state.empty_window(state.rules(extend=total)))
    state.store.set_setting(EXTEND, str(total))
    state.store.event(
        state.clock(), None, "extend", f"the window extended by {minutes:g} min (in all {total:g} min)", author=who.name
    )
    return views.done(request, "/coach", {"extend_minutes": total})


@router.post("/coach/extra-time")
def extra_time(
    request: Request,
    who: Admin,
    state: State,
    minutes: Minutes,
    student: Annotated[str, Form()] = "",
    set: Annotated[bool, Form()] = False,  # noqa: A002 - the form's field: set the total, do not add
) -> Response:
    """Give a student more time: ``minutes`` more, or (``set=1``, the coach's page) ``minutes`` in all, so
    that a form sent twice does not double it."""
    refused = set_refusal(minutes) if set else change_refusal(minutes)
    if refused:
        raise HTTPException(400, refused)
    name = known_student(state, student)
    wanted = state.extra_minutes()
    total = added_minutes(wanted.get(name, 0.0), minutes, set)
    wanted[name] = total
    why = state.empty_window(state.rules(extra=wanted))
    if why:
        raise HTTPException(400, f"{minutes:g} min is too short: {why}")
    if set:
        state.store.set_extra_minutes(name, total)
    else:
        total = state.store.add_extra_minutes(name, minutes)
    how = f"set to {total:g} min" if set else f"{minutes:g} min more"
    state.store.event(state.clock(), name, "extra time", f"{how} (by the coach: {total:g} min in all)", author=who.name)
    return views.done(request, "/coach", {"student": name, "added_minutes": total})


@router.post("/coach/start-delay")
def start_delay(
    request: Request, who: Admin, state: State, minutes: Minutes, student: Annotated[str, Form()] = ""
) -> Response:
    """A latecomer's fixed window starts ``minutes`` after the contest's (0: at it), and lasts the full
    duration from there; set, not added."""
    refused = delay_refusal(state.base, minutes)
    if refused:
        raise HTTPException(400, refused)
    name = known_student(state, student)
    state.store.set_start_delay(name, minutes)
    state.store.event(
        state.clock(), name, "start delay", f"their window starts {minutes:g} min after the contest's", author=who.name
    )
    return views.done(request, "/coach", {"student": name, "start_delay_minutes": minutes})


def known_student(state: ContestState, student: str) -> str:
    name = student.strip()
    if name not in state.students:
        raise HTTPException(400, f"{name!r} is not a student of this contest")
    return name


@router.post("/coach/void/{sid}")
def void(sid: int, request: Request, who: Admin, state: State, undo: Undo = False) -> Response:
    row = state.row(sid)
    if row is None:
        raise HTTPException(404, f"no submission {sid}")
    refused = None if undo else void_refusal(sid, row.status)
    if refused:
        raise HTTPException(409, refused)
    state.store.set_voided(sid, not undo)
    state.store.event(state.clock(), None, "unvoid" if undo else "void", f"submission {sid}", author=who.name)
    return views.done(request, "/coach", {"id": sid, "voided": not undo})


@router.post("/coach/regrade/{sid}")
def regrade(sid: int, request: Request, who: Admin, state: State) -> Response:
    if state.row(sid) is None:
        raise HTTPException(404, f"no submission {sid}")
    if not state.store.requeue(sid, state.clock()):
        raise HTTPException(
            409,
            f"submission {sid} did not fail and has no checks set aside: only such a submission is graded again",
        )
    state.store.event(state.clock(), None, "regrade", f"submission {sid} queued again", author=who.name)
    state.enqueue(sid)
    return views.done(request, "/coach", {"id": sid, "status": QUEUED})


@router.post("/coach/regrade-task")
async def regrade_task(request: Request, who: Admin, state: State, task: Annotated[str, Form()] = "") -> Response:
    if state.rules().task(task) is None:
        raise HTTPException(400, f"{task!r} is not a task of this contest")
    ids = await run_in_threadpool(state.store.requeue_task, task, state.clock())  # many rows: off the event loop
    state.store.event(state.clock(), None, "regrade", f"{task}: {len(ids)} submission(s) queued again", author=who.name)
    for sid in ids:
        state.enqueue(sid)
    return views.done(request, "/coach", {"task": task, "queued": ids})


@router.post("/coach/reveal/{task_id}")
def reveal(task_id: str, request: Request, who: Admin, state: State, undo: Undo = False) -> Response:
    if state.rules().task(task_id) is None or not is_metric(task_id):
        raise HTTPException(404, f"{task_id} is not a metric task of this contest: it has no split B")
    state.store.set_setting(f"{REVEALED}{task_id}", None if undo else state.clock().isoformat())
    what = "sealed again" if undo else "revealed to the students"
    state.store.event(state.clock(), None, "reveal", f"{task_id}: leaderboard B {what}", author=who.name)
    return views.done(request, "/coach", {"task": task_id, "revealed": not undo})


@router.post("/coach/freeze")
def freeze(request: Request, who: Admin, state: State) -> Response:
    at = state.store.setting(FROZEN_AT) or state.clock().isoformat()
    if not state.store.setting(FROZEN_AT):
        state.resolve(None)  # a new freeze: nothing of it revealed yet
    state.store.set_setting(FROZEN_AT, at)
    state.store.event(state.clock(), None, "freeze", f"the students' scoreboard frozen as of {at}", author=who.name)
    return views.done(request, "/coach", {"frozen_at": at, "freeze": views.freeze(state.freeze(state.rules()))})


@router.post("/coach/unfreeze")
def unfreeze(request: Request, who: Admin, state: State) -> Response:
    """Lift the freeze in effect: the coach's own, and the contest's scheduled one if it has begun (it does not
    come back; a freeze by hand still can)."""
    contest, now = state.rules(), state.clock()
    before = state.freeze(contest)
    state.store.set_setting(FROZEN_AT, None)
    state.resolve(None)
    if state.freeze(contest).by == "schedule":
        state.store.set_setting(FREEZE_LIFTED, now.isoformat())
    lifted = "the scheduled freeze lifted: " if before.frozen and state.freeze_lifted() else ""
    state.store.event(now, None, "unfreeze", f"{lifted}the students' scoreboard is live again", author=who.name)
    return views.done(request, "/coach", {"frozen_at": None, "freeze": views.freeze(state.freeze(contest))})


def still_open(state: ContestState, contest: Contest) -> list[str]:
    """The students whose window is open now (extra time, a later start, a personal window), each with its end
    as the pages print it: "alan (until 10:20:00 UTC)"."""
    now = state.clock()
    return [
        f"{p['name']} (until {plain_time(p['end'], now)})"
        for p in views.people(state, contest)
        if p["phase"] == Phase.OPEN.value
    ]


@router.post("/coach/resolve")
def resolve(request: Request, who: Admin, state: State, force: Force = False) -> Response:
    """DOMjudge's resolver, one click a step: on a board the coach froze, the lowest-ranked student's next
    pending task is revealed (its results since the freeze count on the students' board); once none is
    pending, the board is live again. Used after the end, it turns the final standings into a ceremony.

    While a student's window is still open (their extra time, say) it is refused, naming them: a result revealed
    then would show the frozen board to someone still at work. ``force=1`` runs it anyway, and the event says
    who was still in their window."""
    contest, now = state.rules(), state.clock()
    if state.frozen_by_hand() is None:
        raise HTTPException(409, "freeze the students' scoreboard first: the resolver reveals a frozen board")
    working = still_open(state, contest)
    if working and not force:
        # a room's 200 names would bury the message: the first few, and how many more
        named = ", ".join(working[:5]) + (f" and {len(working) - 5} more" if len(working) > 5 else "")
        raise HTTPException(
            409,
            f"still in their window: {named}; the resolver would show them the frozen results. "
            'Wait for their end, or resolve with force=1 (the button\'s "resolve anyway")',
        )
    if working:
        state.store.event(
            now, None, "resolve forced", f"resolved while still in their window: {', '.join(working)}", author=who.name
        )
    board = state.board(Who("", coach=False), contest)
    counts = views.attempts(state, contest, board.frozen_at)
    pending = {
        name: [t.id for t in contest.tasks if tasks.get(t.id, {}).get("pending")] for name, tasks in counts.items()
    }
    step = resolve_next(board, pending)
    if step is None:
        return unfreeze(request, who, state)  # every result revealed: the board is live
    state.resolve(step)
    state.store.event(now, step[0], "resolve", f"{step[1]}: the results since the freeze revealed", author=who.name)
    return views.done(request, "/coach", {"revealed": {"student": step[0], "task": step[1]}})


def resolver_board(state: ContestState, contest: Contest) -> dict[str, Any]:
    """The board the resolver reveals: the students' own (frozen, a "?" for each result not shown yet)."""
    board = state.board(Who("", coach=False), contest)
    return {
        **views.board(board, False, views.attempts(state, contest, board.frozen_at)),
        "frozen_by_hand": state.frozen_by_hand() is not None,
        "still_open": still_open(state, contest),
    }


@router.get("/coach/resolver", response_class=HTMLResponse)
def resolver_page(who: Coach, state: State) -> Response:
    """The resolver for a projector: the students' board in large type, one result revealed a key press (the
    right arrow or space) at a time, the page updated in place (no reload: the room sees the rows move)."""
    contest = state.rules()
    return views.render(
        state,
        "resolver.html",
        board=resolver_board(state, contest),
        tasks=[t.id for t in contest.tasks],
        may_resolve=role_of(who) == ADMIN,
    )


@router.get("/api/coach/resolver")
def resolver_api(who: Coach, state: State) -> dict[str, Any]:
    """The resolver's board now, for its page to redraw after each step."""
    return resolver_board(state, state.rules())
