"""The Grader (grader/grading.py): one warm fork server for many gradings, replaced when it dies, each grading
under its own limits, and a grader failure that never sticks to the next grading."""

from __future__ import annotations

import dataclasses
import os
import select
import signal
from pathlib import Path

import pytest

import attacks as A
from grader.batch.run import grade_one
from grader.grading import Grader, Request
from grader.options import limits
from helpers import SOLUTIONS, Variant

pytestmark = pytest.mark.slow  # each test grades: on servers of its own, or on the session's warm Grader


FIRST_CALL_SLEEPS = """
if not globals().get("_slept"):  # each worker's first call only
    globals()["_slept"] = True
    import time
    time.sleep(3)
"""


def slow_first_call(folder: Path) -> Path:
    """The reference whose causal_attention sleeps 3 s on a worker's first call: over a 1 s limit on one call,
    well inside the default 20 s."""
    return Variant("sleeps", edits={A.M1: [A.in_call(FIRST_CALL_SLEEPS)]}).build(folder)


def slow_calls(folder: Path) -> Path:
    """The reference whose causal_attention sleeps 1 s on every call: m1's checks make dozens of calls."""
    return Variant("sleeps", edits={A.M1: [A.in_call("import time\ntime.sleep(1)")]}).build(folder)


def full(report, milestone: str) -> bool:
    """Every point of the milestone won, none set aside as the grader's failure (a dead server's checks are)."""
    got, most = report.score(milestone)
    return got == most > 0 and not report.internal_errors


def warm_starts(grader: Grader) -> int:
    """The servers a Grader will have started once its next grading on the warm server begins: one more if it
    holds none alive (the session's Grader may have one already, from the tests before)."""
    return grader.started + (grader._server is None or grader.server_died)


def test_one_server_serves_many_gradings(grader):
    """The session's warm Grader (tests/conftest.py): its second grading starts no server of its own."""
    before, expected = grader.started, warm_starts(grader)
    first = grader.grade(Request(SOLUTIONS, ("m1",)))
    second = grader.grade(Request(SOLUTIONS, ("m2",)))
    assert full(first, "m1") and full(second, "m2")
    assert grader.started == expected, (
        f"{grader.started - before} fork servers started for two gradings ({expected - before} were needed)"
    )


def test_a_warmed_server_serves_the_first_grading():
    """A warm-up starts the server and does not wait for its hello; once the hello is there, unread, the first
    grading must take that server, not mistake the waiting hello for a closed connection and start another."""
    with Grader() as grader:
        grader.warm_up()
        server = grader._server
        assert server is not None
        select.select([server.control], [], [], 120)  # its hello has arrived, and nobody has read it
        report = grader.grade(Request(SOLUTIONS, ("m4",)))
        assert full(report, "m4")
        assert grader._server is server and grader.started == 1, "the warmed server was replaced at the first grading"


def test_a_server_that_died_is_replaced_before_the_next_grading():
    with Grader() as grader:
        assert full(grader.grade(Request(SOLUTIONS, ("m1",))), "m1")
        server = grader._server
        assert server is not None and server.proc is not None
        os.killpg(server.proc.pid, signal.SIGKILL)  # the machine's OOM killer, a stray kill
        server.proc.wait()
        assert grader.server_died
        again = grader.grade(Request(SOLUTIONS, ("m1",)))
    assert full(again, "m1"), "the grading after the server died lost points: it met the dead server"
    assert grader.started == 2 and not again.internal_errors


def test_each_grading_runs_under_its_own_limits(tmp_path, grader):
    """The warm server was started under one set of limits (the session's Grader's, the defaults); a grading
    asked under others gets those, and the next one, on the same server, the defaults again."""
    folder = slow_first_call(tmp_path / "sleeps")
    expected = warm_starts(grader)
    tight = grader.grade(Request(folder, ("m1",)), limits(timeout=1))
    roomy = grader.grade(Request(folder, ("m1",)))
    assert not full(tight, "m1"), "a 3 s call passed under a 1 s limit"
    assert full(roomy, "m1"), "the default limits were not restored for the next grading"
    assert grader.started == expected, "the two gradings were not on one warm server"


def test_a_grading_is_bounded_as_a_whole(tmp_path, grader):
    """Every call sleeps 1 s; with 5 s for the whole submission, the checks left once it is up fail at once."""
    folder = slow_calls(tmp_path / "sleeps")
    report = grader.grade(Request(folder, ("m1",)), limits(submission_timeout=5))
    assert report.seconds < 60, f"graded in {report.seconds:.0f} s"
    assert any("time limit" in c.message for c in report.checks if not c.passed), [c.message for c in report.checks]


def test_side_by_side_gradings_get_a_server_each_and_leave_the_warm_one():
    with Grader(jobs=2) as grader:
        report = grader.grade(Request(SOLUTIONS, ("m1", "m2")))
        assert grader._server is None, "a side-by-side grading started the warm server too"
    assert full(report, "m1") and full(report, "m2")
    assert [c.milestone for c in report.checks] == sorted((c.milestone for c in report.checks), key=["m1", "m2"].index)


def test_a_pool_process_replaces_its_dead_server(tmp_path):
    """grade batch's and the contest's worker processes keep one Grader each: its server, killed between two
    submissions, is replaced (before the Grader, a pool process kept the dead one and failed every later one)."""
    from grader import grading

    first = grade_one(str(SOLUTIONS), ["m1"], limits())
    grader = grading._process_grader
    assert grader is not None and grader._server is not None and grader._server.proc is not None
    try:
        os.killpg(grader._server.proc.pid, signal.SIGKILL)
        grader._server.proc.wait()
        second = grade_one(str(SOLUTIONS), ["m1"], limits())
    finally:
        grader.close()
        grading._process_grader = None
    assert "error" not in first and "error" not in second, second.get("error")
    assert second["score"] == second["max_score"]


def test_each_grading_reads_the_lmbudget_task_file_of_its_own_time(tmp_path, monkeypatch, grader):
    """A suite's module-level state is read afresh by each grading in one process: the lmbudget task file named
    by GPTKIT_LMBUDGET_TASK when the grading starts, not the one the first grading saw (a test once trained for
    the shipped task's 185 s while its own task file said 23). On the session's Grader, which graded before."""
    from grader.lmbudget.task import ENV_VAR, TASK_FILE, load_task, write_task

    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "lmbudget.py").write_text((SOLUTIONS.parent / "exercises" / "lmbudget.py").read_text())
    maxima = []
    for points in (10.0, 7.0):
        task = tmp_path / f"task-{points:g}.toml"
        write_task(dataclasses.replace(load_task(TASK_FILE), points=points), task)
        monkeypatch.setenv(ENV_VAR, str(task))
        report = grader.grade(Request(stub, ("lmbudget",)), limits()).to_json()
        maxima.append(sum(c["max_score"] for m in report["milestones"] for c in m["checks"]))
    assert maxima == [10.0, 7.0], f"the second grading kept the first task file's points: {maxima}"
