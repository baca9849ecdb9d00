"""The store's finish of a test run (grader/contest/store.py ``finish_test_run``) is atomic for anyone polling it:
the status says done only once its files are gone, and a finish that does not commit leaves it queued with its
files, to run again."""

from __future__ import annotations

import pytest

from grader.contest.store import Store
from grader.contest.testruns import check_files, write
from helpers import ContestClock

TASKS = "[tasks.m1]\npoints = 10\ntest_runs = 3\n"


def queued(contest) -> tuple[Store, int, ContestClock]:
    store, clock = Store(contest(TASKS, title="Finish")), ContestClock()
    files = check_files([], b"print(1)\n")
    rid = store.accept_test_run("ada", "m1", clock, lambda where: write(files, where), lambda runs: None)
    assert store.test_run_folder(rid).is_dir()
    return store, rid, clock


def test_the_status_says_done_only_once_the_files_are_gone(contest, monkeypatch):
    store, rid, clock = queued(contest)
    seen = []
    record = store._record_test_run

    def committing(*args, **kwargs):
        # the moment the status is committed: a poller reading "done" from here on must find no files
        seen.append(store.test_run_folder(rid).exists())
        return record(*args, **kwargs)

    monkeypatch.setattr(store, "_record_test_run", committing)
    assert store.finish_test_run(rid, clock(), {"verdict": "ok", "output": "1\n"})
    assert seen == [False], "the files were still there when the status said done"
    run = store.test_run(rid)
    assert run is not None and run["status"] == "done" and run["verdict"] == "ok"
    assert not any(store.test_run_folder(rid).parent.iterdir()), "nothing is left of it, not even the moved folder"


def test_a_finish_that_does_not_commit_leaves_the_run_queued_with_its_files(contest, monkeypatch):
    store, rid, clock = queued(contest)

    def failing(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(store, "_record_test_run", failing)
    with pytest.raises(OSError, match="disk full"):
        store.finish_test_run(rid, clock(), {"verdict": "ok"})
    run = store.test_run(rid)
    assert run is not None and run["status"] == "queued"
    assert store.test_run_folder(rid).is_dir(), "its files are put back: the next start runs it"
