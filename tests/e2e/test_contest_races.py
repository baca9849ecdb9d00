"""The contest server's decisions against the clock and against each other: an upload is judged when its whole
body has arrived, atomically with its insert, and the grading queue is fair between students.

Uploads go through the real app (FastAPI's TestClient, one thread per upload where they race, with the clock the
test sets); a body that never finishes goes to the app on loopback (uvicorn in a thread), where a real socket
can stall. The queue is driven with an executor of the test's own, whose futures the test completes one by one.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from grader.contest.store import Store
from grader.contest.web.app import create_app
from helpers import CONTEST_START, SOLUTIONS, ContestClock, ServedInThread, auth

START = CONTEST_START
M1 = "[tasks.m1]\npoints = 30\n"
CAPPED = M1 + "max_submissions = 3\n"
BOUNDARY = "race-boundary"


Clock = ContestClock


@pytest.fixture
def folder(contest) -> Path:
    return contest(CAPPED, title="Race test")


def body_parts() -> tuple[bytes, bytes]:
    """A multipart upload of the reference m1, cut in two: the part a slow client has sent, and the rest."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="m1_attention.py"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return head, (SOLUTIONS / "m1_attention.py").read_bytes() + f"\r\n--{BOUNDARY}--\r\n".encode()


def headers_for(folder: Path, who: str, length: int) -> dict[str, str]:
    return {
        **auth(folder, who),
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Content-Length": str(length),
    }


def submissions(folder: Path) -> list[tuple]:
    store = Store(folder)
    try:
        return [(r.student, r.task, r.status, r.received_at) for r in store.all(reports=False)]
    finally:
        store.close()


# --- The upload is judged when it has arrived -----------------------------------------------------------------------


def test_six_parallel_uploads_against_a_cap_of_3_accept_exactly_3(folder):
    """Six uploads whose headers all arrive before any body is complete: each is judged once its body is in,
    one after the other, so the cap (queued uploads count as graded) lets exactly 3 through."""
    client = TestClient(create_app(folder, Clock()))
    head, rest = body_parts()
    all_started = threading.Barrier(6, timeout=20)

    def body() -> Iterator[bytes]:
        yield head
        all_started.wait()  # every upload's handler is reading its body now: none has been judged after it
        yield rest

    answers: list[int] = []

    def send() -> None:
        answer = client.post("/submit/m1", content=body(), headers=headers_for(folder, "ada", len(head + rest)))
        answers.append(answer.status_code)

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(answers) == [202, 202, 202, 403, 403, 403], answers
    assert [status for _, _, status, _ in submissions(folder)] == ["queued"] * 3


def test_a_body_completed_after_the_window_closed_is_refused(folder):
    """The headers come in at 09:59:59, inside the window; the body's last byte after 10:00, its end."""
    clock = Clock(minutes=60 - 1 / 60)
    client = TestClient(create_app(folder, clock))
    head, rest = body_parts()

    def body() -> Iterator[bytes]:
        yield head
        clock.now = START + timedelta(minutes=60, seconds=1)
        yield rest

    refused = client.post("/submit/m1", content=body(), headers=headers_for(folder, "ada", len(head + rest)))
    assert refused.status_code == 403 and "ended" in refused.json()["detail"], refused.text
    assert submissions(folder) == []
    assert not any((folder / "uploads").iterdir())


def test_an_accepted_upload_is_received_when_its_body_has_arrived(folder):
    """received_at is the clock read at acceptance, not when the headers came: the freeze and the interval
    measure from it."""
    clock = Clock(minutes=10)
    client = TestClient(create_app(folder, clock))
    head, rest = body_parts()
    arrived = START + timedelta(minutes=12)

    def body() -> Iterator[bytes]:
        yield head
        clock.now = arrived
        yield rest

    accepted = client.post("/submit/m1", content=body(), headers=headers_for(folder, "ada", len(head + rest)))
    assert accepted.status_code == 202, accepted.text
    assert [received for *_, received in submissions(folder)] == [arrived]


@pytest.fixture
def live(folder):
    """The app on loopback (uvicorn in a thread, no grading), a body allowed 0.5 s to arrive: its port."""
    with ServedInThread(create_app(folder, Clock(), body_seconds=0.5)) as served:
        yield served.port


def test_a_body_that_stalls_past_the_deadline_is_408_and_nothing_is_recorded(folder, live):
    head, rest = body_parts()
    headers = headers_for(folder, "ada", len(head + rest))
    request = "POST /submit/m1 HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(("127.0.0.1", live), timeout=10) as sock:
        sock.sendall(request.encode() + b"\r\n" + head)  # ... and the rest never comes
        answer = b""
        while b"nothing was recorded" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"did not arrive within 0.5 s" in answer, answer
    assert submissions(folder) == []
    assert not any((folder / "uploads").iterdir())


# --- The grading queue is fair between students ---------------------------------------------------------------------


class Manual:
    """An executor whose futures the test completes: ``jobs`` are (submission id, future), as handed out."""

    def __init__(self) -> None:
        self.jobs: list[tuple[int, Future]] = []

    def submit(self, fn, path: str, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self.jobs.append((int(re.search(r"uploads/(\d+)", path).group(1)), future))  # type: ignore[union-attr]
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass

    def grade_next(self) -> int:
        """Complete the oldest job handed out and not done (graded, full marks); its id."""
        sid, future = next((sid, f) for sid, f in self.jobs if not f.done())
        future.set_result({"milestones": [{"id": "m1", "score": 1, "max_score": 1, "checks": [{"counted": True}]}]})
        return sid


def test_a_student_who_queues_five_does_not_push_anothers_one_to_sixth(contest):
    """ada queues 5, alan 1 after them, one grading slot: alan's is graded second, then ada's other four."""
    folder = contest(M1, title="Race test")  # no cap: ada's five are all taken
    manual = Manual()
    head, rest = body_parts()
    with TestClient(create_app(folder, Clock(), executor=manual, slots=1)) as client:
        sent = {}
        for who in ("ada",) * 5 + ("alan",):
            answer = client.post("/submit/m1", content=head + rest, headers=headers_for(folder, who, len(head + rest)))
            assert answer.status_code == 202, answer.text
            sent.setdefault(who, []).append(answer.json()["id"])
        assert len(manual.jobs) == 1, "one slot: the queue, not the executor, holds the rest"
        order = [manual.grade_next() for _ in range(6)]
    assert order == [sent["ada"][0], sent["alan"][0], *sent["ada"][1:]]
    assert [status for _, _, status, _ in submissions(folder)] == ["graded"] * 6


def accepted(store: Store, student: str) -> int:
    return store.accept(student, "m1", START, lambda target: (target / "m1_attention.py").write_text("x = 1") and ".")


def test_a_student_over_their_share_of_grading_time_waits_behind_the_others(folder):
    """ada's first run took 400 s (a sleeping training run), alan's 1 s; with one of each waiting, alan's goes
    first, although ada was served less recently: she used more than the 300 s share of the last 10 minutes."""
    from grader.contest.grading import GradingQueue

    store = Store(folder)
    now = [0.0]
    manual = Manual()
    queue = GradingQueue(store, Clock(), executor=manual, slots=1, timer=lambda: now[0])
    queue.start()
    queue.enqueue(ada1 := accepted(store, "ada"))
    queue.enqueue(alan1 := accepted(store, "alan"))
    now[0] = 400.0
    assert manual.grade_next() == ada1  # alan's is handed out now, at 400 s
    queue.enqueue(ada2 := accepted(store, "ada"))
    queue.enqueue(alan2 := accepted(store, "alan"))
    now[0] = 401.0
    assert manual.grade_next() == alan1
    assert [manual.grade_next() for _ in range(2)] == [alan2, ada2]
    now[0] = 2000.0  # ten minutes on, her 400 s no longer count: round robin again
    queue.enqueue(ada3 := accepted(store, "ada"))
    assert manual.jobs[-1][0] == ada3
    queue.close()
    store.close()
