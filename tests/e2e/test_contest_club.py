"""The contest room for a club: the faults a coach met, each through the server. The board's totals and
the export's are one number; the resolver waits for the students still in their window (or is forced, naming
them); a refusal prints its time as the pages do; an unknown path is a page for a browser and JSON for a script.
Through FastAPI's TestClient, on a clock the tests set; no grading runs (results are written to the store)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from grader.contest.grading import grading_line
from grader.contest.store import Store
from grader.contest.web.app import create_app
from helpers import SOLUTIONS, ContestClock, auth, upload

HTML = {"Accept": "text/html"}
THREE = "[tasks.m1]\npoints = 10\n[tasks.m2]\npoints = 10\n[tasks.m3]\npoints = 10\n"
FILES = {"m1": "m1_attention.py", "m2": "m2_model.py", "m3": "m3_train.py"}


def report(task: str, score: float, max_score: float) -> dict:
    checks = [
        {
            "name": "c",
            "milestone": task,
            "score": score,
            "max_score": max_score,
            "passed": score == max_score,
            "message": "",
        }
    ]
    return {
        "score": score,
        "max_score": max_score,
        "milestones": [{"id": task, "title": task, "score": score, "max_score": max_score, "checks": checks}],
    }


def graded(client, folder, clock, who: str, task: str, score: float, max_score: float) -> int:
    files = [(FILES[task], (SOLUTIONS / FILES[task]).read_bytes())]
    sent = upload(client, folder, who, task, files)
    assert sent.status_code == 202, sent.text
    Store(folder).finish(sent.json()["id"], clock.now, report(task, score, max_score))
    clock.now += timedelta(seconds=30)
    return sent.json()["id"]


def test_the_boards_total_and_the_exports_are_one_number_under_one_rounding_rule(contest):
    """A third of each of three 10-point tasks: 3.33 a task on the board. The sum of the rounded tasks (9.99) and
    the rounded sum (10.00) differed by 0.01; both now give the board's rule, task by task then added up."""
    assert all((SOLUTIONS / f).is_file() for f in FILES.values())
    folder = contest(THREE, title="Rounding")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    for task in ("m1", "m2", "m3"):
        graded(client, folder, clock, "ada", task, 1, 3)
    graded(client, folder, clock, "alan", "m1", 2, 3)  # 6.67: one task, no sum to disagree on
    graded(client, folder, clock, "alan", "m2", 1, 6)  # 1.67 (1.666...): 8.34 by the tasks, 8.33 by the sum
    board = {r["student"]: r for r in client.get("/api/scoreboard", headers=coach).json()["rows"]}
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(client.get("/coach/results.csv", headers=coach).text))}
    assert board["ada"]["tasks"] == {"m1": 3.33, "m2": 3.33, "m3": 3.33} and board["ada"]["total"] == 9.99
    assert board["alan"]["total"] == 8.34
    for name in ("ada", "alan", "grace"):
        assert float(rows[name]["score"]) == board[name]["total"], (name, rows[name], board[name])
    assert [float(rows["ada"][t]) for t in ("m1", "m2", "m3")] == [3.33, 3.33, 3.33]


def test_the_resolver_waits_for_a_student_still_in_their_window_or_is_forced_naming_them(contest):
    folder = contest("[tasks.m1]\npoints = 30\n", title="Resolver")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    graded(client, folder, clock, "ada", "m1", 4, 4)
    assert client.post("/coach/extra-time", data={"student": "alan", "minutes": "20"}, headers=coach).status_code == 200
    assert client.post("/coach/freeze", headers=coach).status_code == 200
    graded(client, folder, clock, "grace", "m1", 2, 4)  # pending
    clock.now += timedelta(minutes=55)  # 10:05: the contest's hour is over; alan's runs until 10:20
    refused = client.post("/coach/resolve", headers=coach)
    assert refused.status_code == 409, refused.text
    assert "still in their window: alan (until 10:20:00 UTC)" in refused.json()["detail"]
    page = client.get("/coach", headers={**coach, **HTML}).text
    assert 'id="resolve-warning"' in page and "alan (until 10:20:00 UTC)" in page and "Resolve anyway" in page
    forced = client.post("/coach/resolve", data={"force": "1"}, headers=coach)
    assert forced.status_code == 200 and forced.json()["revealed"] == {"student": "grace", "task": "m1"}
    (event,) = [e for e in Store(folder).events() if e["kind"] == "resolve forced"]
    assert "alan (until 10:20:00 UTC)" in event["detail"]
    clock.now += timedelta(minutes=16)  # 10:21: every window has ended: no refusal, no force needed
    assert client.post("/coach/resolve", headers=coach).status_code == 200
    assert 'id="resolve-warning"' not in client.get("/coach", headers={**coach, **HTML}).text


def test_a_late_start_refusal_prints_its_time_as_the_pages_do(contest):
    folder = contest("[tasks.m1]\npoints = 30\n", title="Late")
    clock = ContestClock(minutes=1)
    client = TestClient(create_app(folder, clock))
    coach = auth(folder, "coach")
    assert client.post("/coach/start-delay", data={"student": "ada", "minutes": "4"}, headers=coach).status_code == 200
    refused = upload(client, folder, "ada", "m1", [("m1_attention.py", b"x = 1\n")])
    assert refused.status_code == 403 and "it opens at 09:04:00 UTC" in refused.json()["detail"], refused.text
    assert "T09:04" not in refused.json()["detail"]
    page = client.get("/me", headers={**auth(folder, "ada"), **HTML}).text
    assert "09:04:00 UTC" in page


@pytest.mark.parametrize("path", ["/charts", "/coach/nothing-here", "/api/nothing"])
def test_an_unknown_path_is_a_page_for_a_browser_and_json_for_a_script(contest, path):
    folder = contest("[tasks.m1]\npoints = 30\n", title="Lost")
    client = TestClient(create_app(folder, ContestClock()))
    browser = client.get(path, headers={**auth(folder, "ada"), "Accept": "text/html,application/xhtml+xml"})
    script = client.get(path, headers={**auth(folder, "ada"), "Accept": "application/json"})
    assert browser.status_code == script.status_code == 404
    assert script.json() == {"detail": f"there is no page {path} here"}
    if path.startswith("/api/"):  # an API path answers JSON whoever asks
        assert browser.json() == script.json()
    else:
        assert browser.headers["content-type"].startswith("text/html")
        assert f"there is no page {path} here" in browser.text and 'href="/"' in browser.text


def test_each_recorded_grading_has_one_console_line_with_who_the_task_and_the_score_or_verdict():
    """The server's console says each grading once (grading.grading_line, logged as it is recorded)."""
    assert grading_line(3, "ada", "m1", report("m1", 2, 4)) == "graded #3: ada m1: 2 of 4 grader points"
    late = report("m2", 0, 4)
    late["milestones"][0]["checks"][0]["verdict"] = "time limit exceeded"
    assert grading_line(4, "alan", "m2", late) == "graded #4: alan m2: 0 of 4 grader points, time limit exceeded"
    assert grading_line(5, "grace", "m1", {"error": "the grading process died"}) == (
        "graded #5: grace m1: failed (the grading process died)"
    )


def test_the_heatmap_tells_a_task_not_attempted_from_one_scored_zero(contest):
    """ada scored 0 on m1 and never tried m2; both were a red 0. Now m2 is a blank cell marked "–"."""
    import matplotlib

    matplotlib.use("Agg")
    from grader.contest.web.routes.exports import NOT_ATTEMPTED_MARK, attempts_figure, gradebook

    folder = contest("[tasks.m1]\npoints = 10\n[tasks.m2]\npoints = 10\n", title="Heatmap")
    clock = ContestClock()
    app = create_app(folder, clock)
    client = TestClient(app)
    graded(client, folder, clock, "ada", "m1", 0, 3)
    graded(client, folder, clock, "alan", "m2", 3, 3)
    page = client.get("/coach/charts", headers={**auth(folder, "coach"), **HTML})
    assert page.status_code == 200 and "a task not attempted" in page.text
    fig = attempts_figure(*gradebook(app.state.contest))
    ax = fig.axes[0]
    tasks = [t.get_text() for t in ax.get_xticklabels()]
    students = [s.get_text() for s in ax.get_yticklabels()]
    cells = {(students[round(t.get_position()[1])], tasks[round(t.get_position()[0])]): t.get_text() for t in ax.texts}
    assert cells[("ada", "m1")] == "0" and cells[("ada", "m2")] == NOT_ATTEMPTED_MARK
    assert cells[("alan", "m2")] == "100" and cells[("alan", "m1")] == NOT_ATTEMPTED_MARK


def test_the_coach_page_opens_with_a_table_of_contents_that_counts_open_questions(contest):
    """The filters were the page's 9th section; the contents at its top reach each in one tap."""
    folder = contest("[tasks.m1]\npoints = 30\n", title="Contents")
    client = TestClient(create_app(folder, ContestClock()))
    assert client.post("/ask", data={"question": "is m1 causal?"}, headers=auth(folder, "ada")).status_code == 201
    page = client.get("/coach", headers={**auth(folder, "coach"), **HTML}).text
    toc = page.split('<nav class="toc" id="toc"')[1].split("</nav>")[0]
    for anchor in ("grading", "messages", "freeze", "time", "standings", "results", "students", "filters", "events"):
        assert f'href="#{anchor}"' in toc and f'id="{anchor}"' in page, anchor
    assert 'Questions <strong class="pending">1</strong>' in toc
    assert page.index('id="toc"') < page.index('id="grading"')


# --- 2. A jury of several ---------------------------------------------------------------------------------------


def coach_token(folder, name: str) -> str:
    from click.testing import CliRunner

    from grader.contest.commands import contest as contest_group

    made = CliRunner().invoke(contest_group, ["coach", str(folder), name])
    assert made.exit_code == 0, made.output
    return made.output.strip().rsplit(": ", 1)[1]


def test_two_coaches_act_in_one_round_and_the_audit_names_each_with_a_canned_answer_and_a_category(contest):
    folder = contest(
        "[tasks.m1]\npoints = 30\n",
        title="Jury",
        more='[clarifications]\ncategories = ["general", "grading"]\ncanned = ["No comment.", "Yes: as stated."]\n',
    )
    judges = {name: {"Authorization": f"Bearer {coach_token(folder, name)}"} for name in ("rosa", "tomas")}
    from click.testing import CliRunner

    from grader.contest.commands import contest as contest_group

    taken = CliRunner().invoke(contest_group, ["coach", str(folder), "ada"])
    assert taken.exit_code != 0 and "is a student" in taken.output
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    ada = auth(folder, "ada")
    assert client.post("/ask", data={"question": "is a tie split?", "task": "grading"}, headers=ada).status_code == 201
    assert client.post("/ask", data={"question": "?", "task": "lunch"}, headers=ada).status_code == 400
    rosa, tomas = judges["rosa"], judges["tomas"]
    assert client.get("/api/coach", headers=rosa).json()["coach"] == "rosa"
    assert client.post("/coach/announce", data={"text": "10 minutes left"}, headers=rosa).status_code == 201
    assert client.post("/coach/answer", data={"question": 1, "canned": "2"}, headers=tomas).status_code == 200
    assert client.post("/coach/answer", data={"question": 1, "canned": "9"}, headers=tomas).status_code == 400
    assert client.post("/coach/extra-time", data={"student": "alan", "minutes": 5}, headers=rosa).status_code == 200
    assert client.post("/coach/freeze", headers=auth(folder, "coach")).status_code == 200  # admin.token: "coach"
    assert client.get("/api/messages", headers=ada).json()["clarifications"][0]["answer"] == "Yes: as stated."
    audit = client.get("/api/coach", headers=tomas).json()["audit"]
    assert [(e["author"], e["kind"]) for e in audit] == [
        ("coach", "freeze"),
        ("rosa", "extra time"),
        ("tomas", "answer"),
        ("rosa", "announcement"),
    ]
    assert "(canned): Yes: as stated." in audit[2]["detail"]
    page = client.get("/coach", headers={**tomas, **HTML}).text
    listed = page.split('id="audit-list"')[1].split("</table>")[0]
    assert listed.count("<strong>rosa</strong>") == 2 and listed.count("<strong>tomas</strong>") == 1
    assert "Logged in as <strong>tomas</strong>" in page and "Yes: as stated.</option>" in page
    me = client.get("/me", headers={**ada, **HTML}).text
    assert "<option>grading</option>" in me
    assert client.post("/ask", data={"question": "q"}, headers=rosa).status_code == 403, "a coach is no student"


# --- 3. A contestant's own history ------------------------------------------------------------------------------


def test_a_student_downloads_their_own_uploads_never_anothers_and_always_sees_what_is_left(contest):
    import zipfile

    folder = contest("[tasks.m1]\npoints = 30\nmax_submissions = 3\n[tasks.m2]\npoints = 20\n", title="History")
    clock = ContestClock()
    client = TestClient(create_app(folder, clock))
    ada, alan = auth(folder, "ada"), auth(folder, "alan")
    mine = upload(client, folder, "ada", "m1", [("m1_attention.py", b"# ada's attention\n")]).json()["id"]
    theirs = upload(client, folder, "alan", "m1", [("m1_attention.py", b"# alan's secret\n")]).json()["id"]
    got = client.get(f"/submissions/{mine}/files.zip", headers=ada)
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(got.content)) as zf:
        assert zf.namelist() == ["m1_attention.py"] and zf.read("m1_attention.py") == b"# ada's attention\n"
    for who, sid in ((ada, theirs), (ada, 999), (alan, mine)):  # another's is the same 404 as none
        refused = client.get(f"/submissions/{sid}/files.zip", headers=who)
        assert refused.status_code == 404 and "of yours" in refused.json()["detail"], refused.text
        assert b"secret" not in refused.content and b"attention" not in refused.content
    assert client.get(f"/submissions/{mine}/files.zip").status_code == 401, "no token: nothing"
    assert client.get(f"/submissions/{theirs}/files.zip", headers=auth(folder, "coach")).status_code == 200
    page = client.get("/me", headers={**ada, **HTML}).text
    assert f'href="/submissions/{mine}/files.zip"' in page and f"/submissions/{theirs}/" not in page
    quota = page.split('id="quota"')[1].split("</div>")[0]
    assert "<strong>2</strong> of 3 (1 waiting)" in quota and "m2: no cap (0 graded)" in quota
    Store(folder).finish(mine, clock.now, report("m1", 1, 4))
    tasks = {t["id"]: t for t in client.get("/api/me", headers=ada).json()["tasks"]}
    assert (tasks["m1"]["left"], tasks["m1"]["used"], tasks["m2"]["left"]) == (2, 1, None)


def test_a_coach_account_removed_stops_working_and_its_file_is_private_and_git_ignored(contest):
    import stat

    from click.testing import CliRunner

    from grader.contest.commands import contest as contest_group

    folder = contest("[tasks.m1]\npoints = 30\n", title="Jury")
    token = {"Authorization": f"Bearer {coach_token(folder, 'rosa')}"}
    assert stat.S_IMODE((folder / "coaches.csv").stat().st_mode) == 0o600
    assert "coaches.csv" in (folder / ".gitignore").read_text().splitlines()
    assert TestClient(create_app(folder, ContestClock())).get("/api/coach", headers=token).status_code == 200
    again = CliRunner().invoke(contest_group, ["coach", str(folder), "rosa"])
    assert again.exit_code != 0 and "already" in again.output
    assert CliRunner().invoke(contest_group, ["coach", str(folder), "rosa", "--remove"]).exit_code == 0
    assert TestClient(create_app(folder, ContestClock())).get("/api/coach", headers=token).status_code == 401


def test_a_download_never_follows_a_link_planted_in_the_kept_upload(contest, tmp_path):
    """The kept files are walked as the grader walks a submission: a link in them (to another student's upload or
    any file of the server's) is left out of the zip, not followed."""
    import zipfile

    folder = contest("[tasks.m1]\npoints = 30\n", title="Links")
    client = TestClient(create_app(folder, ContestClock()))
    ada = auth(folder, "ada")
    mine = upload(client, folder, "ada", "m1", [("m1_attention.py", b"# ada's attention\n")]).json()["id"]
    (kept,) = [p.parent for p in folder.rglob("m1_attention.py") if p.read_bytes() == b"# ada's attention\n"]
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's secret\n")
    (kept / "stolen.txt").symlink_to(secret)
    (kept / "tree").symlink_to(tmp_path)
    got = client.get(f"/submissions/{mine}/files.zip", headers=ada)
    with zipfile.ZipFile(io.BytesIO(got.content)) as zf:
        assert zf.namelist() == ["m1_attention.py"], zf.namelist()
    assert b"secret" not in got.content
