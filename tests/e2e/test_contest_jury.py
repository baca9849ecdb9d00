"""The contest's jury: coach roles (admin, jury, read-only), claims on questions, the coach page folded for a
large room, and the resolver's projector view. Through FastAPI's TestClient with a clock the tests set (no
lifespan: nothing is graded)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from grader.contest.commands import contest as contest_group
from grader.contest.web.app import create_app
from helpers import SOLUTIONS, ContestClock, auth, upload

HTML = {"Accept": "text/html"}
# Each state-changing coach route and the role it needs. A new route must be placed here: the walk below fails on
# one it does not know, so that no route is left open to every coach by forgetting it.
JURY_ROUTES = {"/coach/announce", "/coach/answer", "/coach/claim", "/coach/regrade-requests/{rid}"}
ADMIN_ROUTES = {
    "/coach/extend",
    "/coach/extra-time",
    "/coach/start-delay",
    "/coach/void/{sid}",
    "/coach/regrade/{sid}",
    "/coach/regrade-task",
    "/coach/reveal/{task_id}",
    "/coach/freeze",
    "/coach/unfreeze",
    "/coach/resolve",
}


def coach_account(folder: Path, name: str, *role: str) -> dict[str, str]:
    """A named coach account made with `grade contest coach` (``role``: ``--role`` and its value), its header."""
    made = CliRunner().invoke(contest_group, ["coach", str(folder), name, *role])
    assert made.exit_code == 0, made.output
    return {"Authorization": f"Bearer {made.output.strip().rsplit(': ', 1)[1]}"}


def rows(folder: Path) -> dict[str, list[tuple]]:
    """Every table the coach routes change, read directly."""
    db = sqlite3.connect(folder / "contest.sqlite")
    try:
        tables = ("submissions", "events", "settings", "extra_time", "start_delay", "clarifications", "announcements")
        return {t: [tuple(r) for r in db.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in tables}
    finally:
        db.close()


def coach_posts(app) -> set[str]:
    return {r.path for r in app.routes if isinstance(r, APIRoute) and "POST" in r.methods and "/coach" in r.path}


@pytest.fixture
def room(contest):
    """A round with a question asked, a submission in and two named coaches: rosa (jury) and vera (read-only)."""
    folder = contest("[tasks.m1]\npoints = 30\n", title="Jury room")
    rosa = coach_account(folder, "rosa", "--role", "jury")
    vera = coach_account(folder, "vera", "--role", "read-only")
    client = TestClient(create_app(folder, ContestClock()))
    sent = upload(client, folder, "ada", "m1", [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())])
    assert sent.status_code == 202, sent.text
    assert client.post("/ask", data={"question": "is m1 causal?"}, headers=auth(folder, "ada")).status_code == 201
    return folder, client, rosa, vera


def test_every_coach_post_route_checks_the_role_and_the_403_names_the_role_needed(room):
    folder, client, rosa, vera = room
    routes = coach_posts(client.app)
    assert routes == JURY_ROUTES | ADMIN_ROUTES, routes ^ (JURY_ROUTES | ADMIN_ROUTES)
    forms = {  # what each route's form would send: past the role check, each would act
        "/coach/extend": {"minutes": "30"},
        "/coach/extra-time": {"minutes": "30", "student": "ada"},
        "/coach/start-delay": {"minutes": "30", "student": "ada"},
        "/coach/regrade-task": {"task": "m1"},
        "/coach/announce": {"text": "hello"},
        "/coach/answer": {"question": "1", "text": "hello"},
        "/coach/claim": {"question": "1"},
        "/coach/regrade-requests/{rid}": {"action": "decline", "answer": "no"},
    }
    before = rows(folder)
    for path in sorted(routes):
        url = path.replace("{sid}", "1").replace("{rid}", "1").replace("{task_id}", "m1")
        form = forms.get(path, {})
        refused = client.post(url, data=form, headers=vera)
        assert refused.status_code == 403, (path, refused.text)
        needed = "jury or admin role" if path in JURY_ROUTES else "admin role"
        assert needed in refused.json()["detail"] and "read-only" in refused.json()["detail"], refused.text
        answer = client.post(url, data=form, headers=rosa)
        if path in ADMIN_ROUTES:
            assert answer.status_code == 403, (path, answer.text)
            assert "needs the admin role" in answer.json()["detail"] and "jury" in answer.json()["detail"]
        else:  # past the role: the route's own answer (done, or a 404 for a request that is not there)
            assert answer.status_code != 403, (path, answer.text)
    after = rows(folder)
    assert {t: after[t] for t in ("submissions", "settings", "extra_time", "start_delay")} == {
        t: before[t] for t in ("submissions", "settings", "extra_time", "start_delay")
    }, "the jury changed what only the admin may"
    assert after["announcements"] != before["announcements"]  # the jury's own routes did act
    # the read-only coach still reads every page and export
    for page in ("/coach", "/api/coach", "/coach/student/ada", "/coach/results.csv", "/coach/resolver"):
        assert client.get(page, headers=vera).status_code == 200, page


def test_a_coaches_file_from_before_roles_keeps_its_tokens_admin(contest):
    folder = contest("[tasks.m1]\npoints = 30\n", title="Old folder")
    (folder / "coaches.csv").write_text("coach,token\nold-hand,an-old-token-of-32-characters-xx\n")
    client = TestClient(create_app(folder, ContestClock()))
    old = {"Authorization": "Bearer an-old-token-of-32-characters-xx"}
    assert client.post("/coach/freeze", headers=old).status_code == 200
    # a role the server does not know grants nothing: read-only, not admin
    (folder / "coaches.csv").write_text("coach,token,role\nold-hand,an-old-token-of-32-characters-xx,superuser\n")
    refused = client.post("/coach/unfreeze", headers=old)
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]


def test_the_role_of_an_account_changes_with_its_token_kept_and_a_wrong_role_is_a_message(contest):
    folder = contest("[tasks.m1]\npoints = 30\n", title="Roles")
    rosa = coach_account(folder, "rosa", "--role", "jury")
    client = TestClient(create_app(folder, ContestClock()))
    assert client.post("/coach/freeze", headers=rosa).status_code == 403
    changed = CliRunner().invoke(contest_group, ["coach", str(folder), "rosa", "--role", "admin"])
    assert changed.exit_code == 0 and "admin now" in changed.output, changed.output
    assert client.post("/coach/freeze", headers=rosa).status_code == 200  # the same token, read again at once
    again = CliRunner().invoke(contest_group, ["coach", str(folder), "rosa"])
    assert again.exit_code != 0 and "--role" in again.output
    wrong = CliRunner().invoke(contest_group, ["coach", str(folder), "nina", "--role", "boss"])
    assert wrong.exit_code == 2 and "boss" in wrong.output and "Traceback" not in wrong.output


def test_a_claimed_question_is_answered_by_its_claimant_or_taken_over_and_a_second_answer_needs_replace(room):
    folder, client, rosa, _ = room
    tomas = coach_account(folder, "tomas", "--role", "jury")
    assert client.post("/coach/claim", data={"question": 1}, headers=rosa).json()["claimed_by"] == "rosa"
    taken = client.post("/coach/answer", data={"question": 1, "text": "yes"}, headers=tomas)
    assert taken.status_code == 409 and "claimed by rosa" in taken.json()["detail"], taken.text
    assert client.post("/coach/claim", data={"question": 1}, headers=tomas).status_code == 409
    assert client.get("/api/messages", headers=auth(folder, "ada")).json()["clarifications"][0]["answer"] is None
    over = client.post("/coach/answer", data={"question": 1, "text": "yes", "take_over": "1"}, headers=tomas)
    assert over.status_code == 200, over.text
    again = client.post("/coach/answer", data={"question": 1, "text": "yes, causal"}, headers=tomas)
    assert again.status_code == 409 and "replace" in again.json()["detail"]
    assert client.post("/coach/claim", data={"question": 1}, headers=tomas).status_code == 409  # answered
    replaced = client.post("/coach/answer", data={"question": 1, "text": "yes, causal", "replace": "1"}, headers=tomas)
    assert replaced.status_code == 200, replaced.text
    seen = client.get("/api/messages", headers=auth(folder, "ada")).json()["clarifications"][0]
    assert seen["answer"] == "yes, causal" and "claimed_by" not in seen  # the jury's claims are not the student's
    events = client.get("/api/coach", headers=rosa).json()["events"]
    kept = [e for e in events if e["kind"] == "answer replaced"]
    assert len(kept) == 1 and "was: yes" in kept[0]["detail"] and kept[0]["author"] == "tomas"
    assert client.post("/coach/claim", data={"question": 99}, headers=rosa).status_code == 404


def test_the_coach_page_folds_answered_questions_and_shows_an_answer_form_only_to_the_claimant(room):
    folder, client, rosa, vera = room
    assert client.post("/ask", data={"question": "and m2?"}, headers=auth(folder, "alan")).status_code == 201
    assert client.post("/coach/answer", data={"question": 2, "text": "see m2"}, headers=rosa).status_code == 200

    def page(who: dict[str, str]) -> str:
        return client.get("/coach", headers={**who, **HTML}).text

    seen = page(rosa)
    folded = re.search(r'<details id="answered">(.*?)</details>', seen, re.S)
    assert folded and 'id="question-2"' in folded.group(1) and 'id="question-1"' not in folded.group(1)
    assert '<details id="answered" open' not in seen
    question_1 = re.search(r'<div class="msg" id="question-1">(.*?)</div>', seen, re.S).group(1)
    assert "Claim</button>" in question_1 and 'action="/coach/answer"' not in question_1  # claim first
    client.post("/coach/claim", data={"question": 1}, headers=rosa)
    mine = re.search(r'<div class="msg" id="question-1">(.*?)</div>', page(rosa), re.S).group(1)
    assert "claimed by you" in mine and 'action="/coach/answer"' in mine
    theirs = re.search(r'<div class="msg" id="question-1">(.*?)</div>', page(auth(folder, "coach")), re.S).group(1)
    assert "claimed by rosa" in theirs and "Take it over" in theirs and 'action="/coach/answer"' not in theirs
    assert 'action="/coach/' not in page(vera)  # read-only: no form that would only be refused


def test_the_coach_pages_students_and_submissions_in_pages(contest):
    names = tuple(f"s{i:02d}" for i in range(60))
    folder = contest("[tasks.m1]\npoints = 30\n", title="Big room", students=names)
    client = TestClient(create_app(folder, ContestClock()))
    coach = {**auth(folder, "coach"), **HTML}

    def students_on(url: str) -> list[str]:
        text = client.get(url, headers=coach).text
        table = text.split('id="students"', 1)[1].split("</table>", 1)[0]
        return re.findall(r'href="/coach/student/(s\d\d)"', table)

    assert students_on("/coach") == list(names[:25])
    assert students_on("/coach?people_page=3") == list(names[50:])
    assert students_on("/coach?people_page=99") == list(names[50:])  # past the end: the last page
    first = client.get("/coach", headers=coach).text
    assert (
        "Page 1 of 3 (60 in all)" in first
        and 'href="/coach?student=&amp;task=&amp;status=&amp;page=1&amp;people_page=2#students"' in first
    )
    assert len(re.findall(r"<option value=\"s\d\d\">", first)) == 60  # one list of names, not one per form


def test_the_resolver_steps_without_a_reload_and_only_the_admin_steps_it(room):
    folder, client, rosa, _ = room
    admin = auth(folder, "coach")
    assert client.post("/coach/freeze", headers=admin).status_code == 200
    sent = upload(client, folder, "alan", "m1", [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())])
    assert sent.status_code == 202
    board = client.get("/api/coach/resolver", headers=rosa).json()
    assert [r["pending"] for r in board["rows"] if r["student"] == "alan"] == [{"m1": 1}]
    page = client.get("/coach/resolver", headers={**admin, **HTML}).text
    assert 'id="resolver-board"' in page and 'id="resolver-step"' in page and "ArrowRight" in page
    assert 'id="resolver-step"' not in client.get("/coach/resolver", headers={**rosa, **HTML}).text
    assert client.post("/coach/resolve", headers=rosa).status_code == 403
    waiting = client.post("/coach/resolve", headers=admin)  # the windows are open: the page offers "anyway"
    assert waiting.status_code == 409 and "still in their window" in waiting.json()["detail"]
    stepped = client.post("/coach/resolve", data={"force": "1"}, headers=admin)  # as the page's fetch: JSON back
    assert stepped.status_code == 200 and stepped.json()["revealed"] == {"student": "alan", "task": "m1"}
    board = client.get("/api/coach/resolver", headers=admin).json()
    assert [r["pending"] for r in board["rows"] if r["student"] == "alan"] == [{}]


@pytest.mark.slow
def test_in_chromium_the_resolver_steps_by_the_keyboard_in_place_and_the_total_sticks_on_a_phone(tmp_path):
    """benchmarks/contest_jury.py's room, smaller: the right arrow and the space bar each reveal a result on the
    projector view without reloading it; at 390 px the board's total column sticks to the left, at 1280 it
    does not need to."""
    from datetime import timedelta

    from helpers import benchmark, needs_a_browser

    pytest.importorskip("selenium.webdriver", reason="needs selenium (the dev extra)")
    needs_a_browser()
    bench = benchmark("contest_jury")
    bench.STUDENTS = 12
    clock = bench.Clock()
    app, tokens, _ = bench.room(tmp_path / "room", clock)
    clock.now += timedelta(hours=3)  # every window over: no step waits
    server, base = bench.serve(app)
    driver = bench.browser()
    try:
        keys = bench.resolver_keys(driver, base, tokens["coach"])
        assert keys["not_reloaded"] and len(keys["said"]) == 2, keys
        assert all(line.endswith("revealed.") for line in keys["said"]), keys
        assert keys["said"][0] != keys["said"][1]  # two different results, one a key
        sticky = "return getComputedStyle(document.querySelector('table.standings tr > :nth-child(3)')).position"
        positions = {}
        for width in (390, 1280):
            driver.set_window_size(width, 800)
            driver.get(base + "/scoreboard")
            positions[width] = driver.execute_script(sticky)
        assert positions == {390: "sticky", 1280: "static"}, positions
    finally:
        driver.quit()
        server.should_exit = True
