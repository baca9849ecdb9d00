"""Test runs (``grader/contest/testruns.py``): a student sends their files and a script, while their window is open,
and reads what it printed. Never a submission: nothing here touches a score, a cap or the board."""

from __future__ import annotations

import functools
import logging
from typing import Any

import anyio
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from grader.contest.policy import closed_reason
from grader.contest.store import QUEUED, Refused
from grader.contest.testruns import MAX_SCRIPT_BYTES, check_files, refusal, write
from grader.contest.uploads import MAX_FILES, MAX_UPLOAD_BYTES, UploadError, too_big
from grader.contest.web import views
from grader.contest.web.deps import Anyone, State, Student
from grader.contest.web.intake import Intake
from grader.contest.web.limits import TooBig
from grader.contest.web.state import SQLITE_IDS, ContestState
from grader.contest.web.tokens import Who

log = logging.getLogger("grader.contest")

router = APIRouter()
REFUSED = "test run refused"  # its event's kind: apart from an upload's "refused", which the student's page shows


async def read_form(request: Request, seconds: float) -> tuple[list[tuple[str, bytes]], bytes]:
    """A test run's files (name, bytes) and its script (a ``script`` field, or file), read within ``seconds``;
    TooBig past MAX_UPLOAD_BYTES."""
    with anyio.fail_after(seconds):
        form = await request.form(max_files=MAX_FILES + 1, max_fields=10)
        files, total = [], 0
        for value in [*form.getlist("files"), *form.getlist("file")]:
            if isinstance(value, UploadFile):
                data = await value.read(MAX_UPLOAD_BYTES + 1)
                total += len(data)
                if total > MAX_UPLOAD_BYTES:
                    raise TooBig(total)
                files.append((value.filename or "", data))
        given = form.get("script")
        if isinstance(given, UploadFile):
            script = await given.read(MAX_SCRIPT_BYTES + 1)
        else:
            script = (given or "").encode("utf-8")
        return files, script


@router.post("/test-run/{task}")
async def send(task: str, request: Request, who: Student, state: State) -> Response:
    """Queue a test run of ``who``'s files on their script. A refusal is written to the coach's event log as an
    upload's is (intake.py: bounded by the refusals a token and an address may make in a minute)."""
    refuse = functools.partial(Intake(state, request, who, task).refuse, kind=REFUSED)
    contest, window = await run_in_threadpool(state.window, who.name)
    found = contest.task(task)
    if found is None:
        raise await refuse(404, f"{task} is not a task of this contest")
    closed = closed_reason(window, state.clock())
    if closed:
        raise await refuse(403, closed.replace("submissions are closed", "test runs are closed"))
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        raise await refuse(411, "the upload needs a Content-Length")
    if int(length) > MAX_UPLOAD_BYTES:
        raise await refuse(413, too_big(int(length)))
    if state.uploads.take(f"token:{who.name}", state.clock()):  # test runs and uploads share the minute's count
        raise HTTPException(429, f"too many uploads: at most {state.settings.uploads_per_minute} a minute")
    try:
        files, script = await read_form(request, state.settings.body_seconds)
        checked = check_files(files, script)
    except TimeoutError:
        raise await refuse(408, "the test run did not arrive in time: nothing was recorded; try again") from None
    except TooBig as e:
        raise await refuse(413, too_big(e.size)) from None
    except UploadError as e:
        raise await refuse(400, str(e)) from None
    try:
        rid = await run_in_threadpool(
            state.store.accept_test_run,
            who.name,
            task,
            state.clock,
            lambda folder: write(checked, folder),
            lambda runs: refusal(found, runs),
        )
    except Refused as e:
        raise await refuse(e.status, str(e)) from None
    log.info("test run %d: %s on %s, queued", rid, who.name, task)
    # off the event loop: the first test run makes its process pool, which waits for the fork server to start
    await run_in_threadpool(state.test_runs.enqueue, rid)
    payload = {"id": rid, "status": QUEUED, "url": f"/api/test-runs/{rid}"}
    return views.done(request, f"/me#test-run-{rid}", payload, status=202)


def own(state: ContestState, rid: int, who: Who) -> dict[str, Any]:
    """Test run ``rid`` if ``who`` may see it (the coach: any); the same 404 for another's as for none."""
    run = state.store.test_run(rid) if rid in SQLITE_IDS else None
    if run is None or (not who.coach and run["student"] != who.name):
        raise HTTPException(404, f"no test run {rid} of yours")
    return run


@router.get("/api/test-runs/{rid}")
def test_run(rid: int, who: Anyone, state: State) -> dict[str, Any]:
    return views.test_run(own(state, rid, who))
