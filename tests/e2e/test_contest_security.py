"""The contest server under attack: hostile uploads, floods, other students' submissions, coach routes and
tokens, through FastAPI's TestClient with a clock the tests set (no lifespan: nothing is graded, so all fast).

Each test ends in a clear refusal (a 4xx with a message) and checks the gradebook is intact: the database's
rows and events compared before and after, with only the expected refusal added, and no file written outside
``uploads/``.
"""

from __future__ import annotations

import ast
import hmac
import inspect
import io
import json
import logging
import sqlite3
import struct
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from grader.contest.uploads import MAX_FILES, MAX_NOTEBOOK_DEPTH, MAX_UPLOAD_BYTES, MAX_ZIP_BYTES, json_depth
from grader.contest.web import tokens as server_module
from grader.contest.web.app import create_app
from helpers import CONTEST_START, SOLUTIONS, ContestClock, auth, forget_counts, tokens, upload

START = CONTEST_START
TASKS = '[tasks.m1]\npoints = 30\n[tasks.m2]\npoints = 20\nscoring = "selected"\nselect = 1\n'
TABLES = ("submissions", "events", "logins", "settings", "extra_time")


Clock = ContestClock


@pytest.fixture
def folder(contest) -> Path:
    return contest(TASKS, title="Security test")


@pytest.fixture(scope="module")
def refusals_app(module_contest):
    """One contest and its app for the tests of an upload refused for what it is (its size, a file's name, a zip,
    a notebook): each compares the gradebook before and after its own upload, and none is accepted, so that
    ``uploads/`` stays empty. A test that has an upload accepted, or counts every event, has its own."""
    folder = module_contest(TASKS, title="Security test", name="refusals")
    return folder, create_app(folder, Clock())


@pytest.fixture
def shared(refusals_app):
    """The shared folder and app, the app's counts per token and address as a fresh app's (a restart's): the
    refusals of the tests before do not count against this one's."""
    folder, app = refusals_app
    forget_counts(app)
    return folder, app


def raw_upload(client: TestClient, folder: Path, who: str, task: str, filename: bytes, data: bytes):
    """A multipart upload built by hand, so that the file name reaches the server byte for byte (httpx would
    percent-encode a NUL or a quote)."""
    boundary = b"----contest-security-boundary"
    body = (
        b"--" + boundary + b"\r\n"
        b'Content-Disposition: form-data; name="files"; filename="' + filename + b'"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--" + boundary + b"--\r\n"
    )
    headers = {**auth(folder, who), "Content-Type": f"multipart/form-data; boundary={boundary.decode()}"}
    return client.post(f"/submit/{task}", content=body, headers=headers)


def reference() -> list[tuple[str, bytes]]:
    return [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())]


def zipped(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def snapshot(folder: Path) -> dict[str, list[tuple]]:
    """Every row of every table of the contest's database (read directly, not through the server)."""
    db = sqlite3.connect(folder / "contest.sqlite")
    try:
        return {table: [tuple(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY rowid")] for table in TABLES}
    finally:
        db.close()


def files_under(root: Path) -> set[str]:
    """Every file under ``root`` but the database's own (its WAL files change on any read)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith("contest.sqlite")
    }


def added(before: dict[str, list[tuple]], after: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    """The rows added since ``before``; fails if any row there was changed or removed."""
    new: dict[str, list[tuple]] = {}
    for table in TABLES:
        assert after[table][: len(before[table])] == before[table], f"{table}: rows changed"
        if after[table][len(before[table]) :]:
            new[table] = after[table][len(before[table]) :]
    return new


def refusal_events(new: dict[str, list[tuple]], student: str | None) -> list[tuple]:
    """The events added, checked to be refusals of ``student``: (kind, detail)."""
    events = new.get("events", [])
    assert all(e[2] == student for e in events), events
    return [(e[3], e[4]) for e in events]


def expect_refused(response, status: int, *words: str) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    detail = response.json()["detail"]
    assert isinstance(detail, str) and detail, response.text
    for word in words:
        assert word in detail, detail
    return detail


def expect_only_a_rejection(before, after, student: str, task: str, status: int = 400) -> None:
    """A 400 keeps the refused upload as a rejected row (no files, no path) and adds one refusal event."""
    new = added(before, after)
    assert set(new) <= {"submissions", "events"}, new
    rows = new.get("submissions", [])
    if status == 400:
        assert len(rows) == 1
        _, who, what, _, state, path, score, *_ = rows[0]
        assert (who, what, state, path, score) == (student, task, "rejected", None, None)
    else:
        assert rows == []
    events = refusal_events(new, student)
    assert [kind for kind, _ in events] == ["refused"], events
    assert events[0][1].startswith(f"{task}: ")


# --- Size ---------------------------------------------------------------------------------------------------------


def test_an_upload_over_the_size_cap_is_413_naming_the_cap(shared):
    folder, app = shared
    client = TestClient(app)
    before, files = snapshot(folder), files_under(folder.parent)
    big = [("m1_attention.py", b"#" * (MAX_UPLOAD_BYTES + 1))]
    refused = upload(client, folder, "ada", "m1", big)
    expect_refused(refused, 413, f"{MAX_UPLOAD_BYTES >> 20} MB")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1", status=413)
    assert files_under(folder.parent) == files and not any((folder / "uploads").iterdir())


def test_an_upload_without_a_content_length_is_refused(shared):
    """A chunked body (no Content-Length) cannot be sized before it is read: the server asks for the length."""
    folder, app = shared
    client = TestClient(app)
    before = snapshot(folder)

    def chunks() -> Iterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="files"; filename="m1_attention.py"\r\n\r\n'
        yield b"x = 1\r\n--b--\r\n"

    headers = {**auth(folder, "ada"), "Content-Type": "multipart/form-data; boundary=b"}
    refused = client.post("/submit/m1", content=chunks(), headers=headers)
    assert "content-length" not in {k.lower() for k in refused.request.headers}
    expect_refused(refused, 411, "Content-Length")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1", status=411)
    assert not any((folder / "uploads").iterdir())


# --- File names ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        b"evil.sh",
        b"m2_model.py",  # another task's file
        b"../m1_attention.py",
        b"..\\m1_attention.py",
        b"/etc/m1_attention.py",
        b"sub/m1_attention.py",
        b"m1_attention.py\x00.sh",
        b"m1_attention.py\x00",
        b"m1_attention.py/",
        b"..",
    ],
)
def test_a_file_name_not_of_the_task_is_400(shared, name):
    folder, app = shared
    client = TestClient(app)
    before, files = snapshot(folder), files_under(folder.parent)
    refused = raw_upload(client, folder, "ada", "m1", name, b"x = 1\n")
    expect_refused(refused, 400)
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1")
    assert files_under(folder.parent) == files and not any((folder / "uploads").iterdir())


def test_too_many_files_in_one_upload_is_400(shared):
    folder, app = shared
    client = TestClient(app)
    before = snapshot(folder)
    refused = upload(client, folder, "ada", "m1", [(f"f{i}.py", b"x = 1") for i in range(MAX_FILES + 1)])
    expect_refused(refused, 400, str(MAX_FILES))
    new = added(before, snapshot(folder))
    assert set(new) <= {"events"} and not any((folder / "uploads").iterdir())


def test_a_hostile_file_name_is_escaped_in_the_pages(folder):
    """The refusal names the file: as a page, and later on the student's page, it is escaped, not markup."""
    client = TestClient(create_app(folder, Clock()), headers={"Accept": "text/html"})
    script = "<script>alert(1)</script>.py"
    parts = [("files", (script, b"x = 1", "text/x-python"))]
    refused = client.post("/submit/m1", files=parts, headers=auth(folder, "ada"))
    assert refused.status_code == 400 and "&lt;script&gt;" in refused.text and "<script>" not in refused.text
    page = client.get("/me", headers=auth(folder, "ada"))
    assert page.status_code == 200 and "&lt;script&gt;" in page.text and "<script>alert" not in page.text


# --- Zips ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "member",
    ["/m1_attention.py", "/tmp/m1_attention.py", "../m1_attention.py", "work/../../m1_attention.py", "..\\evil.py"],
)
def test_a_zip_member_with_an_unsafe_path_is_400(shared, member):
    folder, app = shared
    client = TestClient(app)
    before, files = snapshot(folder), files_under(folder.parent)
    refused = upload(client, folder, "ada", "m1", [("work.zip", zipped({member: b"x = 1\n"}))])
    expect_refused(refused, 400, "unsafe path")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1")
    assert files_under(folder.parent) == files and not any((folder / "uploads").iterdir())


def test_a_zip_bomb_is_400(shared):
    """A member that unpacks past the cap from a small upload (zeros deflate about a thousandfold)."""
    folder, app = shared
    client = TestClient(app)
    bomb = zipped({"m1_attention.py": b"\0" * (MAX_ZIP_BYTES + 1)}, zipfile.ZIP_DEFLATED)
    assert len(bomb) < MAX_UPLOAD_BYTES // 100
    before, files = snapshot(folder), files_under(folder.parent)
    refused = upload(client, folder, "ada", "m1", [("work.zip", bomb)])
    expect_refused(refused, 400, f"{MAX_ZIP_BYTES >> 20} MB")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1")
    assert files_under(folder.parent) == files and not any((folder / "uploads").iterdir())


def test_a_zip_bomb_that_lies_about_its_size_is_400(shared):
    """The same bomb with its headers claiming 10 bytes unpacked: the cap on the declared sizes passes, so the
    unpacking itself must stop at the declared size (and the CRC then fails)."""
    folder, app = shared
    client = TestClient(app)
    bomb = bytearray(zipped({"m1_attention.py": b"\0" * (MAX_ZIP_BYTES + 1)}, zipfile.ZIP_DEFLATED))
    assert bomb[:4] == b"PK\x03\x04"
    struct.pack_into("<I", bomb, 22, 10)  # the local header's uncompressed size
    central = bomb.rindex(b"PK\x01\x02")
    struct.pack_into("<I", bomb, central + 24, 10)  # the central directory's
    assert zipfile.ZipFile(io.BytesIO(bytes(bomb))).infolist()[0].file_size == 10
    before, files = snapshot(folder), files_under(folder.parent)
    refused = upload(client, folder, "ada", "m1", [("work.zip", bytes(bomb))])
    expect_refused(refused, 400, "m1_attention.py")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1")
    assert files_under(folder.parent) == files and not any((folder / "uploads").iterdir())


# --- Notebooks ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b'{"cells": [',
        b"\xff\xfe not text",
        b"[1, 2, 3]",
        b'"a string"',
        b'{"cells": "none", "nbformat": 4}',
        b'{"nbformat": 4, "metadata": {}}',
        b'{"cells": [], "nbformat": 3}',
    ],
)
def test_a_notebook_that_is_not_one_is_400(shared, data):
    folder, app = shared
    client = TestClient(app)
    before = snapshot(folder)
    refused = upload(client, folder, "ada", "m1", [("mine.ipynb", data)])
    expect_refused(refused, 400, "mine.ipynb", "notebook")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1")
    assert not any((folder / "uploads").iterdir())


def test_a_notebook_nested_200000_levels_deep_is_400_before_it_is_parsed(shared):
    """json.loads recurses once a level: this one would end in a RecursionError, a 500 and a traceback."""
    folder, app = shared
    client = TestClient(app)
    before = snapshot(folder)
    deep = b'{"cells": [], "nbformat": 4, "metadata": {"x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    refused = upload(client, folder, "ada", "m1", [("mine.ipynb", deep)])
    expect_refused(refused, 400, "mine.ipynb", "levels deep", str(MAX_NOTEBOOK_DEPTH))
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1")
    assert not any((folder / "uploads").iterdir())


def test_a_notebook_in_a_zip_is_held_to_the_same_depth(shared):
    folder, app = shared
    client = TestClient(app)
    deep = b'{"cells": [' + b"{" * 5000 + b"}" * 5000 + b'], "nbformat": 4}'
    refused = upload(client, folder, "ada", "m1", [("work.zip", zipped({"mine.ipynb": deep}))])
    expect_refused(refused, 400, "levels deep")


def test_brackets_inside_a_notebooks_strings_are_not_nesting():
    """A cell of source full of brackets (and escaped quotes) is text, at depth 3."""
    source = json.dumps("[" * 5000 + '\\" {{' * 100)
    notebook = ('{"cells": [{"cell_type": "code", "source": ' + source + '}], "nbformat": 4}').encode()
    assert json_depth(notebook) == 3
    assert json_depth(b"[[[]]] [[]]") == 3 and json_depth(b"{}") == 1 and json_depth(b'"[["') == 0


# --- Floods -------------------------------------------------------------------------------------------------------


def test_a_flood_from_one_token_is_429_while_another_student_still_uploads(folder):
    clock = Clock()
    client = TestClient(create_app(folder, clock, uploads_per_minute=3))
    bad = [("m1_attention.py", b"\xff")]
    assert [upload(client, folder, "ada", "m1", bad).status_code for _ in range(3)] == [400] * 3
    before = snapshot(folder)
    flood = upload(client, folder, "ada", "m1", reference())
    expect_refused(flood, 429, "at most 3 a minute")
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1", status=429)
    assert not any((folder / "uploads").iterdir())

    accepted = upload(client, folder, "alan", "m1", reference())
    assert accepted.status_code == 202, accepted.text
    assert [p.name for p in (folder / "uploads").iterdir()] == [str(accepted.json()["id"])]
    clock.now += timedelta(minutes=1)  # the minute has passed: ada may upload again
    assert upload(client, folder, "ada", "m1", reference()).status_code == 202


def test_refusals_past_the_limit_per_token_are_429_and_not_recorded(folder):
    """A script that uploads junk in a loop: the first refusals are recorded (the coach sees them), the rest are
    a 429 that writes nothing, neither an event nor a rejected row."""
    clock = Clock()
    client = TestClient(create_app(folder, clock, uploads_per_minute=100, refusals_per_minute=3))
    bad = [("m1_attention.py", b"\xff")]
    assert [upload(client, folder, "ada", "m1", bad).status_code for _ in range(3)] == [400] * 3
    before = snapshot(folder)
    for _ in range(20):
        expect_refused(upload(client, folder, "ada", "m1", bad), 429, "too many refused", "a minute")
    assert snapshot(folder) == before
    assert upload(client, folder, "alan", "m1", bad).status_code == 400  # another token still has its own
    clock.now += timedelta(minutes=1)
    assert upload(client, folder, "ada", "m1", bad).status_code == 400


def test_refusals_past_the_limit_per_address_are_429_whatever_the_token(folder):
    client = TestClient(create_app(folder, Clock(), refusals_per_minute=10, address_per_minute=4))
    bad = [("m1_attention.py", b"\xff")]
    assert [upload(client, folder, who, "m1", bad).status_code for who in ("ada", "ada", "alan", "alan")] == [400] * 4
    before = snapshot(folder)
    expect_refused(upload(client, folder, "grace", "m1", bad), 429, "your address")
    assert snapshot(folder) == before


def test_wrong_logins_past_the_limit_per_address_are_429_and_not_recorded(folder):
    """Past the limit even a right token is refused from that address for the minute: guessing stops."""
    clock = Clock()
    client = TestClient(create_app(folder, clock, address_per_minute=5))
    for _ in range(5):
        assert client.post("/login", data={"token": "wrong"}).status_code == 401
    before = snapshot(folder)
    assert [e[3] for e in before["events"]] == ["login refused"] * 5
    for token in ("wrong", tokens(folder)["ada"]):
        answer = client.post("/login", data={"token": token}, follow_redirects=False)
        assert answer.status_code == 429 and "wait a minute" in answer.text and "set-cookie" not in answer.headers
    assert snapshot(folder) == before
    clock.now += timedelta(minutes=1)
    assert client.post("/login", data={"token": tokens(folder)["ada"]}, follow_redirects=False).status_code == 303


def test_a_rooms_refused_uploads_do_not_lock_its_students_out_of_the_login_form(folder):
    """Students behind one router share an address: their refused uploads fill the address's refusals, and the
    next upload from it waits, but a right token at the login form still logs in (only wrong logins count there)."""
    client = TestClient(create_app(folder, Clock(), refusals_per_minute=10, address_per_minute=4))
    bad = [("m1_attention.py", b"\xff")]
    assert [upload(client, folder, who, "m1", bad).status_code for who in ("ada", "ada", "alan", "alan")] == [400] * 4
    expect_refused(upload(client, folder, "grace", "m1", bad), 429, "your address")
    answer = client.post("/login", data={"token": tokens(folder)["grace"]}, follow_redirects=False)
    assert answer.status_code == 303 and "set-cookie" in answer.headers, answer.text[:300]


def test_the_coach_sees_identical_consecutive_events_once_with_their_count(folder):
    client = TestClient(create_app(folder, Clock(), uploads_per_minute=100, refusals_per_minute=100))
    bad = [("m1_attention.py", b"\xff")]
    for _ in range(12):
        upload(client, folder, "ada", "m1", bad)
    upload(client, folder, "alan", "m1", bad)
    upload(client, folder, "ada", "m1", bad)
    events = client.get("/api/coach", headers=auth(folder, "coach")).json()["events"]
    assert [(e["student"], e["count"]) for e in events] == [("ada", 1), ("alan", 1), ("ada", 12)], events
    assert events[2]["detail"] == "m1: m1_attention.py is not UTF-8 text"
    page = client.get("/coach", headers={**auth(folder, "coach"), "Accept": "text/html"}).text
    log = page.split('<h2 id="events">Events</h2>')[1]
    assert log.count("m1_attention.py is not UTF-8 text") == 3 and log.count("×12") == 1


# --- Other students' submissions ----------------------------------------------------------------------------------


def test_a_student_cannot_see_select_or_void_anothers_submission(folder):
    client = TestClient(create_app(folder, Clock()))
    m2 = [("m2_model.py", (SOLUTIONS / "m2_model.py").read_bytes())]
    sent = upload(client, folder, "ada", "m2", m2)
    assert sent.status_code == 202, sent.text
    sid = sent.json()["id"]
    before = snapshot(folder)
    alan = auth(folder, "alan")

    seen = client.get(f"/api/submissions/{sid}", headers=alan)
    missing = client.get(f"/api/submissions/{sid + 100}", headers=alan)
    expect_refused(seen, 404)
    expect_refused(missing, 404)
    assert seen.json()["detail"].replace(str(sid), "#") == missing.json()["detail"].replace(str(sid + 100), "#")
    assert "ada" not in seen.text
    expect_refused(client.post(f"/select/{sid}", headers=alan), 404)
    expect_refused(client.post(f"/select/{sid}", data={"selected": "0"}, headers=alan), 404)
    expect_refused(client.post(f"/coach/void/{sid}", headers=alan), 403, "coach")
    expect_refused(client.post(f"/coach/void/{sid}", data={"undo": "1"}, headers=alan), 403, "coach")
    page = client.get("/me", headers=alan)
    assert page.status_code == 200 and f"submission-{sid}" not in page.text
    assert all(s["id"] != sid for s in client.get("/api/me", headers=alan).json()["submissions"])

    after = snapshot(folder)
    new = added(before, after)
    assert set(new) <= {"logins"}, new  # alan's visit to /me is his first login; nothing else
    assert after["submissions"] == before["submissions"]
    row = client.get(f"/api/submissions/{sid}", headers=auth(folder, "ada")).json()
    assert (row["selected"], row["voided"]) == (False, False)


# --- Coach routes -------------------------------------------------------------------------------------------------


def coach_routes(app) -> list[tuple[str, str]]:
    found = []
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path.startswith(("/coach", "/api/coach")):
            found.extend((method, route.path) for method in sorted(route.methods))
    return found


def test_every_coach_route_is_403_for_a_student_and_401_for_nobody(folder):
    app = create_app(folder, Clock())
    client = TestClient(app)
    sent = upload(client, folder, "ada", "m1", reference())
    sid = sent.json()["id"]
    before = snapshot(folder)
    routes = coach_routes(app)
    paths = {path for _, path in routes}
    assert {"/coach", "/api/coach", "/coach/extend", "/coach/void/{sid}", "/coach/freeze"} <= paths, paths
    form = {"minutes": "30", "student": "ada", "undo": "1"}
    for method, path in routes:
        url = path.replace("{sid}", str(sid))
        for who in ("ada", "alan"):
            answer = client.request(method, url, data=form if method == "POST" else None, headers=auth(folder, who))
            expect_refused(answer, 403, "coach")
        expect_refused(client.request(method, url, data=form if method == "POST" else None), 401, "token")
    assert snapshot(folder) == before
    assert client.get("/api/coach", headers=auth(folder, "coach")).status_code == 200


def post_routes(app) -> list[str]:
    return sorted(p for r in app.routes if isinstance(r, APIRoute) and "POST" in r.methods for p in [r.path])


@pytest.mark.parametrize("origin", [{"Origin": "https://evil.example"}, {"Origin": "null"}])
def test_a_cross_site_post_with_the_coachs_cookie_is_403_and_changes_nothing(folder, origin):
    """A page on another site (or a sandboxed frame: Origin null) posts to /coach/freeze, the coach's browser
    adding their cookie: refused, and the board is not frozen."""
    client = TestClient(create_app(folder, Clock()))
    sid = upload(client, folder, "ada", "m1", reference()).json()["id"]
    before = snapshot(folder)
    client.cookies.set("contest_token", tokens(folder)["coach"])
    refused = client.post("/coach/freeze", headers=origin)
    expect_refused(refused, 403, "origin", "this server")
    for url in ("/coach/extend", "/coach/extra-time", f"/coach/void/{sid}", f"/coach/regrade/{sid}"):
        expect_refused(client.post(url, data={"minutes": "30", "student": "ada"}, headers=origin), 403, "origin")
    assert snapshot(folder) == before
    assert client.get("/api/coach").json()["frozen_at"] is None


def test_every_post_route_checks_the_origin_for_students_and_the_coach_alike(folder):
    app = create_app(folder, Clock())
    client = TestClient(app)
    sid = upload(client, folder, "ada", "m1", reference()).json()["id"]
    before = snapshot(folder)
    routes = post_routes(app)
    assert {"/login", "/logout", "/submit/{task}", "/select/{sid}", "/coach/freeze"} <= set(routes), routes
    for path in routes:
        url = path.replace("{sid}", str(sid)).replace("{task}", "m1").replace("{task_id}", "m1")
        for who in ("ada", "coach"):
            client.cookies.set("contest_token", tokens(folder)[who])
            for header in ({"Origin": "https://evil.example"}, {"Referer": "https://evil.example/page"}):
                answer = client.post(url, data={"token": tokens(folder)[who]}, headers=header, follow_redirects=False)
                expect_refused(answer, 403, "origin")
                assert "set-cookie" not in answer.headers
    assert snapshot(folder) == before


def test_a_post_from_the_servers_own_pages_or_with_no_origin_at_all_is_obeyed(folder):
    """A form on the server's own page sends its Origin; `grade submit`, curl and scripts send none."""
    client = TestClient(create_app(folder, Clock()))
    coach = auth(folder, "coach")
    own = client.post("/coach/freeze", headers={**coach, "Origin": "http://testserver"})
    assert own.status_code == 200, own.text
    assert client.post("/coach/unfreeze", headers={**coach, "Referer": "http://testserver/coach"}).status_code == 200
    assert client.post("/coach/freeze", headers=coach).status_code == 200
    sent = upload(client, folder, "ada", "m1", reference())
    assert sent.status_code == 202, sent.text


# --- Tokens -------------------------------------------------------------------------------------------------------


BAD_TOKENS = ["wrong-token-4a1f", "", " ", "x" * 4096, 'null%00\\"quoted\\"']


def test_a_wrong_empty_or_long_token_is_401_and_no_token_is_ever_echoed_or_logged(folder, caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "fastapi", "grader", "grader.contest", "httpx"):
        caplog.set_level(logging.DEBUG, logger=name)
    client = TestClient(create_app(folder, Clock()))
    secrets = tokens(folder)
    bad = [t for t in BAD_TOKENS if t.strip()]
    responses = []

    # A valid token at work: its pages, an upload, the coach's pages.
    for who in ("ada", "coach"):
        headers = auth(folder, who)
        for url in ("/me", "/api/me", "/scoreboard", "/api/scoreboard", "/coach", "/api/coach"):
            responses.append(client.get(url, headers=headers))
            responses.append(client.get(url, headers={**headers, "Accept": "text/html"}))
    sent = upload(client, folder, "ada", "m1", reference())
    assert sent.status_code == 202
    responses.append(sent)
    responses.append(client.get(f"/api/submissions/{sent.json()['id']}", headers=auth(folder, "ada")))
    responses.append(upload(client, folder, "ada", "m1", [("evil.sh", b"x")]))

    # Invalid tokens, as a header, a cookie and the login form.
    before = snapshot(folder)
    for token in BAD_TOKENS:
        for accept in ("application/json", "text/html"):
            for url in ("/me", "/api/me", "/api/scoreboard", "/api/submissions/1"):
                answer = client.get(url, headers={"Authorization": f"Bearer {token}", "Accept": accept})
                assert answer.status_code == 401, (url, answer.text)
                responses.append(answer)
                client.cookies.set("contest_token", token)
                answer = client.get(url, headers={"Accept": accept})
                client.cookies.clear()
                assert answer.status_code == 401, (url, answer.text)
                responses.append(answer)
            answer = client.post(
                "/submit/m1",
                files=[("files", ("m1_attention.py", b"x = 1"))],
                headers={"Authorization": f"Bearer {token}", "Accept": accept},
            )
            assert answer.status_code == 401
            responses.append(answer)
        login = client.post("/login", data={"token": token}, follow_redirects=False)
        assert login.status_code == 401 and "not one of this contest" in login.text
        assert "set-cookie" not in login.headers
        responses.append(login)
    expect_refused(client.get("/api/me", headers={"Authorization": "Bearer wrong-token-4a1f"}), 401, "token")

    new = added(before, snapshot(folder))
    assert set(new) == {"events"} and {e[3] for e in new["events"]} == {"login refused"}
    assert len(new["events"]) == len(BAD_TOKENS)  # the form's refusals are recorded; the token is not

    assert any("submission 1: ada to m1, queued" in r.getMessage() for r in caplog.records)  # the capture works
    everything = [r.text + json.dumps(dict(r.headers)) for r in responses]
    everything += [record.getMessage() + repr(record.args) for record in caplog.records]
    everything.append(caplog.text)
    everything.append(json.dumps(snapshot(folder)))
    everything.append("\n".join(p.read_text(errors="replace") for p in (folder / "uploads").rglob("*") if p.is_file()))
    for text in everything:
        for token in [*secrets.values(), *bad]:
            if token in ("x" * 4096,):
                assert "x" * 64 not in text
            else:
                assert token not in text


def test_tokens_are_compared_with_hmac_compare_digest(shared, monkeypatch):
    folder, app = shared
    client = TestClient(app)
    secrets = tokens(folder)
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(server_module.hmac, "compare_digest", spy)
    for who, status in (("alan", 200), ("nobody", 401)):
        calls.clear()
        token = secrets.get(who, "not-a-token-at-all")
        answer = client.get("/api/me", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == status
        assert len(calls) == len(secrets), calls  # the coach's and every student's: no early exit
        assert all(given == token.encode() for given, _ in calls)
        assert {known for _, known in calls} == {t.encode() for t in secrets.values()}

    # And no token is compared any other way: no ==, !=, in, or dict lookup on a token in server.py.
    tree = ast.parse(inspect.getsource(server_module))
    secret_names = {"token", "given", "known", "coach_token", "tokens"}

    def names(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            assert not any(names(o) & secret_names for o in operands), ast.unparse(node)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "tokens":
            raise AssertionError(f"a token looked up by key: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "tokens":
                raise AssertionError(f"a token looked up by key: {ast.unparse(node)}")


# --- The window ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("minutes", "word"), [(-5, "start"), (61, "ended")])
def test_an_upload_outside_the_window_is_403_and_recorded(folder, minutes, word):
    client = TestClient(create_app(folder, Clock(minutes)))
    before, files = snapshot(folder), files_under(folder.parent)
    refused = upload(client, folder, "ada", "m1", reference())
    expect_refused(refused, 403, word)
    expect_only_a_rejection(before, snapshot(folder), "ada", "m1", status=403)
    assert files_under(folder.parent) == files and not any((folder / "uploads").iterdir())


# --- The paper's notebook -----------------------------------------------------------------------------------------


def on_a_paper(contest, **window) -> Path:
    """A contest on a paper of one part (m1), with open_contest's ``window`` options (start, personal)."""
    return contest("", title="Paper", paper='title = "P"\nminutes = 60\n[parts.m1]\npoints = 30\n', **window)


def test_the_papers_notebook_is_not_served_before_the_students_window_opens(contest):
    folder = on_a_paper(contest)
    clock = Clock(minutes=-5)
    client = TestClient(create_app(folder, clock))
    early = client.get("/paper.ipynb", headers=auth(folder, "ada"))
    expect_refused(early, 403, "not started", "09:00")
    assert "cells" not in early.text
    page = client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"})
    assert "/paper.ipynb" not in page.text  # no link to a download that would be refused
    clock.now = START
    assert client.get("/paper.ipynb", headers=auth(folder, "ada")).json()["cells"]


def test_downloading_the_papers_notebook_starts_a_personal_window_and_records_it(contest):
    """A personal window starts at the first login: the notebook's download is one, or a student could read
    the questions at leisure and only then start their clock."""
    folder = on_a_paper(contest, personal=True)
    clock = Clock(minutes=10)
    client = TestClient(create_app(folder, clock))
    book = client.get("/paper.ipynb", headers=auth(folder, "ada"))
    assert book.status_code == 200 and book.json()["cells"]
    me = client.get("/api/me", headers=auth(folder, "ada")).json()
    assert me["start"] == clock.now.isoformat(timespec="seconds") and me["phase"] == "open"
    assert snapshot(folder)["logins"] == [("ada", clock.now.isoformat())]
    clock.now += timedelta(minutes=61)  # the window is over: the notebook is no longer handed out
    expect_refused(client.get("/paper.ipynb", headers=auth(folder, "ada")), 403, "ended")
