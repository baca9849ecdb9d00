"""The contest server (grader/contest/web/) through FastAPI's TestClient, with a clock the tests set.

A TestClient used outside ``with`` runs no lifespan, so no grading: those tests check logins, uploads and
refusals, fast. The slow ones start the grading queue (the sandboxed batch path) and grade real uploads.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from grader.batch.gradebook import Gradebook
from grader.batch.summary import NOT_SUBMITTED, failure_rates, milestone_means, set_aside
from grader.contest.commands import contest as contest_group
from grader.contest.store import Store
from grader.contest.submit import feedback_lines
from grader.contest.uploads import UploadError, check_upload
from grader.contest.web.app import create_app
from grader.milestones import MILESTONES
from helpers import (
    CONTEST_START,
    EXERCISES,
    REPO,
    SOLUTIONS,
    ContestClock,
    ServedInThread,
    auth,
    cli,
    fill_paper_notebook,
    forget_counts,
    free_port,
    opened_a_minute_ago,
    serve_contest,
    tokens,
    upload,
)

START = CONTEST_START
TITLE = "Server test"
TASKS = '[tasks.m1]\npoints = 30\n[tasks.m2]\npoints = 20\nmax_submissions = 1\nscoring = "selected"\nselect = 1\n'
PAPER_M1 = 'title = "P"\nminutes = 60\n[parts.m1]\npoints = 30\n'  # a paper of one part, m1


Clock = ContestClock


@pytest.fixture
def folder(contest) -> Path:
    return contest(TASKS, title=TITLE)


@pytest.fixture(scope="module")
def shared_app(module_contest):
    """One contest and its app for the tests that change nothing another of them reads: refusals, 404s, the pages
    of a contest where nothing was submitted. A test that uploads, grades or changes a setting has its own."""
    folder = module_contest(TASKS, title=TITLE, name="shared")
    return folder, create_app(folder, Clock())


@pytest.fixture
def shared(shared_app):
    """The shared contest folder and app, their in-memory counts as a fresh app's (helpers.forget_counts)."""
    folder, app = shared_app
    forget_counts(app)
    return folder, app


def reference() -> list[tuple[str, bytes]]:
    return [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())]


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def wait_graded(client: TestClient, folder: Path, who: str, sid: int, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        entry = client.get(f"/api/submissions/{sid}", headers=auth(folder, who)).json()
        if entry["status"] != "queued":
            return entry
        time.sleep(0.3)
    raise AssertionError(f"submission {sid} not graded in {seconds} s")


# --- Logins and who may see what --------------------------------------------------------------------------------


def test_login_form_sets_a_cookie_and_me_records_the_first_login(folder):
    clock = Clock()
    client = TestClient(create_app(folder, clock))
    assert "token" in client.get("/").text
    refused = client.post("/login", data={"token": "not-a-token"}, follow_redirects=False)
    assert refused.status_code == 401
    ok = client.post("/login", data={"token": tokens(folder)["ada"]}, follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/me"
    assert "httponly" in ok.headers["set-cookie"].lower()
    page = client.get("/me")
    assert page.status_code == 200 and "ada" in page.text and "Submit to m1" in page.text
    assert Store(folder).first_login("ada") == clock.now
    events = Store(folder).events()
    assert events[-1]["kind"] == "login refused" and "not-a-token" not in json.dumps(events)


def test_no_token_is_401_and_a_student_token_on_coach_pages_is_403(shared):
    folder, app = shared
    client = TestClient(app)
    assert client.get("/me").status_code == 401
    assert client.get("/coach", headers=auth(folder, "ada")).status_code == 403
    assert client.post("/coach/freeze", headers=auth(folder, "ada")).status_code == 403
    assert client.post("/coach/extend", data={"minutes": "10"}, headers=auth(folder, "ada")).status_code == 403
    assert client.get("/coach", headers=auth(folder, "coach")).status_code == 200
    assert client.get("/me", headers=auth(folder, "coach")).status_code == 403


def test_a_submission_is_its_students_only(folder):
    client = TestClient(create_app(folder, Clock()))
    accepted = upload(client, folder, "ada", "m1", reference())
    assert accepted.status_code == 202, accepted.text
    sid = accepted.json()["id"]
    assert client.get(f"/api/submissions/{sid}", headers=auth(folder, "ada")).json()["status"] == "queued"
    assert client.get(f"/api/submissions/{sid}", headers=auth(folder, "alan")).status_code == 404
    assert client.get(f"/api/submissions/{sid}", headers=auth(folder, "coach")).json()["student"] == "ada"
    assert (folder / "uploads" / str(sid) / "m1_attention.py").read_bytes() == reference()[0][1]


# --- Uploads refused --------------------------------------------------------------------------------------------


def test_upload_after_the_end_is_refused_and_recorded(folder):
    clock = Clock(minutes=61)
    client = TestClient(create_app(folder, clock))
    refused = upload(client, folder, "ada", "m1", reference())
    assert refused.status_code == 403 and "ended" in refused.json()["detail"]
    assert Store(folder).all() == []
    assert [e["kind"] for e in Store(folder).events("ada")] == ["refused"]


def test_unsafe_zip_bad_notebook_and_wrong_names_are_400(folder):
    client = TestClient(create_app(folder, Clock()))
    evil = upload(client, folder, "ada", "m1", [("work.zip", zipped({"../evil.py": b"x = 1"}))])
    assert evil.status_code == 400 and "unsafe path" in evil.json()["detail"]
    absolute = upload(client, folder, "ada", "m1", [("work.zip", zipped({"/etc/m1_attention.py": b"x = 1"}))])
    assert absolute.status_code == 400
    notebook = upload(client, folder, "ada", "m1", [("mine.ipynb", b'{"cells": [')])
    assert notebook.status_code == 400 and "not a valid notebook" in notebook.json()["detail"]
    wrong = upload(client, folder, "ada", "m1", [("m2_model.py", b"x = 1")])
    assert wrong.status_code == 400 and "m1_attention.py" in wrong.json()["detail"]
    assert upload(client, folder, "ada", "m9", reference()).status_code == 404
    rows = Store(folder).all()
    assert [r.status for r in rows] == ["rejected"] * 4 and not any((folder / "uploads").iterdir())
    assert len([e for e in Store(folder).events("ada") if e["kind"] == "refused"]) == 5


def test_check_upload_keeps_a_zips_exercise_files_and_a_notebook():
    files = check_upload("m1", [("w.zip", zipped({"work/m1_attention.py": b"a = 1", "work/data.txt": b"."}))])
    assert files == {"m1_attention.py": b"a = 1"}
    notebook = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}).encode()
    assert check_upload("m1", [("x.ipynb", notebook)]) == {"submission.ipynb": notebook}
    with pytest.raises(UploadError, match="one notebook"):
        check_upload("m1", [("x.ipynb", notebook), ("m1_attention.py", b"")])
    with pytest.raises(UploadError, match="not a valid zip"):
        check_upload("m1", [("x.zip", b"PK nonsense")])


def test_the_cap_counts_graded_submissions_only(folder):
    clock = Clock()
    client = TestClient(create_app(folder, clock))
    store = Store(folder)
    m2 = [("m2_model.py", (SOLUTIONS / "m2_model.py").read_bytes())]
    first = upload(client, folder, "ada", "m2", m2).json()["id"]
    assert upload(client, folder, "ada", "m2", m2).status_code == 403  # one is queued: it may be graded
    store.finish(first, clock.now, {"error": "the grader broke"})  # failed: it costs nothing
    failed = client.get(f"/api/submissions/{first}", headers=auth(folder, "ada")).json()
    assert failed["status"] == "failed" and "grader broke" not in json.dumps(failed)
    assert "the grader broke" in client.get("/coach", headers=auth(folder, "coach")).text
    clock.now += timedelta(minutes=1)
    second = upload(client, folder, "ada", "m2", m2)
    assert second.status_code == 202
    report = {"milestones": [{"id": "m2", "title": "The full TinyGPT", "score": 5, "max_score": 10, "checks": []}]}
    assert store.finish(second.json()["id"], clock.now, report)
    refused = upload(client, folder, "ada", "m2", m2)
    assert refused.status_code == 403 and "your one graded submission" in refused.json()["detail"]
    assert client.post(f"/select/{first}", headers=auth(folder, "ada")).status_code == 409  # failed: not selectable
    assert client.post(f"/select/{second.json()['id']}", headers=auth(folder, "ada")).json()["selected"]
    assert client.post(f"/select/{second.json()['id']}", headers=auth(folder, "alan")).status_code == 404
    board = client.get("/api/scoreboard", headers=auth(folder, "alan")).json()
    assert board["rows"][0]["student"] == "ada" and board["rows"][0]["tasks"]["m2"] == 10
    coach = auth(folder, "coach")
    assert client.post(f"/coach/regrade/{second.json()['id']}", headers=coach).status_code == 409
    assert client.post(f"/coach/regrade/{first}", headers=coach).json()["status"] == "queued"
    assert store.get(first).status == "queued" and store.get(first).error is None


def test_uploads_are_rate_limited_per_token(folder):
    client = TestClient(create_app(folder, Clock(), uploads_per_minute=2))
    bad = [("m1_attention.py", b"\xff")]
    assert [upload(client, folder, "ada", "m1", bad).status_code for _ in range(3)] == [400, 400, 429]
    assert upload(client, folder, "alan", "m1", bad).status_code == 400


def test_coach_extends_adds_time_voids_and_freezes(folder):
    clock = Clock(minutes=61)
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    assert upload(client, folder, "ada", "m1", reference()).status_code == 403
    assert client.post("/coach/extra-time", data={"student": "ada", "minutes": "5"}, headers=coach).status_code == 200
    assert (
        client.post("/coach/extra-time", data={"student": "nobody", "minutes": "5"}, headers=coach).status_code == 400
    )
    accepted = upload(client, folder, "ada", "m1", reference())
    assert accepted.status_code == 202
    assert upload(client, folder, "alan", "m1", reference()).status_code == 403
    assert client.post("/coach/extend", data={"minutes": "10"}, headers=coach).json()["extend_minutes"] == 10
    alan = upload(client, folder, "alan", "m1", reference()).json()["id"]
    report = {"milestones": [{"id": "m1", "title": "t", "score": 27, "max_score": 27, "checks": []}]}
    assert Store(folder).finish(alan, clock.now, report)
    clock.now += timedelta(minutes=1)
    assert client.post("/coach/freeze", headers=coach).status_code == 200
    clock.now += timedelta(minutes=1)
    grace = upload(client, folder, "grace", "m1", reference()).json()["id"]
    assert Store(folder).finish(grace, clock.now, report)
    frozen = client.get("/api/scoreboard", headers=auth(folder, "ada")).json()
    assert frozen["frozen_at"] and [(r["student"], r["total"]) for r in frozen["rows"]][:2] == [
        ("alan", 30),
        ("ada", 0),
    ]
    live = client.get("/api/scoreboard", headers=coach).json()
    assert live["live"] and live["rows"][0]["student"] == "alan" and live["rows"][1]["student"] == "grace"
    assert client.post(f"/coach/void/{alan}", headers=coach).json()["voided"]  # counts for nothing, anywhere
    live = client.get("/api/scoreboard", headers=coach).json()
    assert [(r["student"], r["total"]) for r in live["rows"]][0] == ("grace", 30)
    assert all(r["total"] == 0 for r in client.get("/api/scoreboard", headers=auth(folder, "ada")).json()["rows"])
    client.post("/coach/unfreeze", headers=coach)
    assert client.get("/api/scoreboard", headers=auth(folder, "grace")).json()["frozen_at"] is None
    assert "Live standings" in client.get("/coach", headers=coach).text


def test_a_browser_logs_in_uploads_and_sees_full_feedback(folder):
    """The pages as a browser uses them: a cookie, form posts answered with redirects, errors as pages."""
    clock = Clock()
    client = TestClient(create_app(folder, clock), headers={"Accept": "text/html"})
    client.post("/login", data={"token": tokens(folder)["ada"]})
    files = [("files", ("m1_attention.py", reference()[0][1], "text/x-python"))]
    sent = client.post("/submit/m1", files=files, follow_redirects=False)
    assert sent.status_code == 303 and sent.headers["location"].startswith("/me#submission-")
    report = json.loads((REPO / "tests" / "unit" / "data" / "graded-m1-m2.json").read_text())
    assert Store(folder).finish(1, clock.now, report)
    page = client.get("/me").text
    assert "7.98 / 30" in page and "causal_mask(T) is the lower-triangular matrix of ones" in page
    bad = client.post("/submit/m1", files=[("files", ("notes.txt", b"hi", "text/plain"))])
    assert bad.status_code == 400 and "notes.txt" in bad.text
    assert "400:" not in bad.text and "<strong>400</strong>" not in bad.text, "the page shows the message, not a code"
    assert "Refused at" in client.get("/me").text
    board = client.get("/scoreboard")
    assert board.status_code == 200 and "<td>ada</td>" in board.text
    assert client.post("/logout", follow_redirects=False).headers["location"] == "/"
    client.cookies.clear()
    assert client.get("/me").status_code == 401


def test_a_personal_window_opens_at_the_first_visit(contest):
    folder = contest(TASKS, title=TITLE, personal=True)
    clock = Clock(minutes=500)
    client = TestClient(create_app(folder, clock))
    refused = upload(client, folder, "ada", "m1", reference())
    assert refused.status_code == 403 and "log in to start it" in refused.json()["detail"]
    me = client.get("/api/me", headers=auth(folder, "ada")).json()
    assert me["phase"] == "open" and me["remaining_seconds"] == 3600
    assert upload(client, folder, "ada", "m1", reference()).status_code == 202
    clock.now += timedelta(minutes=60)
    assert client.get("/api/me", headers=auth(folder, "ada")).json()["phase"] == "ended"


# --- Grading ----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_queued_upload_survives_a_restart_is_graded_once_and_scored(folder):
    """An upload left queued by a server that stopped before grading it is graded by the next one, once;
    the reference scores full marks, a stub zero, and the scoreboard shows it."""
    clock = Clock()
    stopped = TestClient(create_app(folder, clock))  # no lifespan: nothing graded
    sid = upload(stopped, folder, "ada", "m1", reference()).json()["id"]
    assert Store(folder).get(sid).status == "queued"
    del stopped

    with TestClient(create_app(folder, clock, workers=2)) as client:
        entry = wait_graded(client, folder, "ada", sid)
        assert entry["status"] == "graded", entry
        task = entry["feedback"]["tasks"][0]
        assert task["id"] == "m1" and task["score"] == task["max_score"] == 30
        assert all(check["passed"] for check in task["checks"])
        assert "30 / 30 points" in "\n".join(feedback_lines(entry))

        stub = [("m1_attention.py", (EXERCISES / "m1_attention.py").read_bytes())]
        clock.now += timedelta(minutes=1)
        zero = wait_graded(client, folder, "alan", upload(client, folder, "alan", "m1", stub).json()["id"])
        assert zero["status"] == "graded" and zero["feedback"]["tasks"][0]["score"] == 0, zero

        board = client.get("/api/scoreboard", headers=auth(folder, "grace")).json()
        assert [(r["student"], r["total"]) for r in board["rows"]][:2] == [("ada", 30), ("alan", 0)]
        assert "graded" in client.get("/me", headers=auth(folder, "ada")).text

    row = Store(folder).get(sid)
    assert row.status == "graded" and not Store(folder).finish(sid, clock.now, {"error": "again"})
    assert [r.id for r in Store(folder).all() if r.status == "graded"] == [sid, sid + 1]


@pytest.mark.slow
def test_serve_and_grade_submit_survive_kill_9(contest):
    """`grade contest serve` and `grade submit`, as run by a coach and a student: an upload accepted just
    before the server is killed with -9 is graded, once, by the next server."""
    folder = contest(TASKS, title=TITLE, start=opened_a_minute_ago())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "GPTKIT_CONTEST_TOKEN": tokens(folder)["ada"]}
    first = serve_contest(folder, port)
    try:
        sent = cli("submit", str(SOLUTIONS), "--server", url, "-m", "m1", "--no-wait", env=env, timeout=60)
        assert sent.returncode == 0, sent.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert [(r.id, r.status) for r in Store(folder).all()] == [(1, "queued")]
    second = serve_contest(folder, port)
    try:
        graded = cli("submit", str(EXERCISES), "--server", url, "-m", "m1", env=env, timeout=180)
        assert graded.returncode == 0, graded.stderr
        assert "submission 2 to m1: graded" in graded.stdout and "m1: 0 / 30 points" in graded.stdout
        assert "FAIL" in graded.stdout
        request = urllib.request.Request(
            f"{url}/api/submissions/1", headers={"Authorization": f"Bearer {env['GPTKIT_CONTEST_TOKEN']}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            entry = json.loads(response.read())
        assert entry["status"] == "graded" and entry["feedback"]["tasks"][0]["score"] == 30
        refused = cli("submit", str(SOLUTIONS), "--server", url, "-m", "m1", "--token", "wrong", timeout=60)
        assert refused.returncode == 2 and "401" in refused.stderr
    finally:
        second.send_signal(signal.SIGINT)
        try:
            second.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(second.pid, signal.SIGKILL)
            raise AssertionError("the server did not stop within 30 s of Ctrl-C") from None
    assert [r.status for r in Store(folder).all()] == ["graded", "graded"]


# --- The session's results: export, charts, regrading a task ------------------------------------------------------


def m_report(task: str, passed: list[bool]) -> dict:
    """A grader report for one milestone: one point per check, ``passed`` saying which pass."""
    checks = [
        {"name": f"check {i}", "milestone": task, "score": float(ok), "max_score": 1.0, "passed": ok, "message": ""}
        for i, ok in enumerate(passed)
    ]
    score = float(sum(passed))
    milestone = {"id": task, "title": task, "score": score, "max_score": float(len(passed)), "checks": checks}
    totals = {"score": score, "max_score": float(len(passed)), "seconds": 1.0, "protections": []}
    return {**totals, "milestones": [milestone]}


def recorded_session(folder: Path) -> tuple[Path, TestClient, dict[str, int]]:
    """ada: m1 at 2/4 then 4/4 (best counts), m2 twice, the first selected; alan: m1 at 4/4 voided, m2 failed;
    grace: nothing. Returns the folder, the TestClient and the submission ids."""
    clock = Clock()
    client = TestClient(create_app(folder, clock))
    store = Store(folder)
    ids = {}
    for key, who, task, passed in [
        ("ada-m1-half", "ada", "m1", [True, True, False, False]),
        ("ada-m1-full", "ada", "m1", [True] * 4),
        ("ada-m2-first", "ada", "m2", [True, False]),
        ("alan-m1", "alan", "m1", [True] * 4),
        ("alan-m2", "alan", "m2", None),
    ]:
        clock.now += timedelta(minutes=1)
        files = [(f"{name}.py", (SOLUTIONS / f"{name}.py").read_bytes()) for name in MILESTONES[task].modules]
        response = upload(client, folder, who, task, files)
        assert response.status_code == 202, response.text
        ids[key] = sid = response.json()["id"]
        store.finish(sid, clock.now, m_report(task, passed) if passed else {"error": "the grader broke"})
    client.post(f"/coach/void/{ids['alan-m1']}", headers=auth(folder, "coach"))
    client.post(f"/select/{ids['ada-m2-first']}", headers=auth(folder, "ada"))
    return folder, client, ids


@pytest.fixture
def session(folder):
    """The session (recorded_session) in a folder of the test's own: for a test that adds to it or regrades."""
    return recorded_session(folder)


@pytest.fixture(scope="module")
def shared_session(module_contest):
    """The session once for the module's tests that only read it: the gradebook, the CSV, the Gradescope zip and
    the charts are each written anew from the store whenever asked (grader/contest/web/routes/exports.py)."""
    return recorded_session(module_contest(TASKS, title=TITLE, name="session"))


def test_the_results_csv_holds_each_students_counted_points_as_on_the_scoreboard(shared_session):
    folder, client, _ = shared_session
    coach = auth(folder, "coach")
    response = client.get("/coach/results.csv", headers=coach)
    assert response.status_code == 200 and "attachment" in response.headers["content-disposition"]
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(response.text))}
    board = {r["student"]: r for r in client.get("/api/scoreboard", headers=coach).json()["rows"]}
    assert set(rows) == {"ada", "alan", "grace"}
    for name, row in rows.items():
        assert float(row["score"] or 0) == pytest.approx(board[name]["total"]), name
    ada = {key: float(rows["ada"][key]) for key in ("m1", "m2", "score", "max_score")}
    assert ada == {"m1": 30, "m2": 10, "score": 40, "max_score": 50}
    for name in ("grace", "alan"):  # nothing submitted; voided + failed: 0 points, as on the scoreboard, and why
        assert (rows[name]["status"], float(rows[name]["score"])) == ("nothing to grade", 0), rows[name]


def test_the_gradescope_zip_has_one_results_json_per_student_in_contest_points(shared_session):
    folder, client, _ = shared_session
    response = client.get("/coach/gradescope.zip", headers=auth(folder, "coach"))
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        assert sorted(zf.namelist()) == ["ada/results.json", "alan/results.json", "grace/results.json"]
        ada = json.loads(zf.read("ada/results.json"))
    assert ada["score"] == 40 and sum(t["max_score"] for t in ada["tests"]) == pytest.approx(50)
    # laid out as the autograder zip is: a test per milestone, hidden until the grades are published
    assert [(t["name"], t["visibility"]) for t in ada["tests"]] == [
        ("m1: Causal self-attention", "after_published"),
        ("m2: The full TinyGPT", "after_published"),
    ]


def test_the_charts_page_draws_grade_reports_charts_for_the_coach_only(shared_session):
    folder, client, _ = shared_session
    page = client.get("/coach/charts", headers=auth(folder, "coach"))
    assert page.status_code == 200
    names = re.findall(r'src="/coach/charts/([a-z-]+\.png)"', page.text)
    assert "milestone-heatmap.png" in names
    for name in names:
        image = client.get(f"/coach/charts/{name}", headers=auth(folder, "coach"))
        assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert client.get("/coach/charts", headers=auth(folder, "ada")).status_code == 403
    assert client.get("/coach/charts/milestone-heatmap.png", headers=auth(folder, "ada")).status_code == 403
    for name in ["..%2Fcontest.toml", "contest.sqlite", "nothing.png"]:
        assert client.get(f"/coach/charts/{name}", headers=auth(folder, "coach")).status_code == 404


def test_grade_contest_export_writes_the_gradebook_then_grade_exports_files(shared_session):
    folder, _, _ = shared_session
    result = CliRunner().invoke(
        contest_group,
        ["export", str(folder), "--csv", str(folder / "out.csv"), "--gradescope", str(folder / "gs")],
    )
    assert result.exit_code == 0, result.output
    assert (folder / "grades.sqlite").exists() and (folder / "gs" / "ada" / "results.json").exists()
    ada = next(r for r in csv.DictReader((folder / "out.csv").open()) if r["student"] == "ada")
    assert (float(ada["score"]), float(ada["m1"]), float(ada["m2"])) == (40, 30, 10)
    reported = cli("report", str(folder / "grades.sqlite"))
    assert reported.returncode == 0 and "3 submissions: 1 graded" in reported.stdout, reported.stderr


def test_a_task_a_student_did_not_submit_counts_as_0_in_the_task_mean(session):
    """grace submits m1 only: m2's class mean is over ada (10 of 20) and grace (0), not over ada alone."""
    folder, client, _ = session
    files = [(f"{name}.py", (SOLUTIONS / f"{name}.py").read_bytes()) for name in MILESTONES["m1"].modules]
    response = upload(client, folder, "grace", "m1", files)
    assert response.status_code == 202, response.text
    Store(folder).finish(response.json()["id"], datetime.now(timezone.utc), m_report("m1", [True] * 4))
    result = CliRunner().invoke(contest_group, ["export", str(folder)])
    assert result.exit_code == 0, result.output
    book = Gradebook(folder / "grades.sqlite")
    try:
        book_checks = book.checks()
    finally:
        book.close()
    means = milestone_means([c for c in book_checks if not set_aside(c)])
    assert means == {"m1": pytest.approx(1.0), "m2": pytest.approx(0.25)}, means
    rates = dict(failure_rates([c for c in book_checks if not set_aside(c)]))
    assert ("m2", NOT_SUBMITTED) not in rates, "not submitting is no check the student failed"


def test_grade_contest_export_of_a_folder_with_nothing_submitted_says_so(folder):
    result = CliRunner().invoke(contest_group, ["export", str(folder)])
    assert result.exit_code == 2 and "nothing was submitted" in result.output


def test_regrading_a_task_queues_its_graded_and_failed_submissions_only(session):
    folder, client, ids = session
    coach = auth(folder, "coach")
    assert client.post("/coach/regrade-task", data={"task": "m9"}, headers=coach).status_code == 400
    assert client.post("/coach/regrade-task", data={"task": "m1"}, headers=auth(folder, "ada")).status_code == 403
    queued = client.post("/coach/regrade-task", data={"task": "m2"}, headers=coach).json()["queued"]
    assert queued == [ids["ada-m2-first"], ids["alan-m2"]]
    rows = {r.id: r for r in Store(folder).all()}
    assert {rows[i].status for i in queued} == {"queued"} and rows[ids["ada-m1-full"]].status == "graded"
    assert rows[ids["ada-m2-first"]].selected  # the student's choice stays
    queued = client.post("/coach/regrade-task", data={"task": "m1"}, headers=coach).json()["queued"]
    assert queued == [ids["ada-m1-half"], ids["ada-m1-full"]]  # alan's voided one stays out
    assert "m1: 2 submission(s) queued again" in json.dumps(Store(folder).events())


def test_serve_with_an_unreachable_scheduler_is_a_usage_error(folder):
    """A free port of its own: on the default 8000, anything else listening there (another test run, a notebook
    server) made this fail for the port, not the scheduler."""
    port = str(free_port())
    proc = cli("contest", "serve", str(folder), "--scheduler", "tcp://127.0.0.1:9", "--port", port, timeout=120)
    assert proc.returncode == 2 and "no Dask scheduler answers at tcp://127.0.0.1:9" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_dask_cluster_grades_the_uploads_and_regrades_a_task(folder):
    """--scheduler: the same queue with a Dask client's executor; a regrade runs again (not Dask's memo)."""
    distributed = pytest.importorskip("distributed")
    clock = Clock()
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as dask,
        TestClient(create_app(folder, clock, executor=dask.get_executor(pure=False))) as client,
    ):
        sid = upload(client, folder, "ada", "m1", reference()).json()["id"]
        entry = wait_graded(client, folder, "ada", sid, seconds=300)
        assert entry["status"] == "graded" and entry["feedback"]["tasks"][0]["score"] == 30, entry
        first = Store(folder).get(sid).graded_at
        clock.now += timedelta(minutes=1)
        client.post("/coach/regrade-task", data={"task": "m1"}, headers=auth(folder, "coach"))
        again = wait_graded(client, folder, "ada", sid, seconds=300)
        assert again["status"] == "graded" and Store(folder).get(sid).graded_at > first


# The reference m1, each worker process's first call sleeping 4 s: a grading long enough to lose its machine in.
SLEEPS_FIRST = 'if not globals().get("_slept"):\n    globals()["_slept"] = True\n    import time\n    time.sleep(4)'


@pytest.mark.slow
def test_a_dask_worker_lost_mid_grading_gives_its_submission_back(folder):
    """A machine of the cluster lost while it grades (its worker killed, as a machine switched off): Dask hands
    the submission to a worker still there, and it is graded once, in full, not failed and not lost."""
    distributed = pytest.importorskip("distributed")
    import attacks as A

    old, new = A.in_call(SLEEPS_FIRST)
    slow = (SOLUTIONS / "m1_attention.py").read_text().replace(old, new, 1)
    assert slow.count("time.sleep(4)") == 1
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as dask,
        TestClient(create_app(folder, Clock(), executor=dask.get_executor(pure=False))) as client,
    ):
        sid = upload(client, folder, "ada", "m1", [("m1_attention.py", slow.encode())]).json()["id"]
        deadline = time.monotonic() + 120
        while not any(dask.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        (grading,) = [worker for worker, keys in dask.processing().items() if keys]
        time.sleep(1)  # inside its grading: the first call's sleep
        pid = dask.run(os.getpid, workers=[grading])[grading]
        assert Store(folder).get(sid).status == "queued", "graded before its worker could be lost"  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)
        entry = wait_graded(client, folder, "ada", sid, seconds=300)
        assert entry["status"] == "graded" and entry["feedback"]["tasks"][0]["score"] == 30, entry
    rows = Store(folder).all()
    assert [(row.id, row.status) for row in rows] == [(sid, "graded")]


def test_a_contest_on_a_paper_grades_each_student_with_their_own_variant_and_the_papers_rules(contest):
    """The queue hands grade_one each student's seed (from the paper's secret, made once: the numbers
    `grade paper render` gives) and the paper's rules for every part."""
    from grader.paper.config import SECRET_FILE
    from grader.variants import seed_of

    folder = contest("", title="S", paper=PAPER_M1)
    seen = []

    class Recorder:
        def submit(self, fn, *args, **kwargs):
            seen.append((args, kwargs))
            from concurrent.futures import Future

            return Future()  # never done: nothing is recorded

        def shutdown(self, wait=True):
            pass

    with TestClient(create_app(folder, Clock(), executor=Recorder())) as client:
        for who in ("ada", "alan"):
            assert upload(client, folder, who, "m1", reference()).status_code == 202
    secret = (folder / "paper1" / SECRET_FILE).read_text().strip()
    assert oct((folder / "paper1" / SECRET_FILE).stat().st_mode & 0o777) == "0o600"
    assert [kwargs["seed"] for _, kwargs in seen] == [seed_of(secret, "paper1", who) for who in ("ada", "alan")]
    assert seen[0][1]["seed"] != seen[1][1]["seed"]
    assert all(kwargs["rules"] == {"m1": frozenset()} for _, kwargs in seen)


def test_a_paper_and_a_task_of_its_own_in_one_round(contest):
    """One token, one page: the paper's part is graded on the student's numbers and the paper's rules, the
    contest's own task beside it on the lesson's numbers, without the paper's rules."""
    folder = contest("[tasks.m4]\npoints = 10\n", title="S", paper=PAPER_M1)
    seen = []

    class Recorder:
        def submit(self, fn, path, milestones, *args, **kwargs):
            seen.append((milestones, kwargs))
            from concurrent.futures import Future

            return Future()  # never done: nothing is recorded

        def shutdown(self, wait=True):
            pass

    with TestClient(create_app(folder, Clock(), executor=Recorder())) as client:
        page = client.get("/me", headers=auth(folder, "ada")).text
        assert "Submit to m1" in page and "Submit to m4" in page, "both tasks on the student's one page"
        assert upload(client, folder, "ada", "m1", reference()).status_code == 202
        m4 = [("m4_generate.py", (SOLUTIONS / "m4_generate.py").read_bytes())]
        assert upload(client, folder, "ada", "m4", m4).status_code == 202
        board = client.get("/api/scoreboard", headers=auth(folder, "ada")).json()
    (m1, paper_part), (m4_task, own) = seen
    assert m1 == ["m1"] and set(paper_part) == {"seed", "rules"}, "the paper's part: the student's numbers"
    assert m4_task == ["m4"] and own == {}, "the contest's own task: the lesson's numbers, no rules"
    assert set(board["rows"][0]["tasks"]) == {"m1", "m4"}, "the board counts the paper's part and the task"


def test_a_student_downloads_their_own_notebook_of_the_paper(shared, contest):
    """The notebook a contest on a paper hands out carries the seed it grades with; no paper, no notebook."""
    plain, app = shared
    assert TestClient(app).get("/paper.ipynb", headers=auth(plain, "ada")).status_code == 404
    folder = contest("", title="S", paper='title = "P"\nminutes = 180\n[parts.m1]\n[parts.kvmemory]\n')
    client = TestClient(create_app(folder, Clock()))
    assert "download your notebook" in client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    books = {who: client.get("/paper.ipynb", headers=auth(folder, who)) for who in ("ada", "alan")}
    assert all(r.status_code == 200 for r in books.values())
    meta = {who: r.json()["metadata"]["gptkit"]["paper"] for who, r in books.items()}
    assert meta["ada"]["student"] == "ada" and meta["ada"]["seed"] != meta["alan"]["seed"]
    assert "Q_NUM1" in json.dumps(books["ada"].json()["cells"])
    assert "Time: 60 minutes" in json.dumps(books["ada"].json()["cells"]), "the contest's window, not the paper's 180"
    assert books["ada"].headers["content-disposition"].startswith('attachment; filename="paper1-ada.ipynb"'), (
        "the name `grade paper render` gives the notebook"
    )
    assert client.get("/paper.ipynb", headers=auth(folder, "coach")).status_code == 403


@pytest.mark.slow
def test_a_contest_on_a_paper_grades_a_filled_notebook_with_the_students_own_numbers(contest, tmp_path):
    """End to end: ada downloads her notebook, fills it with the reference and her own answers, uploads it to the
    kvmemory task: full marks. alan's upload of ada's answers loses the questions drawn for him, and the multiple
    choice whose right option his order puts at another letter."""
    folder = contest("", title="S", paper='title = "P"\nminutes = 60\n[parts.kvmemory]\npoints = 20\n')
    clock = Clock()
    with TestClient(create_app(folder, clock)) as client:
        book = client.get("/paper.ipynb", headers=auth(folder, "ada")).json()
        (tmp_path / "ada.ipynb").write_text(json.dumps(book))
        seed = book["metadata"]["gptkit"]["paper"]["seed"]
        fill_paper_notebook(tmp_path / "ada.ipynb", seed, tmp_path / "filled.ipynb")
        filled = [("ada.ipynb", (tmp_path / "filled.ipynb").read_bytes())]
        graded = {}
        for who in ("ada", "alan"):
            clock.now += timedelta(minutes=1)
            response = upload(client, folder, who, "kvmemory", filled)
            assert response.status_code == 202, response.text
            graded[who] = wait_graded(client, folder, who, response.json()["id"], seconds=300)
    tasks = {who: entry["feedback"]["tasks"][0] for who, entry in graded.items()}
    assert tasks["ada"]["score"] == 20, graded["ada"]
    assert tasks["alan"]["score"] < 20
    failed = [c["name"] for c in tasks["alan"]["checks"] if not c["passed"]]
    assert failed and all("Q_NUM" in name or "Q_MC" in name for name in failed), failed


# --- The coach's changes are checked before they are stored ---------------------------------------------------------


@pytest.mark.parametrize("minutes", ["nan", "NaN", "inf", "-inf"])
def test_extending_by_a_value_that_is_not_a_number_is_400_and_stores_nothing(shared, minutes):
    folder, app = shared
    client = TestClient(app)
    coach = auth(folder, "coach")
    extend = client.post("/coach/extend", data={"minutes": minutes}, headers=coach)
    assert extend.status_code == 400 and extend.json()["detail"] == "minutes must be a number"
    extra = client.post("/coach/extra-time", data={"student": "ada", "minutes": minutes}, headers=coach)
    assert extra.status_code == 400 and extra.json()["detail"] == "minutes must be a number"
    assert Store(folder).setting("extend_minutes") is None and Store(folder).extra_minutes() == {}
    assert client.get("/api/me", headers=auth(folder, "ada")).status_code == 200


def test_a_bad_stored_extension_is_ignored_and_every_page_still_answers(folder, caplog):
    """A value an older server stored (or a hand edit) must not take the contest down, now or after a restart."""
    Store(folder).set_setting("extend_minutes", "nan")
    client = TestClient(create_app(folder, Clock()))
    ada, coach = auth(folder, "ada"), auth(folder, "coach")
    for path, who in [("/me", ada), ("/api/me", ada), ("/scoreboard", ada), ("/coach", coach), ("/api/coach", coach)]:
        assert client.get(path, headers=who).status_code == 200, path
    assert client.get("/api/me", headers=ada).json()["remaining_seconds"] == 50 * 60  # the window as in the file
    assert "ignoring the stored extension 'nan'" in caplog.text
    assert client.post("/coach/extend", data={"minutes": "5"}, headers=coach).json()["extend_minutes"] == 5


def test_a_negative_extension_that_would_empty_the_window_is_refused(folder):
    client = TestClient(create_app(folder, Clock()))
    coach = auth(folder, "coach")
    refused = client.post("/coach/extend", data={"minutes": "-1000"}, headers=coach)
    assert refused.status_code == 400 and "end at or before its start" in refused.json()["detail"]
    assert client.post("/coach/extend", data={"minutes": "-60"}, headers=coach).status_code == 400  # exactly empty
    assert Store(folder).setting("extend_minutes") is None
    assert client.post("/coach/extend", data={"minutes": "-5"}, headers=coach).json()["extend_minutes"] == -5
    assert client.get("/api/me", headers=auth(folder, "ada")).json()["remaining_seconds"] == 45 * 60


def test_negative_extra_time_that_would_empty_a_students_window_is_refused(folder):
    client = TestClient(create_app(folder, Clock()))
    coach = auth(folder, "coach")
    refused = client.post("/coach/extra-time", data={"student": "ada", "minutes": "-100"}, headers=coach)
    assert refused.status_code == 400 and "ada's window would end at or before its start" in refused.json()["detail"]
    assert Store(folder).extra_minutes() == {}
    fine = client.post("/coach/extra-time", data={"student": "ada", "minutes": "-10"}, headers=coach)
    assert fine.status_code == 200 and fine.json()["added_minutes"] == -10
    # the window and ada's extra time together: shortening the window by 55 min leaves ada none
    assert client.post("/coach/extend", data={"minutes": "-55"}, headers=coach).status_code == 400


def test_a_wrong_bearer_token_is_told_so_and_no_token_is_asked_to_log_in(shared):
    from grader.contest.web.deps import UNKNOWN_TOKEN

    _, app = shared
    client = TestClient(app)
    wrong = client.get("/api/me", headers={"Authorization": "Bearer WRONG"})
    assert wrong.status_code == 401 and wrong.json()["detail"] == UNKNOWN_TOKEN
    assert client.get("/api/me").json()["detail"] == "log in with your contest token first"
    form = client.post("/login", data={"token": "WRONG"})
    assert form.status_code == 401 and UNKNOWN_TOKEN.capitalize() in html.unescape(form.text)


# --- Uploads: empty files, big files, and what `grade submit` says ------------------------------------------------


@pytest.fixture(scope="module")
def live(module_contest):
    """The app on loopback (uvicorn in a thread, no grading) with a clock the test sets, for `grade submit`: one
    for the module, as its tests only meet refusals (each sets the clock it needs). (URL, clock, folder)."""
    folder = module_contest(TASKS, title=TITLE, name="live")
    clock = Clock()
    with ServedInThread(create_app(folder, clock)) as served:
        yield served.url, clock, folder


def grade_submit(*args: str, token: str | None = None):
    from grader.contest.submit import submit

    env = {"GPTKIT_CONTEST_TOKEN": token} if token else {}
    return CliRunner().invoke(submit, list(args), env=env)


def test_an_empty_exercise_file_is_refused_and_costs_no_submission(folder):
    client = TestClient(create_app(folder, Clock()))
    empty = upload(client, folder, "ada", "m2", [("m2_model.py", b"")])
    assert empty.status_code == 400 and empty.json()["detail"].startswith("m2_model.py is empty")
    tasks = client.get("/api/me", headers=auth(folder, "ada")).json()["tasks"]
    assert next(t for t in tasks if t["id"] == "m2")["used"] == 0
    m2 = [("m2_model.py", (SOLUTIONS / "m2_model.py").read_bytes())]
    assert upload(client, folder, "ada", "m2", m2).status_code == 202, "the one m2 submission is still there"
    with pytest.raises(UploadError, match="m1_attention.py is empty"):
        check_upload("m1", [("w.zip", zipped({"m1_attention.py": b""}))])


def test_grade_submit_refuses_an_empty_file_before_uploading(tmp_path):
    (tmp_path / "m2_model.py").write_bytes(b"")
    result = grade_submit(str(tmp_path), "--server", "http://127.0.0.1:9", "-m", "m2", token="t")
    assert result.exit_code == 2 and "m2_model.py is empty" in result.output, result.output


def test_grade_submit_refuses_a_file_over_the_limit_before_uploading(tmp_path):
    from grader.contest.uploads import MAX_UPLOAD_BYTES

    big = tmp_path / "m1_attention.py"
    big.write_bytes(b"#" * (MAX_UPLOAD_BYTES + 1))
    result = grade_submit(str(big), "--server", "http://127.0.0.1:9", "-m", "m1", token="t")
    assert result.exit_code == 2 and f"the upload is over {MAX_UPLOAD_BYTES >> 20} MB" in result.output
    assert "cannot reach" not in result.output, "a refusal the client can foresee is not a network error"


def test_the_servers_413_names_the_limit(shared):
    from grader.contest.uploads import MAX_UPLOAD_BYTES

    folder, app = shared
    client = TestClient(app)
    big = upload(client, folder, "ada", "m1", [("m1_attention.py", b"#" * (MAX_UPLOAD_BYTES + 1))])
    assert big.status_code == 413 and f"over {MAX_UPLOAD_BYTES >> 20} MB" in big.json()["detail"]


def test_grade_submit_passes_on_the_servers_reason_when_the_window_is_closed(live):
    url, clock, folder = live
    clock.now = START - timedelta(minutes=5)
    early = grade_submit(str(SOLUTIONS), "--server", url, "-m", "m1", token=tokens(folder)["ada"])
    assert early.exit_code == 2 and "has not started: it opens at 09:00:00 UTC" in early.output, early.output
    clock.now = START + timedelta(minutes=61)
    late = grade_submit(str(SOLUTIONS), "--server", url, "-m", "m1", token=tokens(folder)["ada"])
    assert "your contest window has ended: submissions are closed" in late.output, late.output
    assert " is ended" not in late.output and " is not started" not in early.output


def test_grade_submit_with_a_wrong_token_is_told_the_token_is_unknown(live):
    from grader.contest.web.deps import UNKNOWN_TOKEN

    url, _, _ = live
    result = grade_submit(str(SOLUTIONS), "--server", url, "-m", "m1", "--token", "WRONG")
    assert result.exit_code == 2 and f"(401): {UNKNOWN_TOKEN}" in result.output, result.output


def test_grade_submit_help_says_the_token_may_come_from_the_environment():
    result = grade_submit("--help")
    assert "GPTKIT_CONTEST_TOKEN" in result.output and "[required]" not in result.output.split("--token")[1][:200]
    missing = grade_submit(".", "--server", "http://127.0.0.1:9", "-m", "m1")
    assert missing.exit_code == 2 and "GPTKIT_CONTEST_TOKEN" in missing.output


# --- The pages on a phone, the freeze on the coach's page, and less noise -------------------------------------------


def tables_in_scroll_boxes(page: str) -> bool:
    """Every <table> of the page sits directly in a <div class="scroll"> (overflow-x: auto): none runs off a phone."""
    return page.count("<table") == len(re.findall(r'<div class="scroll"[^>]*>\s*(?:\{[^}]*\}\s*)?<table', page))


def test_every_table_scrolls_in_its_own_box_and_times_are_short(folder):
    clock = Clock()
    client = TestClient(create_app(folder, clock))
    ada, coach = auth(folder, "ada") | {"Accept": "text/html"}, auth(folder, "coach") | {"Accept": "text/html"}
    sid = upload(client, folder, "ada", "m1", reference()).json()["id"]
    report = json.loads((REPO / "tests" / "unit" / "data" / "graded-m1-m2.json").read_text())
    assert Store(folder).finish(sid, clock.now, report)
    for path, who in [("/me", ada), ("/scoreboard", ada), ("/coach", coach), ("/scoreboard", coach)]:
        page = client.get(path, headers=who).text
        assert "<table" in page and tables_in_scroll_boxes(page), f"{path}: a table outside a scroll box"
        assert "+00:00<" not in page and "T09:10:00+00:00</td>" not in page, f"{path}: a raw ISO time is shown"
    me = client.get("/me", headers=ada).text
    assert '<time datetime="2026-03-14T09:10:00+00:00" title="2026-03-14T09:10:00+00:00">09:10:00 UTC</time>' in me
    assert '<strong class="nowrap">7.98 / 30</strong>' in me
    css = (REPO / "grader" / "templates" / "contest" / "base.html").read_text()
    assert ".scroll { overflow-x: auto;" in css and "white-space: nowrap" in css


def test_a_time_on_another_day_shows_its_date():
    from grader.contest.web.pages import short_time as _clock

    now = datetime(2026, 12, 1, 13, 40, tzinfo=timezone.utc)
    assert ">13:40:00 UTC<" in _clock("2026-12-01T13:40:00+00:00", now)
    assert ">12-02 09:00 UTC<" in _clock("2026-12-02T10:00:00+01:00", now)
    assert _clock(None, now) == "" and _clock("soon", now) == "soon"


FROZEN = {"scoreboard": "frozen", "freeze_minutes": 15}


def test_the_coach_sees_the_scheduled_freeze_coming_and_in_effect(contest):
    folder = contest(TASKS, title=TITLE, **FROZEN)
    clock = Clock(minutes=30)
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    coming = client.get("/api/coach", headers=coach).json()["freeze"]
    assert not coming["frozen"] and coming["scheduled"] == "2026-03-14T09:45:00+00:00"
    assert "freezes at" in client.get("/coach", headers=coach).text
    clock.now = START + timedelta(minutes=50)
    assert client.get("/api/scoreboard", headers=auth(folder, "ada")).json()["frozen_at"]
    freeze = client.get("/api/coach", headers=coach).json()["freeze"]
    assert freeze == {
        "frozen": True,
        "at": "2026-03-14T09:45:00+00:00",
        "by": "schedule",
        "lifts": "2026-03-14T10:00:00+00:00",
        "scheduled": None,
    }
    page = html.unescape(client.get("/coach", headers=coach).text)
    assert "frozen as of" in page and "scheduled freeze" in page and "it lifts at" in page and "Unfreeze" in page


def test_unfreeze_lifts_the_scheduled_freeze_for_the_students(contest):
    folder = contest(TASKS, title=TITLE, **FROZEN)
    clock = Clock(minutes=50)
    client = TestClient(create_app(folder, clock))
    coach, ada = auth(folder, "coach"), auth(folder, "ada")
    late = upload(client, folder, "alan", "m1", reference()).json()["id"]
    report = {"milestones": [{"id": "m1", "title": "t", "score": 27, "max_score": 27, "checks": []}]}
    assert Store(folder).finish(late, clock.now, report)
    frozen = client.get("/api/scoreboard", headers=ada).json()
    assert frozen["frozen_at"] and all(r["total"] == 0 for r in frozen["rows"])
    lifted = client.post("/coach/unfreeze", headers=coach).json()
    assert lifted["frozen_at"] is None and not lifted["freeze"]["frozen"]
    board = client.get("/api/scoreboard", headers=ada).json()
    assert board["frozen_at"] is None and board["rows"][0] == {**board["rows"][0], "student": "alan", "total": 30}
    assert client.post("/coach/freeze", headers=coach).json()["freeze"]["by"] == "coach", "a hand freeze still works"
    assert client.get("/api/scoreboard", headers=ada).json()["frozen_at"]


def test_the_student_page_shows_only_the_latest_recent_refusal(folder):
    clock = Clock()
    client = TestClient(create_app(folder, clock), headers={"Accept": "text/html"})
    ada = auth(folder, "ada")
    for _ in range(3):
        upload(client, folder, "ada", "m1", [("notes.txt", b"hi")])
        clock.now += timedelta(seconds=10)
    assert client.get("/me", headers=ada).text.count("Refused at") == 1
    clock.now += timedelta(minutes=10)
    assert "Refused at" not in client.get("/me", headers=ada).text, "an old refusal is not news"


def test_none_yet_has_no_empty_table_under_it(shared):
    folder, app = shared
    client = TestClient(app, headers={"Accept": "text/html"})
    page = client.get("/me", headers=auth(folder, "ada")).text
    mine = page.split("Your submissions")[1]
    assert "None yet." in mine and "<table" not in mine.split("<script>")[0]
    assert 'id="submissions"' in page, "the page's poller looks for it"


def test_a_rejected_submission_cannot_be_voided_and_has_no_void_button(folder):
    client = TestClient(create_app(folder, Clock()))
    coach = auth(folder, "coach")
    rejected = upload(client, folder, "ada", "m1", [("notes.txt", b"hi")])
    assert rejected.status_code == 400
    sid = Store(folder).all()[0].id
    refused = client.post(f"/coach/void/{sid}", headers=coach)
    assert refused.status_code == 409 and "only a graded or queued submission" in refused.json()["detail"]
    assert not Store(folder).get(sid).voided
    assert f'action="/coach/void/{sid}"' not in client.get("/coach", headers=coach).text
    queued = upload(client, folder, "ada", "m1", reference()).json()["id"]
    assert client.post(f"/coach/void/{queued}", headers=coach).json()["voided"]
    assert client.post(f"/coach/void/{queued}", data={"undo": "1"}, headers=coach).json()["voided"] is False


# --- The metric task's leaderboards go with the scoreboard: frozen with it, hidden with it -----------------------

METRIC = "[tasks.lmbudget]\npoints = 10\n"


def lm_report(loss: float) -> dict:
    """lmbudget's report with ``loss`` on both splits (A carries the points, as the grader calibrates them)."""
    from grader.lmbudget.task import load_task

    checks = [
        {"name": f"loss on split {split}", "milestone": "lmbudget", "score": 0.0, "max_score": 0.0, "passed": True}
        | {"message": "", "counted": True, "value": loss}
        for split in "AB"
    ]
    score = load_task().score(loss)
    milestone = {"id": "lmbudget", "title": "t", "score": score, "max_score": 10.0, "checks": checks}
    return {"score": score, "max_score": 10.0, "seconds": 1.0, "protections": [], "milestones": [milestone]}


def submit_lm(client: TestClient, folder: Path, clock: Clock, who: str, loss: float) -> int:
    """``who`` uploads to lmbudget now and it is graded at once with ``loss``; the clock moves on a minute."""
    files = [("lmbudget.py", (SOLUTIONS / "lmbudget.py").read_bytes())]
    response = upload(client, folder, who, "lmbudget", files)
    assert response.status_code == 202, response.text
    sid = response.json()["id"]
    assert Store(folder).finish(sid, clock.now, lm_report(loss))
    clock.now += timedelta(minutes=1)
    return sid


def rows_a(client: TestClient, folder: Path, who: str) -> dict[str, dict]:
    (board,) = client.get("/api/leaderboards", headers=auth(folder, who)).json()
    return {row["student"]: row for row in board["A"]}


def test_the_coachs_freeze_freezes_the_metric_leaderboard_with_the_scoreboard(contest):
    folder = contest(METRIC, title=TITLE)
    clock = Clock(minutes=30)
    client = TestClient(create_app(folder, clock))
    submit_lm(client, folder, clock, "ada", 3.5)
    assert client.post("/coach/freeze", headers=auth(folder, "coach")).status_code == 200
    clock.now += timedelta(minutes=1)
    submit_lm(client, folder, clock, "alan", 2.0)  # after the freeze: the students' boards must not show it
    seen = rows_a(client, folder, "ada")
    assert seen["ada"]["rank"] == 1 and seen["alan"]["loss"] is None and seen["alan"]["rank"] is None, (
        "leaderboard A gives the scoreboard's points: frozen with it, or it tells what the frozen board hides"
    )
    assert rows_a(client, folder, "coach")["alan"]["rank"] == 1, "the coach still sees it live"
    page = client.get("/scoreboard", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert "2.0000" not in page and "frozen with it" in page


def test_the_scheduled_freeze_freezes_the_metric_leaderboard_with_the_scoreboard(contest):
    folder = contest(METRIC, title=TITLE, **FROZEN)
    clock = Clock(minutes=30)
    client = TestClient(create_app(folder, clock))
    submit_lm(client, folder, clock, "ada", 3.5)
    clock.now = START + timedelta(minutes=50)  # the freeze began at 09:45
    submit_lm(client, folder, clock, "alan", 2.0)
    (board,) = client.get("/api/leaderboards", headers=auth(folder, "ada")).json()
    assert [row["student"] for row in board["A"] if row["rank"]] == ["ada"], board["A"]
    assert board["frozen_at"] == "2026-03-14T09:45:00+00:00", "the board says as of when"


def test_a_hidden_scoreboard_shows_a_student_only_their_own_leaderboard_row(contest):
    folder = contest(METRIC, title=TITLE, scoreboard="hidden")
    clock = Clock(minutes=30)
    client = TestClient(create_app(folder, clock))
    submit_lm(client, folder, clock, "ada", 3.5)
    submit_lm(client, folder, clock, "alan", 2.0)
    (board,) = client.get("/api/leaderboards", headers=auth(folder, "ada")).json()
    assert [row["student"] for row in board["A"]] == ["ada"], (
        "hidden until the end: no other student's loss, and no rank, which would tell where the others stand"
    )
    assert board["A"][0]["rank"] is None and board["A"][0]["loss"] == 3.5 and board["hidden"]
    page = client.get("/scoreboard", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert "alan" not in page and "2.0000" not in page
    assert len(rows_a(client, folder, "coach")) == 3, "the coach sees every student"
    clock.now = START + timedelta(minutes=61)  # the contest is over: every board is live
    assert rows_a(client, folder, "ada")["alan"]["rank"] == 1


# --- An id no database can hold is an unknown id ------------------------------------------------------------------


@pytest.mark.parametrize("sid", [12345, 2**63, 99999999999999999999999, -(2**63) - 1])
@pytest.mark.parametrize(
    ("method", "path", "who"),
    [
        ("GET", "/api/submissions/{}", "ada"),
        ("POST", "/select/{}", "ada"),
        ("POST", "/coach/void/{}", "coach"),
        ("POST", "/coach/regrade/{}", "coach"),
    ],
)
def test_an_id_too_large_for_the_database_is_a_404_as_any_unknown_id(shared, sid, method, path, who):
    folder, app = shared
    client = TestClient(app, raise_server_exceptions=False)
    response = client.request(method, path.format(sid), headers=auth(folder, who))
    assert response.status_code == 404, f"{method} {path.format(sid)}: {response.status_code} {response.text}"
    assert f"no submission {sid}" in response.json()["detail"]


# --- The roster the server reads: names safe as folders, and on a paper one seed each ----------------------------


def test_the_server_refuses_a_roster_name_that_would_leave_the_export_folder(folder):
    from grader.roster import RosterError

    (folder / "roster.csv").write_text("student\nada\n../../escaped_student\n")
    with pytest.raises(RosterError, match=r"line 3: '../../escaped_student' cannot be a student name"):
        create_app(folder, Clock())


def test_the_server_of_a_paper_refuses_two_roster_names_that_draw_the_same_numbers(contest):
    from grader.roster import RosterError

    folder = contest("", title="S", paper=PAPER_M1)
    (folder / "roster.csv").write_text("student\nAda Lovelace\nada lovelace\n")
    with pytest.raises(RosterError, match="'Ada Lovelace' and 'ada lovelace' differ only in letter case or spaces"):
        create_app(folder, Clock())


# --- Checks the grader set aside ------------------------------------------------------------------------------------


def check(name: str, score: float, max_score: float, counted: bool = True) -> dict:
    internal = {} if counted else {"internal_error": True, "message": "the grader's own check failed"}
    return {"name": name, "score": score, "max_score": max_score, "passed": score == max_score, "message": "",
            "counted": counted, **internal}  # fmt: skip


def graded_with(store: Store, sid: int, at: datetime, checks: list[dict]) -> None:
    """Submission ``sid`` graded on m1 with ``checks``, its report as the grader writes one (``set_aside``)."""
    counted = [c for c in checks if c["counted"]]
    aside = [c for c in checks if not c["counted"]]
    report = {
        "milestones": [
            {
                "id": "m1",
                "title": "Attention",
                "score": sum(c["score"] for c in counted),
                "max_score": sum(c["max_score"] for c in counted),
                "checks": checks,
            }
        ],
        "set_aside": {
            "checks": len(aside),
            "points": sum(c["max_score"] for c in aside),
            "internal_errors": len(aside),
            "note": f"{len(aside)} check(s) failed inside the grader" if aside else "",
        },
    }
    assert store.finish(sid, at, report)


def one_set_aside(folder: Path) -> tuple[TestClient, Store, int, int]:
    """ada's m1 graded with 3 of its 4 checks passed and the fourth set aside (a grader error), alan's with all 4
    passed: (the client, the store, ada's submission, alan's)."""
    clock = Clock()
    client = TestClient(create_app(folder, clock))
    store = Store(folder)
    flagged = upload(client, folder, "ada", "m1", reference()).json()["id"]
    clean = upload(client, folder, "alan", "m1", reference()).json()["id"]
    graded_with(store, flagged, clock.now, [check(f"c{i}", 5, 5) for i in range(3)] + [check("c3", 0, 5, False)])
    graded_with(store, clean, clock.now, [check(f"c{i}", 5, 5) for i in range(4)])
    return client, store, flagged, clean


def test_a_submission_with_checks_set_aside_is_flagged_to_the_coach_who_can_grade_it_again(folder):
    """ada's "30 of 30" rests on 3 of the grader's 4 checks: a quarter of m1's points was never judged."""
    client, store, flagged, clean = one_set_aside(folder)

    coach = auth(folder, "coach")
    rows = {s["id"]: s for s in client.get("/api/coach", headers=coach).json()["submissions"]}
    assert rows[flagged]["points"] == 30 and rows[clean]["points"] == 30
    assert rows[flagged]["set_aside"] == {
        "checks": 1,
        "points": 7.5,
        "internal_errors": 1,
        "note": "1 check(s) failed inside the grader",
    }
    assert rows[clean]["set_aside"] is None
    page = client.get("/coach", headers={**coach, "Accept": "text/html"}).text
    table = page.split('<h2 id="submissions">Submissions</h2>')[1].split("<h2")[0]
    ada_row = next(r for r in table.split("<tr>") if f">{flagged}</a>" in r)
    alan_row = next(r for r in table.split("<tr>") if f">{clean}</a>" in r)
    assert "1 check set aside" in ada_row and "7.5 of 30 points" in ada_row and "Grade again" in ada_row
    assert "set aside" not in alan_row and "Grade again" not in alan_row
    again = client.post(f"/coach/regrade/{flagged}", headers=coach)
    assert again.status_code == 200 and store.get(flagged).status == "queued"
    refused = client.post(f"/coach/regrade/{clean}", headers=coach)
    assert refused.status_code == 409 and "set aside" in refused.json()["detail"]


def test_grade_contest_export_has_columns_for_the_checks_set_aside(folder):
    client, _, flagged, _ = one_set_aside(folder)
    result = CliRunner().invoke(contest_group, ["export", str(folder), "--csv", str(folder / "out.csv")])
    assert result.exit_code == 0, result.output
    rows = {r["student"]: r for r in csv.DictReader((folder / "out.csv").open())}
    assert (rows["ada"]["set_aside_checks"], rows["ada"]["set_aside_points"]) == ("1", "7.5")
    assert rows["ada"]["set_aside_submissions"] == f"m1={flagged}"
    assert (rows["alan"]["set_aside_checks"], rows["alan"]["set_aside_points"]) == ("0", "0")
    assert rows["alan"]["set_aside_submissions"] == "" and float(rows["alan"]["score"]) == 30
    served = client.get("/coach/results.csv", headers=auth(folder, "coach")).text
    assert served.splitlines() == (folder / "out.csv").read_text().splitlines()


def test_a_metric_tasks_leaderboard_keeps_the_previous_grade_while_the_task_is_graded_again(contest):
    """As the scoreboard, leaderboard A keeps a submission's previous grade during its regrade."""
    folder = contest(METRIC, title=TITLE)
    clock = Clock(minutes=30)
    client = TestClient(create_app(folder, clock))
    sid = submit_lm(client, folder, clock, "ada", 3.5)
    before = rows_a(client, folder, "alan")["ada"]
    assert client.post("/coach/regrade-task", data={"task": "lmbudget"}, headers=auth(folder, "coach")).json()[
        "queued"
    ] == [sid]
    assert Store(folder).get(sid).status == "queued"
    assert rows_a(client, folder, "alan")["ada"] == before and before["loss"] == 3.5
    Store(folder).finish(sid, clock.now, lm_report(3.0))
    assert rows_a(client, folder, "alan")["ada"]["loss"] == 3.0
