"""Test runs (CMS's user tests), through the server: a student's files and their script run in
the grading's sandbox, within its limits, and what it printed comes back; nothing scored, capped or ranked moves.
Through FastAPI's TestClient on a clock the tests set, as test_contest_club.py; the test runs are real (one
process of the app's own, shared by the module's tests), the submissions' grades written to the store."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from test_contest_club import graded
from test_contest_server import grade_submit

from grader.contest.store import Store
from grader.contest.testruns import TestRunQueue, check_files, write
from grader.contest.web.app import create_app
from grader.sandbox.client import Limits
from grader.sandbox.testrun import OUTPUT_KEPT
from helpers import REPO, SOLUTIONS, ContestClock, ServedInThread, auth, forget_counts, tokens

pytestmark = pytest.mark.slow  # a real sandbox runs each script

SECONDS = 8.0  # the app's call limit: a test run's time
TASKS = "[tasks.m1]\npoints = 10\nmax_submissions = 3\ntest_runs = 2\n[tasks.m2]\npoints = 10\ntest_runs = 10\n"
M1 = ("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())


@pytest.fixture(scope="module")
def room(module_contest):
    """(client, folder, clock): one app for the module, its test-run process closed at the end."""
    folder = module_contest(TASKS, title="Test runs")
    clock = ContestClock()
    app = create_app(folder, clock, limits=Limits(call_seconds=SECONDS, test_seconds=SECONDS))
    yield TestClient(app), folder, clock
    app.state.contest.stop_grading()


def send(client, folder, who: str, task: str, script: str, files=(M1,)):
    parts = [("files", (name, data, "text/x-python")) for name, data in files]
    return client.post(f"/test-run/{task}", files=parts, data={"script": script}, headers=auth(folder, who))


def ran(client, folder, who: str, task: str, script: str, files=(M1,)) -> dict:
    """A test run sent and waited for: its record as the student reads it."""
    sent = send(client, folder, who, task, script, files)
    assert sent.status_code == 202, sent.text
    url = sent.json()["url"]
    deadline = time.monotonic() + 120  # the first one starts the process and its fork server
    while time.monotonic() < deadline:
        run = client.get(url, headers=auth(folder, who)).json()
        if run["status"] == "done":
            return run
        time.sleep(0.3)
    raise AssertionError(f"{url} did not run within 120 s")


def test_a_test_run_prints_the_students_output_on_their_input(room):
    client, folder, _ = room
    script = "import torch\nfrom m1_attention import causal_attention\ntorch.manual_seed(0)\n"
    script += "q = torch.randn(1, 4, 8)\nout, weights = causal_attention(q, q, q)\nprint('shape', tuple(out.shape))\n"
    script += "print('<b>bold</b>')\n"
    run = ran(client, folder, "ada", "m1", script)
    assert run["verdict"] == "ok" and run["error"] is None, run
    assert "shape (1, 4, 8)" in run["output"] and not run["cut"]
    assert 0 < run["seconds"] < SECONDS
    page = client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert f'id="test-run-{run["id"]}"' in page and "shape (1, 4, 8)" in page and "Test run (not scored)" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold" not in page  # the output is text, never markup


def test_an_error_shows_the_students_traceback_tail(room):
    client, folder, _ = room
    run = ran(client, folder, "ada", "m2", "print('before')\ndef f():\n    return 1 / 0\nf()\n")
    assert run["verdict"] == "error" and "ZeroDivisionError" in run["error"], run
    output = run["output"]
    assert output.index("before") < output.index("Traceback"), output  # in the order it was printed
    assert 'File "test_run.py", line 4' in output and "ZeroDivisionError: division by zero" in output
    assert "ops_calls" not in output and "runpy" not in output  # the worker's own frames are not theirs
    page = client.get("/me", headers={**auth(folder, "ada"), "Accept": "text/html"}).text
    assert re.search(r'<pre class="scroll bad">[^<]*ZeroDivisionError', page), "the error is kept as printed"
    assert 'placeholder="import m2_model&#10;' in page  # m2's form starts from m2's own file, not m1's


def test_an_infinite_loop_hits_the_time_limit(room):
    client, folder, _ = room
    run = ran(client, folder, "alan", "m2", "print('looping', flush=True)\nwhile True:\n    pass\n")
    assert run["verdict"] == "time limit", run
    assert "looping" in run["output"] and SECONDS <= run["seconds"] < SECONDS + 5


def test_too_much_memory_meets_the_memory_limit(room):
    client, folder, _ = room
    run = ran(client, folder, "alan", "m2", "print('allocating', flush=True)\nhoard = bytearray(64 << 30)\n")
    assert run["verdict"] == "memory limit" and "MemoryError" in run["error"], run
    assert "allocating" in run["output"]


def test_a_huge_print_is_cut_to_its_end_and_says_so(room):
    client, folder, _ = room
    run = ran(client, folder, "ada", "m2", "for i in range(50_000):\n    print(f'line {i:06d}')\nprint('the end')\n")
    assert run["verdict"] == "ok" and run["cut"], run
    assert len(run["output"].encode()) <= OUTPUT_KEPT and run["output"].endswith("the end\n")
    assert "line 049999" in run["output"] and "line 000000" not in run["output"]
    assert run["message"] == f"only the last {OUTPUT_KEPT >> 10} KB of the output is kept"


@pytest.mark.parametrize(
    "script",
    [
        "import os\nos._exit(3)\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "import os, signal\nfor pid in (os.getppid(), 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\nprint('still here')\n",
    ],
    ids=["exit", "kill-itself", "kill-its-parents"],
)
def test_attack_a_script_that_ends_its_process_is_its_own_verdict_and_uses_a_run(room, script):
    """Only a run the grader failed on is free: a script that ends its own worker, or tries to end the processes
    above it, gets a verdict of its own that counts, and the queue runs the next one."""
    client, folder, _ = room
    me = lambda: client.get("/api/me", headers=auth(folder, "ada")).json()  # noqa: E731
    left = next(t["test_runs_left"] for t in me()["tasks"] if t["id"] == "m2")
    run = ran(client, folder, "ada", "m2", script)
    # its own end: crashed, with why; the processes above it are out of its reach (its own pid namespace)
    assert (run["verdict"], run["output"]) in (("crashed", ""), ("ok", "still here\n")), run
    assert next(t["test_runs_left"] for t in me()["tasks"] if t["id"] == "m2") == left - 1
    after = ran(client, folder, "ada", "m2", "print('next')\n")
    assert after["verdict"] == "ok" and after["output"] == "next\n", after
    forget_counts(client.app)  # two runs a case, on one minute of the clock: not the next tests' rate limit


def test_attack_the_script_cannot_read_the_hidden_suites_or_the_solutions(room):
    """The test run's worker is the grading's: the hidden suites, the reference and the kit's tests are not there."""
    client, folder, _ = room
    secrets = [REPO / "grader" / "suites" / "hidden" / "test_kvcache.py", SOLUTIONS / "m2_model.py"]
    assert all(path.is_file() for path in secrets)
    script = "import os\n"
    for path in secrets:
        script += f"try:\n    print(open({str(path)!r}).read())\n"
        script += "except OSError as e:\n    print('refused', type(e).__name__)\n"
    script += f"print(os.path.exists({str(REPO / 'grader')!r}))\n"
    run = ran(client, folder, "alan", "m2", script)
    assert run["verdict"] == "ok", run
    assert run["output"].count("refused") == 2 and run["output"].endswith("False\n"), run["output"]
    for path in secrets:
        assert path.read_text().splitlines()[0] not in run["output"]


def test_scores_caps_the_board_and_the_export_do_not_move(room):
    client, folder, clock = room
    coach = auth(folder, "coach")
    graded(client, folder, clock, "grace", "m1", 2, 4)

    def seen() -> tuple:
        me = client.get("/api/me", headers=auth(folder, "grace")).json()
        return (
            client.get("/api/scoreboard", headers=coach).json(),
            client.get("/coach/results.csv", headers=coach).text,
            [(t["id"], t["used"], t["left"]) for t in me["tasks"]],
            [s["id"] for s in me["submissions"]],
            client.get("/api/coach", headers=coach).json()["submissions"],
        )

    before = seen()
    ran(client, folder, "grace", "m1", "print('hi')\n")
    assert seen() == before
    me = client.get("/api/me", headers=auth(folder, "grace")).json()
    assert {t["id"]: t["test_runs_left"] for t in me["tasks"]} == {"m1": 1, "m2": 10}
    assert client.get("/api/coach", headers=coach).json()["test_runs"]["grace"] == 1


def test_the_limit_refuses_the_next_and_one_waits_at_a_time(room):
    client, folder, _ = room
    ran(client, folder, "grace", "m1", "print(1)\n")  # grace's second of m1's 2 (the test above ran the first)
    refused = send(client, folder, "grace", "m1", "print(2)\n")
    assert refused.status_code == 429 and refused.json()["detail"] == "you have used your 2 test runs of m1"
    first = send(client, folder, "grace", "m2", "import time\ntime.sleep(2)\n")
    assert first.status_code == 202, first.text
    second = send(client, folder, "grace", "m2", "print(3)\n")
    assert second.status_code == 409 and "previous test run has not finished" in second.json()["detail"]


def test_another_students_test_run_is_the_same_404_as_none(room):
    client, folder, _ = room
    run = ran(client, folder, "ada", "m2", "print('mine')\n")
    theirs = client.get(f"/api/test-runs/{run['id']}", headers=auth(folder, "alan"))
    missing = client.get("/api/test-runs/999999", headers=auth(folder, "alan"))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"] == f"no test run {run['id']} of yours" and "mine" not in theirs.text


def test_a_closed_window_and_a_bad_upload_are_refused(room):
    client, folder, clock = room
    bad = send(client, folder, "ada", "m2", "print(1)\n", files=[("notes.txt", b"x")])
    assert bad.status_code == 400 and "not an exercise file" in bad.json()["detail"]
    assert send(client, folder, "ada", "m9", "print(1)\n").status_code == 404
    now = clock.now
    clock.now += timedelta(hours=2)
    try:
        closed = send(client, folder, "ada", "m2", "print(1)\n")
    finally:
        clock.now = now
    assert closed.status_code == 403 and "test runs are closed" in closed.json()["detail"], closed.text
    logged = [(e["kind"], e["detail"]) for e in Store(folder).events("ada", limit=3)]  # newest first
    assert [kind for kind, _ in logged] == ["test run refused"] * 3, logged  # not "refused": no upload banner
    assert logged[0][1] == f"m2: {closed.json()['detail']}" and logged[1][1].startswith("m9: m9 is not a task")
    assert logged[2][1] == "m2: 'notes.txt' is not an exercise file: a test run takes your .py files and a script"


def test_attack_a_flood_of_bad_test_runs_is_cut_off_and_logs_no_more_than_a_minutes_refusals(room):
    client, folder, _ = room
    forget_counts(client.app)
    before = len(Store(folder).events("alan", limit=10_000))
    codes = [send(client, folder, "alan", "m9", "print(1)\n").status_code for _ in range(25)]
    most = client.app.state.contest.settings.refusals_per_minute
    assert codes[:most] == [404] * most and set(codes[most:]) == {429}, codes
    assert len(Store(folder).events("alan", limit=10_000)) - before == most, "the log grows by a minute's most"
    forget_counts(client.app)


def test_grade_submit_test_run_prints_the_output_and_the_verdict(room, tmp_path):
    client, folder, _ = room
    (tmp_path / "m1_attention.py").write_bytes(M1[1])
    (tmp_path / "try.py").write_text("import m1_attention\nprint('loaded', m1_attention.__name__)\n")
    (tmp_path / "fail.py").write_text("raise ValueError('mine')\n")
    with ServedInThread(client.app) as served:
        common = ["--server", served.url, "-m", "m1"]
        ok = grade_submit(str(tmp_path), *common, "--test-run", str(tmp_path / "try.py"), token=tokens(folder)["alan"])
        failed = grade_submit(
            str(tmp_path), *common, "--test-run", str(tmp_path / "fail.py"), token=tokens(folder)["alan"]
        )
    assert ok.exit_code == 0 and "loaded m1_attention" in ok.output and ": ok in " in ok.output, ok.output
    assert failed.exit_code == 1 and "ValueError: mine" in failed.output and ": error in " in failed.output
    assert client.get("/api/me", headers=auth(folder, "alan")).json()["submissions"] == []


def test_a_test_run_left_waiting_by_a_stopped_server_runs_at_the_next_start(module_contest):
    folder = module_contest(TASKS, title="Restart", name="restart")
    store, clock = Store(folder), ContestClock()
    files = check_files([], b"print('after the restart')\n")
    rid = store.accept_test_run("ada", "m1", clock, lambda where: write(files, where), lambda runs: None)
    queue = TestRunQueue(store, clock, Limits(call_seconds=SECONDS))
    queue.start()
    try:
        deadline = time.monotonic() + 120
        while (run := store.test_run(rid)) is not None and run["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        queue.close()
    assert run is not None and run["verdict"] == "ok" and run["output"] == "after the restart\n", run
    assert not store.test_run_folder(rid).exists(), "its files are deleted once it has run"


def test_a_test_run_the_grader_failed_on_is_said_to_cost_nothing_and_does_not(module_contest):
    """Its process died (the grader's fault): the page says it costs nothing, and the count left agrees."""
    folder = module_contest(TASKS, title="Grader fault", name="fault")
    store, clock = Store(folder), ContestClock()
    files = check_files([], b"print(1)\n")
    rid = store.accept_test_run("ada", "m1", clock, lambda where: write(files, where), lambda runs: None)
    store.finish_test_run(rid, clock(), {"error": "the test run's process died (BrokenProcessPool): send it again"})
    me = TestClient(create_app(folder, clock)).get("/api/me", headers=auth(folder, "ada")).json()
    (shown,) = me["test_runs"]
    assert shown["verdict"] == "failed" and "it costs you nothing" in shown["message"], shown
    (m1,) = [t for t in me["tasks"] if t["id"] == "m1"]
    assert m1["test_runs_left"] == 2, "a run the grader failed on is not counted against the limit"
