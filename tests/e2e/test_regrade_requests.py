"""Regrade requests in a contest: a student asks, with a reason, that a graded submission of theirs be
graded again, from their page or `grade submit --regrade`; the coach regrades (the request then holds the old and
the new points) or declines, with an answer the student reads, each answer in the audit trail with its author.
Another's submission is the same 404 as none; the per-student limit and the one open request per submission
refuse; a reason is text wherever it is shown. Through FastAPI's TestClient on a clock the tests set; no grading
runs (results are written to the store, as tests/e2e/test_contest_club.py does)."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from grader.cli import main
from grader.contest.config import ContestFileError, parse
from grader.contest.store import Store
from grader.contest.web.app import create_app
from helpers import SOLUTIONS, ContestClock, ServedInThread, auth, open_contest, tokens, upload

HTML = {"Accept": "text/html"}
TEN = "[tasks.m1]\npoints = 10\n"


def report(task: str, score: float, max_score: float) -> dict:
    """A grader's report of one check on ``task``, worth ``score`` of ``max_score``."""
    check = {"name": "c", "score": score, "max_score": max_score, "passed": score == max_score, "message": ""}
    milestone = {"id": task, "title": task, "score": score, "max_score": max_score, "checks": [check]}
    return {"score": score, "max_score": max_score, "milestones": [milestone]}


def graded(client, folder, clock, who: str, task: str, score: float, max_score: float) -> int:
    """An upload of ``who`` to ``task``, graded ``score`` of ``max_score`` (written to the store): its id."""
    sent = upload(client, folder, who, task, [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())])
    assert sent.status_code == 202, sent.text
    Store(folder).finish(sent.json()["id"], clock.now, report(task, score, max_score))
    clock.now += timedelta(seconds=30)
    return sent.json()["id"]


@pytest.fixture
def room(contest):
    """A contest of one 10-point task where ada has a graded submission worth 4 points: (folder, client, clock, sid)."""
    folder = contest(TEN, title="Regrades")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    return folder, client, clock, graded(client, folder, clock, "ada", "m1", 2, 5)


def ask(client, folder, who: str, sid: int, reason: str = "check 3 timed out on a busy machine"):
    return client.post(f"/request-regrade/{sid}", data={"reason": reason}, headers=auth(folder, who))


def answer(client, folder, rid: int, action: str, text: str):
    return client.post(
        f"/coach/regrade-requests/{rid}", data={"action": action, "answer": text}, headers=auth(folder, "coach")
    )


def test_a_student_asks_the_coach_regrades_and_the_request_shows_old_and_new_points(room):
    folder, client, clock, sid = room
    asked = ask(client, folder, "ada", sid)
    assert asked.status_code == 201, asked.text
    rid = asked.json()["id"]
    (mine,) = client.get("/api/me", headers=auth(folder, "ada")).json()["regrade_requests"]
    assert (mine["status"], mine["submission"], mine["new_points"]) == ("open", sid, None)
    assert "answered_by" not in mine and "student" not in mine, "a student sees their own request, not the jury"
    listed = client.get("/api/coach", headers=auth(folder, "coach")).json()["regrade_requests"]
    assert [(r["id"], r["student"], r["reason"]) for r in listed] == [
        (rid, "ada", "check 3 timed out on a busy machine")
    ]

    done = answer(client, folder, rid, "regrade", "Fair: graded again on a quiet machine.")
    assert done.status_code == 200 and done.json() == {"id": rid, "status": "accepted", "submission": sid}
    assert Store(folder).get(sid).status == "queued", "accepted: the submission is queued again"
    Store(folder).finish(sid, clock.now, report("m1", 4, 5))  # the grading queue's result, 8 points now
    (mine,) = client.get("/api/regrade-requests", headers=auth(folder, "ada")).json()
    assert (mine["status"], mine["old_points"], mine["new_points"], mine["regraded"]) == ("accepted", 4, 8, True)
    assert mine["answer"] == "Fair: graded again on a quiet machine."
    page = html.unescape(client.get("/me", headers={**auth(folder, "ada"), **HTML}).text)
    assert "Regraded:" in page and "Points: 4 → 8" in page and "graded again on a quiet machine" in page
    coach_page = html.unescape(client.get("/coach", headers={**auth(folder, "coach"), **HTML}).text)
    assert 'id="regrade-request-' in coach_page and "Regraded by coach" in coach_page and "Points: 4 → 8" in coach_page
    (audit,) = [e for e in Store(folder).audit() if "regrade request" in e["detail"]]
    assert (audit["kind"], audit["author"], audit["student"]) == ("regrade", "coach", "ada")
    assert client.get("/api/scoreboard", headers=auth(folder, "coach")).json()["rows"][0]["total"] == 8
    exported = CliRunner().invoke(main, ["contest", "export", str(folder)])  # the contest as a batch gradebook
    assert exported.exit_code == 0, exported.output
    reported = CliRunner().invoke(main, ["report", str(folder / "grades.sqlite")])
    assert "regrade requests: 1 answered" in reported.output
    assert "ada  m1  regraded by coach: 4 -> 8 of 10: Fair: graded again on a quiet machine." in reported.output


def test_a_declined_request_keeps_the_grade_and_the_student_reads_the_answer(room):
    folder, client, _, sid = room
    rid = ask(client, folder, "ada", sid).json()["id"]
    declined = answer(client, folder, rid, "decline", "The hidden check is right: see its message.")
    assert declined.status_code == 200 and declined.json()["status"] == "declined"
    assert Store(folder).get(sid).status == "graded", "declined: nothing queued again"
    (mine,) = client.get("/api/me", headers=auth(folder, "ada")).json()["regrade_requests"]
    assert (mine["status"], mine["answer"]) == ("declined", "The hidden check is right: see its message.")
    assert mine["new_points"] is None
    page = html.unescape(client.get("/me", headers={**auth(folder, "ada"), **HTML}).text)
    assert "Declined:" in page and "The hidden check is right" in page
    (audit,) = [e for e in Store(folder).audit() if e["kind"] == "regrade declined"]
    assert audit["author"] == "coach" and f"#{rid}" in audit["detail"]
    again = answer(client, folder, rid, "regrade", "changed my mind")
    assert again.status_code == 409 and "declined already" in again.json()["detail"], "answered once"
    assert answer(client, folder, 999, "decline", "no").status_code == 404
    assert answer(client, folder, rid, "maybe", "no").status_code == 400


def test_another_students_submission_is_the_same_404_as_a_missing_one(room):
    folder, client, _, sid = room
    theirs, missing = ask(client, folder, "alan", sid), ask(client, folder, "alan", 999)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"] == f"no submission {sid} of yours"
    assert missing.json()["detail"] == "no submission 999 of yours"
    assert Store(folder).regrade_requests() == [], "nothing recorded"
    assert ask(client, folder, "ada", sid).status_code == 201, "its own student may"


def test_the_limit_and_one_open_request_per_submission_refuse(contest):
    folder = contest(TEN, title="Limited", more="[regrades]\nper_student = 2\n")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    ids = [graded(client, folder, clock, "ada", "m1", 1, 5) for _ in range(3)]
    assert ask(client, folder, "ada", ids[0]).status_code == 201
    twice = ask(client, folder, "ada", ids[0])
    assert twice.status_code == 409 and "has an open regrade request already" in twice.json()["detail"]
    assert ask(client, folder, "ada", ids[1]).status_code == 201
    third = ask(client, folder, "ada", ids[2])
    assert third.status_code == 409 and "at most 2 in this contest" in third.json()["detail"], third.text
    assert len(Store(folder).regrade_requests("ada")) == 2
    page = client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    assert "Ask for a regrade" not in page, "no form once none is left"


def test_a_contest_of_no_requests_says_so(contest):
    folder = contest(TEN, title="None", more="[regrades]\nper_student = 0\n")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    sid = graded(client, folder, clock, "ada", "m1", 1, 5)
    assert "Ask for a regrade" not in client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    refused = ask(client, folder, "ada", sid)
    assert refused.status_code == 409 and "takes no regrade requests" in refused.json()["detail"]


def test_a_request_needs_a_graded_submission_and_a_bounded_reason(room):
    folder, client, clock, sid = room
    assert ask(client, folder, "ada", sid, "   ").status_code == 400
    long = ask(client, folder, "ada", sid, "x" * 1001)
    assert long.status_code == 400 and "at most 1000" in long.json()["detail"]
    Store(folder).set_voided(sid, True)
    voided = ask(client, folder, "ada", sid)
    assert voided.status_code == 409 and "voided" in voided.json()["detail"]


def test_a_reason_and_an_answer_are_text_not_markup(room):
    folder, client, _, sid = room
    attack = '<script>alert("reason")</script><img src=x onerror=alert(1)>'
    rid = ask(client, folder, "ada", sid, attack).json()["id"]
    for page in ("/coach", "/coach/student/ada"):
        coach_page = client.get(page, headers={**auth(folder, "coach"), **HTML}).text
        assert "<script>alert" not in coach_page and "<img src=x" not in coach_page, page
        assert "&lt;script&gt;alert(&#34;reason&#34;)&lt;/script&gt;" in coach_page, page
    answer(client, folder, rid, "decline", "<b>no</b>")
    page = client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    assert "<script>alert" not in page and "<b>no</b>" not in page and "&lt;b&gt;no&lt;/b&gt;" in page


def test_the_form_on_the_students_row_and_the_coachs_buttons(room):
    folder, client, _, sid = room
    page = client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    assert f'action="/request-regrade/{sid}"' in page and "5 requests left" in page
    rid = ask(client, folder, "ada", sid).json()["id"]
    page = client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    assert f'action="/request-regrade/{sid}"' not in page and "Waiting for the coach's answer" in page
    coach_page = client.get("/coach", headers={**auth(folder, "coach"), **HTML}).text
    assert f'action="/coach/regrade-requests/{rid}"' in coach_page and 'value="regrade"' in coach_page
    assert 'href="#regrade-requests"' in coach_page


def test_a_student_may_not_answer_and_the_coach_may_not_ask(room):
    folder, client, _, sid = room
    rid = ask(client, folder, "ada", sid).json()["id"]
    student_answer = client.post(
        f"/coach/regrade-requests/{rid}", data={"action": "regrade", "answer": "yes"}, headers=auth(folder, "ada")
    )
    assert student_answer.status_code == 403
    assert ask(client, folder, "coach", sid).status_code == 403
    assert Store(folder).regrade_requests()[0]["status"] == "open"


def test_per_student_must_be_a_whole_number_and_defaults_to_5():
    assert parse(open_contest()).regrade_requests == 5
    assert parse(open_contest(more="[regrades]\nper_student = 0\n")).regrade_requests == 0
    with pytest.raises(ContestFileError, match="per_student"):
        parse(open_contest(more="[regrades]\nper_student = -1\n"))
    with pytest.raises(ContestFileError, match="per_studnet"):
        parse(open_contest(more="[regrades]\nper_studnet = 3\n"))


def test_grade_submit_asks_for_a_regrade_and_passes_on_a_refusal(room):
    from grader.contest.submit import submit

    folder, client, _, sid = room
    app = client.app
    with ServedInThread(app) as served:
        run = CliRunner()
        base = ["--server", served.url, "--token", tokens(folder)["ada"]]
        sent = run.invoke(submit, [*base, "--regrade", str(sid), "--reason", "my loss curve is right"])
        assert sent.exit_code == 0, sent.output
        assert f"for submission {sid} sent" in sent.output
        again = run.invoke(submit, [*base, "--regrade", str(sid), "--reason", "again"])
        assert again.exit_code == 2 and "(409)" in again.output and "open regrade request" in again.output
        other = run.invoke(
            submit,
            ["--server", served.url, "--token", tokens(folder)["alan"], "--regrade", str(sid), "--reason", "mine?"],
        )
        assert other.exit_code == 2 and f"(404): no submission {sid} of yours" in other.output
        lone = run.invoke(submit, [*base, "--regrade", str(sid)])
        assert lone.exit_code == 2 and "--reason" in lone.output
        no_task = run.invoke(submit, [*base, "."])
        assert no_task.exit_code == 2 and "-m TASK" in no_task.output
    (request,) = Store(folder).regrade_requests()
    assert (request["student"], request["reason"]) == ("ada", "my loss curve is right")


def test_a_student_sees_old_and_new_points_only_where_the_contest_shows_scores(contest):
    """Under feedback "none" a regraded request tells its student the answer, not the points (their submissions'
    feedback would not show them either); the coach sees them."""
    folder = contest(TEN, title="Quiet", feedback="none")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    sid = graded(client, folder, clock, "ada", "m1", 2, 5)
    rid = ask(client, folder, "ada", sid).json()["id"]
    assert answer(client, folder, rid, "regrade", "Graded again.").status_code == 200
    Store(folder).finish(sid, clock.now, report("m1", 5, 5))
    (mine,) = client.get("/api/me", headers=auth(folder, "ada")).json()["regrade_requests"]
    assert mine["status"] == "accepted" and "old_points" not in mine and "new_points" not in mine
    assert "Points:" not in client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    (coach_view,) = client.get("/api/coach", headers=auth(folder, "coach")).json()["regrade_requests"]
    assert (coach_view["old_points"], coach_view["new_points"]) == (4, 10)


@pytest.mark.parametrize("rid", [12345, 2**63, -(2**63) - 1])
def test_an_id_no_database_holds_is_a_404(room, rid):
    folder, client, _, _ = room
    client = TestClient(client.app, raise_server_exceptions=False)
    assert ask(client, folder, "ada", rid).status_code == 404
    unknown = answer(client, folder, rid, "decline", "no")
    assert unknown.status_code == 404 and f"no regrade request {rid}" in unknown.json()["detail"]


def test_requests_sent_at_once_make_one_open_request_and_answers_at_once_one_answer(room):
    """Six forms sent together for one submission, from six stores of the folder (as several server processes
    would be): one request; then six answers together: one is recorded and queues it once, the others refused."""
    import threading

    folder, _, clock, sid = room
    stores = [Store(folder) for _ in range(6)]
    outcomes: list[str] = []

    def race(action) -> None:
        start = threading.Barrier(6)

        def one(store: Store) -> None:
            start.wait()
            try:
                outcomes.append(str(action(store)))
            except Exception as e:  # noqa: BLE001 - the refusal is the outcome
                outcomes.append(type(e).__name__)

        threads = [threading.Thread(target=one, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)

    race(lambda store: store.request_regrade("ada", sid, clock.now, "why", 5))
    assert sorted(outcomes) == ["1", *["Refused"] * 5], outcomes
    outcomes.clear()
    race(lambda store: store.answer_regrade(1, clock.now, "ok", "coach", accept=True)["status"])
    assert sorted(outcomes) == [*["Refused"] * 5, "accepted"], outcomes
    assert Store(folder).get(sid).status == "queued" and len(Store(folder).previous()) == 1
