"""`grade contest serve --supervise`: a server killed with -9 is replaced by its supervisor, which kept the port
open, so the next request is answered (within 10 s) instead of refused, and an upload accepted before the kill
is graded once after it; a stop of the supervisor (SIGTERM, as systemd sends) leaves no process behind."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from grader.contest.store import Store
from grader.contest.submit import multipart
from grader.contest.supervise import MAX_DELAY, backoff
from helpers import REPO, SOLUTIONS, auth, free_port, opened_a_minute_ago, serve_contest, stop_server

M1 = SOLUTIONS / "m1_attention.py"


def descendants(root: int) -> dict[int, bytes]:
    """Every process under ``root`` that is not a zombie, with its command line."""
    parents, states = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)], states[int(entry)] = int(fields[1]), fields[0]
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    alive = {}
    for pid in found:
        try:
            alive[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if states.get(pid) == "Z":
            del alive[pid]
    return alive


def the_server(supervisor: int) -> int:
    """The server the supervisor runs now: its child serving on the supervisor's socket."""
    (pid,) = [pid for pid, line in descendants(supervisor).items() if b"--listen-fd" in line and pid != supervisor]
    return pid


def upload(port: int, folder: Path) -> int:
    body, kind = multipart([M1])
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/submit/m1", data=body, headers={**auth(folder, "ada"), "Content-Type": kind}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 202
        return json.loads(answer.read())["id"]


def test_a_first_crash_is_restarted_at_once_and_a_crash_loop_ever_slower_up_to_the_cap():
    waits = [backoff(n) for n in range(1, 10)]
    assert waits[:5] == [0, 1, 2, 4, 8]
    assert waits[-1] == MAX_DELAY and max(waits) == MAX_DELAY
    assert waits == sorted(waits)


def test_a_server_that_refuses_its_first_start_is_not_restarted(contest):
    """A mistake the coach must fix (here, a contest file that does not parse) ends the supervisor with the
    server's exit status 2 and its message, rather than a restart every 30 s that nobody reads."""
    folder = contest(title="Refused")
    (folder / "contest.toml").write_text("title = \n")
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "contest", "serve", str(folder), "--port", str(free_port()), "--supervise"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "contest.toml" in proc.stderr and "not restarted" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "server restarted" not in [e["kind"] for e in Store(folder).events()]


def test_init_writes_a_systemd_unit_whose_command_serves_this_folder(tmp_path):
    """The unit `grade contest init` writes (the alternative to --supervise): every blank filled, restarted by
    systemd, stopped as Ctrl-C stops the server, and its ExecStart a command line that runs: `serve` of this
    folder (with --help: it is not served here)."""
    folder = tmp_path / "round"
    init = subprocess.run(
        [sys.executable, "-m", "grader", "contest", "init", str(folder)], cwd=REPO, capture_output=True, text=True
    )
    assert init.returncode == 0 and "contest.service" in init.stdout, init.stderr
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd's keys are case-sensitive
    unit.read_string((folder / "contest.service").read_text())
    service = unit["Service"]
    assert service["Restart"] == "always" and service["KillSignal"] == "SIGINT", dict(service)
    assert service["WorkingDirectory"] == str(folder.resolve())
    command = shlex.split(service["ExecStart"])
    assert command[1:6] == ["-m", "grader", "contest", "serve", str(folder.resolve())], command
    assert "@" not in (folder / "contest.service").read_text()  # no blank left unfilled
    ran = subprocess.run([*command, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "--supervise" in ran.stdout, ran.stderr
    wrong = subprocess.run([*command[:4], "serv", "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert wrong.returncode == 2  # the check above can fail: a command line that does not run is refused


@pytest.mark.slow
def test_a_plain_server_killed_with_9_refuses_the_next_request(contest):
    """What --supervise is for, shown: without it, a server killed with -9 leaves the port closed."""
    folder = contest(title="Plain", start=opened_a_minute_ago(), scoreboard=None)
    port = free_port()
    server = serve_contest(folder, port)
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).close()
    assert isinstance(refused.value.reason, ConnectionRefusedError), refused.value


@pytest.mark.slow
def test_a_supervised_server_killed_with_9_answers_again_within_10_s_and_grades_the_upload_once(contest):
    folder = contest(title="Supervised", start=opened_a_minute_ago(), scoreboard=None)
    port = free_port()
    supervisor = serve_contest(folder, port, options=("--supervise",))
    try:
        first = the_server(supervisor.pid)
        command = descendants(supervisor.pid)[first].split(b"\0")
        assert b"--supervise" not in command and command[command.index(b"--workers") + 1] == b"1", command
        sid = upload(port, folder)
        store = Store(folder)
        assert store.get(sid).status == "queued"  # type: ignore[union-attr]  # accepted, not graded: then killed
        os.kill(first, signal.SIGKILL)
        killed = time.monotonic()
        # The very next request: the supervisor's socket holds it until the new server answers it.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as answer:
            assert answer.status == 200
        assert time.monotonic() - killed < 10, time.monotonic() - killed
        assert the_server(supervisor.pid) != first
        deadline = time.monotonic() + 240
        while store.get(sid).status == "queued" and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.5)
        row = store.get(sid)
        assert row is not None and row.status == "graded" and row.score is not None, row
        assert len(store.all()) == 1
        (restart,) = [e for e in store.events() if e["kind"] == "server restarted"]
        assert "killed by SIGKILL" in restart["detail"], restart
        assert [e["kind"] for e in store.events()].count("server started") == 2
        store.close()
    finally:
        stop_server(supervisor)  # Ctrl-C to the supervisor's group: it stops its server, then itself
    assert supervisor.returncode == 0
    output = (folder / f"serve-{port}.log").read_text()
    assert len(re.findall(rf"graded #{sid}: ada m1", output)) == 1, output  # graded once, by the second server


@pytest.mark.slow
def test_sigterm_stops_the_supervisor_its_server_and_every_grading_process(contest):
    folder = contest(title="Stopped", start=opened_a_minute_ago(), scoreboard=None)
    port = free_port()
    supervisor = serve_contest(folder, port, options=("--supervise",))
    try:
        upload(port, folder)
        deadline = time.monotonic() + 60  # the server, its fork server, its grading process and its sandboxes
        while time.monotonic() < deadline and len(descendants(supervisor.pid)) < 4:
            time.sleep(0.2)
        started = descendants(supervisor.pid)
        assert len(started) >= 4, started
        os.kill(supervisor.pid, signal.SIGTERM)  # the supervisor alone, as systemd's stop
        assert supervisor.wait(60) == 0
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in started):
        time.sleep(0.2)
    left = {pid: line[:200] for pid, line in started.items() if _alive(pid)}
    for pid in left:  # the test's own cleanup, so that a failure leaves nothing either
        os.kill(pid, signal.SIGKILL)
    assert not left, left
    with pytest.raises(urllib.error.URLError):  # and the port is closed: nothing serves it any more
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
