"""The contest server holds a paper's "full" feedback back from a student whose window has ended while another
still sits the paper (extra time): the student's page and `/api/submissions` give the part's score, not its
checks, until every window has ended. No grading runs: the report is written to the store as the grader would."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from grader.contest.store import Store
from grader.contest.web.app import create_app
from helpers import SOLUTIONS, ContestClock, auth, upload

PAPER_M1 = 'title = "P"\nminutes = 60\n[parts.m1]\npoints = 30\n'
WORKING = "row i must allow columns 0..i (torch.tril, not triu)"
REPORT = {
    "milestones": [
        {
            "id": "m1",
            "title": "Causal self-attention",
            "score": 1,
            "max_score": 2,
            "checks": [
                {"name": "the mask", "score": 0, "max_score": 1, "passed": False, "message": WORKING},
                {"name": "the weights", "score": 1, "max_score": 1, "passed": True, "message": ""},
            ],
        }
    ]
}


def feedback(client: TestClient, folder: Path, sid: int) -> dict:
    return client.get(f"/api/submissions/{sid}", headers=auth(folder, "ada")).json()["feedback"]


def test_a_papers_checks_wait_for_every_window_to_end(contest):
    folder = contest("", title="Paper", paper=PAPER_M1, feedback="score", more="[extra_time]\ngrace = 30\n")
    clock = ContestClock(minutes=10)
    client = TestClient(create_app(folder, clock))  # no lifespan: nothing is graded but what the test writes
    sid = upload(client, folder, "ada", "m1", [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())])
    assert sid.status_code == 202, sid.text
    sid = sid.json()["id"]
    assert Store(folder).finish(sid, clock.now, REPORT)
    clock.now += timedelta(minutes=51)  # ada's window is over; grace has 29 minutes left
    held = feedback(client, folder, sid)
    assert WORKING not in json.dumps(held) and "checks" not in held["tasks"][0], held
    assert held["tasks"][0]["score"] == 15 and "every student's window on this paper has ended" in json.dumps(held)
    page = client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert WORKING not in page and "15 / 30" in page
    clock.now += timedelta(minutes=30)  # grace's window is over too
    shown = feedback(client, folder, sid)
    assert shown["feedback"] == "full" and WORKING in json.dumps(shown)
