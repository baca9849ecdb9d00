"""The routes' dependencies: the contest (``State``), and who is asking (``Anyone``, ``Student``, ``Coach``),
from their token in an ``Authorization: Bearer`` header (`grade submit`, scripts) or in the cookie the login form
sets; and :func:`same_origin`, which every route depends on, before any of these.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request

from grader.contest.web.state import ContestState
from grader.contest.web.tokens import ADMIN, JURY, Who

COOKIE = "contest_token"
UNKNOWN_TOKEN = "this token is not one of this contest's"  # the API's 401 and the login form's message


def contest_state(request: Request) -> ContestState:
    return request.app.state.contest


State = Annotated[ContestState, Depends(contest_state)]


def given_token(request: Request) -> str | None:
    """The token the request carries: the Bearer header's (even empty: a script sent one), else the cookie's;
    None for neither."""
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return request.cookies.get(COOKIE) or None


def identify(request: Request) -> Who | None:
    """Who the request's token names; None for no token or an unknown one."""
    return contest_state(request).tokens.check(given_token(request) or "")


def anyone(request: Request) -> Who:
    who = identify(request)
    if who is None:
        raise HTTPException(
            401, UNKNOWN_TOKEN if given_token(request) is not None else "log in with your contest token first"
        )
    return who


def student(who: Annotated[Who, Depends(anyone)]) -> Who:
    if who.coach:
        raise HTTPException(403, "this page is for students: the coach's is /coach")
    return who


def coach(who: Annotated[Who, Depends(anyone)]) -> Who:
    if not who.coach:
        raise HTTPException(403, "this page is for the coach only")
    return who


def role_of(who: Who) -> str:
    """A coach's role; a coach made without one (the server's own ``Who``) is the admin, as before roles."""
    return who.role or ADMIN


def needs(who: Who, roles: tuple[str, ...], what: str) -> Who:
    """``who``, if their role is one of ``roles``; else a 403 naming the role needed and theirs."""
    if role_of(who) not in roles:
        wanted = " or ".join(roles)
        raise HTTPException(
            403,
            f"{what} needs the {wanted} role: your coach token ({who.name}) is {role_of(who)}. "
            "Ask the contest's admin (`grade contest coach --role`)",
        )
    return who


def jury(who: Annotated[Who, Depends(coach)]) -> Who:
    """A coach who may answer the room: questions, regrade requests, announcements."""
    return needs(who, (JURY, ADMIN), "answering the students")


def admin(who: Annotated[Who, Depends(coach)]) -> Who:
    """A coach who may change the contest itself: windows, submissions, results, the board."""
    return needs(who, (ADMIN,), "changing the contest's windows, results or board")


Anyone = Annotated[Who, Depends(anyone)]
Student = Annotated[Who, Depends(student)]
Coach = Annotated[Who, Depends(coach)]  # any coach, read-only included: the pages and exports
Jury = Annotated[Who, Depends(jury)]
Admin = Annotated[Who, Depends(admin)]


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
