"""The contest server: an ASGI app (FastAPI) over a contest folder, built by :func:`create_app`.

Students log in with their token (a form that sets an HttpOnly cookie, or ``Authorization: Bearer`` for
``grade submit``), upload to a task, and see their submissions with the feedback the contest allows and the
scoreboard as the contest shows it; the coach (``admin.token``) sees everything live and can extend the
window, add a student's time, void a submission, grade a failed one again and freeze the board. The rules are
the pure policy engine's (``policy``, ``feedback``, ``scoreboard``) at the injected clock's time; the records
are ``store``'s; grading is ``grading``'s queue, started with the app's lifespan.

Tokens are compared in constant time and never logged or put in a URL.
"""

from __future__ import annotations

import csv
import dataclasses
import hmac
import io
import json
import logging
import math
import re
import threading
import zipfile
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from grader.batch.exports import gradescope_json
from grader.batch.gradebook import Gradebook
from grader.contest.commands import ADMIN_TOKEN, CONTEST_FILE, ROSTER, TOKENS
from grader.contest.config import Board, Contest, Scoring, load
from grader.contest.export import results_csv as results_with_set_aside
from grader.contest.export import set_aside_of, write_gradebook
from grader.contest.feedback import visible_report
from grader.contest.grading import GradingQueue
from grader.contest.metric import finals_allowed, is_metric, leaderboard
from grader.contest.policy import Phase, closed_reason, contest_end, may_select, may_submit, window_of, window_state
from grader.contest.scoreboard import Standings, coach_view, freeze_time, student_view
from grader.contest.store import FAILED, GRADED, NOT_COUNTED, QUEUED, REJECTED, Refused, Row, Store
from grader.contest.uploads import MAX_FILES, MAX_UPLOAD_BYTES, UploadError, allowed_files, check_upload, too_big, write
from grader.milestones import GRADABLE
from grader.paper.config import SECRET_FILE
from grader.roster import read_roster
from grader.variants import read_or_make_secret, seed_of

log = logging.getLogger("grader.contest")

COOKIE = "contest_token"
COACH = "coach"
CHARTS = "charts"  # DIR/charts/: grade report's charts of the session, drawn anew on each visit of /coach/charts
CHART_NAME = re.compile(r"[a-z][a-z-]*\.png")
REFUSAL_SHOWN = timedelta(minutes=5)  # how long a student's page shows their latest refused upload
FREEZE_LIFTED = "freeze_lifted"  # the setting: when the coach lifted the contest's scheduled freeze
UNKNOWN_TOKEN = "this token is not one of this contest's"  # the API's 401 and the login form's message
# How long an upload's body may take to arrive once its headers have: 20 MB in a minute is 0.35 MB/s, slow wifi.
BODY_SECONDS = 60.0
EVENTS_READ = 500  # the latest events the coach's view collapses (runs of identical ones) and shows the first of
SQLITE_IDS = range(-(2**63), 2**63)  # the ids SQLite can hold: any other names no submission (not an overflow)


class TooBig(Exception):
    """An upload's files over MAX_UPLOAD_BYTES, found while reading them."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


class Limiter:
    """Counts of recent failures (refusals, wrong logins) per key ("token:ada", "address:10.0.0.7"), in a
    sliding minute, each kind of key ("token", "address") with its own most; in memory: a restart forgets them."""

    def __init__(self, most: dict[str, int], span: timedelta = timedelta(minutes=1)):
        self.most = most
        self.span = span
        self._times: dict[str, deque[datetime]] = defaultdict(deque)
        self._lock = threading.Lock()  # the sync routes run in the thread pool

    def _recent(self, key: str, now: datetime) -> deque[datetime]:
        times = self._times[key]
        while times and now - times[0] >= self.span:
            times.popleft()
        return times

    def full(self, keys: list[str], now: datetime) -> str | None:
        """The first of ``keys`` at its most in the last minute, said for a person ("your token"); else None."""
        with self._lock:
            for key in keys:
                kind = key.split(":", 1)[0]
                if len(self._recent(key, now)) >= self.most[kind]:
                    return f"your {kind}"
        return None

    def count(self, keys: list[str], now: datetime) -> None:
        with self._lock:
            for key in keys:
                self._recent(key, now).append(now)


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


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def same_origin(request: Request) -> None:
    """Refuse a state-changing request sent by a page of another origin (403). A browser adds the coach's cookie
    to a form another site posts here, SameSite or not (a page on another port of the same host is the same
    site); it also says where the form came from, in ``Origin`` (or, failing that, ``Referer``), which the page
    cannot forge. A request with neither comes from no browser (`grade submit`, curl, a script): it carries a
    token of its own, not a victim's cookie, and is let through."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return
    host = request.headers.get("host", "").lower()
    sent_from = "" if source == "null" else urlsplit(source).netloc.lower()  # null: a sandboxed frame, a file
    if not host or sent_from != host:
        raise HTTPException(
            403,
            f"refused: this request comes from a page of another origin ({source[:100]}), not from this server's "
            f"own pages ({host or 'no Host header'}); another site may not act in your name. Use the forms on "
            "this server's pages (behind a proxy, pass the browser's Host header on)",
        )


@dataclasses.dataclass(frozen=True)
class Who:
    name: str  # the student's name; COACH for the coach
    coach: bool = False


def read_tokens(folder: Path) -> tuple[dict[str, str], str | None]:
    """The students' tokens (token -> student) and the coach's token, from the files `grade contest tokens`
    writes; a missing file is no tokens."""
    students: dict[str, str] = {}
    path = folder / TOKENS
    if path.exists():
        for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines()):
            token, student = (row.get("token") or "").strip(), (row.get("student") or "").strip()
            if token and student:
                students[token] = student
    admin = folder / ADMIN_TOKEN
    coach = admin.read_text(encoding="utf-8").strip() if admin.exists() else None
    return students, coach or None


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def _clock(moment: str | datetime | None, now: datetime) -> Markup | str:
    """A time as the pages show it: short, in UTC ("13:40:00 UTC"; "12-02 09:00 UTC" on another day than
    ``now``'s), the full ISO time on hover; "" for None. A value that is not a time is shown as it is."""
    if not moment:
        return ""
    try:
        at = moment if isinstance(moment, datetime) else datetime.fromisoformat(moment)
        utc = at.astimezone(timezone.utc)
    except (TypeError, ValueError):
        return str(moment)
    short = (
        utc.strftime("%H:%M:%S UTC")
        if utc.date() == now.astimezone(timezone.utc).date()
        else utc.strftime("%m-%d %H:%M UTC")
    )
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(at.isoformat(timespec="seconds"), short)


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
) -> FastAPI:
    """The contest server for ``contest_dir`` (contest.toml, tokens.csv, admin.token; roster.csv if any).
    ``clock`` gives the time (aware), for the tests; ``workers`` grading processes; ``limits`` the sandbox's
    (default: grader.options.limits()); ``executor`` grades instead of a pool of the server's own (a Dask
    client's, for ``--scheduler``: its workers must see the contest folder at the same path); ``body_seconds``
    how long an upload's body may take to arrive; ``refusals_per_minute`` the refused uploads of one token
    recorded in a minute, ``address_per_minute`` those and the wrong logins of one address (a classroom behind
    one router shares it); ``slots`` the submissions handed to the executor at once (default: ``workers``, or
    grading.EXTERNAL_SLOTS for an ``executor``). Grading starts
    with the app's lifespan, so an app used without it (a TestClient outside ``with``) records uploads as
    queued and grades nothing."""
    folder = Path(contest_dir)
    base = load(folder / CONTEST_FILE)
    tokens, coach_token = read_tokens(folder)
    roster = read_roster(folder / ROSTER, paper=base.paper is not None) if (folder / ROSTER).exists() else ()
    students = tuple(dict.fromkeys([*roster, *tokens.values()]))
    store = Store(folder)
    recent: dict[str, deque[datetime]] = defaultdict(deque)
    failures = Limiter({"token": refusals_per_minute, "address": address_per_minute})
    templates = Environment(loader=PackageLoader("grader.templates", "contest"), autoescape=select_autoescape(["html"]))
    state: dict[str, Any] = {"queue": None}
    templates.filters["clock"] = lambda moment: _clock(moment, clock())

    # The paper's own secret: the numbers `grade paper render PAPER --student NAME` writes are those graded here.
    paper_folder = base.paper.folder if base.paper and base.paper.folder else folder
    secret = read_or_make_secret(paper_folder / SECRET_FILE) if base.paper else ""

    def paper_options(student: str) -> dict[str, Any]:
        """On a paper: the student's own numbers (their variant) and the paper's rules for each part."""
        if base.paper is None:
            return {}
        rules = {part.id: frozenset(part.rules) for part in base.paper.parts}
        return {"seed": seed_of(secret, base.paper.id, student), "rules": rules}

    def enqueue(sid: int) -> None:
        queue = state["queue"]
        if queue is not None:
            queue.enqueue(sid)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        queue = GradingQueue(store, clock, workers, limits, executor=executor, options=paper_options, slots=slots)
        queue.start()
        state["queue"] = queue
        try:
            yield
        finally:
            state["queue"] = None
            queue.close()

    app = FastAPI(
        title="gptkit contest",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(same_origin)],  # run before each route's own: before who is asking is even looked at
    )
    app.state.store = store

    # --- The rules with the coach's changes ------------------------------------------------------------------

    def extend_minutes() -> float:
        """The minutes the coach added to the whole window; a stored value that is not a finite number (written
        by an older server, or by hand) is ignored with a warning: it must never take the contest down."""
        text = store.setting("extend_minutes")
        try:
            minutes = float(text or 0)
        except ValueError:
            minutes = math.nan
        if not math.isfinite(minutes):
            log.warning("ignoring the stored extension %r: it is not a number of minutes", text)
            return 0.0
        return minutes

    def extra_minutes() -> dict[str, float]:
        """The minutes the coach added to each student's window, the ones that are not finite numbers ignored."""
        extra: dict[str, float] = {}
        for name, minutes in store.extra_minutes().items():
            if isinstance(minutes, (int, float)) and math.isfinite(minutes):
                extra[name] = float(minutes)
            else:
                log.warning("ignoring the stored extra time %r of %s: it is not a number of minutes", minutes, name)
        return extra

    def rules(extend: float | None = None, extra_minutes_of: dict[str, float] | None = None) -> Contest:
        """The contest with the coach's changes: those stored, or ``extend`` and ``extra_minutes_of`` (the
        changes a coach asks for, to check them before they are stored)."""
        added = timedelta(minutes=extend_minutes() if extend is None else extend)
        window = base.window
        if added:
            hard_end = window.hard_end + added if window.hard_end else None
            window = dataclasses.replace(window, duration=window.duration + added, hard_end=hard_end)
        extra = dict(base.extra_time)
        for name, minutes in (extra_minutes() if extra_minutes_of is None else extra_minutes_of).items():
            extra[name] = extra.get(name, timedelta(0)) + timedelta(minutes=minutes)
        return dataclasses.replace(base, window=window, extra_time=extra)

    def empty_window(contest: Contest) -> str | None:
        """Why ``contest`` leaves the whole window, or a student's, with its end at or before its start; None if
        every window still has some time."""
        if contest.window.duration <= timedelta(0):
            return "the contest's window would end at or before its start"
        logins = store.first_logins()
        for name in dict.fromkeys([*students, *contest.extra_time]):
            span = window_of(contest, name, logins.get(name))
            if contest.window.duration + contest.extra_time.get(name, timedelta(0)) <= timedelta(0) or (
                span is not None and span[1] <= span[0]
            ):
                return f"{name}'s window would end at or before its start"
        return None

    # --- Who is asking -----------------------------------------------------------------------------------------

    def identify(request: Request) -> Who | None:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else request.cookies.get(COOKIE, "")
        return check_token(token)

    def check_token(token: str) -> Who | None:
        if not token:
            return None
        given = token.encode()
        if coach_token and hmac.compare_digest(given, coach_token.encode()):
            return Who(COACH, coach=True)
        found = None
        for known, student in tokens.items():  # every token compared, in constant time each
            if hmac.compare_digest(given, known.encode()):
                found = student
        return Who(found) if found else None

    def anyone(request: Request) -> Who:
        who = identify(request)
        if who is None:
            given = request.headers.get("authorization", "")[:7].lower() == "bearer " or request.cookies.get(COOKIE)
            raise HTTPException(401, UNKNOWN_TOKEN if given else "log in with your contest token first")
        return who

    def student(who: Who = Depends(anyone)) -> Who:
        if who.coach:
            raise HTTPException(403, "this page is for students: the coach's is /coach")
        return who

    def coach(who: Who = Depends(anyone)) -> Who:
        if not who.coach:
            raise HTTPException(403, "this page is for the coach only")
        return who

    @app.exception_handler(HTTPException)
    async def refused(request: Request, exc: HTTPException) -> Response:
        if _wants_html(request):
            page = templates.get_template("error.html").render(
                title=base.title, status=exc.status_code, message=exc.detail, logged_in=identify(request) is not None
            )
            return HTMLResponse(page, status_code=exc.status_code)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    def render(name: str, **values: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(title=base.title, **values))

    def done(request: Request, url: str, payload: dict[str, Any], status: int = 200) -> Response:
        if _wants_html(request):
            return RedirectResponse(url, status_code=303)
        return JSONResponse(payload, status_code=status)

    # --- What a student sees ---------------------------------------------------------------------------------

    def history(name: str) -> list[Row]:
        return store.of(name)

    def view(row: Row, contest: Contest, full: bool = False) -> dict[str, Any]:
        """A submission as its student may see it now (``full``: as the coach sees it)."""
        entry: dict[str, Any] = {
            "id": row.id,
            "task": row.task,
            "received_at": _iso(row.received_at),
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
                graded_at=_iso(row.graded_at),
                set_aside=set_aside_of(row, contest),  # the coach's flag: a score that rests on fewer checks
            )
            return entry
        if row.voided:
            entry["message"] = "voided by the coach: it does not count"
        elif row.status == GRADED and row.report is not None:
            now_state = window_state(contest, row.student, clock(), store.first_login(row.student))
            entry["feedback"] = visible_report(contest, row.report, now_state, sealed(contest))
        elif row.status == FAILED and (row.error or "").startswith(NOT_COUNTED):
            entry["message"] = f"{row.error}: it does not count against your submissions; fix it and submit again"
        elif row.status == FAILED:
            entry["message"] = "the grader failed on this submission: it costs you nothing; submit again"
        elif row.status == REJECTED:
            entry["message"] = f"refused: {row.error}"
        elif row.status == QUEUED:
            entry["message"] = "waiting to be graded"
        return entry

    # --- Metric tasks: leaderboards A (as the scoreboard) and B (sealed until the coach reveals it) ---------------

    def revealed(task_id: str) -> bool:
        return store.setting(f"revealed:{task_id}") is not None

    def sealed(contest: Contest) -> frozenset[str]:
        return frozenset(t.id for t in contest.tasks if is_metric(t.id) and not revealed(t.id))

    def leaderboards(who: Who, contest: Contest, standings: Standings) -> list[dict[str, Any]]:
        """The metric tasks' leaderboards as ``who`` may see them: as their scoreboard (``standings``, from
        :func:`board`) is, since split A is the scoreboard's points. Frozen: only the submissions received before
        the freeze. Hidden: the viewer's own row only, unranked (a rank would tell where the others stand)."""
        every = store.all()
        if standings.frozen_at is not None:
            every = [r for r in every if r.received_at < standings.frozen_at]
        boards = []
        for task in contest.tasks:
            if not is_metric(task.id):
                continue
            rows = [r for r in every if r.task == task.id]
            shown_b = who.coach or revealed(task.id)
            split = {
                name: leaderboard(contest, task.id, rows, students, name) if name == "A" or shown_b else None
                for name in ("A", "B")
            }
            if standings.hidden:
                for name, lb in split.items():
                    if lb is not None:
                        split[name] = [{**row, "rank": None} for row in lb if row["student"] == who.name]
            boards.append(
                {
                    "task": task.id,
                    "revealed": revealed(task.id),
                    "finals": finals_allowed(task),
                    "frozen_at": _iso(standings.frozen_at),
                    "hidden": standings.hidden,
                    **split,
                }
            )
        return boards

    @app.get("/api/leaderboards")
    def api_leaderboards(who: Who = Depends(anyone)) -> list[dict[str, Any]]:
        contest = rules()
        return leaderboards(who, contest, board(who, contest))

    def all_submissions(contest: Contest) -> dict[str, list]:
        grouped: dict[str, list] = defaultdict(list)
        for row in store.all(reports=False):
            grouped[row.student].append(row.as_policy(contest))
        return grouped

    def manual_freeze() -> datetime | None:
        """When the coach froze the board by hand (it stays so until they unfreeze it); None if they did not. A
        stored value that is not a time is ignored with a warning."""
        text = store.setting("frozen_at")
        try:
            return datetime.fromisoformat(text) if text else None
        except ValueError:
            log.warning("ignoring the stored freeze %r: it is not a time", text)
            return None

    def freeze_state(contest: Contest, now: datetime) -> dict[str, Any]:
        """The freeze of the students' board, for the coach: in effect now (``at``, ``by`` "coach" or
        "schedule", ``lifts``: when, None for a hand freeze, which lasts until the coach unfreezes), or coming
        (``scheduled``: when the contest's own freeze begins), or neither."""
        at = manual_freeze()
        if at is not None:
            return {"frozen": True, "at": _iso(at), "by": "coach", "lifts": None, "scheduled": None}
        scheduled, end = freeze_time(contest), contest_end(contest)
        over = end is not None and now >= end
        if scheduled is None or over or store.setting(FREEZE_LIFTED) is not None:
            return {"frozen": False, "at": None, "by": None, "lifts": None, "scheduled": None}
        if scheduled <= now:
            return {"frozen": True, "at": _iso(scheduled), "by": "schedule", "lifts": _iso(end), "scheduled": None}
        return {"frozen": False, "at": None, "by": None, "lifts": _iso(end), "scheduled": _iso(scheduled)}

    def board(who: Who, contest: Contest) -> Standings:
        submissions = all_submissions(contest)
        if who.coach:
            return coach_view(contest, submissions, students)
        at = manual_freeze()
        if at is not None:  # the coach froze the board by hand: it stays so until they unfreeze it
            before = {name: [s for s in subs if s.time < at] for name, subs in submissions.items()}
            standings = student_view(contest, who.name, clock(), before, students)
            return standings if standings.hidden else dataclasses.replace(standings, frozen_at=at)
        if contest.scoreboard is Board.FROZEN and store.setting(FREEZE_LIFTED) is not None:
            contest = dataclasses.replace(contest, scoreboard=Board.PUBLIC)  # the coach lifted the scheduled freeze
        return student_view(contest, who.name, clock(), submissions, students)

    def board_json(standings: Standings, live: bool) -> dict[str, Any]:
        return {
            "live": live,
            "frozen_at": _iso(standings.frozen_at),
            "hidden": standings.hidden,
            "rows": [
                {
                    "rank": row.rank,
                    "student": row.student,
                    "total": row.total,
                    "tasks": row.tasks,
                    "last_improvement": _iso(row.last_improvement),
                }
                for row in standings.rows
            ],
        }

    # --- Pages and routes ------------------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    def login_page(request: Request) -> Response:
        who = identify(request)
        if who is not None:
            return RedirectResponse("/coach" if who.coach else "/me", status_code=303)
        return render("login.html", message="")

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        token = str(form.get("token") or "").strip()
        address = f"address:{_client(request)}"
        if failures.full([address], clock()):  # even a right token: past the limit, guessing stops for a minute
            page = render("login.html", message="Too many wrong tokens from your address: wait a minute and try again.")
            page.status_code = 429
            return page
        who = check_token(token)
        if who is None:
            failures.count([address], clock())
            store.event(clock(), None, "login refused", f"an unknown token from {_client(request)}")
            page = render("login.html", message=f"{UNKNOWN_TOKEN.capitalize()}: check it and try again.")
            page.status_code = 401
            return page
        response = RedirectResponse("/coach" if who.coach else "/me", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return response

    @app.post("/logout")
    def logout() -> Response:
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    def student_state(name: str, record_login: bool) -> tuple[Contest, Any, datetime | None]:
        contest = rules()
        now = clock()
        first = store.record_login(name, now) if record_login else store.first_login(name)
        return contest, window_state(contest, name, now, first), first

    def me_data(who: Who) -> dict[str, Any]:
        contest, window, first = student_state(who.name, record_login=True)
        rows = history(who.name)
        tasks = []
        for task in contest.tasks:
            used = sum(1 for r in rows if r.task == task.id and r.status == GRADED and not r.voided)
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
                    "files": allowed_files(task.id),
                }
            )
        return {
            "student": who.name,
            "phase": window.phase.value,
            "start": _iso(window.start),
            "end": _iso(window.end),
            "remaining_seconds": round(window.remaining.total_seconds()),
            "closed": closed_reason(window),  # why the student may not submit now; None while open
            "tasks": tasks,
            "submissions": [view(r, contest) for r in reversed(rows)],
            "paper": base.paper is not None,
        }

    @app.get("/me", response_class=HTMLResponse)
    def me(request: Request, who: Who = Depends(student)) -> Response:
        data = me_data(who)
        # The latest refusal, while it is news (REFUSAL_SHOWN): older ones are in the coach's log, not on the page.
        latest = [e for e in store.events(who.name, limit=20) if e["kind"] == "refused"][:1]
        refusals = [e for e in latest if clock() - datetime.fromisoformat(e["at"]) < REFUSAL_SHOWN]
        selectable = {t.id for t in rules().tasks if t.scoring is Scoring.SELECTED or is_metric(t.id)}
        waiting = any(s["status"] == QUEUED for s in data["submissions"])
        return render("me.html", **data, refusals=refusals, selectable=selectable, waiting=waiting)

    @app.get("/paper.ipynb")
    def paper_notebook(who: Who = Depends(student)) -> Response:
        """On a paper: the student's own notebook, with their numbers (the ones they are graded on)."""
        from grader.paper.render import RenderError, build, notebook_name

        if base.paper is None:
            raise HTTPException(404, "this contest is not on a paper: there is no notebook to download")
        # The notebook is the paper's questions: handed out only while the student's window is open. Its download
        # is a login: it opens a personal window (recorded), or the questions could be read before the clock runs.
        _, window, _ = student_state(who.name, record_login=True)
        if window.phase is not Phase.OPEN:
            opens = f" (it opens at {window.start.isoformat()})" if window.start else ""
            when = f"has not started{opens}" if window.phase is Phase.NOT_STARTED else "has ended"
            raise HTTPException(403, f"your contest window {when}: the paper's notebook is handed out while it is open")
        # the time the notebook states is the contest's window, not the paper's own minutes
        paper = dataclasses.replace(base.paper, minutes=rules().window.duration.total_seconds() / 60)
        try:
            notebook = build(paper, who.name, paper_options(who.name)["seed"])
        except RenderError as e:
            raise HTTPException(500, f"the notebook could not be made: {e}") from None
        name = notebook_name(base.paper.id, who.name)  # the name `grade paper render` gives it
        ascii_name = name.encode("ascii", "replace").decode().replace("?", "_")  # a header is latin-1: RFC 6266
        attachment = {"Content-Disposition": f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"}
        return Response(json.dumps(notebook, indent=1), media_type="application/x-ipynb+json", headers=attachment)

    @app.get("/api/me")
    def api_me(who: Who = Depends(student)) -> dict[str, Any]:
        return me_data(who)

    async def refuse(
        request: Request, who: Who, task: str, status: int, reason: str, rejected: bool = False
    ) -> HTTPException:
        """The refusal of an upload, recorded for the coach (``rejected``: as a rejected submission too), unless
        the student's token or their address has had ``refusals_per_minute`` (``address_per_minute``) refusals
        recorded in the last minute: then a 429 that records nothing, so a script's loop cannot fill the log."""
        now = clock()
        keys = [f"token:{who.name}", f"address:{_client(request)}"]
        full = failures.full(keys, now)
        if full:
            return HTTPException(429, f"too many refused uploads from {full}: wait a minute, then fix the upload")
        failures.count(keys, now)
        if rejected:
            await run_in_threadpool(store.reject, who.name, task, now, reason)
        await run_in_threadpool(store.event, now, who.name, "refused", f"{task}: {reason}")
        return HTTPException(status, reason)

    def rate_limited(name: str, now: datetime) -> bool:
        times = recent[name]
        while times and now - times[0] >= timedelta(minutes=1):
            times.popleft()
        if len(times) >= uploads_per_minute:
            return True
        times.append(now)
        return False

    def late_body() -> str:
        return (
            f"the upload did not arrive within {body_seconds:g} s: nothing was recorded; try again on a faster "
            "connection, or send a smaller file"
        )

    async def uploaded_files(request: Request) -> list[tuple[str, bytes]]:
        """The upload's files (name, bytes), read in full; raises TooBig past MAX_UPLOAD_BYTES."""
        form = await request.form(max_files=MAX_FILES, max_fields=10)
        files = []
        total = 0
        for value in [*form.getlist("files"), *form.getlist("file")]:
            if isinstance(value, UploadFile):
                data = await value.read()
                total += len(data)
                if total > MAX_UPLOAD_BYTES:
                    raise TooBig(total)
                files.append((value.filename or "", data))
        return files

    @app.post("/submit/{task}")
    async def submit(task: str, request: Request, who: Who = Depends(student)) -> Response:
        # Every store call runs in the thread pool: the store's lock may be held by another upload's fsync,
        # and the event loop must not wait for it.
        contest, now = await run_in_threadpool(rules), clock()
        if contest.task(task) is None:
            raise await refuse(request, who, task, 404, f"{task} is not a task of this contest")
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            raise await refuse(request, who, task, 411, "the upload needs a Content-Length")
        if int(length) > MAX_UPLOAD_BYTES:
            raise await refuse(request, who, task, 413, too_big(int(length)))
        if rate_limited(who.name, now):
            raise await refuse(request, who, task, 429, f"too many uploads: at most {uploads_per_minute} a minute")
        # A quick refusal, before the body is read, of an upload the rules refuse already (a closed window, a used
        # cap); the decision that counts is taken again once the body is in (``decide``, below).
        rows, first_login = await run_in_threadpool(lambda: (history(who.name), store.first_login(who.name)))
        decision = may_submit(
            contest, who.name, task, now, [r.as_policy(contest, queued_as_graded=True) for r in rows], first_login
        )
        if not decision.allowed:
            raise await refuse(request, who, task, 403, decision.reason)
        try:
            with anyio.fail_after(body_seconds):  # a body trickled in byte by byte must not hold the server
                files = await uploaded_files(request)
        except TimeoutError:
            raise await refuse(request, who, task, 408, late_body()) from None
        except TooBig as e:
            raise await refuse(request, who, task, 413, too_big(e.size)) from None
        try:
            checked = check_upload(task, files)
        except UploadError as e:
            raise await refuse(request, who, task, 400, str(e), rejected=True) from None

        def decide(rows: list[Row], first_login: datetime | None, at: datetime) -> str | None:
            """The decision that counts: at ``at``, the moment of acceptance, with the body in, inside the store's
            transaction (the window, the cap and the interval as they stand then, this upload's rivals included)."""
            contest = rules()
            policy = [r.as_policy(contest, queued_as_graded=True) for r in rows]
            decision = may_submit(contest, who.name, task, at, policy, first_login)
            return None if decision.allowed else decision.reason

        try:
            sid = await run_in_threadpool(
                store.accept, who.name, task, clock, lambda target: write(checked, target), decide
            )
        except Refused as e:
            raise await refuse(request, who, task, 403, str(e)) from None
        log.info("submission %d: %s to %s, queued", sid, who.name, task)
        enqueue(sid)
        payload = {"id": sid, "status": QUEUED, "url": f"/api/submissions/{sid}"}
        return done(request, f"/me#submission-{sid}", payload, status=202)

    def stored(sid: int) -> Row | None:
        """Submission ``sid``, or None where there is none (an id too large for SQLite included)."""
        return store.get(sid) if sid in SQLITE_IDS else None

    def own(sid: int, who: Who) -> Row:
        row = stored(sid)
        if row is None or (not who.coach and row.student != who.name):
            raise HTTPException(404, f"no submission {sid} of yours")
        return row

    @app.get("/api/submissions/{sid}")
    def submission(sid: int, who: Who = Depends(anyone)) -> dict[str, Any]:
        return view(own(sid, who), rules(), full=who.coach)

    @app.post("/select/{sid}")
    async def select(sid: int, request: Request, who: Who = Depends(student)) -> Response:
        row = own(sid, who)
        form = await request.form(max_files=0, max_fields=5)
        want = str(form.get("selected", "1")) not in ("0", "false", "")
        contest = rules()
        task = contest.task(row.task)
        if task is None:
            raise HTTPException(404, f"{row.task} is not a task of this contest")
        window = window_state(contest, who.name, clock(), store.first_login(who.name))
        if window.phase is not Phase.OPEN:
            raise HTTPException(403, "your window is not open: the selection is fixed")
        if want:
            rows = history(who.name)
            decision = may_select(task, [r.as_policy(contest) for r in rows], row.as_policy(contest))
            if not decision.allowed:
                raise HTTPException(409, decision.reason)
        store.set_selected(sid, want)
        return done(request, f"/me#submission-{sid}", {"id": sid, "selected": want})

    @app.get("/scoreboard", response_class=HTMLResponse)
    def scoreboard_page(who: Who = Depends(anyone)) -> Response:
        contest = rules()
        standings = board(who, contest)
        return render(
            "scoreboard.html",
            standings=board_json(standings, who.coach),
            tasks=[t.id for t in contest.tasks],
            who=who,
            leaderboards=leaderboards(who, contest, standings),
        )

    @app.get("/api/scoreboard")
    def scoreboard(who: Who = Depends(anyone)) -> dict[str, Any]:
        return board_json(board(who, rules()), who.coach)

    # --- The coach -------------------------------------------------------------------------------------------

    @app.get("/coach", response_class=HTMLResponse)
    def coach_page(who: Who = Depends(coach)) -> Response:
        contest = rules()
        logins = store.first_logins()
        now = clock()
        people = []
        for name in students:
            window = window_state(contest, name, now, logins.get(name))
            people.append(
                {
                    "name": name,
                    "phase": window.phase.value,
                    "end": _iso(window.end),
                    "extra": contest.extra_time.get(name, timedelta(0)).total_seconds() / 60,
                    "first_login": _iso(logins.get(name)),
                }
            )
        standings = coach_view(contest, all_submissions(contest), students)
        return render(
            "coach.html",
            standings=board_json(standings, True),
            tasks=[t.id for t in contest.tasks],
            submissions=[view(r, contest, full=True) for r in reversed(store.all(reports=False))],
            people=people,
            events=collapsed(store.events(limit=EVENTS_READ))[:50],
            freeze=freeze_state(contest, now),
            leaderboards=leaderboards(who, contest, standings),
            extend=extend_minutes(),
            queued=len(store.queued()),
            task_points={t.id: t.points for t in contest.tasks},
            now=_iso(now),
        )

    @app.get("/api/coach")
    def coach_api(who: Who = Depends(coach)) -> dict[str, Any]:
        contest = rules()
        return {
            "scoreboard": board_json(coach_view(contest, all_submissions(contest), students), True),
            "submissions": [view(r, contest, full=True) for r in store.all(reports=False)],  # reports: one by one
            "frozen_at": store.setting("frozen_at"),
            "freeze": freeze_state(contest, clock()),
            "extend_minutes": extend_minutes(),
            "events": collapsed(store.events(limit=EVENTS_READ)),
        }

    async def minutes_of(request: Request) -> tuple[float, dict]:
        form = await request.form(max_files=0, max_fields=5)
        try:
            minutes = float(str(form.get("minutes", "")))
        except ValueError:
            raise HTTPException(400, "minutes must be a number") from None
        if not math.isfinite(minutes):  # nan, inf: float() takes them, a window cannot
            raise HTTPException(400, "minutes must be a number") from None
        if not minutes or abs(minutes) > 24 * 60:
            raise HTTPException(400, "minutes must be a non-zero number of minutes, at most a day")
        return minutes, dict(form)

    @app.post("/coach/extend")
    async def extend(request: Request, who: Who = Depends(coach)) -> Response:
        minutes, _ = await minutes_of(request)
        total = extend_minutes() + minutes
        why = empty_window(rules(extend=total))
        if why:
            raise HTTPException(400, f"{minutes:g} min is too short a change: {why}")
        store.set_setting("extend_minutes", str(total))
        store.event(clock(), None, "extend", f"the window extended by {minutes:g} min (in all {total:g} min)")
        return done(request, "/coach", {"extend_minutes": total})

    @app.post("/coach/extra-time")
    async def extra_time(request: Request, who: Who = Depends(coach)) -> Response:
        minutes, form = await minutes_of(request)
        name = str(form.get("student", "")).strip()
        if name not in students:
            raise HTTPException(400, f"{name!r} is not a student of this contest")
        wanted = extra_minutes()
        wanted[name] = wanted.get(name, 0.0) + minutes
        why = empty_window(rules(extra_minutes_of=wanted))
        if why:
            raise HTTPException(400, f"{minutes:g} min is too short a change: {why}")
        total = store.add_extra_minutes(name, minutes)
        store.event(clock(), name, "extra time", f"{minutes:g} min more (added by the coach: {total:g} min in all)")
        return done(request, "/coach", {"student": name, "added_minutes": total})

    @app.post("/coach/void/{sid}")
    async def void(sid: int, request: Request, who: Who = Depends(coach)) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        undo = str(form.get("undo", "")) not in ("", "0", "false")
        row = stored(sid)
        if row is None:
            raise HTTPException(404, f"no submission {sid}")
        if not undo and row.status not in (GRADED, QUEUED):
            raise HTTPException(
                409,
                f"submission {sid} is {row.status}: it counts for nothing already; only a graded "
                "or queued submission can be voided",
            )
        store.set_voided(sid, not undo)
        store.event(clock(), None, "unvoid" if undo else "void", f"submission {sid}")
        return done(request, "/coach", {"id": sid, "voided": not undo})

    @app.post("/coach/regrade/{sid}")
    def regrade(sid: int, request: Request, who: Who = Depends(coach)) -> Response:
        if stored(sid) is None:
            raise HTTPException(404, f"no submission {sid}")
        if not store.requeue(sid):
            raise HTTPException(
                409,
                f"submission {sid} did not fail and has no checks set aside: only such a submission is graded again",
            )
        store.event(clock(), None, "regrade", f"submission {sid} queued again")
        enqueue(sid)
        return done(request, "/coach", {"id": sid, "status": QUEUED})

    @app.post("/coach/regrade-task")
    async def regrade_task(request: Request, who: Who = Depends(coach)) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        task = str(form.get("task", ""))
        if rules().task(task) is None:
            raise HTTPException(400, f"{task!r} is not a task of this contest")
        ids = await run_in_threadpool(store.requeue_task, task)
        store.event(clock(), None, "regrade", f"{task}: {len(ids)} submission(s) queued again")
        for sid in ids:
            enqueue(sid)
        return done(request, "/coach", {"task": task, "queued": ids})

    # --- The session's results as grade export and grade report give them --------------------------------------

    charts_lock = threading.Lock()

    def gradebook() -> tuple[list[dict], list[dict]]:
        book = Gradebook(write_gradebook(folder, rules(), store, students))
        try:
            return book.rows(), book.checks()
        finally:
            book.close()

    @app.get("/coach/results.csv")
    def results_csv(who: Who = Depends(coach)) -> Response:
        text = results_with_set_aside(rules(), store, *gradebook())
        attachment = {"Content-Disposition": "attachment; filename=results.csv"}
        return Response(text, media_type="text/csv", headers=attachment)

    @app.get("/coach/gradescope.zip")
    def gradescope_zip(who: Who = Depends(coach)) -> Response:
        rows, checks = gradebook()
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for row in rows:
                zf.writestr(f"{row['student']}/results.json", json.dumps(gradescope_json(row, checks), indent=2))
        return Response(
            out.getvalue(),
            media_type="application/zip",
            headers={"Content-Disposition": "attachment; filename=gradescope-results.zip"},
        )

    @app.get("/coach/charts", response_class=HTMLResponse)
    def charts_page(who: Who = Depends(coach)) -> Response:
        from grader.batch.charts import draw

        rows, checks = gradebook()
        with charts_lock:  # pyplot keeps global state: one drawing at a time
            names = [path.name for path in draw(rows, checks, folder / CHARTS)]
        return render("charts.html", names=names, students=len(rows), now=_iso(clock()))

    @app.get("/coach/charts/{name}")
    def chart(name: str, who: Who = Depends(coach)) -> Response:
        path = folder / CHARTS / name
        if not CHART_NAME.fullmatch(name) or not path.is_file():
            raise HTTPException(404, f"no chart {name!r}: open /coach/charts to draw them")
        return FileResponse(path, media_type="image/png")

    @app.post("/coach/reveal/{task_id}")
    async def reveal(task_id: str, request: Request, who: Who = Depends(coach)) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        undo = str(form.get("undo", "")) not in ("", "0", "false")
        if rules().task(task_id) is None or not is_metric(task_id):
            raise HTTPException(404, f"{task_id} is not a metric task of this contest: it has no split B")
        store.set_setting(f"revealed:{task_id}", None if undo else clock().isoformat())
        what = "sealed again" if undo else "revealed to the students"
        store.event(clock(), None, "reveal", f"{task_id}: leaderboard B {what}")
        return done(request, "/coach", {"task": task_id, "revealed": not undo})

    @app.post("/coach/freeze")
    def freeze(request: Request, who: Who = Depends(coach)) -> Response:
        at = store.setting("frozen_at") or clock().isoformat()
        store.set_setting("frozen_at", at)
        store.event(clock(), None, "freeze", f"the students' scoreboard frozen as of {at}")
        return done(request, "/coach", {"frozen_at": at, "freeze": freeze_state(rules(), clock())})

    @app.post("/coach/unfreeze")
    def unfreeze(request: Request, who: Who = Depends(coach)) -> Response:
        """Lift the freeze in effect: the coach's own, and the contest's scheduled one if it has begun (it does
        not come back; a freeze by hand still can)."""
        contest, now = rules(), clock()
        before = freeze_state(contest, now)
        store.set_setting("frozen_at", None)
        if freeze_state(contest, now)["by"] == "schedule":
            store.set_setting(FREEZE_LIFTED, now.isoformat())
        lifted = "the scheduled freeze lifted: " if before["frozen"] and store.setting(FREEZE_LIFTED) else ""
        store.event(now, None, "unfreeze", f"{lifted}the students' scoreboard is live again")
        return done(request, "/coach", {"frozen_at": None, "freeze": freeze_state(contest, now)})

    return app


def _client(request: Request) -> str:
    return request.client.host if request.client else "an unknown address"
