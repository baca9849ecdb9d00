"""What a student does: log in and out, see their own page (``/me``, ``/api/me``) and submissions, download a
paper's notebook, upload to a task and select the submissions that count."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import secrets
import zipfile
from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from grader import nofollow
from grader.contest.config import Scoring
from grader.contest.metric import is_metric
from grader.contest.policy import may_select, notebook_refusal, selection_refusal
from grader.contest.store import QUEUED, Row
from grader.contest.web import views
from grader.contest.web.deps import COOKIE, UNKNOWN_TOKEN, Anyone, State, Student, identify
from grader.contest.web.intake import Intake
from grader.contest.web.limits import address
from grader.contest.web.state import ContestState
from grader.contest.web.tokens import Who

log = logging.getLogger("grader.contest")

# A form of a few fields and no file (the upload reads its own, with its own limits: see limits.read_files).
router = APIRouter(form_limits={"max_files": 0, "max_fields": 5})
REFUSAL_SHOWN = timedelta(minutes=5)  # how long a student's page shows their latest refused upload


@router.get("/", response_class=HTMLResponse)
def login_page(request: Request, state: State) -> Response:
    who = identify(request)
    if who is not None:
        return RedirectResponse("/coach" if who.coach else "/me", status_code=303)
    return views.render(state, "login.html", message="")


@router.post("/login")
def login(request: Request, state: State, token: Annotated[str, Form()] = "") -> Response:
    token, client, now = token.strip(), f"address:{address(request)}", state.clock()
    if state.wrong_logins.full([client], now):  # even a right token: past the limit, guessing stops for a minute
        message = "Too many wrong tokens from your address: wait a minute and try again."
        return views.render(state, "login.html", status=429, message=message)
    who = state.tokens.check(token)
    if who is None:
        state.wrong_logins.count([client], now)
        state.store.event(now, None, "login refused", f"an unknown token from {address(request)}")
        message = f"{UNKNOWN_TOKEN.capitalize()}: check it and try again."
        return views.render(state, "login.html", status=401, message=message)
    response = RedirectResponse("/coach" if who.coach else "/me", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE)
    return response


@router.get("/me", response_class=HTMLResponse)
def me(who: Student, state: State) -> Response:
    data = views.me(state, who.name)
    # The latest refusal, while it is news (REFUSAL_SHOWN): older ones are in the coach's log, not on the page.
    # An upload accepted since makes it stale: gone (events keep seconds: in the same second the refusal stays).
    latest = [e for e in state.store.events(who.name, limit=20) if e["kind"] == "refused"][:1]
    accepted = [s["received_at"] for s in data["submissions"] if s["status"] != "rejected"]
    since = datetime.fromisoformat(max(accepted)).replace(microsecond=0) if accepted else None
    refusals = [
        e
        for e in latest
        if state.clock() - datetime.fromisoformat(e["at"]) < REFUSAL_SHOWN
        and (since is None or datetime.fromisoformat(e["at"]) >= since)
    ]
    selectable = {t.id for t in state.rules().tasks if t.scoring is Scoring.SELECTED or is_metric(t.id)}
    waiting = any(s["status"] == QUEUED for s in data["submissions"])
    return views.render(
        state,
        "me.html",
        **data,
        refusals=refusals,
        selectable=selectable,
        waiting=waiting,
        messages=views.messages(state, who),
        categories=state.rules().categories,
        upload_key=secrets.token_hex(16),  # a page's own: the same form sent again is the same upload
    )


@router.get("/api/me")
def api_me(who: Student, state: State) -> dict[str, Any]:
    return views.me(state, who.name)


@router.get("/paper.ipynb")
def paper_notebook(who: Student, state: State) -> Response:
    """On a paper: the student's own notebook, with their numbers (the ones they are graded on)."""
    from grader.paper.render import RenderError, build, notebook_name

    paper = state.base.paper
    if paper is None:
        raise HTTPException(404, "this contest is not on a paper: there is no notebook to download")
    # Its download is a login: it opens a personal window (recorded), or the questions could be read before the
    # clock runs.
    contest, window = state.window(who.name, login=True)
    refused = notebook_refusal(window)
    if refused:
        raise HTTPException(403, refused)
    # the time the notebook states is the contest's window, not the paper's own minutes
    paper = dataclasses.replace(paper, minutes=contest.window.duration.total_seconds() / 60)
    seed = state.paper_options(who.name, paper.parts[0].id)["seed"]
    # Made once per student and window (a coach's extension changes the minutes it states), one at a time: the
    # notebook is made from the stubs with `ast`, whose conversion to Python objects is not safe in threads on
    # CPython 3.11 (a parallel burst of downloads got "AST constructor recursion depth mismatch"), and a room
    # downloading at the start needs each one made only once.
    key = (paper.id, who.name, seed, paper.minutes)
    with state.notebooks_lock:
        text = state.notebooks.get(key)
        if text is None:
            try:
                text = json.dumps(build(paper, who.name, seed), indent=1)
            except RenderError as e:
                raise HTTPException(500, f"the notebook could not be made: {e}") from None
            state.notebooks[key] = text
    name = notebook_name(paper.id, who.name)  # the name `grade paper render` gives it
    ascii_name = name.encode("ascii", "replace").decode().replace("?", "_")  # a header is latin-1: RFC 6266
    attachment = {"Content-Disposition": f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"}
    return Response(text, media_type="application/x-ipynb+json", headers=attachment)


@router.post("/submit/{task}")
async def submit(task: str, request: Request, who: Student, state: State) -> Response:
    intake = Intake(state, request, who, task)
    await intake.before_body(await run_in_threadpool(state.rules), state.clock(), resent=await intake.resent())
    sid, again = await intake.accept(await intake.body())
    if again:  # its reply was lost and the client sent it again: the same submission, stored and counted once
        log.info("submission %d: %s to %s, sent again with its key", sid, who.name, task)
        row = state.row(sid)
        status = row.status if row else QUEUED
        payload = {"id": sid, "status": status, "url": f"/api/submissions/{sid}", "repeated": True}
        return views.done(request, f"/me#submission-{sid}", payload, status=200)
    log.info("submission %d: %s to %s, queued", sid, who.name, task)
    state.enqueue(sid)
    payload = {"id": sid, "status": QUEUED, "url": f"/api/submissions/{sid}"}
    return views.done(request, f"/me#submission-{sid}", payload, status=202)


def own(state: ContestState, sid: int, who: Who) -> Row:
    """Submission ``sid`` if ``who`` may see it (the coach: any); the same 404 for another's as for none."""
    row = state.row(sid)
    if row is None or (not who.coach and row.student != who.name):
        raise HTTPException(404, f"no submission {sid} of yours")
    return row


@router.get("/api/submissions/{sid}")
def submission(sid: int, who: Anyone, state: State) -> dict[str, Any]:
    return views.submission(state, own(state, sid, who), state.rules(), full=who.coach)


@router.get("/submissions/{sid}/files.zip")
def download(sid: int, who: Anyone, state: State) -> Response:
    """The files of submission ``sid`` as they were uploaded, in a zip: a student's own (another's is the same 404
    as none), the coach's any. Regular files only: a link in an upload is never followed out of it."""
    row = own(state, sid, who)
    if row.path is None:
        raise HTTPException(404, f"submission {sid} was refused: no file of it was kept")
    root = (state.folder / row.path).resolve()
    uploads = state.store.uploads.resolve()
    if not root.is_relative_to(uploads) or not root.exists():
        raise HTTPException(404, f"the files of submission {sid} are not kept any more")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        if root.is_file():
            with nofollow.open_file(root) as f:
                zf.writestr(root.name, f.read())
        else:  # the grader's own walk: no link followed, its depth and size bounded
            for entry in nofollow.walk(root, skip=lambda rel: False):
                if entry.kind == nofollow.FILE:
                    with entry.open() as f:
                        zf.writestr(str(entry.path), f.read())
    name = f"submission-{sid}-{row.task}.zip"
    attachment = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(out.getvalue(), media_type="application/zip", headers=attachment)


@router.post("/select/{sid}")
def select(
    sid: int, request: Request, who: Student, state: State, selected: Annotated[bool, Form()] = True
) -> Response:
    row = own(state, sid, who)
    contest, window = state.window(who.name)
    task = contest.task(row.task)
    if task is None:
        raise HTTPException(404, f"{row.task} is not a task of this contest")
    refused = selection_refusal(window)
    if refused:
        raise HTTPException(403, refused)
    if selected:
        history = [r.as_policy(contest) for r in state.store.of(who.name)]
        decision = may_select(task, history, row.as_policy(contest))
        if not decision.allowed:
            raise HTTPException(409, decision.reason)
    state.store.set_selected(sid, selected)
    return views.done(request, f"/me#submission-{sid}", {"id": sid, "selected": selected})
