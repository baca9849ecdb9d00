"""What a coach runs a room with: announcements and clarifications, the grading's health, start
delays and extra time that is set, statements locked until the window opens, the coach's filters, a student's
page and the regrades' diff, the scoreboard's own row, attempts and pending marks, and the faults around them.
Through FastAPI's TestClient, on a clock the tests set; no grading runs (results are written to the store)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from grader.contest.store import Store
from grader.contest.web.app import create_app
from helpers import CONTEST_START, SOLUTIONS, ContestClock, auth, upload

TASKS = "[tasks.m1]\npoints = 30\n[tasks.m2]\npoints = 20\n"

HTML = {"Accept": "text/html"}


@pytest.fixture
def folder(contest) -> Path:
    return contest(TASKS, title="Room test")


def reference() -> list[tuple[str, bytes]]:
    return [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())]


def report(task: str, score: float, max_score: float = 4.0, set_aside: int = 0) -> dict:
    checks = [{"name": "c", "milestone": task, "score": score, "max_score": max_score, "passed": score == max_score}]
    result = {"milestones": [{"id": task, "title": task, "score": score, "max_score": max_score, "checks": checks}]}
    if set_aside:
        result["set_aside"] = {"checks": set_aside, "points": 1.0, "internal_errors": set_aside, "note": "n"}
    return result


# --- 1. Announcements and clarifications ----------------------------------------------------------------------


def test_an_announcement_reaches_every_student_and_an_answer_only_its_asker_unless_public(folder):
    client = TestClient(create_app(folder, ContestClock()))
    coach, ada, alan = auth(folder, "coach"), auth(folder, "ada"), auth(folder, "alan")
    assert (
        client.post("/coach/announce", data={"text": "m2's deadline is the window's"}, headers=coach).status_code == 201
    )
    for who in (ada, alan):
        assert "m2&#39;s deadline" in client.get("/me", headers={**who, **HTML}).text
    asked = client.post("/ask", data={"question": "<script>alert(1)</script> is m1 causal?", "task": "m1"}, headers=ada)
    assert asked.status_code == 201, asked.text
    cid = asked.json()["id"]
    coach_page = client.get("/coach", headers={**coach, **HTML}).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in coach_page and "<script>alert(1)" not in coach_page
    answered = client.post("/coach/answer", data={"question": cid, "text": "yes, causal"}, headers=coach)
    assert answered.status_code == 200
    assert client.get("/api/messages", headers=ada).json()["clarifications"][0]["answer"] == "yes, causal"
    assert client.get("/api/messages", headers=alan).json()["clarifications"] == []  # private: ada's alone
    again = {"question": cid, "text": "yes: for all", "public": "1", "replace": "1"}  # a second answer: replace
    assert client.post("/coach/answer", data=again, headers=coach).status_code == 200
    seen = client.get("/api/messages", headers=alan).json()["clarifications"]
    assert [(q["answer"], q["student"]) for q in seen] == [("yes: for all", None)]  # not who asked
    assert "yes: for all" in client.get("/me", headers={**alan, **HTML}).text
    assert client.get("/api/messages", headers=coach).json()["clarifications"][0]["student"] == "ada"


def test_messages_are_refused_when_empty_too_long_unknown_too_many_or_cross_site(folder):
    client = TestClient(create_app(folder, ContestClock()))
    coach, ada = auth(folder, "coach"), auth(folder, "ada")
    assert client.post("/ask", data={"question": "  "}, headers=ada).status_code == 400
    long = client.post("/ask", data={"question": "x" * 1001}, headers=ada)
    assert long.status_code == 400 and "at most 1000" in long.json()["detail"]
    assert client.post("/ask", data={"question": "q", "task": "m9"}, headers=ada).status_code == 400
    assert client.post("/coach/answer", data={"question": 99, "text": "a"}, headers=coach).status_code == 404
    assert client.post("/coach/announce", data={"text": "x" * 2001}, headers=coach).status_code == 400
    assert client.post("/ask", data={"question": "q"}, headers=coach).status_code == 403  # the coach's is /coach
    for _ in range(5):
        assert client.post("/ask", data={"question": "again?"}, headers=ada).status_code == 201
    assert client.post("/ask", data={"question": "again?"}, headers=ada).status_code == 429
    cross = client.post("/coach/announce", data={"text": "hi"}, headers={**coach, "Origin": "https://evil.example"})
    assert cross.status_code == 403
    assert len(Store(folder).clarifications()) == 5 and Store(folder).announcements() == []


def test_the_coach_answers_a_rooms_questions_without_a_rate_limit(folder):
    """A student may send 5 messages a minute; the jury answers 30 questions in the same minute, all stored."""
    client = TestClient(create_app(folder, ContestClock()))
    coach = auth(folder, "coach")
    asked = [
        client.post("/ask", data={"question": f"q{i}"}, headers=auth(folder, who)).json()["id"]
        for who in ("ada", "alan", "grace")
        for i in range(5)
    ]
    answers = [
        client.post(
            "/coach/answer", data={"question": cid, "text": f"a{cid}", "replace": "1"}, headers=coach
        ).status_code
        for cid in asked * 2
    ]
    assert answers == [200] * len(answers), answers
    sent = [client.post("/coach/announce", data={"text": f"n{i}"}, headers=coach).status_code for i in range(8)]
    assert sent == [201] * 8, sent
    assert len(Store(folder).announcements()) == 8


# --- 2. The grading's health ------------------------------------------------------------------------------------


def test_the_coach_sees_the_gradings_health_on_the_page_and_in_the_api(folder):
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))  # no lifespan: nothing grades
    coach = auth(folder, "coach")
    assert upload(client, folder, "ada", "m1", reference()).status_code == 202
    clock.now += timedelta(minutes=3)
    health = client.get("/api/coach", headers=coach).json()["health"]
    assert health == {
        "running": False,
        "workers": 1,
        "alive": 0,
        "queued": 1,
        "oldest_wait_seconds": 180,
        "replaced": 0,
        "lanes": [  # a contest without a metric task has one lane
            {
                "lane": "quick",
                "workers": 1,
                "alive": 0,
                "busy": 0,
                "waiting": 1,
                "oldest_wait_seconds": 180,
                "replaced": 0,
                "where": "local processes",
                "threads": None,
            }
        ],
    }
    page = client.get("/coach", headers={**coach, **HTML}).text
    assert "Workers alive: <strong>0 of 1</strong> (grading not running)" in page and "3 min" in page


def test_the_health_counts_a_running_queues_workers_and_replaced_pools(folder):
    with ThreadPoolExecutor(2) as executor:
        app = create_app(folder, ContestClock(), executor=executor, slots=2)
        with TestClient(app) as client:
            app.state.contest.queue.lanes["quick"].replaced = 2  # as after two dead grading processes
            health = client.get("/api/coach", headers=auth(folder, "coach")).json()["health"]
            assert health["running"] and health["alive"] == 2 and health["replaced"] == 2
            page = client.get("/coach", headers={**auth(folder, "coach"), **HTML}).text
            assert "Pools replaced: <strong>2</strong>" in page and "graded again" in page
    events = Store(folder).events()
    assert events[-1]["kind"] == "server started"  # 7: a (re)start is in the event log


# --- 3. Start delays and extra time that is set -----------------------------------------------------------------


def test_a_latecomer_starts_later_and_gets_the_full_duration(folder):
    clock = ContestClock(minutes=10)
    client = TestClient(create_app(folder, clock))
    coach, ada = auth(folder, "coach"), auth(folder, "ada")
    set_delay = client.post("/coach/start-delay", data={"student": "ada", "minutes": "30"}, headers=coach)
    assert set_delay.status_code == 200 and set_delay.json()["start_delay_minutes"] == 30
    again = client.post("/coach/start-delay", data={"student": "ada", "minutes": "30"}, headers=coach)
    assert again.status_code == 200  # set, not added: still 30
    me = client.get("/api/me", headers=ada).json()
    assert me["phase"] == "not started" and me["starts_in_seconds"] == 20 * 60
    assert me["end"] == "2026-03-14T10:30:00+00:00"
    refused = upload(client, folder, "ada", "m1", reference())
    assert refused.status_code == 403 and "has not started" in refused.json()["detail"]
    assert upload(client, folder, "alan", "m1", reference()).status_code == 202
    clock.now += timedelta(minutes=55)  # 65 min in: alan's window is over, ada's runs until 90
    assert upload(client, folder, "alan", "m1", reference()).status_code == 403
    assert upload(client, folder, "ada", "m1", reference()).status_code == 202
    page = client.get("/coach", headers={**coach, **HTML}).text
    assert 'action="/coach/start-delay"' in page
    assert client.post("/coach/start-delay", data={"student": "ada", "minutes": "-5"}, headers=coach).status_code == 400
    assert client.post("/coach/start-delay", data={"student": "zed", "minutes": "5"}, headers=coach).status_code == 400


def test_a_personal_contest_takes_no_start_delay(contest):
    folder = contest(TASKS, title="Room test", personal=True)
    client = TestClient(create_app(folder, ContestClock()))
    refused = client.post("/coach/start-delay", data={"student": "ada", "minutes": "5"}, headers=auth(folder, "coach"))
    assert refused.status_code == 400 and "personal" in refused.json()["detail"]


def test_extra_time_set_twice_is_not_doubled_and_added_twice_is(folder):
    clock = ContestClock(minutes=61)
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    for _ in range(2):
        sent = client.post("/coach/extra-time", data={"student": "ada", "minutes": "10", "set": "1"}, headers=coach)
        assert sent.status_code == 200 and sent.json()["added_minutes"] == 10
    assert client.get("/api/me", headers=auth(folder, "ada")).json()["end"] == "2026-03-14T10:10:00+00:00"
    client.post("/coach/extra-time", data={"student": "ada", "minutes": "5"}, headers=coach)
    assert (
        client.post("/coach/extra-time", data={"student": "ada", "minutes": "5"}, headers=coach).json()["added_minutes"]
        == 20
    )
    zero = client.post("/coach/extra-time", data={"student": "ada", "minutes": "0", "set": "1"}, headers=coach)
    assert zero.status_code == 200 and zero.json()["added_minutes"] == 0  # set to 0: taken back
    assert client.post("/coach/extra-time", data={"student": "ada", "minutes": "0"}, headers=coach).status_code == 400
    assert 'name="set" value="1"' in client.get("/coach", headers={**coach, **HTML}).text


# --- 4. Statements locked until the window opens ----------------------------------------------------------------


def test_the_tasks_are_locked_before_the_window_and_the_page_counts_down_to_it(folder):
    clock = ContestClock(minutes=-5)
    client = TestClient(create_app(folder, clock))
    ada = auth(folder, "ada")
    me = client.get("/api/me", headers=ada).json()
    assert me["locked"] and me["tasks"] == [] and me["starts_in_seconds"] == 300
    page = client.get("/me", headers={**ada, **HTML}).text
    assert "handed out when your window opens" in page and "Submit to" not in page
    assert 'id="starts-in" data-seconds="300"' in page and 'fetch("/api/me"' in page
    clock.now += timedelta(minutes=6)
    opened = client.get("/me", headers={**ada, **HTML}).text
    assert "Submit to m1" in opened and 'id="remaining"' in opened and "handed out" not in opened
    assert not client.get("/api/me", headers=ada).json()["locked"]


# --- 5. The coach's filters, a student's page, the regrades' diff -------------------------------------------------


def test_the_coach_filters_submissions_and_opens_a_students_page(folder):
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    coach = {**auth(folder, "coach"), **HTML}
    for who in ("ada", "alan", "ada"):
        clock.now += timedelta(minutes=1)
        assert upload(client, folder, who, "m1", reference()).status_code == 202
    Store(folder).finish(1, clock.now, report("m1", 4))

    def ids(query: str) -> list[str]:
        table = (
            client.get(f"/coach?{query}", headers=coach)
            .text.split('<h2 id="submissions">Submissions</h2>')[1]
            .split("<h2")[0]
        )
        return [part.split('">')[1].split("<")[0] for part in table.split('<a href="/api/submissions/')[1:]]

    assert ids("") == ["3", "2", "1"]
    assert ids("student=AD") == ["3", "1"]  # a part of the name, any case
    assert ids("student=ada&status=graded") == ["1"]
    assert ids("task=m2") == []
    page = client.get("/coach/student/ada", headers=coach)
    assert page.status_code == 200 and "Submissions (2)" in page.text and "Start delay" in page.text
    assert client.get("/coach/student/zed", headers=coach).status_code == 404
    assert client.get("/coach/student/ada", headers={**auth(folder, "ada"), **HTML}).status_code == 403


def test_a_regrade_shows_old_against_new_and_keeps_the_old_points_in_the_standings_meanwhile(folder):
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    sid = upload(client, folder, "ada", "m1", reference()).json()["id"]
    Store(folder).finish(sid, clock.now, report("m1", 2))  # 15 of 30
    assert client.post("/coach/regrade-task", data={"task": "m1"}, headers=coach).json()["queued"] == [sid]
    # 7: while it is graded again, the standings keep the previous grade, for the coach and the students alike
    for who in ("coach", "ada", "alan"):
        rows = client.get("/api/scoreboard", headers=auth(folder, who)).json()["rows"]
        assert next(r for r in rows if r["student"] == "ada")["total"] == 15
    waiting = client.get("/api/coach", headers=coach).json()["regrades"]
    assert waiting == [
        {
            "id": sid,
            "student": "ada",
            "task": "m1",
            "old_status": "graded",
            "old_points": 15.0,
            "status": "queued",
            "new_points": None,
            "change": None,
            "requeued_at": clock.now.isoformat(),
        }
    ]
    Store(folder).finish(sid, clock.now, report("m1", 3))
    done = client.get("/api/coach", headers=coach).json()["regrades"][0]
    assert (done["old_points"], done["new_points"], done["change"]) == (15.0, 22.5, 7.5)
    page = client.get("/coach", headers={**coach, **HTML}).text
    assert "Regrades: old and new" in page and "+7.5" in page
    assert client.get("/api/scoreboard", headers=coach).json()["rows"][0]["total"] == 22.5


# --- 6. The scoreboard: own row, attempts, pending marks, time left ----------------------------------------------


def test_the_scoreboard_marks_the_viewers_row_counts_attempts_and_pending_while_frozen(folder):
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    for _ in range(2):
        clock.now += timedelta(minutes=1)
        sid = upload(client, folder, "alan", "m1", reference()).json()["id"]
        Store(folder).finish(sid, clock.now, report("m1", 4))
    clock.now += timedelta(seconds=10)
    client.post("/coach/freeze", headers=auth(folder, "coach"))
    clock.now += timedelta(minutes=1)
    upload(client, folder, "alan", "m1", reference())  # after the freeze: pending
    board = client.get("/api/scoreboard", headers=auth(folder, "ada")).json()
    alan = next(r for r in board["rows"] if r["student"] == "alan")
    assert alan["attempts"] == {"m1": 2} and alan["pending"] == {"m1": 1}
    page = client.get("/scoreboard", headers={**auth(folder, "ada"), **HTML}).text
    assert 'class="me" id="my-row"' in page and "?1" in page and "(2)" in page
    assert 'id="time-left"' in page and 'id="remaining"' in page
    mine = page.split('id="my-row"')[1].split("</tr>")[0]
    assert "<td>ada</td>" in mine
    coach = client.get("/api/scoreboard", headers=auth(folder, "coach")).json()  # live: no pending
    assert next(r for r in coach["rows"] if r["student"] == "alan")["attempts"] == {"m1": 3}


# --- 7. Faults --------------------------------------------------------------------------------------------------


def test_a_refusal_banner_goes_once_a_later_upload_is_accepted(folder):
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    ada = auth(folder, "ada")
    assert upload(client, folder, "ada", "m1", [("notes.txt", b"hi")]).status_code == 400
    assert "Refused at" in client.get("/me", headers={**ada, **HTML}).text
    clock.now += timedelta(seconds=30)
    assert upload(client, folder, "ada", "m1", reference()).status_code == 202
    assert "Refused at" not in client.get("/me", headers={**ada, **HTML}).text


def test_with_personal_windows_each_students_board_freezes_before_their_own_end(contest):
    """ada's window runs 9:00-10:00 and alan's 9:20-10:20, 30 frozen minutes each: at 9:41 grace's new points
    are hidden from ada (frozen since 9:30) and shown to alan (his freeze comes at 9:50); the coach is told."""
    folder = contest(
        TASKS,
        title="Room test",
        personal=True,
        hard_end=CONTEST_START.replace(hour=12),
        scoreboard="frozen",
        freeze_minutes=30,
    )
    clock = ContestClock(minutes=0)
    client = TestClient(create_app(folder, clock))
    ada, alan, grace = (auth(folder, who) for who in ("ada", "alan", "grace"))
    client.get("/api/me", headers=ada)  # ada's window opens at 9:00
    clock.now += timedelta(minutes=20)
    client.get("/api/me", headers=alan)  # alan's at 9:20
    clock.now += timedelta(minutes=20)
    client.get("/api/me", headers=grace)  # grace's at 9:40, and her first upload
    sent = upload(client, folder, "grace", "m1", reference())
    assert sent.status_code == 202, sent.text
    Store(folder).finish(sent.json()["id"], clock.now, report("m1", 4))
    clock.now += timedelta(minutes=1)

    def grace_total(headers: dict) -> tuple[str | None, float]:
        board = client.get("/api/scoreboard", headers=headers).json()
        return board["frozen_at"], next(r["total"] for r in board["rows"] if r["student"] == "grace")

    assert grace_total(ada) == ("2026-03-14T09:30:00+00:00", 0), "ada's last 30 minutes: frozen"
    assert grace_total(alan) == (None, 30), "alan's freeze is still to come: live"
    page = client.get("/coach", headers={**auth(folder, "coach"), **HTML}).text
    assert "before their own window ends" in page
    clock.now = clock.now.replace(hour=12, minute=0)
    assert grace_total(ada) == (None, 30), "every board live again at the hard end"


def test_the_resolver_reveals_the_lowest_ranked_pending_result_one_step_at_a_time(folder):
    """DOMjudge's resolver: on the coach's frozen board each click reveals the next pending result from the
    bottom of the board up; once none is pending, the next click unfreezes it. No freeze, no resolver."""
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    coach, ada = auth(folder, "coach"), auth(folder, "ada")
    assert client.post("/coach/resolve", headers=coach).status_code == 409, "nothing frozen: nothing to resolve"
    store = Store(folder)

    def graded(who: str, task: str, score: float) -> None:
        files = reference() if task == "m1" else [("m2_model.py", (SOLUTIONS / "m2_model.py").read_bytes())]
        sent = upload(client, folder, who, task, files)
        assert sent.status_code == 202, sent.text
        store.finish(sent.json()["id"], clock.now, report(task, score))
        clock.now += timedelta(minutes=1)

    graded("ada", "m1", 4)  # 30 points, before the freeze
    graded("grace", "m1", 1)  # 7.5
    assert client.post("/coach/freeze", headers=coach).status_code in (200, 303)
    clock.now += timedelta(minutes=1)
    graded("alan", "m1", 4)  # 30, pending
    graded("grace", "m2", 4)  # 20, pending
    clock.now = CONTEST_START + timedelta(minutes=61)  # the ceremony, after the end: no one in their window

    def board() -> dict:
        return client.get("/api/scoreboard", headers=ada).json()

    def totals() -> dict[str, float]:
        return {r["student"]: r["total"] for r in board()["rows"]}

    assert totals() == {"ada": 30, "grace": 7.5, "alan": 0}
    first = client.post("/coach/resolve", headers=coach).json()["revealed"]
    assert first == {"student": "alan", "task": "m1"}, "alan is last on the frozen board: his result comes first"
    assert totals() == {"ada": 30, "alan": 30, "grace": 7.5} and board()["frozen_at"] is not None
    second = client.post("/coach/resolve", headers=coach).json()["revealed"]
    assert second == {"student": "grace", "task": "m2"}
    assert totals() == {"ada": 30, "alan": 30, "grace": 27.5}
    assert not any(r["pending"] for r in board()["rows"]), "nothing pending once revealed"
    client.post("/coach/resolve", headers=coach)  # nothing left: the board is live
    assert board()["frozen_at"] is None
    assert any(e["kind"] == "resolve" for e in store.events())
