"""The contest's grading queue: submissions graded fairly between students, each on its task's milestone only,
by the same sandboxed path as ``grade batch`` (``grader.batch.run.grade_one`` in a pool of worker processes).

Fair, not first come first served: one student's five uploads of a training run that sleeps out its budget
must not hold the only worker for half an hour ahead of everyone else. The queue keeps the waiting submissions
itself and hands the executor only as many as it has ``slots``; each time one frees, the next is the oldest
waiting submission of the student who, in order: has not used more than ``share_seconds`` of grading in the
last ``share_window`` seconds; has the fewest submissions being graded; was served least recently.

Unlike a batch, the server cannot know how many processes will grade at once, and a shared fork server waits
for all its clients before it serves any: so each worker process starts its own (a few CPU seconds, once),
when the queue starts (``warm_up``). Each result is recorded by ``Store.finish`` (one transaction, only while
the row is still queued). A grader failure (the ``{"error": ...}`` result) marks the submission failed: not
the student's doing, it costs them nothing.

Grading heals itself. A grading process that dies (the machine's out-of-memory killer, a stray ``kill``)
breaks the whole pool: every submission it held fails at once, and every later one could not even be handed
out. The queue then replaces the pool with a new one and grades those submissions again, each up to
``RETRIES`` times (a submission that kills its grading process every time is then failed, at no cost to its
student); an upload never meets the broken pool.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime

from grader.batch.run import grade_one, pool_context, stop_forkserver, stop_workers, warm_up
from grader.contest.store import Store
from grader.options import limits as default_limits

log = logging.getLogger("grader.contest")

SHARE_WINDOW = 600.0  # seconds: the recent past in which a student's grading time is counted
SHARE_SECONDS = 300.0  # a student who used more than this of it waits behind everyone who did not
EXTERNAL_SLOTS = 16  # submissions handed at once to an executor not the queue's own (a Dask cluster's), by default
RETRIES = 2  # times a submission is graded again after its grading process died under it


class GradingQueue:
    """``workers`` processes grading the queued submissions of ``store``. ``start`` re-queues what a previous
    server left queued; ``close`` stops the pool (what is still queued stays queued for the next start)."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime],
        workers: int = 1,
        limits=None,
        executor: Executor | None = None,
        on_done: Callable[[int], None] = lambda sid: None,
        options: Callable[[str], dict] = lambda student: {},
        slots: int | None = None,
        share_seconds: float = SHARE_SECONDS,
        share_window: float = SHARE_WINDOW,
        timer: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.clock = clock
        self.workers = workers
        self.limits = limits or default_limits()
        self.on_done = on_done
        self.options = options  # a student's extra arguments to grade_one: a paper's seed and rules
        self._executor = executor
        self._own = executor is None
        # Submissions handed to the executor at once: as many as it grades at once, so that the choice of the
        # next one stays here, where it is fair, not in the executor's first-come queue.
        self.slots = slots or (workers if executor is None else max(workers, EXTERNAL_SLOTS))
        self.share_seconds = share_seconds
        self.share_window = share_window
        self.timer = timer
        self._waiting: dict[int, tuple[str, str, str]] = {}  # sid -> (student, path, task), in arrival order
        self._running: dict[int, tuple[str, float]] = {}  # sid -> (student, when it was handed out)
        self._served: dict[str, float] = {}  # student -> when their latest submission was handed out
        self._used: dict[str, deque[tuple[float, float]]] = defaultdict(deque)  # student -> (ended, seconds)
        self._pending: dict[int, Future] = {}
        self._handed: dict[int, tuple[str, str, str, Executor]] = {}  # sid -> (student, path, task, its pool)
        self._retries: dict[int, int] = defaultdict(int)  # sid -> times graded again after its process died
        self.replaced = 0  # pools replaced after a grading process died (the coach's page shows it)
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Start the pool and queue every submission left queued, oldest first."""
        if self._own:
            self._executor = self._new_pool()
        for row in self.store.queued():
            self.enqueue(row.id)

    def _new_pool(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(self.workers, mp_context=pool_context())
        # Each worker's fork server starts now, while the room logs in, not on its first submission.
        for _ in range(self.workers):
            pool.submit(warm_up, self.limits)
        return pool

    def _heal(self, broken: Executor) -> None:
        """Replace ``broken``, the pool a grading process died in, once (called with the lock held): the
        submissions it held come back through _record, each graded again."""
        if not self._own or self._closed or self._executor is not broken:
            return  # not ours to replace, or replaced already by another of its failed submissions
        log.warning("a grading process died: starting a new pool of %d", self.workers)
        self._executor = self._new_pool()
        self.replaced += 1
        threading.Thread(target=_end, args=(broken,), daemon=True).start()

    def enqueue(self, sid: int) -> None:
        """Queue submission ``sid`` (committed as queued) for grading, in its student's turn."""
        row = self.store.get(sid)
        if row is None or row.path is None or self._executor is None:
            return
        path = str(self.store.folder.resolve() / row.path)  # a Dask worker may run in another folder
        with self._lock:
            if self._closed or sid in self._waiting or sid in self._pending:
                return
            self._waiting[sid] = (row.student, path, row.task)
        self._dispatch()

    def used(self, student: str, now: float) -> float:
        """The seconds of grading ``student``'s submissions took in the last ``share_window``, those being graded
        included (called with the lock held)."""
        ended = self._used[student]
        while ended and now - ended[0][0] > self.share_window:
            ended.popleft()
        running = sum(now - started for who, started in self._running.values() if who == student)
        return sum(seconds for _, seconds in ended) + running

    def _next(self) -> int | None:
        """The submission to grade next (called with the lock held): each student's oldest waiting one, the
        student chosen by (over their share, submissions being graded, last served), oldest first on a tie."""
        now = self.timer()
        oldest: dict[str, int] = {}
        for sid, (student, _, _) in self._waiting.items():
            oldest.setdefault(student, sid)
        if not oldest:
            return None

        def turn(student: str) -> tuple:
            busy = sum(1 for who, _ in self._running.values() if who == student)
            over = self.used(student, now) > self.share_seconds
            return (over, busy, self._served.get(student, -math.inf), oldest[student])

        return oldest[min(oldest, key=turn)]

    def _dispatch(self) -> None:
        """Hand the executor the next submissions while it has free slots."""
        while True:
            with self._lock:
                if self._closed or self._executor is None or len(self._pending) >= self.slots:
                    return
                sid = self._next()
                if sid is None:
                    return
                student, path, task = self._waiting.pop(sid)
                now = self.timer()
                executor = self._executor
                try:
                    future = executor.submit(grade_one, path, [task], self.limits, None, **self.options(student))
                except BrokenProcessPool:  # broken before its failed submissions came back: heal it now
                    self._waiting = {sid: (student, path, task), **self._waiting}
                    self._heal(executor)
                    if self._executor is executor:
                        return  # not ours to heal: it stays waiting
                    continue
                self._running[sid] = (student, now)
                self._served[student] = now
                self._pending[sid] = future
                self._handed[sid] = (student, path, task, executor)
            future.add_done_callback(functools.partial(self._record, sid))

    def _record(self, sid: int, future: Future) -> None:
        with self._lock:
            self._pending.pop(sid, None)
            student, path, task, executor = self._handed.pop(sid, ("", "", "", None))
            _, started = self._running.pop(sid, ("", 0.0))
            now = self.timer()
            if student:
                self._used[student].append((now, now - started))
            if future.cancelled():
                return  # closing: it stays queued for the next start
            died = isinstance(future.exception(), BrokenProcessPool)
            if died and executor is not None:
                self._heal(executor)
            again = died and self._own and not self._closed and self._retries[sid] < RETRIES
            if again:
                self._retries[sid] += 1
                self._waiting = {sid: (student, path, task), **self._waiting}  # first in its student's turn
        self._dispatch()  # the freed slot goes to the next student's turn before this result is written
        if again:
            return
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - a worker process that died (memory, signal)
            if self._closed:
                return
            tries = f" {self._retries[sid] + 1} times" if self._retries[sid] else ""
            result = {"error": f"the grading process died{tries}: {type(e).__name__}: {e}"}
        try:
            if self.store.finish(sid, self.clock(), result):
                log.info("submission %d: %s", sid, "failed" if result.get("error") else "graded")
        except Exception:  # noqa: BLE001 - the store closed under us (shutdown): it stays queued
            log.exception("submission %d: could not record its result", sid)
            return
        self.on_done(sid)

    def pending(self) -> int:
        """Submissions waiting here or being graded."""
        with self._lock:
            return len(self._pending) + len(self._waiting)

    def close(self) -> None:
        """Stop: drop what has not started, end the workers and the fork server. Submissions not recorded
        stay queued in the store and are graded at the next start."""
        with self._lock:
            self._closed = True
            self._waiting.clear()  # still queued in the store: graded at the next start
        if self._own and self._executor is not None:
            stop_workers(self._executor)
            self._executor.shutdown(wait=True, cancel_futures=True)
            stop_forkserver()
        elif self._executor is not None:  # a Dask client's: cancel what it has not graded; the client is the caller's
            self._executor.shutdown(wait=False)


def _end(pool: Executor) -> None:
    """End a broken pool's processes (some may live on after one of them died) without waiting on the caller."""
    stop_workers(pool)
    pool.shutdown(wait=True, cancel_futures=True)
