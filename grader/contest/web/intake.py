"""An upload's way in, step by step, for the ``/submit/{task}`` route: the refusals that need no body first (an
unknown task, no or too large a Content-Length, a flood, a closed window or a used cap), then the body within its
deadline and size, then the files' own checks, then the decision that counts, taken again when the body is in,
inside the store's transaction. Every refusal is recorded for the coach, unless its token or address has had too
many recorded in the last minute: a script's loop must not fill the log.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from grader.contest.config import Contest
from grader.contest.policy import may_submit
from grader.contest.store import Refused, Row
from grader.contest.uploads import MAX_UPLOAD_BYTES, UploadError, check_upload, too_big, write
from grader.contest.web.limits import TooBig, address, read_files
from grader.contest.web.state import ContestState
from grader.contest.web.tokens import Who


class Intake:
    """One upload by ``who`` to ``task``. Every store call runs in the thread pool: the store's lock may be held
    by another upload's fsync, and the event loop must not wait for it."""

    def __init__(self, state: ContestState, request: Request, who: Who, task: str):
        self.state, self.request, self.who, self.task = state, request, who, task

    async def refuse(self, status: int, reason: str, rejected: bool = False, kind: str = "refused") -> HTTPException:
        """The refusal, recorded for the coach as an event of ``kind`` (``rejected``: as a rejected submission
        too), unless the token or the address is at its most refusals of the minute: then a 429 that records
        nothing."""
        state, now = self.state, self.state.clock()
        keys = [f"token:{self.who.name}", f"address:{address(self.request)}"]
        full = state.failures.full(keys, now)
        if full:
            return HTTPException(429, f"too many refused uploads from {full}: wait a minute, then fix the upload")
        state.failures.count(keys, now)
        if rejected:
            await run_in_threadpool(state.store.reject, self.who.name, self.task, now, reason)
        await run_in_threadpool(state.store.event, now, self.who.name, kind, f"{self.task}: {reason}")
        return HTTPException(status, reason)

    def decide(self, contest: Contest, rows: list[Row], first_login: datetime | None, at: datetime) -> str | None:
        """Why the rules refuse the upload at ``at``, given the student's ``rows`` (a queued one counts as graded:
        a burst of uploads must not pass the cap before the first is graded); None if they allow it."""
        policy = [r.as_policy(contest, queued_as_graded=True) for r in rows]
        decision = may_submit(contest, self.who.name, self.task, at, policy, first_login)
        return None if decision.allowed else decision.reason

    async def before_body(self, contest: Contest, now: datetime) -> None:
        """The refusals taken before the body is read: a quick answer, and no body read for nothing."""
        settings, state, name = self.state.settings, self.state, self.who.name
        if contest.task(self.task) is None:
            raise await self.refuse(404, f"{self.task} is not a task of this contest")
        length = self.request.headers.get("content-length")
        if length is None or not length.isdigit():
            raise await self.refuse(411, "the upload needs a Content-Length")
        if int(length) > MAX_UPLOAD_BYTES:
            raise await self.refuse(413, too_big(int(length)))
        if state.uploads.take(f"token:{name}", now):
            raise await self.refuse(429, f"too many uploads: at most {settings.uploads_per_minute} a minute")
        rows, first_login = await run_in_threadpool(lambda: (state.store.of(name), state.store.first_login(name)))
        why = self.decide(contest, rows, first_login, now)
        if why:
            raise await self.refuse(403, why)

    async def body(self) -> dict[str, bytes]:
        """The upload's files, read within the deadline and checked (names, sizes, zips, notebooks)."""
        seconds = self.state.settings.body_seconds
        try:
            files = await read_files(self.request, seconds)
        except TimeoutError:
            late = (
                f"the upload did not arrive within {seconds:g} s: nothing was recorded; try again on a faster "
                "connection, or send a smaller file"
            )
            raise await self.refuse(408, late) from None
        except TooBig as e:
            raise await self.refuse(413, too_big(e.size)) from None
        try:
            return check_upload(self.task, files)
        except UploadError as e:
            raise await self.refuse(400, str(e), rejected=True) from None

    async def accept(self, checked: dict[str, bytes]) -> int:
        """The upload stored, its id; the decision that counts is taken at the moment of acceptance, with the body
        in, inside the store's transaction (the window, the cap and the interval as they stand then, this upload's
        rivals included)."""
        state = self.state

        def decide(rows: list[Row], first_login: datetime | None, at: datetime) -> str | None:
            return self.decide(state.rules(), rows, first_login, at)

        try:
            return await run_in_threadpool(
                state.store.accept, self.who.name, self.task, state.clock, lambda target: write(checked, target), decide
            )
        except Refused as e:
            raise await self.refuse(403, str(e)) from None
