"""`kill -9` of `grade contest serve` leaves nothing running: the fork server, the grading processes and their
sandboxes die with it (PR_SET_PDEATHSIG), and a restart ends what an older server's grading left (its pidfile in
the contest folder) before it serves again."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from grader.contest.reaper import PIDFILE
from helpers import SOLUTIONS, auth, free_port, opened_a_minute_ago, serve_contest

pytestmark = pytest.mark.slow


def children() -> dict[int, int]:
    """Every process's parent, from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            found[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(root: int) -> set[int]:
    parents = children()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    left = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.add(pid)
    return left


def test_kill_9_of_the_server_leaves_no_process_and_a_restart_serves(contest):
    import urllib.request

    folder = contest(title="Kill", start=opened_a_minute_ago(), scoreboard=None)
    port = free_port()
    server = serve_contest(folder, port)
    try:
        body = (SOLUTIONS / "m1_attention.py").read_bytes()
        boundary = "kill9boundary"
        data = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="m1_attention.py"\r\n\r\n'.encode()
            + body
            + f"\r\n--{boundary}--\r\n".encode()
        )
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/submit/m1",
            data=data,
            headers={**auth(folder, "ada"), "Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 202
        deadline = time.monotonic() + 60  # the grading processes and their sandboxes start
        while time.monotonic() < deadline and len(descendants(server.pid)) < 3:
            time.sleep(0.2)
        time.sleep(1)
        started = descendants(server.pid)
        assert len(started) >= 3, started
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/coach", headers=auth(folder, "coach"))
        with urllib.request.urlopen(request, timeout=30) as answer:
            health = json.loads(answer.read())["health"]
        assert health["running"] and health["alive"] == health["workers"] == 1, health
        assert (folder / PIDFILE).exists()
    finally:
        os.kill(server.pid, signal.SIGKILL)  # the server alone, as the OOM killer would
        server.wait()
    deadline = time.monotonic() + 10
    while alive(started) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = alive(started)
    for pid in left:  # the test's own cleanup, so that a failure leaves nothing either
        os.kill(pid, signal.SIGKILL)
    assert not left, {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in left}
    again = serve_contest(folder, port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
            assert answer.status == 200
    finally:
        os.killpg(again.pid, signal.SIGKILL)
        again.wait()
