"""The contest's grading queue: submissions graded fairly between students, each on its task's milestone only,
by the same sandboxed path as ``grade batch`` (``grader.batch.run.grade_one`` in a pool of worker processes).

Two lanes. A metric task's submission (lmbudget: a training run of up to a few minutes) is graded in the
*metric* lane, every other one in the *quick* lane, each with its own capacity: the quick lane's ``workers``
processes, the metric lane's ``metric_workers`` (by default half as many, at least one; 0: no metric lane, every
task shares the quick lane's workers, as before lanes). So two students' training runs never hold the workers
a one-second m1 grading waits for: even with ``workers = 1`` the metric lane has a process of its own, at a lower
CPU weight (``METRIC_NICE``), so that the quick lane may have a process for every core. On an
executor not the queue's own (a Dask cluster), the lanes share its ``slots`` (its threads): the metric lane
gets ``metric_workers`` of them (by default half), never all while there are two, the quick lane the rest.
``lane_slots`` decides the sizes, ``lane_of`` which lane a task is graded in.

One lane on a cluster, the other here (``Remote.lanes``, ``grade contest serve --scheduler-lanes metric``): the
lane sent to the executor gets the cluster's threads as its slots, the other keeps a pool of its own processes,
healed as ever (``lane_plan``). A cluster that fails (its scheduler gone) fails only the submissions of the lane
it grades, as any grader failure: the coach grades them again once it is back; the local lane never notices.

Fair, not first come first served, within each lane: one student's five uploads of a training run that sleeps
out its budget must not hold the only worker for half an hour ahead of everyone else. The queue keeps the
waiting submissions itself and hands each lane's executor only as many as the lane has ``slots``; each time
one frees, the next is the lane's oldest waiting submission of the student who, in order: has not used more
than ``share_seconds`` of the lane's grading in the last ``share_window`` seconds; has the fewest submissions
being graded in it; was served by it least recently.

Unlike a batch, the server cannot know how many processes will grade at once, and a shared fork server waits
for all its clients before it serves any: so each worker process starts its own (a few CPU seconds, once),
when the queue starts (``warm_up``). Each result is recorded by ``Store.finish`` (one transaction, only while
the row is still queued). A grader failure (the ``{"error": ...}`` result) marks the submission failed: not
the student's doing, it costs them nothing. What the submission itself caused is never one: a reply too large
to read, a copy past its cap, a tree too deep to delete, a grading past its time are its own failed checks,
with their cause (``grader.sandbox.client``: ``ReplyTooLarge``, ``remove_tree``; ``Limits.submission_seconds``).

Grading heals itself, lane by lane. A grading process that dies (the machine's out-of-memory killer, a stray
``kill``) breaks its lane's whole pool: every submission it held fails at once, and every later one could not
even be handed out. The queue then replaces that pool with a new one (the other lane's goes on) and grades
those submissions again, each up to ``RETRIES`` times (a submission that kills its grading process every time
is then failed, at no cost to its student); an upload never meets the broken pool.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import math
import os
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from grader.batch.run import grade_one, pool_context, stop_forkserver, stop_workers, warm_up
from grader.contest.metric import is_metric
from grader.contest.reaper import PIDFILE, die_with_server
from grader.contest.store import QUEUED, Store
from grader.contest.supervise import process_age
from grader.options import limits as default_limits
from grader.sandbox.client import GRADING_MEMORY_BYTES, sweep_scratch
from grader.sandbox.common.agreement import CGROUP_SLACK_BYTES

log = logging.getLogger("grader.contest")

SHARE_WINDOW = 600.0  # seconds: the recent past in which a student's grading time is counted
SHARE_SECONDS = 300.0  # a student who used more than this of it waits behind everyone who did not
EXTERNAL_SLOTS = 16  # submissions handed at once to an executor not the queue's own (a Dask cluster's), by default
RETRIES = 2  # times a submission is graded again after its grading process died under it
WARM_SECONDS = 120.0  # at most this long a start waits for its grading processes' warm-up before handing out
WATCH_SECONDS = 1.0  # how often the queue looks for a pool broken while it held nothing (a worker killed idle)
REPLACED = "pools replaced: "  # the store's setting of a lane's replaced pools, + the lane: kept across restarts
# The metric lane's niceness, added to the server's: the quick gradings get the CPU first. Its score is measured
# in CPU seconds, so a lower weight never changes it; what it stretches is the run's wall time, and the task's wall
# limit is 6x its CPU budget (grader/lmbudget/task.toml). At +2 (a weight of 1024 / 1.25 ** 2) a run keeps 39 % of a
# core beside one busy process and 24 % beside two (a quick grading and the server): an honest run ends in time
# even while a whole class floods the quick lane. At +5 it would keep 14 % beside two, past the limit. A weight
# shares cores, not caches: on two cores a training run still slows a burst's gradings (docs/performance.md
# measures it, and even a SCHED_IDLE run does the same).
METRIC_NICE = 2
QUICK, METRIC = "quick", "metric"  # the lanes: every task but the metric ones; the metric tasks (lmbudget)
LANES = (QUICK, METRIC)
LOCAL = "local processes"  # where a lane of the queue's own pool grades, as the coach's health panel says it

# Set by ``warming_in_background``: a queue started within starts its pools in a thread (``GradingQueue.start``).
_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("grading_in_background", default=False)


@contextlib.contextmanager
def warming_in_background() -> Iterator[None]:
    """Within, ``GradingQueue.start`` returns at once and its pools start in a thread: the server answers HTTP
    first (web/app.py's lifespan). Elsewhere (a script, the tests) ``start`` returns with the pools made."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


@dataclass(frozen=True)
class Remote:
    """Which lanes an executor not the queue's own (a Dask client's) grades, and what the coach is told of it."""

    lanes: frozenset[str] = frozenset(LANES)  # the others keep a pool of the queue's own processes
    where: str = "an executor not the server's own"  # "the Dask cluster at tcp://10.0.0.2:8786"
    threads: Callable[[], int | None] = lambda: None  # its threads alive now; None: not known (its slots shown)


def default_workers(memory_bytes: int, cores: int | None = None, machine_bytes: int | None = None) -> int:
    """The quick lane's processes when the coach names none: one per core this server may use (``cores``), but
    no more than the machine's memory (``machine_bytes``) holds with every grading process at its limits: its
    worker's ``memory_bytes`` and cgroup slack, and its own cap, the metric lane's processes (half as many)
    counted too. A burst of uploads that each take all the memory they may then cannot run the machine out of it,
    whoever sent them: each costs its own grading alone."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if machine_bytes is None:
        machine_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    process = memory_bytes + CGROUP_SLACK_BYTES + GRADING_MEMORY_BYTES
    held = int(machine_bytes // (process * 1.5))  # ``workers`` quick processes and half as many metric ones
    return max(1, min(cores, held))


def default_metric_workers(workers: int) -> int:
    """The metric lane's size when the coach names none: half the quick lane's, at least one."""
    return max(1, workers // 2)


def lane_slots(workers: int, metric_workers: int | None = None, external: int | None = None) -> dict[str, int]:
    """The submissions each lane grades at once: ``{QUICK: n}``, and ``METRIC: m`` unless ``metric_workers`` is 0
    (no metric lane). With the queue's own processes (``external`` None) each lane has its own: ``workers`` and
    ``metric_workers`` (None: ``default_metric_workers``). On an executor of ``external`` slots (a cluster's
    threads), the lanes share them: the metric lane gets ``metric_workers`` (None: half) but leaves the quick
    lane one at least; a cluster of one thread cannot keep them apart, and each lane gets that one."""
    if external is None:
        metric = default_metric_workers(workers) if metric_workers is None else metric_workers
        return {QUICK: workers, METRIC: metric} if metric > 0 else {QUICK: workers}
    if metric_workers == 0:
        return {QUICK: external}
    if external < 2:
        return {QUICK: 1, METRIC: 1}
    metric = min(default_metric_workers(external) if metric_workers is None else metric_workers, external - 1)
    return {QUICK: external - metric, METRIC: metric}


def queue_slots(workers: int, metric_workers: int | None, external: bool, slots: int | None) -> dict[str, int]:
    """The submissions a queue hands each lane's executor at once: as many as it grades at once, so that the choice
    of the next one stays here, where it is fair, not in the executor's first-come queue. ``slots``: the quick
    lane's (its own processes), or the executor's in all (``external``: a cluster's threads; by default
    ``EXTERNAL_SLOTS``, at least ``workers``)."""
    if external:
        return lane_slots(workers, metric_workers, slots or max(workers, EXTERNAL_SLOTS))
    return {**lane_slots(workers, metric_workers), **({QUICK: slots} if slots else {})}


def lane_plan(
    workers: int, metric_workers: int | None, slots: int | None, remote: Collection[str]
) -> dict[str, tuple[int, int]]:
    """Each lane's (processes of the queue's own, submissions handed at once), ``remote`` the lanes graded on an
    executor not the queue's own (none: every lane local, ``lane_slots``; all of them: they share its ``slots``,
    ``queue_slots``). Split, the local lane keeps its own processes and the remote one gets the executor's
    slots (a cluster's threads; ``EXTERNAL_SLOTS`` by default): the metric lane at most ``metric_workers`` of
    them, as the coach may cap it."""
    local = lane_slots(workers, metric_workers)
    if not remote:  # ``slots``: the quick lane's, if not its processes
        return {name: (local[name], n) for name, n in queue_slots(workers, metric_workers, False, slots).items()}
    if not set(remote) & set(local):  # the lane sent away does not exist here: ``slots`` are the executor's
        return {name: (n, n) for name, n in local.items()}
    if set(remote) >= set(local):
        return {name: (0, n) for name, n in queue_slots(workers, metric_workers, True, slots).items()}
    threads = slots or max(workers, EXTERNAL_SLOTS)
    capped = {METRIC: min(threads, metric_workers or threads)}
    return {name: (0, capped.get(name, threads)) if name in remote else (n, n) for name, n in local.items()}


def lane_of(task: str, lanes: Collection[str]) -> str:
    """The lane ``task``'s submissions are graded in, of ``lanes``: a metric task's own, where there is one."""
    return METRIC if is_metric(task) and METRIC in lanes else QUICK


@dataclass
class Lane:
    """One lane's executor and queue: what waits, what is being graded, and each student's use of it."""

    name: str
    workers: int  # processes of its own pool (with an executor not the queue's own: 0)
    slots: int  # submissions handed to its executor at once
    own: bool = True  # graded by a pool of the queue's own, which it heals; else by the queue's Remote executor
    nice: int = 0  # its own processes' niceness, added to the server's (the metric lane's: METRIC_NICE)
    executor: Executor | None = None
    waiting: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # sid -> (student, path, task), in order
    running: dict[int, tuple[str, float]] = field(default_factory=dict)  # sid -> (student, when handed out)
    served: dict[str, float] = field(default_factory=dict)  # student -> when their latest was handed out
    ended: dict[str, deque[tuple[float, float]]] = field(default_factory=lambda: defaultdict(deque))  # (at, seconds)
    pending: dict[int, Future] = field(default_factory=dict)
    handed: dict[int, tuple[str, str, str, Executor]] = field(default_factory=dict)  # sid -> (..., its pool)
    replaced: int = 0  # pools replaced after a grading process died (the coach's page shows it)

    def used(self, student: str, now: float, window: float) -> float:
        """The seconds of this lane's grading ``student``'s submissions took in the last ``window``, those being
        graded included."""
        ended = self.ended[student]
        while ended and now - ended[0][0] > window:
            ended.popleft()
        running = sum(now - started for who, started in self.running.values() if who == student)
        return sum(seconds for _, seconds in ended) + running

    def next(self, now: float, share_seconds: float, window: float) -> int | None:
        """The submission to grade next: each student's oldest waiting one, the student chosen by (over their
        share, submissions being graded, last served), oldest first on a tie."""
        oldest: dict[str, int] = {}
        for sid, (student, _, _) in self.waiting.items():
            oldest.setdefault(student, sid)
        if not oldest:
            return None

        def turn(student: str) -> tuple:
            busy = sum(1 for who, _ in self.running.values() if who == student)
            over = self.used(student, now, window) > share_seconds
            return (over, busy, self.served.get(student, -math.inf), oldest[student])

        return oldest[min(oldest, key=turn)]


class GradingQueue:
    """``workers`` processes grading the quick tasks' queued submissions of ``store``, and ``metric_workers`` the
    metric tasks' (see ``lane_slots``); ``executor`` instead, for the lanes of ``remote`` (by default every
    lane: ``lane_plan``). ``start`` re-queues what a previous server left queued; ``close`` stops the pools
    (what is still queued stays queued for the next start)."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime],
        workers: int = 1,
        limits=None,
        executor: Executor | None = None,
        on_done: Callable[[int], None] = lambda sid: None,
        options: Callable[[str, str], dict] = lambda student, task: {},
        slots: int | None = None,
        share_seconds: float = SHARE_SECONDS,
        share_window: float = SHARE_WINDOW,
        timer: Callable[[], float] = time.monotonic,
        metric_workers: int | None = None,
        watch_seconds: float = WATCH_SECONDS,
        remote: Remote | None = None,
        metric_nice: int = METRIC_NICE,
    ):
        self.store = store
        self.clock = clock
        self.limits = limits or default_limits()
        self.on_done = on_done
        self.options = options  # a student's extra arguments to grade_one for a task: a paper's seed and rules
        self._external = executor
        self.remote = (remote or Remote()) if executor is not None else None
        plan = lane_plan(workers, metric_workers, slots, self.remote.lanes if self.remote else ())
        self.lanes = {
            name: Lane(
                name,
                processes,
                n,
                own=self.remote is None or name not in self.remote.lanes,
                nice=metric_nice if name == METRIC else 0,
            )
            for name, (processes, n) in plan.items()
        }
        for lane in self.lanes.values():  # a restarted server goes on counting: the coach's page never drops to 0
            lane.replaced = int(store.setting(f"{REPLACED}{lane.name}") or 0)
        self.watch_seconds = watch_seconds
        self._stopped = threading.Event()
        self.share_seconds = share_seconds
        self.share_window = share_window
        self.timer = timer
        self._retries: dict[int, int] = defaultdict(int)  # sid -> times graded again after its process died
        self._lock = threading.Lock()
        self._closed = False
        self._warming: threading.Thread | None = None  # the pools starting in the background (``start``)
        self._ready = threading.Event()  # set once the queue's own pools exist
        self._warm_ups: list[Future] = []  # the start's pools' warm-up tasks (``_new_pool``)

    @property
    def replaced(self) -> int:
        """Pools replaced after a grading process died, every lane's."""
        return sum(lane.replaced for lane in self.lanes.values())

    def _owns_any(self) -> bool:
        return any(lane.own for lane in self.lanes.values())

    def start(self) -> None:
        """Start the pools and queue every submission left queued, oldest first.

        Within ``warming_in_background`` (the server's lifespan) it returns at once and the pools start in a
        thread of their own: their processes wait for Python's fork server to load torch and the grader, seconds
        the server would otherwise spend not answering anyone. An upload accepted meanwhile is committed as
        queued and waits in the store (``enqueue`` leaves it there while its lane has no pool); the thread queues
        it with those a previous server left once the pools exist, so nothing is refused or lost."""
        for lane in self.lanes.values():
            if not lane.own:
                lane.executor = self._external
        if not self._owns_any():
            self._queue_left()
            return
        if _BACKGROUND.get():  # `grade contest serve` has started Python's fork server already, in its main thread
            self._warming = threading.Thread(target=self._warm, name="grading-warm-up", daemon=True)
            self._warming.start()
        else:
            self._warm()

    def _warm(self) -> None:
        """Make each lane of the queue's own its pool and watch the pools; in the background (``start``), wait
        for every grading process to have begun its warm-up (its sandbox's own fork server, which its first
        grading waits for) and say when; then queue what waits in the store."""
        try:
            for lane in self.lanes.values():
                if lane.own:
                    pool = self._new_pool(lane.workers, lane.nice)
                    with self._lock:  # ``close`` waits for this: it ends these pools with the others
                        lane.executor = pool
        finally:  # even failed: ``close`` must not wait for ever
            self._ready.set()
        threading.Thread(target=self._watch, name="grading-watch", daemon=True).start()
        if self._warming is not None:  # the server's start: its timestamps (benchmarks/contest_start.py reads them)
            # What waits in the store is handed out once each process has begun its warm-up, not queued behind it
            # from the start: so queued, the first verdict came later (1.7 s, with 12 busy loops on 2 cores).
            wait(self._warm_ups, timeout=WARM_SECONDS)
            if not self._closed:
                log.info("start: grading processes up after %.2f s", process_age())
        self._queue_left()

    def _queue_left(self) -> None:
        for row in self.store.queued():
            self.enqueue(row.id)

    def _watch(self) -> None:
        """Replace a lane's pool as soon as one of its processes dies, not when the next upload meets it broken:
        a pool that held nothing when its worker was killed has no submission to report it (health
        read "alive 0 of 2" until the next upload)."""
        while not self._stopped.wait(self.watch_seconds):
            for lane in self.lanes.values():
                executor = lane.executor
                if executor is None or not getattr(executor, "_broken", False):  # private, as stop_workers reads it
                    continue
                with self._lock:
                    self._heal(lane, executor)
                self._dispatch(lane)

    def _new_pool(self, workers: int, nice: int = 0) -> ProcessPoolExecutor:
        """A pool of ``workers`` grading processes, ``nice`` added to their niceness (their sandboxes inherit it),
        started now (this waits for the fork server to be ready); at the start, their warm-ups are kept in
        ``_warm_ups`` for ``_warm`` to wait on."""
        pidfile = str(self.store.folder.resolve() / PIDFILE)
        pool = ProcessPoolExecutor(
            workers, mp_context=pool_context(), initializer=grading_process, initargs=(pidfile, os.getpid(), nice)
        )
        # Each worker's fork server starts now, while the room logs in, not on its first submission.
        started = [pool.submit(warm_up, self.limits) for _ in range(workers)]
        if not self._ready.is_set():
            self._warm_ups.extend(started)
        return pool

    def _heal(self, lane: Lane, broken: Executor) -> None:
        """Replace ``broken``, the pool of ``lane`` a grading process died in, once (called with the lock held):
        the submissions it held come back through _record, each graded again."""
        if not lane.own or self._closed or lane.executor is not broken:
            return  # not ours to replace, or replaced already by another of its failed submissions
        log.warning("a grading process of the %s lane died: starting a new pool of %d", lane.name, lane.workers)
        lane.executor = self._new_pool(lane.workers, lane.nice)
        lane.replaced += 1
        held = len([sid for sid, handed in lane.handed.items() if handed[3] is broken])
        try:  # the coach's event list says it, and the count outlives the server
            self.store.set_setting(f"{REPLACED}{lane.name}", str(lane.replaced))
            self.store.event(
                self.clock(),
                None,
                "worker died",
                f"a grading process of the {lane.name} lane died: its pool replaced at once "
                f"({lane.replaced} in all), {held} submission(s) it held graded again",
            )
        except Exception:  # noqa: BLE001 - the store closed under us (shutdown): the pool is replaced all the same
            log.exception("the replaced pool could not be recorded")
        threading.Thread(target=_end, args=(broken,), daemon=True).start()

    def enqueue(self, sid: int) -> None:
        """Queue submission ``sid`` (committed as queued) for grading, in its lane and its student's turn."""
        row = self.store.get(sid)
        if row is None or row.path is None or row.status != QUEUED:  # graded already: found again by _queue_left
            return
        lane = self.lanes[lane_of(row.task, self.lanes)]
        if lane.executor is None:
            return
        path = str(self.store.folder.resolve() / row.path)  # a Dask worker may run in another folder
        with self._lock:
            if self._closed or any(sid in other.waiting or sid in other.pending for other in self.lanes.values()):
                return
            lane.waiting[sid] = (row.student, path, row.task)
        self._dispatch(lane)

    def _dispatch(self, lane: Lane) -> None:
        """Hand ``lane``'s executor the lane's next submissions while it has free slots."""
        refused: list[tuple[int, str, str, Exception]] = []
        try:
            self._hand_out(lane, refused)
        finally:  # outside the lock: each written as failed, as a grading that failed
            for sid, student, task, error in refused:
                self._write(sid, student, task, {"error": f"{self._lost(lane)}: {type(error).__name__}: {error}"})

    def _lost(self, lane: Lane) -> str:
        where = self.remote.where if self.remote and not lane.own else "its grading pool"
        return f"{where} could not grade it (grade it again once it is back)"

    def _hand_out(self, lane: Lane, refused: list[tuple[int, str, str, Exception]]) -> None:
        while True:
            with self._lock:
                if self._closed or lane.executor is None or len(lane.pending) >= lane.slots:
                    return
                now = self.timer()
                sid = lane.next(now, self.share_seconds, self.share_window)
                if sid is None:
                    return
                student, path, task = lane.waiting.pop(sid)
                executor = lane.executor
                try:
                    future = executor.submit(grade_one, path, [task], self.limits, None, **self.options(student, task))
                except BrokenProcessPool:  # broken before its failed submissions came back: heal it now
                    lane.waiting = {sid: (student, path, task), **lane.waiting}
                    self._heal(lane, executor)
                    if lane.executor is executor:
                        return  # not ours to heal: it stays waiting
                    continue
                except Exception as e:  # noqa: BLE001 - a cluster's client that gave up (its scheduler gone)
                    if lane.own:
                        raise
                    refused.append((sid, student, task, e))  # this lane's, failed: the other lane goes on
                    continue
                lane.running[sid] = (student, now)
                lane.served[student] = now
                lane.pending[sid] = future
                lane.handed[sid] = (student, path, task, executor)
            future.add_done_callback(functools.partial(self._record, lane, sid))

    def _record(self, lane: Lane, sid: int, future: Future) -> None:
        with self._lock:
            lane.pending.pop(sid, None)
            student, path, task, executor = lane.handed.pop(sid, ("", "", "", None))
            _, started = lane.running.pop(sid, ("", 0.0))
            now = self.timer()
            if student:
                lane.ended[student].append((now, now - started))
            lost = future.cancelled() and not lane.own and not self._closed  # Dask cancels what its scheduler lost
            if future.cancelled() and not lost:
                return  # closing: it stays queued for the next start
            died = not lost and isinstance(future.exception(), BrokenProcessPool)
            if died and executor is not None:
                self._heal(lane, executor)
            again = died and lane.own and not self._closed and self._retries[sid] < RETRIES
            if again:
                self._retries[sid] += 1
                lane.waiting = {sid: (student, path, task), **lane.waiting}  # first in its student's turn
        self._dispatch(lane)  # the freed slot goes to the next student's turn before this result is written
        if again:
            return
        if lost:
            self._write(sid, student, task, {"error": f"{self._lost(lane)}: its scheduler lost the connection"})
            return
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - a worker process that died (memory, signal)
            if self._closed:
                return
            tries = f" {self._retries[sid] + 1} times" if self._retries[sid] else ""
            result = {"error": f"the grading process died{tries}: {type(e).__name__}: {e}"}
        self._write(sid, student, task, result)

    def _write(self, sid: int, student: str, task: str, result: dict[str, Any]) -> None:
        """Record ``result`` as submission ``sid``'s (only while it is still queued) and say so."""
        try:
            if self.store.finish(sid, self.clock(), result):
                log.info("%s", grading_line(sid, student, task, result))
        except Exception:  # noqa: BLE001 - the store closed under us (shutdown): it stays queued
            log.exception("submission %d: could not record its result", sid)
            return
        self.on_done(sid)

    def lane_alive(self, lane: Lane, threads: int | None = None) -> int:
        """``lane``'s grading processes alive now; on an executor not the queue's own (a Dask client's): the
        slots its ``threads`` alive now can fill (all of them where the executor cannot say)."""
        if not lane.own:
            return lane.slots if threads is None else min(lane.slots, threads)
        processes = getattr(lane.executor, "_processes", None) or {}  # private, as stop_workers reads it
        return sum(1 for process in list(processes.values()) if process.is_alive())

    def where(self, lane: Lane) -> str:
        """Where ``lane`` grades, for the coach: ``LOCAL``, or the remote executor's name."""
        return LOCAL if lane.own or self.remote is None else self.remote.where

    def lane_health(self) -> dict[str, dict[str, Any]]:
        """Each lane's size (``workers``: its processes; on an executor not the queue's own, its slots), its
        processes ``alive``, the submissions it is grading (``busy``) and those ``waiting`` here for a slot, its
        pools ``replaced``, ``where`` it grades and, on a cluster, its ``threads`` alive now (else None)."""
        with self._lock:
            counts = {name: (len(lane.pending), len(lane.waiting)) for name, lane in self.lanes.items()}
        threads = self.remote.threads() if self.remote else None
        return {
            name: {
                "workers": lane.workers if lane.own else lane.slots,
                "alive": self.lane_alive(lane, threads),
                "busy": counts[name][0],
                "waiting": counts[name][1],
                "replaced": lane.replaced,
                "where": self.where(lane),
                "threads": None if lane.own else threads,
            }
            for name, lane in self.lanes.items()
        }

    def pending(self) -> int:
        """Submissions waiting here or being graded, in every lane."""
        with self._lock:
            return sum(len(lane.pending) + len(lane.waiting) for lane in self.lanes.values())

    def executors(self) -> list[Executor]:
        """The lanes' pools (the tests kill their processes)."""
        return [lane.executor for lane in self.lanes.values() if lane.executor is not None]

    def close(self) -> None:
        """Stop: drop what has not started, end the workers and the fork server. Submissions not recorded
        stay queued in the store and are graded at the next start."""
        self._stopped.set()
        if self._warming is not None:  # pools still starting: they are made in seconds, then ended with the others
            self._ready.wait()
        with self._lock:
            self._closed = True
            for lane in self.lanes.values():
                lane.waiting.clear()  # still queued in the store: graded at the next start
        own = [lane.executor for lane in self.lanes.values() if lane.own and lane.executor is not None]
        for executor in own:
            stop_workers(executor)
        for executor in own:
            executor.shutdown(wait=True, cancel_futures=True)
        if own:
            stop_forkserver()
            # Each grading process was ended mid-life (stop_workers): none closed its Grader, whose fork server's
            # scratch folder would otherwise stay in the temporary folder, a few per start of the server.
            sweep_scratch()
        if self._external is not None:  # a Dask client's: cancel what it has not graded; the client is the caller's
            self._external.shutdown(wait=False)


def grading_process(pidfile: str, server: int, nice: int = 0) -> None:
    """A grading process's initializer: it dies with the server, and takes its sandboxes and the fork server along
    (reaper.die_with_server); then ``nice`` is added to its niceness, before its sandbox's fork server starts, so
    that every process grading in its lane runs at that weight."""
    die_with_server(pidfile, server)
    if nice:
        os.nice(nice)


def grading_line(sid: int, student: str, task: str, result: dict[str, Any]) -> str:
    """The server's console line for one recorded grading: who, which task, the verdict or the score. Each
    submission is recorded once (``Store.finish``), so each has one line: a coach reads "graded once" there."""
    if result.get("error"):
        return f"graded #{sid}: {student} {task}: failed ({str(result['error'])[:120]})"
    score, most = result.get("score"), result.get("max_score")
    verdicts = [c.get("verdict") for m in result.get("milestones", []) for c in m.get("checks", []) if c.get("verdict")]
    verdict = f", {verdicts[0]}" if verdicts and not all(v == "OK" for v in verdicts) else ""
    numbers = isinstance(score, int | float) and isinstance(most, int | float)
    points = f"{score:g} of {most:g} grader points" if numbers else "graded"
    return f"graded #{sid}: {student} {task}: {points}{verdict}"


def _end(pool: Executor) -> None:
    """End a broken pool's processes (some may live on after one of them died) without waiting on the caller,
    and the scratch folders of their fork servers (a process killed never closes its Grader)."""
    stop_workers(pool)
    pool.shutdown(wait=True, cancel_futures=True)
    sweep_scratch()
