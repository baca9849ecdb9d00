"""A metric-scored task in a contest (lmbudget): split A scores live, split B stays sealed until the coach
reveals it and ranks each student's finals (selected, or their best on A); a run that failed (time limit,
crash, no model, not causal) is a graded 0 and counts against the cap like any submission. Through the server,
with reports made here: no model is trained."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from grader.contest.metric import points_for
from grader.contest.store import Store
from grader.contest.web.app import create_app
from grader.lmbudget.task import LOSS_FORMAT, load_task
from helpers import SOLUTIONS, ContestClock, auth, upload

# Not serial: lmbudget's budget is CPU time, which a busy neighbour does not stretch; its wall-clock limit is
# wall_factor times it

TASKS = "[tasks.lmbudget]\npoints = 10\nmax_submissions = 3\n"


def report(a: float | None, b: float | None, why: str = "") -> dict:
    """lmbudget's report: the two split checks (A carries the points), or both set aside with ``why``."""

    def check(split: str, loss: float | None) -> dict:
        if loss is None:
            return {
                "name": f"loss on split {split}",
                "milestone": "lmbudget",
                "score": 0.0,
                "max_score": 0.0,
                "passed": False,
                "message": f"not counted: {why}",
                "counted": False,
                "value": None,
            }
        return {
            "name": f"loss on split {split}: bits per character",
            "milestone": "lmbudget",
            "score": 0.0,
            "max_score": 10.0 if split == "A" else 0.0,
            "passed": True,
            "message": LOSS_FORMAT.format(split=split, loss=loss),
            "counted": True,
            "value": loss,
        }

    checks = [check("A", a), check("B", b)]
    score = load_task().score(a) if a is not None else 0.0  # the grader's points on A, as calibrated
    milestone = {
        "id": "lmbudget",
        "title": "t",
        "score": score,
        "max_score": 10.0 if a is not None else 0.0,
        "checks": checks,
    }
    return {
        "score": score,
        "max_score": milestone["max_score"],
        "seconds": 1.0,
        "protections": [],
        "milestones": [milestone],
    }


@pytest.fixture
def session(contest):
    folder = contest(TASKS, title="Metric", students=("ada", "alan"), scoreboard=None)
    clock = ContestClock(minutes=5)
    client = TestClient(create_app(folder, clock))
    files = [("lmbudget.py", (SOLUTIONS / "lmbudget.py").read_bytes())]

    def submit(who: str, result: dict) -> int:
        clock.now += timedelta(minutes=1)
        response = upload(client, folder, who, "lmbudget", files)
        assert response.status_code == 202, response.text
        sid = response.json()["id"]
        assert Store(folder).finish(sid, clock.now, result)
        return sid

    return folder, client, submit


def board(client, folder, who: str) -> dict:
    (only,) = client.get("/api/leaderboards", headers=auth(folder, who)).json()
    return only


def test_split_b_is_sealed_for_students_until_the_coach_reveals_it(session):
    folder, client, submit = session
    sid = submit("ada", report(3.30, 3.25))
    seen = json.dumps(client.get(f"/api/submissions/{sid}", headers=auth(folder, "ada")).json())
    assert "loss on split A" in seen and "3.3000" in seen
    assert "split B" not in seen and "3.2500" not in seen, "B sealed: not even the student's own B loss"
    assert board(client, folder, "ada")["B"] is None and board(client, folder, "coach")["B"] is not None
    assert client.post("/coach/reveal/lmbudget", headers=auth(folder, "ada")).status_code == 403
    assert client.post("/coach/reveal/lmbudget", headers=auth(folder, "coach")).json()["revealed"]
    seen = json.dumps(client.get(f"/api/submissions/{sid}", headers=auth(folder, "ada")).json())
    assert "3.2500" in seen and board(client, folder, "ada")["B"][0]["loss"] == 3.25
    assert "Reveal leaderboard B" not in client.get("/scoreboard", headers=auth(folder, "ada")).text


def test_a_scores_live_and_b_ranks_the_finals_best_on_a_by_default(session):
    folder, client, submit = session
    submit("ada", report(3.30, 3.10))  # ada's best on B, not on A
    submit("ada", report(3.20, 3.28))  # ada's best on A: her final by default
    submit("alan", report(3.25, 3.20))
    live = client.get("/api/scoreboard", headers=auth(folder, "alan")).json()["rows"]
    from grader.contest.config import load

    task = load(folder / "contest.toml").task("lmbudget")
    assert [(r["student"], r["total"]) for r in live] == [
        ("ada", pytest.approx(points_for(task, 3.20), abs=0.02)),
        ("alan", pytest.approx(points_for(task, 3.25), abs=0.02)),
    ]
    b = board(client, folder, "coach")["B"]
    assert [(r["student"], r["loss"]) for r in b] == [("alan", 3.20), ("ada", 3.28)]


def test_selected_finals_count_for_b_and_at_most_two_may_be_selected(session):
    folder, client, submit = session
    first = submit("ada", report(3.30, 3.10))
    second = submit("ada", report(3.20, 3.28))
    third = submit("ada", report(3.40, 3.40))
    for sid in (first, third):
        assert client.post(f"/select/{sid}", headers=auth(folder, "ada")).status_code == 200
    refused = client.post(f"/select/{second}", headers=auth(folder, "ada"))
    assert refused.status_code == 409 and "already selected 2" in refused.json()["detail"]
    (ada,) = [r for r in board(client, folder, "coach")["B"] if r["student"] == "ada"]
    assert (ada["loss"], ada["submission"]) == (3.10, first)


def failed(verdict: str, message: str) -> dict:
    """lmbudget's report of a run that failed: both checks a counted 0 with the grader's verdict."""
    result = report(None, None)
    for check in result["milestones"][0]["checks"]:
        check.update(counted=True, message=message, verdict=verdict)
    result["milestones"][0]["max_score"] = result["max_score"] = 10.0
    result["milestones"][0]["checks"][0]["max_score"] = 10.0
    return result


def test_a_run_that_failed_is_a_graded_zero_and_counts_against_the_cap(session):
    folder, client, submit = session
    sid = submit("ada", failed("time limit exceeded", "time limit exceeded: train used 40 of 30 CPU seconds"))
    entry = client.get(f"/api/submissions/{sid}", headers=auth(folder, "ada")).json()
    assert entry["status"] == "graded" and "does not count against" not in json.dumps(entry), entry
    for _ in range(2):  # the cap (3) counts it: two more, then no more
        submit("ada", report(3.3, 3.3))
    refusal = upload(client, folder, "ada", "lmbudget", [("lmbudget.py", b"x = 1\n")])
    assert refusal.status_code == 403 and "all 3 graded submissions" in refusal.json()["detail"]
    (row,) = [r for r in board(client, folder, "coach")["A"] if r["student"] == "ada"]
    assert row["loss"] == 3.3, "a failed run has no loss: it never ranks"
    # the page says what the docs say (it counts), never that a failed run "costs you nothing"
    me = client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert "costs you nothing" not in me and "it counts against your 3 submissions like any other" in me


def test_the_leaderboards_page_lists_only_students_with_a_run(session):
    """alan has no run: no blank row of his on the leaderboard, a line that says one is not listed."""
    folder, client, submit = session
    submit("ada", report(3.30, 3.25))
    for who in ("coach", "ada"):
        page = client.get("/scoreboard", headers={**auth(folder, who), "Accept": "text/html"}).text
        table = page.split('class="leaderboards board"')[1].split("</table>")[0]
        assert "<td>ada</td>" in table and "alan" not in table, table
        assert "1 student with no run on lmbudget is not listed" in page
    assert {r["student"] for r in board(client, folder, "coach")["A"]} == {"ada", "alan"}, "the API keeps every row"


def test_the_pages_show_both_leaderboards_to_the_coach(session):
    folder, client, submit = session
    submit("ada", report(3.30, 3.25))
    page = client.get("/coach", headers={**auth(folder, "coach"), "Accept": "text/html"}).text
    assert "lmbudget: leaderboards" in page and "Reveal leaderboard B" in page and "3.2500" in page
    student = client.get("/scoreboard", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert "lmbudget: leaderboards" in student and "3.2500" not in student and "3.3000" in student
    me = client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert "select up to 2" in me
