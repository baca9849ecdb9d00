"""An upload's way in, step by step, for the ``/submit/{task}`` route: the refusals that need no body first (an
unknown task, no or too large a Content-Length, a flood, a closed window or a used cap), then the body within its
deadline and size, then the files' own checks, then the decision that counts, taken again when the body is in,
inside the store's transaction. Every refusal is recorded for the coach, unless its token or address has had too
many recorded in the last minute: a script's loop must not fill the log.

An upload may carry a key of the client's (an ``Idempotency-Key`` header, or ``?key=`` in the form's address): sent
again with the same key, after a reply that never arrived, it is the submission already stored, answered again,
neither stored nor counted twice.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from grader.contest.config import Contest
from grader.contest.policy import may_submit
from grader.contest.store import Refused, Repeated, Row
from grader.contest.uploads import MAX_UPLOAD_BYTES, UploadError, check_upload, too_big, write
from grader.contest.web.limits import TooBig, address, read_files
from grader.contest.web.state import ContestState
from grader.contest.web.tokens import Who

KEY = re.compile(r"[A-Za-z0-9._-]{1,100}")  # a client's upload key: a UUID, a hex token


def digest(files: dict[str, bytes]) -> str:
    """The files' names and bytes, hashed: what tells a resend (the same) from a new upload under a used key."""
    h = hashlib.sha256()
    for name in sorted(files):
        for part in (name.encode(), files[name]):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
    return h.hexdigest()


class Intake:
    """One upload by ``who`` to ``task``. Every store call runs in the thread pool: the store's lock may be held
    by another upload's fsync, and the event loop must not wait for it."""

    def __init__(self, state: ContestState, request: Request, who: Who, task: str):
        self.state, self.request, self.who, self.task = state, request, who, task
        self.key = request.headers.get("idempotency-key") or request.query_params.get("key") or None

    async def resent(self) -> bool:
        """Whether an upload with this one's key is stored already: then it may be a resend, and the refusals
        that need no body (a used cap, the interval) wait for the files, which tell a resend from a new upload. A
        malformed key is refused before anything else."""
        if self.key is None:
            return False
        if not KEY.fullmatch(self.key):
            raise await self.refuse(400, "the upload's key must be 1 to 100 letters, digits, dots, dashes or _")
        return await run_in_threadpool(self.state.store.keyed, self.who.name, self.task, self.key)

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

    async def before_body(self, contest: Contest, now: datetime, resent: bool = False) -> None:
        """The refusals taken before the body is read: a quick answer, and no body read for nothing. ``resent``:
        the upload's key is stored already, so the rules (a used cap, the interval) are left to the decision that
        counts, once the files tell a resend from a new upload."""
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
        if resent:
            return
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

    async def accept(self, checked: dict[str, bytes]) -> tuple[int, bool]:
        """The upload stored, its id; the decision that counts is taken at the moment of acceptance, with the body
        in, inside the store's transaction (the window, the cap and the interval as they stand then, this upload's
        rivals included). Also says whether it was a resend of a stored one, which the same key names."""
        state = self.state

        def decide(rows: list[Row], first_login: datetime | None, at: datetime) -> str | None:
            return self.decide(state.rules(), rows, first_login, at)

        try:
            sid = await run_in_threadpool(
                state.store.accept,
                self.who.name,
                self.task,
                state.clock,
                lambda target: write(checked, target),
                decide,
                self.key,
                digest(checked) if self.key else None,
            )
            return sid, False
        except Repeated as e:  # the same key and files as a stored upload: that one, answered again
            return e.sid, True
        except Refused as e:
            raise await self.refuse(403, str(e)) from None
