"""Grade many submissions in parallel: one process per worker slot, each with its Grader (grader/grading.py).

The parent only schedules and writes the gradebook (the single writer); each
result is committed as soon as it arrives, so nothing graded is ever lost.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

from grader import __version__
from grader.fingerprint import grader_fingerprint
from grader.grading import Request, process_grader, shared_server
from grader.milestones import MILESTONES, preloads
from grader.sandbox.client import Limits
from grader.variants import Variant

from .discover import FoundSubmission, unpacked
from .discover import snapshot as discover_snapshot
from .gradebook import Gradebook

_one_at_a_time = threading.Lock()  # pytest and the fork server serve one grading at a time per process


SNAPSHOT_DIGEST = "snapshot_digest"  # grade_one's result: the digest of the files it graded (``snapshot``)


def grade_one(
    path: str,
    milestones: list[str],
    limits: Limits,
    server: str | None = None,
    seed: int | None = None,
    rules: dict[str, frozenset[str]] | None = None,
    snapshot: bool = False,
) -> dict:
    """In a worker process: grade one submission; an error that is not the student's becomes {"error": ...}.

    What the submission's own files or replies do to the grading side (a reply too large, a copy past its cap,
    a tree too deep to delete, a grading past ``limits.submission_seconds``) is never such an error: each is
    one of its checks, failed and counted, with its cause (grader/sandbox/client.py).

    ``server``: the address of the batch's fork server, of which this process's Grader takes a copy; ``seed``
    and ``rules``: the student's variant and the paper's rules (a contest run on a paper). ``snapshot``: grade a
    copy of the files taken once, here, and give its digest (``SNAPSHOT_DIGEST``): a batch's class folder may
    change while it grades, and its gradebook must record the files graded (discover.snapshot).
    """
    with _one_at_a_time:
        try:
            grader = process_grader(limits, server)
            taken = discover_snapshot(Path(path)) if snapshot else contextlib.nullcontext((Path(path), None))
            with taken as (copy, digest), unpacked(copy) as inner:
                name = None if Path(path).suffix == ".zip" else path  # a zip's, as before: where it was unpacked
                request = Request(inner, tuple(milestones), variant=Variant(seed), rules=rules, name=name)
                result = grader.grade(request, limits).to_json()
            return {**result, SNAPSHOT_DIGEST: digest} if digest else result
        except Exception as e:  # noqa: BLE001 - recorded as this submission's error; the batch goes on
            return {"error": f"{type(e).__name__}: {e}"}


def test_run_one(folder: str, limits: Limits) -> dict:
    """In a worker process: a contest's test run of ``folder`` (grader/sandbox/testrun.py); the grader's own
    failure becomes {"error": ...}, as grade_one's."""
    with _one_at_a_time:
        try:
            return process_grader(limits).test_run(Path(folder), limits)
        except Exception as e:  # noqa: BLE001 - recorded as this test run's failure, not the student's
            return {"error": f"{type(e).__name__}: {e}"}


def warm_up(limits: Limits, wait: bool = False) -> None:
    """In a worker process: start its Grader's fork server now, so that the first submission it gets does not
    wait for it (the contest server calls this once per worker when it starts); ``wait``: return once it is ready
    (a benchmark's measure of a grading then leaves the server's start out)."""
    with _one_at_a_time:
        grader = process_grader(limits)
        grader.warm_up()
        if wait:
            grader.ready()


def pool_context(milestones: Iterable[str] = MILESTONES) -> multiprocessing.context.BaseContext:
    """The start method of a pool of grading processes (the batch's, the contest server's: grader/contest/
    grading.py): worker processes forked from one that has loaded torch and the grader once (2 s and more each),
    where there is a fork server; else spawned. What ``milestones`` need loaded (``Milestone.preload``) is loaded
    there too, for a cold cache's reference run; a batch of milestones that need none skips it (1.7 CPU s)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver, resource_tracker  # here: not on every platform (Windows has none)

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["grader.runner", "grader.suites.fixtures", *preloads(milestones), "hypothesis"])
    resource_tracker.ensure_running()  # the fork server's start starts it too, unblocking Ctrl-C: first, then
    _ignoring_interrupts(forkserver.ensure_running)
    return context


def _ignoring_interrupts(start: Callable[[], None]) -> None:
    """Start a process (Python's fork server) that ignores Ctrl-C, as do the workers it forks: Ctrl-C, which a
    terminal sends to every process of the batch, is the parent's alone to handle (it stops the workers and
    says what was saved), and a worker that took it too would print its own KeyboardInterrupt traceback.

    Ctrl-C is blocked in this thread while it starts: a child inherits the blocked mask (exec included), the
    fork server then ignores it, and its workers keep the mask. The batch itself must not lose a Ctrl-C
    pressed meanwhile (it would then grade everything): another thread may take the signal, so it is caught,
    not ignored, and raised once the start is over."""
    if threading.current_thread() is not threading.main_thread():
        start()  # only the main thread may set handlers; a server's pool started elsewhere keeps Python's default
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: pressed.append(number))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one pending here reaches the catcher
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def ignore_interrupts() -> None:
    """In a worker process (the pool's initializer, for a start method other than the fork server's): leave
    Ctrl-C to the parent (see _ignoring_interrupts)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ctrl-C inside takes effect once the block is done. While the pool starts its workers (its submit does): a
    worker half started when it came would be known to no one, and, ignoring Ctrl-C, would outlive the batch.
    While a result is saved and counted: the count the batch prints is what it saved."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)  # Python's own handler: raises KeyboardInterrupt


def stop_forkserver() -> None:
    """End Python's fork server of ``pool_context`` now and wait for it (Python leaves it to exit on its own,
    unwaited), so that nothing outlives the pool (a batch, a contest server) and its CPU time, and its
    children's, counts as the pool's owner's."""
    from multiprocessing import forkserver  # here: not on every platform (Windows has none)

    stop = getattr(forkserver._forkserver, "_stop", None)  # private, but present from 3.8 to 3.14
    if stop:
        stop()


def stop_workers(executor: Executor) -> None:
    """Ctrl-C, or a pool's close: drop the queued submissions and end the worker processes of ``executor`` (a
    ``ProcessPoolExecutor``) now (their results are not saved)."""
    # Private, and taken first: shutdown forgets them. The workers ignore Ctrl-C, so they must be ended here
    # (3.14 has terminate_workers).
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()


class Outcome(NamedTuple):
    """What ``grade_all`` did."""

    graded: int  # submissions graded now
    skipped: int  # current already (of the submissions; the entries with nothing to grade are apart)
    narrowed: dict[str, str]  # student: why their grade covers fewer milestones than before ("files", "grader")
    empty: list[FoundSubmission]  # the students' folders that held nothing to grade, each recorded as such


def grade_all(
    found: list[FoundSubmission],
    book: Gradebook,
    milestones: list[str],
    limits: Limits,
    workers: int,
    regrade: bool = False,
    executor: Executor | None = None,
    progress: Callable[[FoundSubmission, dict], None] = lambda f, r: None,
    fingerprint: str | None = None,
    planned: Callable[[int, int], None] = lambda todo, skipped: None,
) -> Outcome:
    """Grade what is not already current in ``book``.

    ``planned(todo, skipped)`` is called once, before any grading: how many will be graded and how many are
    current already (a resumed batch's progress counts what is left). ``progress`` after each one is saved.
    On KeyboardInterrupt, what was saved stays saved; the workers are stopped without waiting for them.

    Current: graded from the same files, on these milestones (and maybe more), by grading code with the same
    fingerprint (``fingerprint``, default this grader's: grader.fingerprint), so a changed suite regrades
    everything. On a cluster, the workers must run the same code as this process.

    A student graded on some milestones keeps their other milestones' results where their files and the
    grader are the same (Gradebook.record's ``keep_others``); where not, ``Outcome.narrowed`` names them.
    An entry with a ``problem`` (nothing to grade) is recorded as such after the others, 0 points of theirs.
    """
    fingerprint = fingerprint or grader_fingerprint()
    empty = [f for f in found if f.problem is not None]
    found = [f for f in found if f.problem is None]
    digests = {f.student: f.digest() for f in found}
    todo = [f for f in found if regrade or not book.is_current(f.student, digests[f.student], fingerprint, milestones)]
    for f in set(found) - set(todo):  # not graded again, but found where they are now: their time comes from there
        book.found_at(f.student, f.time_from)
    planned(len(todo), len(found) - len(todo))
    narrowed: dict[str, str] = {}
    own = executor is None
    # Nothing to grade, or a cluster's executor: no fork server to start (and wait for, as it preloads torch).
    context = pool_context(milestones) if own and todo else None
    executor = executor or ProcessPoolExecutor(workers, mp_context=context, initializer=ignore_interrupts)
    # One fork server for this machine's grading processes; a cluster's processes each start their own.
    server = shared_server(limits, min(workers, len(todo))) if own and todo else None
    try:
        with _interrupts_deferred() if own else contextlib.nullcontext():
            futures = {
                executor.submit(
                    grade_one, str(f.path), milestones, limits, server.address if server else None, snapshot=True
                ): f
                for f in todo
            }
        for future in as_completed(futures):
            f = futures[future]
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 - a worker process that died (memory, signal)
                result = {"error": f"the grading process died: {type(e).__name__}: {e}"}
            error = result.get("error")
            # the digest of the files graded, where the grading took its own copy: they may not be those found
            digest = result.pop(SNAPSHOT_DIGEST, None) or digests[f.student]
            if not error and (why := book.not_kept(f.student, digest, fingerprint, milestones)):
                narrowed[f.student] = why
            # Ctrl-C between the commit and its count would leave a result saved but not counted as saved.
            with _interrupts_deferred():
                book.record(
                    f.student,
                    str(f.path),
                    digest,
                    __version__,
                    milestones,
                    None if error else result,
                    error,
                    fingerprint=fingerprint,
                    keep_others=True,
                    time_from=f.time_from,
                )
                progress(f, result)
    except KeyboardInterrupt:
        if own:
            stop_workers(executor)
        raise
    finally:
        if own:
            executor.shutdown(cancel_futures=True)
            stop_forkserver()
        if server:
            server.close()
    for f in empty:
        assert f.problem is not None
        book.record_empty(
            f.student,
            str(f.path),
            f.digest(),
            __version__,
            milestones,
            f.problem,
            fingerprint=fingerprint,
            time_from=f.time_from,
        )
    return Outcome(len(todo), len(found) - len(todo), narrowed, empty)
