"""A contest's grading survives a grading process that dies (the out-of-memory killer on a laptop, a stray
``kill``): the pool is replaced, what it held is graded again, and no upload meets a 500."""

from __future__ import annotations

import logging
import os
import re
import signal
import time

import pytest
from fastapi.testclient import TestClient

from grader.contest.grading import GradingQueue
from grader.contest.store import Store
from grader.contest.web.app import create_app
from helpers import SOLUTIONS, ContestClock, upload

pytestmark = pytest.mark.slow  # real grading processes, killed and replaced

M1 = (SOLUTIONS / "m1_attention.py").read_bytes()


def kill_grading_processes(queue: GradingQueue) -> int:
    """SIGKILL every process of the queue's pools (as the OOM killer would one); how many there were."""
    processes = [p for pool in queue.executors() for p in (getattr(pool, "_processes", None) or {}).values()]
    for process in processes:
        os.kill(process.pid, signal.SIGKILL)
    return len(processes)


def wait_for(condition, seconds: float = 300) -> None:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s")


def test_a_killed_grading_process_is_replaced_and_its_submissions_graded(contest):
    folder = contest(title="Healing test")
    store = Store(folder)
    queue = GradingQueue(store, ContestClock())
    queue.start()
    try:
        sids = []
        for who in ("ada", "alan", "grace"):
            sid = store.accept(who, "m1", ContestClock()(), lambda f: (f / "m1_attention.py").write_bytes(M1) and ".")
            sids.append(sid)
            queue.enqueue(sid)
        wait_for(lambda: queue.pending() == 3 and kill_grading_processes(queue) > 0, seconds=60)
        wait_for(lambda: all(store.get(sid).status == "graded" for sid in sids))
    finally:
        queue.close()
        store.close()
    assert queue.replaced >= 1


def test_uploads_after_the_grading_process_died_are_accepted_and_graded(contest):
    folder = contest(title="Healing test")
    with TestClient(create_app(folder, ContestClock(), workers=1)) as client:
        queue = client.app.state.contest.queue
        first = upload(client, folder, "ada", "m1", [("m1_attention.py", M1)])
        assert first.status_code == 202, first.text
        wait_for(lambda: kill_grading_processes(queue) > 0, seconds=60)
        answers = [upload(client, folder, who, "m1", [("m1_attention.py", M1)]) for who in ("alan", "grace")]
        assert [a.status_code for a in answers] == [202, 202], [a.text for a in answers]
        ids = [first.json()["id"], *(a.json()["id"] for a in answers)]
        store = Store(folder)
        try:
            wait_for(lambda: all(store.get(sid).status == "graded" for sid in ids))
        finally:
            store.close()


def test_a_worker_killed_while_idle_is_replaced_at_once_recorded_and_counted_across_a_restart(contest, caplog):
    """A pool whose worker died while it held nothing was rebuilt only at the next upload (health
    read "alive 0 of 1" meanwhile). Now it is replaced within the queue's watch, the event list says so, the count
    of replaced pools outlives the server, and each recorded grading has its console line (who, task, score)."""
    folder = contest(title="Healing test")
    store = Store(folder)
    queue = GradingQueue(store, ContestClock(), watch_seconds=0.2)
    queue.start()
    try:
        alive = lambda: queue.lane_health()["quick"]["alive"]  # noqa: E731
        wait_for(lambda: alive() == 1, seconds=60)
        quick = queue.lanes["quick"].executor
        for process in list(getattr(quick, "_processes", {}).values()):  # the quick lane's one worker
            os.kill(process.pid, signal.SIGKILL)
        wait_for(lambda: queue.replaced == 1 and alive() == 1, seconds=30)  # no upload came
        assert queue.lanes["quick"].executor is not quick
        (event,) = [e for e in store.events() if e["kind"] == "worker died"]
        assert "quick lane died: its pool replaced at once (1 in all)" in event["detail"]
        caplog.set_level(logging.INFO, logger="grader.contest")
        sid = store.accept("ada", "m1", ContestClock()(), lambda f: (f / "m1_attention.py").write_bytes(M1) and ".")
        queue.enqueue(sid)
        wait_for(lambda: store.get(sid).status == "graded")
    finally:
        queue.close()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("graded #")]
    assert len(lines) == 1 and re.fullmatch(rf"graded #{sid}: ada m1: [\d.]+ of [\d.]+ grader points", lines[0]), lines
    again = GradingQueue(store, ContestClock())  # a restarted server: the count is read back, not started at 0
    assert again.replaced == 1 and again.lane_health()["quick"]["replaced"] == 1
    store.close()
