"""The contest's grading queue: submissions graded in arrival order, each on its task's milestone only, by the
same sandboxed path as ``grade batch`` (``grader.batch.run.grade_one`` in a pool of worker processes).

Unlike a batch, the server cannot know how many processes will grade at once, and a shared fork server waits
for all its clients before it serves any: so each worker process starts its own (a few CPU seconds, once),
when the queue starts (``warm_up``). The pool runs submissions first come, first served; each result is
recorded by ``Store.finish`` (one transaction, only while the row is still queued). A grader failure (the
``{"error": ...}`` result, or a worker process that died) marks the submission failed: not the student's
doing, it costs them nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from datetime import datetime

from grader.contest.store import Store

log = logging.getLogger("grader.contest")


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
    ):
        from grader.options import limits as default_limits

        self.store = store
        self.clock = clock
        self.workers = workers
        self.limits = limits or default_limits()
        self.on_done = on_done
        self.options = options  # a student's extra arguments to grade_one: a paper's seed and rules
        self._executor = executor
        self._own = executor is None
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Start the pool and queue every submission left queued, oldest first."""
        from grader.batch.run import _context

        if self._own:
            from grader.batch.run import warm_up

            self._executor = ProcessPoolExecutor(self.workers, mp_context=_context())
            # Each worker's fork server starts now, while the room logs in, not on its first submission.
            for _ in range(self.workers):
                self._executor.submit(warm_up, self.limits)
        for row in self.store.queued():
            self.enqueue(row.id)

    def enqueue(self, sid: int) -> None:
        """Grade submission ``sid`` (committed as queued) after those queued before it."""
        from grader.batch.run import grade_one

        row = self.store.get(sid)
        if row is None or row.path is None or self._executor is None:
            return
        with self._lock:
            if self._closed or sid in self._pending:
                return
            path = str(self.store.folder.resolve() / row.path)  # a Dask worker may run in another folder
            future = self._executor.submit(grade_one, path, [row.task], self.limits, None, **self.options(row.student))
            self._pending[sid] = future
        future.add_done_callback(functools.partial(self._record, sid))

    def _record(self, sid: int, future: Future) -> None:
        with self._lock:
            self._pending.pop(sid, None)
        if future.cancelled():
            return  # closing: it stays queued for the next start
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - a worker process that died (memory, signal)
            if self._closed:
                return
            result = {"error": f"the grading process died: {type(e).__name__}: {e}"}
        try:
            if self.store.finish(sid, self.clock(), result):
                log.info("submission %d: %s", sid, "failed" if result.get("error") else "graded")
        except Exception:  # noqa: BLE001 - the store closed under us (shutdown): it stays queued
            log.exception("submission %d: could not record its result", sid)
            return
        self.on_done(sid)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self) -> None:
        """Stop: drop what has not started, end the workers and the fork server. Submissions not recorded
        stay queued in the store and are graded at the next start."""
        from grader.batch.run import _stop_forkserver, _stop_workers

        with self._lock:
            self._closed = True
        if self._own and self._executor is not None:
            _stop_workers(self._executor)
            self._executor.shutdown(wait=True, cancel_futures=True)
            _stop_forkserver()
        elif self._executor is not None:  # a Dask client's: cancel what it has not graded; the client is the caller's
            self._executor.shutdown(wait=False)
