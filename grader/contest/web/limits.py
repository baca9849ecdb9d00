"""The server's own protections, not contest rules: how often a token or an address may fail or upload, how big
and how slow an upload's body may be. All in memory: a restart forgets the counts, which only ever lets more in.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from datetime import datetime, timedelta

import anyio
from fastapi import Request
from starlette.datastructures import UploadFile

from grader.contest.uploads import MAX_FILES, MAX_UPLOAD_BYTES
from grader.errors import UserError

# How long an upload's body may take to arrive once its headers have: 20 MB in a minute is 0.35 MB/s, slow wifi.
BODY_SECONDS = 60.0
MINUTE = timedelta(minutes=1)


class TooBig(UserError):
    """An upload's files over MAX_UPLOAD_BYTES, found while reading them."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


class Limiter:
    """Counts of recent events (refusals, wrong logins, uploads) per key ("token:ada", "address:10.0.0.7"), in a
    sliding minute, each kind of key ("token", "address") with its own most."""

    def __init__(self, most: dict[str, int], span: timedelta = MINUTE):
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

    def take(self, key: str, now: datetime) -> bool:
        """Count ``key`` unless it is at its most: True if it was (and so not counted)."""
        with self._lock:
            times = self._recent(key, now)
            if len(times) >= self.most[key.split(":", 1)[0]]:
                return True
            times.append(now)
            return False


def address(request: Request) -> str:
    return request.client.host if request.client else "an unknown address"


async def read_files(request: Request, seconds: float) -> list[tuple[str, bytes]]:
    """An upload's files (name, bytes), read in full within ``seconds`` (TimeoutError past them: a body trickled
    in byte by byte must not hold the server); raises TooBig past MAX_UPLOAD_BYTES.

    Read by hand, not as a typed ``File()`` parameter: FastAPI would read the body before the route runs, so the
    refusals that need no body (a closed window, a used cap, a flood) could not come first, the deadline could not
    cover the reading, and an upload could not be judged at the moment its body is in."""
    with anyio.fail_after(seconds):
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
