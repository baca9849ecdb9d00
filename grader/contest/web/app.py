"""The contest server's app factory: :func:`create_app` builds a FastAPI app over a contest folder.

Students log in with their token (a form that sets an HttpOnly cookie, or ``Authorization: Bearer`` for
``grade submit``), upload to a task, and see their submissions with the feedback the contest allows and the
scoreboard as the contest shows it; the coach (``admin.token``) sees everything live and can extend the
window, add a student's time, void a submission, grade a failed one again and freeze the board. The rules are
the pure policy engine's (``policy``, ``feedback``, ``scoreboard``, ``metric``) at the injected clock's time; the
records are ``store``'s; grading is ``grading``'s queue, started with the app's lifespan.

Tokens are compared in constant time and never logged or put in a URL.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from grader.contest.grading import METRIC_NICE, Remote, warming_in_background
from grader.contest.policy import NOT_A_NUMBER
from grader.contest.supervise import process_age
from grader.contest.web import views
from grader.contest.web.deps import contest_state, identify, same_origin
from grader.contest.web.limits import BODY_SECONDS
from grader.contest.web.routes import coach, exports, messages, regrades, scoreboard, student, testruns
from grader.contest.web.state import ContestState, Settings

log = logging.getLogger("grader.contest")

# What a form's field that does not parse is told (a 400, as the API has always answered a bad form).
FORM_ERRORS = {
    "minutes": NOT_A_NUMBER,
    "selected": "selected must be 1 or 0",
    "undo": "undo must be 1 or 0",
    "question": "question must be a question's number",
    "public": "public must be 1 or 0",
    "set": "set must be 1 or 0",
}


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def create_app(
    contest_dir: Path | str,
    clock: Callable[[], datetime] = utc_now,
    workers: int = 1,
    limits=None,
    uploads_per_minute: int = 10,
    executor: Executor | None = None,
    body_seconds: float = BODY_SECONDS,
    refusals_per_minute: int = 10,
    address_per_minute: int = 60,
    slots: int | None = None,
    metric_workers: int | None = None,
    remote: Remote | None = None,
    metric_nice: int = METRIC_NICE,
) -> FastAPI:
    """The contest server for ``contest_dir`` (contest.toml, tokens.csv, admin.token; roster.csv if any).
    ``clock`` gives the time (aware), for the tests; ``workers`` grading processes; ``limits`` the sandbox's
    (default: grader.options.limits()); ``executor`` grades instead of a pool of the server's own (a Dask
    client's, for ``--scheduler``: its workers must see the contest folder at the same path); ``body_seconds``
    how long an upload's body may take to arrive; ``refusals_per_minute`` the refused uploads of one token
    recorded in a minute, ``address_per_minute`` those and the wrong logins of one address (a classroom behind
    one router shares it); ``slots`` the submissions handed to the executor at once (default: ``workers``, or
    grading.EXTERNAL_SLOTS for an ``executor``); ``metric_workers`` the metric tasks' lane (grading.lane_slots),
    its processes at ``metric_nice`` more niceness than the server's (grading.METRIC_NICE); ``remote`` the lanes
    ``executor`` grades (the others on processes of the server's own) and its name.
    Grading starts with the app's lifespan: an app without it (a TestClient outside ``with``) grades nothing."""
    settings = Settings(
        workers=workers,
        limits=limits,
        executor=executor,
        slots=slots,
        metric_workers=metric_workers,
        metric_nice=metric_nice,
        remote=remote,
        uploads_per_minute=uploads_per_minute,
        body_seconds=body_seconds,
        refusals_per_minute=refusals_per_minute,
        address_per_minute=address_per_minute,
    )
    state = ContestState(Path(contest_dir), clock, settings)
    app = FastAPI(
        title="gptkit contest",
        lifespan=grading_lifespan(state),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(same_origin)],  # run before each route's own: before who is asking is even looked at
    )
    app.state.contest = state  # the routes' State dependency reads it here
    app.state.store = state.store  # where the app offered its store before the split: kept for its callers
    routers = (student, scoreboard, coach, exports, messages, testruns, regrades)
    for router in (r.router for r in routers):
        include(app, router)
    # Starlette's own: what an unknown path (a 404) or a wrong method raises too, FastAPI's a subclass of it
    app.add_exception_handler(StarletteHTTPException, refused)
    app.add_exception_handler(RequestValidationError, bad_form)
    return app


def grading_lifespan(state: ContestState) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: ``state`` grades while the server serves, and stops grading when it stops. The server
    answers first: the grading pools start in the background (their processes wait seconds for the fork server
    to load torch and the grader, tens of seconds on a loaded machine), and an upload accepted meanwhile waits
    queued in the store until they take it (grading.GradingQueue.start)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with warming_in_background():
            state.start_grading()
        log.info("start: answering after %.2f s", process_age())
        try:
            yield
        finally:
            state.stop_grading()

    return lifespan


def include(app: FastAPI, router: APIRouter) -> None:
    """``router``'s routes added to ``app`` one by one, each with the app's dependencies and the router's form
    limits. Not ``app.include_router``: since FastAPI 0.137 that leaves one opaque entry in ``app.routes``, and
    the routes must be listed there (the security tests check every coach route and every POST route by it)."""
    for route in router.routes:
        assert isinstance(route, APIRoute), route
        app.add_api_route(
            route.path,
            route.endpoint,
            methods=sorted(route.methods or ()),
            response_class=route.response_class,
            name=route.name,
            dependencies=route.dependencies,
            form_limits={**router.form_limits, **route.form_limits},
        )


async def refused(request: Request, exc: Exception) -> Response:
    """A refusal as the asker reads it: a page for a browser, ``{"detail": ...}`` for a script and for every
    path under /api/. An unknown path (``/charts``) is a refusal too: a page that says so, with the way back
    (a browser used to be shown raw JSON)."""
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail
    if exc.status_code == 404 and detail == "Not Found":  # Starlette's words for a path no route matches
        detail = f"there is no page {request.url.path} here"
    headers = getattr(exc, "headers", None)
    if views.wants_html(request) and not request.url.path.startswith("/api/"):
        state = contest_state(request)
        page = state.templates.get_template("error.html").render(
            title=state.base.title, status=exc.status_code, message=detail, logged_in=identify(request) is not None
        )
        return HTMLResponse(page, status_code=exc.status_code, headers=headers)
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)


async def bad_form(request: Request, exc: Exception) -> Response:
    """A form's (or a path's) field missing or not of its type: a 400 that names the field, as a refusal, as
    the forms parsed by hand were answered before they were typed."""
    assert isinstance(exc, RequestValidationError)
    fields = [str(error.get("loc", ("",))[-1]) for error in exc.errors()]
    messages = [FORM_ERRORS.get(name, f"{name}: {error.get('msg')}") for name, error in zip(fields, exc.errors())]
    return await refused(request, HTTPException(400, "; ".join(dict.fromkeys(messages))))
