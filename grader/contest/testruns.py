"""Test runs (CMS's user tests): a student runs their own files on an input of their own, a short script
that drives them, in the grading's sandbox and within its limits, and reads what it printed. Never scored.

Counted apart: a test run is a row of the store's ``test_runs`` table, never a submission, so no score, cap,
board, export or "submissions left" reads it. Each student may make ``Task.test_runs`` of them per task
(contest.toml; 20 by default, 0: none), and have one waiting at a time.

Run apart too: one process of its own (``TestRunQueue``, started on the first test run), one test run at a time,
first come first served, each within one call's time (``Limits.call_seconds``, 20 s by default) whatever the
task; a metric task's (lmbudget's) is capped to it as well. So a test run never takes a grading lane's worker, and
graded submissions never wait for one.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.batch.run import pool_context, stop_workers, test_run_one
from grader.contest.config import Task
from grader.contest.reaper import PIDFILE, die_with_server
from grader.contest.store import FAILED_RUN, QUEUED, Store
from grader.contest.uploads import UploadError
from grader.milestones import STUDENT_MODULES
from grader.sandbox.testrun import SCRIPT

log = logging.getLogger("grader.contest")

MAX_SCRIPT_BYTES = 64 << 10  # a driver of a few lines; the student's files have the upload's own bounds
STUDENT_FILES = frozenset(f"{module}.py" for module in STUDENT_MODULES)


def used(task: str, runs: list[dict[str, Any]]) -> int:
    """The test runs of ``task`` among ``runs`` that count against its limit: not those the grader failed (its
    process died): the page tells the student that such a run costs nothing."""
    return sum(1 for r in runs if r["task"] == task and r.get("verdict") != FAILED_RUN)


def refusal(task: Task, runs: list[dict[str, Any]]) -> tuple[int, str] | None:
    """Why a student with test runs ``runs`` (every task's, as stored) may not make another to ``task``: (HTTP
    status, reason); None if they may."""
    if task.test_runs == 0:
        return 403, f"test runs are off for {task.id} in this contest"
    if any(r["status"] == QUEUED for r in runs):
        return 409, "your previous test run has not finished yet: wait for its output, then send the next"
    if used(task.id, runs) >= task.test_runs:
        return 429, f"you have used your {task.test_runs} test runs of {task.id}"
    return None


def check_files(files: list[tuple[str, bytes]], script: bytes) -> dict[str, bytes]:
    """The files of a test run, by name: the student's exercise files (any exercise's: a script for m2 may use
    their m1) and their ``script``, as ``SCRIPT``. UploadError with the reason otherwise."""
    if not script.strip():
        raise UploadError("no script: write the few lines that run your code on your input")
    if len(script) > MAX_SCRIPT_BYTES:
        raise UploadError(f"the script is over {MAX_SCRIPT_BYTES >> 10} KB: a test run's input is a short driver")
    kept: dict[str, bytes] = {}
    for name, data in [(n, d) for n, d in files if n]:
        if name not in STUDENT_FILES:
            raise UploadError(f"{name!r} is not an exercise file: a test run takes your .py files and a script")
        if name in kept:
            raise UploadError(f"{name} is uploaded twice")
        kept[name] = data
    for name, data in {**kept, SCRIPT: script}.items():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise UploadError(f"{'the script' if name == SCRIPT else name} is not UTF-8 text") from None
    return {**kept, SCRIPT: script}


def write(files: dict[str, bytes], folder: Path) -> None:
    """Write a test run's checked ``files`` into its new ``folder`` (never through a link)."""
    for name, data in files.items():
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with open(fd, "wb") as f:
            f.write(data)


class TestRunQueue:
    """Runs the store's queued test runs, one at a time, in a process of its own made on the first one (a contest
    without test runs pays nothing); a process that dies fails the test run it held (at no cost: the student may
    send it again) and is replaced."""

    __test__ = False  # pytest: not a test class

    def __init__(self, store: Store, clock: Callable[[], datetime], limits: Any):
        self.store, self.clock, self.limits = store, clock, limits
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Run what a stopped server left queued."""
        self._closed = False
        for rid in self.store.queued_test_runs():
            self.enqueue(rid)

    def _new_pool(self) -> ProcessPoolExecutor:
        pidfile = str(self.store.folder.resolve() / PIDFILE)  # ended with the server, as the grading's: reaper.py
        return ProcessPoolExecutor(
            1, mp_context=pool_context(), initializer=die_with_server, initargs=(pidfile, os.getpid())
        )

    def enqueue(self, rid: int) -> None:
        folder = str(self.store.test_run_folder(rid).resolve())
        with self._lock:
            if self._closed:
                return  # stays queued: run at the next start
            if self._pool is None:
                self._pool = self._new_pool()
            pool = self._pool
            future = pool.submit(test_run_one, folder, self.limits)
        future.add_done_callback(functools.partial(self._record, rid, pool))

    def _record(self, rid: int, pool: ProcessPoolExecutor, future: Future) -> None:
        if future.cancelled() or self._closed:
            return  # closing: it stays queued for the next start
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - the process died (memory, a signal): this run fails, the next runs
            result = {"error": f"the test run's process died ({type(e).__name__}): send it again"}
            if isinstance(e, BrokenProcessPool):
                with self._lock:
                    if self._pool is pool:
                        self._pool = None
                threading.Thread(target=stop_workers, args=(pool,), daemon=True).start()
        try:
            self.store.finish_test_run(rid, self.clock(), result)
        except Exception:  # noqa: BLE001 - the store closed under us (shutdown): it stays queued
            log.exception("test run %d: could not record its result", rid)

    def close(self) -> None:
        """Stop: what has not run stays queued in the store."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            stop_workers(pool)
            pool.shutdown(wait=True, cancel_futures=True)
