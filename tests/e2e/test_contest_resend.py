"""An upload whose answer is lost, sent again: the same submission, stored, graded and counted once.

A student's connection breaks after the server stored their upload; the answer never arrives and they (or
`grade submit`, by itself) send it again. The upload carries a key of the client's (an ``Idempotency-Key`` header,
or ``?key=`` in the page's form): the same key with the same files is the stored submission, answered again; other
files under a used key (a stale page's form) are a new upload, decided by the rules as any other.
"""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from grader.contest.web.app import create_app
from helpers import SOLUTIONS, ContestClock, ServedInThread, auth, contest_folder, open_contest, tokens, upload

ONE_SUBMISSION = "[tasks.m1]\npoints = 30\nmax_submissions = 1\n"
TWO_SUBMISSIONS = "[tasks.m1]\npoints = 30\nmax_submissions = 2\n"
M1 = [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())]
OTHER_M1 = [("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes() + b"\n# changed\n")]


def stored(folder: Path) -> list[tuple]:
    with sqlite3.connect(folder / "contest.sqlite") as db:
        return db.execute("SELECT id, student, task FROM submissions ORDER BY id").fetchall()


def keyed(client, folder: Path, who: str, files, key: str):
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return client.post("/submit/m1", files=parts, headers={**auth(folder, who), "Idempotency-Key": key})


def test_an_upload_sent_again_with_its_key_is_the_same_submission_and_uses_no_second_one(tmp_path):
    folder = contest_folder(tmp_path / "c", open_contest(tasks=ONE_SUBMISSION))
    client = TestClient(create_app(folder, ContestClock()))
    first = keyed(client, folder, "ada", M1, "k-1")
    assert first.status_code == 202, first.text
    again = keyed(client, folder, "ada", M1, "k-1")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"] and again.json()["repeated"]
    assert stored(folder) == [(first.json()["id"], "ada", "m1")]
    # without the key, or with another, it is a second upload: the cap of one refuses it
    assert keyed(client, folder, "ada", M1, "k-2").status_code == 403
    assert upload(client, folder, "ada", "m1", M1).status_code == 403


def test_other_files_under_a_used_key_are_a_new_upload_and_another_students_key_is_their_own(tmp_path):
    folder = contest_folder(tmp_path / "c", open_contest(tasks=TWO_SUBMISSIONS))
    client = TestClient(create_app(folder, ContestClock()))
    a = keyed(client, folder, "ada", M1, "stale-page")
    b = keyed(client, folder, "ada", OTHER_M1, "stale-page")
    assert (a.status_code, b.status_code) == (202, 202) and a.json()["id"] != b.json()["id"]
    assert keyed(client, folder, "ada", OTHER_M1, "stale-page").json()["id"] == b.json()["id"]
    assert keyed(client, folder, "alan", M1, "stale-page").status_code == 202  # a key is per student
    assert len(stored(folder)) == 3


@pytest.mark.parametrize("key", ["", "a b", "x" * 101, "../etc", "k\u00e9y"])
def test_a_malformed_key_is_refused_and_stores_nothing(tmp_path, key):
    folder = contest_folder(tmp_path / "c", open_contest(tasks=TWO_SUBMISSIONS))
    client = TestClient(create_app(folder, ContestClock()))
    parts = [("files", (name, data, "application/octet-stream")) for name, data in M1]
    answer = client.post(f"/submit/m1?key={key}", files=parts, headers=auth(folder, "ada"))
    if key == "":  # an empty key is no key: an ordinary upload
        assert answer.status_code == 202
    else:
        assert answer.status_code == 400 and "key" in answer.json()["detail"], answer.text
        assert stored(folder) == []


def test_each_page_gives_its_upload_form_a_key_of_its_own(tmp_path):
    folder = contest_folder(tmp_path / "c", open_contest(tasks=TWO_SUBMISSIONS))
    client = TestClient(create_app(folder, ContestClock()))
    html = {**auth(folder, "ada"), "Accept": "text/html"}
    keys = [re.findall(r'action="/submit/m1\?key=([0-9a-f]{32})"', client.get("/me", headers=html).text) for _ in "ab"]
    assert all(len(k) == 1 for k in keys) and keys[0] != keys[1], keys


class LosesFirstUploadAnswer:
    """A proxy before the server that passes every exchange whole but the first upload's: that one reaches the
    server, which stores it, and its answer is thrown away, the connection closed."""

    def __init__(self, target: int):
        self.target, self.dropped = target, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._exchange, args=(client,), daemon=True).start()

    def _exchange(self, client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", self.target)) as server:
            request = self._request(client)
            server.sendall(request)
            answer = b""
            while chunk := server.recv(65536):
                answer += chunk
                if b"\r\n\r\n" in answer and len(answer) >= self._length(answer):
                    break
            if request.startswith(b"POST /submit/") and not self.dropped:
                self.dropped += 1
                return  # the answer is lost
            client.sendall(answer)

    @staticmethod
    def _length(message: bytes) -> int:
        head, _, _ = message.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        return len(head) + 4 + (int(found[1]) if found else 0)

    def _request(self, client: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data or len(data) < self._length(data):
            chunk = client.recv(65536)
            if not chunk:
                break
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def test_grade_submit_sends_an_upload_again_when_its_answer_is_lost_and_it_counts_once(tmp_path, monkeypatch):
    from grader.cli import main
    from grader.contest import submit

    monkeypatch.setattr(submit, "RESEND_SECONDS", 0.05)
    folder = contest_folder(tmp_path / "c", open_contest(tasks=ONE_SUBMISSION))
    work = tmp_path / "work"
    work.mkdir()
    (work / "m1_attention.py").write_bytes(M1[0][1])
    with ServedInThread(create_app(folder, ContestClock())) as served:
        proxy = LosesFirstUploadAnswer(served.port)
        try:
            result = CliRunner().invoke(
                main,
                ["submit", str(work), "-m", "m1", "--server", f"http://127.0.0.1:{proxy.port}", "--no-wait"],
                env={"GPTKIT_CONTEST_TOKEN": tokens(folder)["ada"]},
            )
        finally:
            proxy.close()
    assert proxy.dropped == 1
    assert result.exit_code == 0, result.output
    assert "sending it again" in result.output and "submission 1, queued" in result.output, result.output
    assert stored(folder) == [(1, "ada", "m1")], "the upload is stored once, and the cap of one is not used up twice"
