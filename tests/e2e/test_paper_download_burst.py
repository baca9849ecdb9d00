"""A room downloading its paper notebooks at once: each student's notebook is made once, one at a time.

The notebook is made from the stubs with ``ast``; on CPython 3.11 that conversion is not safe in threads, and a
burst of 100 parallel downloads answered 500 ("AST constructor recursion depth mismatch") a few times in 500.
The route makes each student's notebook once and serves it from then on, and never makes two at the same time.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.paper import render
from helpers import REPO, STUDENTS, ContestClock, auth, contest_folder, open_contest

PAPER = REPO / "papers" / "practice-2"


@pytest.fixture
def room(tmp_path: Path) -> Path:
    text = open_contest("Round on paper 2", tasks="", paper="paper1", duration=120)
    return contest_folder(tmp_path / "round", text, paper=(PAPER / "paper.toml").read_text())


def test_a_burst_of_downloads_makes_each_notebook_once_and_never_two_at_a_time(room: Path, monkeypatch):
    from fastapi.testclient import TestClient

    from grader.contest.web.app import create_app

    real = render.build
    calls: list[str] = []
    busy = threading.Lock()
    overlaps = []

    def build(paper, student=None, seed=None, **kwargs):
        if not busy.acquire(blocking=False):
            overlaps.append(student)  # another notebook was being made at this moment
            busy.acquire()
        try:
            calls.append(student)
            time.sleep(0.05)  # long enough for a parallel request to arrive while this one is made
            return real(paper, student, seed, **kwargs)
        finally:
            busy.release()

    monkeypatch.setattr(render, "build", build)
    students = STUDENTS[:3]
    client = TestClient(create_app(room, ContestClock()))  # no lifespan: nothing is graded
    with ThreadPoolExecutor(12) as pool:
        replies = list(pool.map(lambda who: (who, client.get("/paper.ipynb", headers=auth(room, who))), students * 8))
    assert [r.status_code for _, r in replies] == [200] * len(replies), [r.text[:200] for _, r in replies]
    for who in students:
        texts = {r.text for w, r in replies if w == who}
        assert len(texts) == 1, f"{who} was given {len(texts)} different notebooks"
    assert sorted(calls) == sorted(students), f"made {len(calls)} times for {len(students)} students: {calls}"
    assert not overlaps, f"notebooks were made two at a time: {overlaps}"
    assert len({r.text for _, r in replies}) == len(students), "each student has a notebook of their own"
