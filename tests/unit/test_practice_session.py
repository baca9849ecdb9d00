"""`grade practice`'s core (grader/practice/session.py): a fake clock and a fake grader, no terminal, no sleep."""

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from grader.paper.config import parse
from grader.practice.errors import PracticeError, Unreadable
from grader.practice.log import read_log
from grader.practice.loop import run_session
from grader.practice.session import Session
from grader.practice.stdin import Commands

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)
PAPER = """
title = "Tiny paper"
minutes = 60
feedback = "{feedback}"

[parts.m1]
points = 60

[parts.quiz]
points = 40
"""


def paper(feedback="score"):
    return parse(PAPER.format(feedback=feedback), paper_id="tiny")


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now

    def at(self, minutes):
        self.now = T0 + timedelta(minutes=minutes)


def report(m1=(0, 27), quiz=(0, 8), message="wrong numbers"):
    """A grader report (Report.to_json()'s shape) with m1 and quiz at these scores."""

    def milestone(mid, score, max_score):
        checks = [
            {
                "name": f"{mid} works",
                "score": score,
                "max_score": max_score,
                "passed": score == max_score,
                "message": "" if score == max_score else message,
                "counted": True,
                "traceback": "secret frames",
            },
        ]
        return {"id": mid, "title": mid.upper(), "score": score, "max_score": max_score, "checks": checks}

    return {
        "score": m1[0] + quiz[0],
        "max_score": m1[1] + quiz[1],
        "set_aside": {"checks": 0, "note": ""},
        "milestones": [milestone("m1", *m1), milestone("quiz", *quiz)],
    }


class Grades:
    """A grade function returning the queued reports in turn (an exception is raised)."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        result = self.results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result


def session(tmp_path, grades, feedback="score", clock=None, **kw):
    return Session(paper(feedback), clock or Clock(), grades, tmp_path / "log.jsonl", **kw)


def test_scores_are_in_the_papers_points_and_the_policy_filters_them_while_the_time_runs(tmp_path):
    s = session(tmp_path, Grades(report(m1=(27, 27), quiz=(4, 8))), feedback="score")
    attempt = s.attempt()
    assert attempt.counted and attempt.scores == {"m1": 60.0, "quiz": 20.0}
    text = "\n".join(s.attempt_lines(attempt))
    assert "m1: 60 / 60 points" in text and "quiz: 20 / 40 points" in text
    assert "works" not in text and "wrong numbers" not in text, "score: no check name or message"
    assert "time left: 1:00:00" in text


@pytest.mark.parametrize(
    "feedback,shown,hidden",
    [
        ("passfail", ["m1: passed", "quiz: not yet full marks"], ["points", "works"]),
        ("none", ["shows no feedback"], ["m1", "points", "passed"]),
        ("full", ["FAIL quiz works: wrong numbers", "1 of 1 checks passed"], ["secret frames"]),
    ],
)
def test_each_policy_during_the_time(tmp_path, feedback, shown, hidden):
    s = session(tmp_path, Grades(report(m1=(27, 27), quiz=(4, 8))), feedback=feedback)
    text = "\n".join(s.attempt_lines(s.attempt()))
    for phrase in shown:
        assert phrase in text
    for phrase in hidden:
        assert phrase not in text


def test_status_follows_the_policy(tmp_path):
    clock = Clock()
    s = session(tmp_path, Grades(report(m1=(27, 27)), report()), feedback="none", clock=clock)
    clock.at(5)
    s.attempt()
    status = "\n".join(s.status())
    assert "attempts: 1 counted" in status and "55:00" in status
    assert "m1" not in status, "none: no scores in the status either"
    s = session(tmp_path, Grades(report(m1=(27, 27))), feedback="score", clock=clock, new=True)
    clock.at(12)
    s.attempt()
    status = "\n".join(s.status())
    assert "m1: best 60 / 60, full marks at 7:00" in status and "quiz: best 0 / 40" in status


def test_full_feedback_after_the_time_and_a_late_attempt_is_not_counted(tmp_path):
    clock = Clock()
    s = session(tmp_path, Grades(report(m1=(10, 27)), report(m1=(27, 27), quiz=(8, 8))), clock=clock)
    clock.at(10)
    s.attempt()
    clock.at(61)
    assert s.over and s.remaining() == 0
    late = s.attempt()
    assert not late.counted and late.why == "late" and late.scores["m1"] == 60
    text = "\n".join(s.attempt_lines(late))
    assert "not counted" in text and "1 of 1 checks passed" in text, "after the time: full feedback"
    assert s.best("m1").number == 1 and s.first_solved("m1") is None
    s.finish("time")
    final = s.final_report()
    assert "| m1 | 22.22 / 60 | attempt 1 | not solved |" in final
    assert "FAIL m1 works: wrong numbers" in final and "Not solved." in final
    assert s.ended == T0 + timedelta(minutes=60), "handed in when the time was up, not when noticed"


def test_first_solved_times_and_the_best_attempt_per_part(tmp_path):
    clock = Clock()
    grades = Grades(report(m1=(27, 27), quiz=(0, 8)), report(m1=(20, 27), quiz=(8, 8)), report(m1=(27, 27)))
    s = session(tmp_path, grades, clock=clock)
    for minute in (3, 17, 40):
        clock.at(minute)
        s.attempt()
    assert s.first_solved("m1").elapsed == 180 and s.first_solved("quiz").elapsed == 17 * 60
    assert s.best("m1").number == 1, "the earliest of equal bests"
    assert s.best("quiz").number == 2
    clock.at(45)
    s.finish("quit")
    final = s.final_report()
    assert "| m1 | 60 / 60 | attempt 1 | 3:00 (attempt 1) |" in final
    assert "| quiz | 40 / 40 | attempt 2 | 17:00 (attempt 2) |" in final
    assert "**100 / 100**" in final and "handed in" in final


def test_a_grader_failure_is_recorded_and_never_counted(tmp_path):
    s = session(tmp_path, Grades(RuntimeError("fork server died"), Unreadable("not a notebook"), report()))
    failed = s.attempt()
    assert not failed.counted and failed.why == "grader" and "fork server died" in failed.error
    assert "the grader itself failed, not your work" in "\n".join(s.attempt_lines(failed))
    unreadable = s.attempt()
    assert not unreadable.counted and unreadable.why == "unreadable"
    assert s.attempt().counted
    assert [a.number for a in s.counted()] == [3]
    assert "1 counted, 2 not graded" in "\n".join(s.status())
    records = read_log(tmp_path / "log.jsonl")
    assert [r.get("why") for r in records[1:]] == ["grader", "unreadable", ""]


def test_ctrl_c_during_grading_is_not_an_attempt(tmp_path):
    s = session(tmp_path, Grades(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        s.attempt()
    assert s.attempts == [] and len(read_log(tmp_path / "log.jsonl")) == 1


def test_a_rerun_with_the_same_log_continues_the_session(tmp_path):
    clock = Clock()
    s = session(tmp_path, Grades(report(m1=(27, 27))), clock=clock, minutes=30)
    clock.at(4)
    s.attempt()
    with open(tmp_path / "log.jsonl", "a") as f:
        f.write('{"kind":"attempt","numb')  # a torn last line: the process was killed while writing
    clock.at(20)
    again = session(tmp_path, Grades(report()), clock=clock, minutes=45)
    assert again.resumed and again.start == T0 and again.minutes == 30, "the same start, its own minutes"
    assert "keeps its 30 minutes" in again.notes[0]
    assert [a.scores["m1"] for a in again.attempts] == [60.0]
    assert again.first_solved("m1").elapsed == 240
    assert again.remaining() == 600
    again.attempt()
    assert [a.number for a in again.attempts] == [1, 2]

    fresh = session(tmp_path, Grades(), clock=clock, new=True)
    assert fresh.start == T0 + timedelta(minutes=20) and fresh.attempts == [] and fresh.minutes == 60
    assert len(read_log(tmp_path / "log.jsonl")) == 1, "the log keeps the old session; reading takes the new"


def test_a_handed_in_session_stays_over(tmp_path):
    clock = Clock()
    s = session(tmp_path, Grades(report(m1=(27, 27)), report(m1=(27, 27), quiz=(8, 8))), clock=clock)
    clock.at(2)
    s.attempt()
    clock.at(5)
    s.finish("quit")
    again = session(tmp_path, s.grade_fn, clock=clock)
    assert again.over and again.ended == T0 + timedelta(minutes=5) and again.end_reason == "quit"
    after = again.attempt()
    assert not after.counted and after.why == "ended"
    assert "| quiz | 0 / 40 | attempt 1 | not solved |" in again.final_report()


def test_a_log_of_another_paper_is_refused(tmp_path):
    session(tmp_path, Grades())
    other = parse(PAPER.format(feedback="score").replace("points = 40", "points = 50"), paper_id="tiny")
    with pytest.raises(PracticeError, match="another paper"):
        Session(other, Clock(), Grades(), tmp_path / "log.jsonl")
    Session(other, Clock(), Grades(), tmp_path / "log.jsonl", new=True)


def test_every_attempt_is_a_whole_line_with_the_full_report(tmp_path):
    clock = Clock()
    s = session(tmp_path, Grades(report(m1=(27, 27))), clock=clock)
    clock.at(1.5)
    s.attempt()
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    start, attempt = (json.loads(line) for line in lines)
    assert start["kind"] == "start" and start["minutes"] == 60 and start["paper"]["id"] == "tiny"
    assert attempt["elapsed"] == 90 and attempt["scores"] == {"m1": 60.0, "quiz": 0.0}
    assert attempt["report"]["milestones"][0]["checks"][0]["traceback"] == "secret frames", "the full report"
    assert datetime.fromisoformat(attempt["time"]) == T0 + timedelta(minutes=1.5)


def test_commands_come_a_line_at_a_time_and_waiting_times_out():
    read, write = os.pipe()
    try:
        commands = Commands(read)
        assert commands.next(0.01) == "timeout"
        os.write(write, b"\nS\nq")  # two lines at once, then one with no newline before the end
        assert commands.next(0.01) == "" and commands.next(0.01) == "s", "a line read ahead is not lost"
        assert commands.next(0.01) == "timeout"
        os.close(write)
        write = -1
        assert commands.next(0.01) == "q" and commands.next(0.01) is None
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_attempt_lines_list_the_parts_in_the_papers_order_not_the_lessons(tmp_path):
    quiz_first = parse(
        '\ntitle = "Quiz first"\nminutes = 60\n\n[parts.quiz]\npoints = 40\n\n[parts.m1]\npoints = 60\n', paper_id="q"
    )
    s = Session(quiz_first, Clock(), Grades(report(m1=(27, 27), quiz=(4, 8))), tmp_path / "log.jsonl")
    text = "\n".join(s.attempt_lines(s.attempt()))
    assert text.index("quiz: 20 / 40") < text.index("m1: 60 / 60"), (
        "the paper lists quiz first; the report lists m1 first (the lesson's order): the student reads the paper's\n"
        + text
    )


def test_full_feedback_gives_the_checks_in_the_papers_points_as_their_part(tmp_path):
    graded = report(m1=(27, 27), quiz=(4, 8))
    graded["milestones"][1]["checks"] = [  # quiz: three checks of the grader's 8 points, 4 won
        {"name": f"Q{i}", "score": won, "max_score": stake, "passed": won == stake, "message": "", "counted": True}
        for i, (won, stake) in enumerate([(3, 3), (1, 3), (0, 2)], 1)
    ]
    s = session(tmp_path, Grades(graded), feedback="full")
    view = s.view(s.attempt())
    for task in view["tasks"]:
        checks = task["checks"]
        assert sum(c["max_score"] for c in checks) == pytest.approx(task["max_score"], abs=1e-3), (
            f"{task['id']}: its checks are in the grader's points, its score in the paper's\n{task}"
        )
        assert sum(c["score"] for c in checks) == pytest.approx(task["score"], abs=0.01), task
    quiz = next(t for t in view["tasks"] if t["id"] == "quiz")
    assert (quiz["score"], quiz["max_score"]) == (20, 40)
    assert [(c["score"], c["max_score"]) for c in quiz["checks"]] == [(15, 15), (5, 15), (0, 10)]


class Typed:
    """Commands typed one after another, then the end of input."""

    def __init__(self, *lines: str):
        self.lines = list(lines)

    def next(self, timeout: float) -> str | None:
        return self.lines.pop(0) if self.lines else None


def test_q_hands_in_and_the_saved_work_is_graded_and_counted(tmp_path):
    """No second q, no warning: handing in grades the work as saved, as a contest grades its final submission."""
    s = session(tmp_path, Grades(report(m1=(27, 27))))
    run_session(s, lambda text="", nl=True: None, Typed("q"))
    assert s.end_reason == "quit" and len(s.counted()) == 1 and s.counted()[0].final
    assert s.counted()[0].scores["m1"] == 60


def test_the_time_running_out_grades_the_saved_work_at_the_end(tmp_path):
    """The clock ran out with nothing graded: the saved work is graded then, counted at the end's time."""
    clock = Clock()
    s = session(tmp_path, Grades(report(m1=(27, 27), quiz=(8, 8))), clock=clock)
    clock.at(61)
    run_session(s, lambda text="", nl=True: None, Typed())
    (final,) = s.counted()
    assert final.final and final.elapsed == 3600 and s.end_reason == "time"
    assert "| **Total** | **100 / 100** |" in s.final_report()


def test_work_unchanged_since_the_last_attempt_is_not_graded_again(tmp_path):
    grades = Grades(report(m1=(27, 27)))
    s = session(tmp_path, grades, digest_fn=lambda: "same")
    said: list[str] = []
    run_session(s, lambda text="", nl=True: said.append(text), Typed("g", "q"))
    assert grades.calls == 1 and any("nothing new to grade" in line for line in said), said


def test_work_changed_since_the_last_attempt_is_graded_at_hand_in(tmp_path):
    digests = iter(["before", "after", "after"])
    grades = Grades(report(m1=(0, 27)), report(m1=(27, 27)))
    s = session(tmp_path, grades, digest_fn=lambda: next(digests))
    run_session(s, lambda text="", nl=True: None, Typed("g", "q"))
    assert grades.calls == 2 and s.best("m1").final


def test_ctrl_c_during_the_hand_in_grading_skips_it(tmp_path):
    s = session(tmp_path, Grades(KeyboardInterrupt()))
    said: list[str] = []
    run_session(s, lambda text="", nl=True: said.append(text), Typed("q"))
    assert s.over and not s.counted() and any("not graded at the end" in line for line in said), said


def test_a_log_of_another_notebooks_session_is_refused(tmp_path):
    session(tmp_path, Grades(), work="alice.ipynb")
    with pytest.raises(PracticeError, match="alice.ipynb"):
        session(tmp_path, Grades(), work="bob.ipynb")


@pytest.mark.parametrize("hidden", [True, False])
def test_without_the_hidden_suites_a_session_says_it_counts_the_public_checks_only(tmp_path, monkeypatch, hidden):
    """In the student release `grade practice` grades a paper's parts with their public checks: the opening lines
    say so, and a full kit says nothing of it."""
    from grader.practice import command

    monkeypatch.setattr(command, "HIDDEN_AVAILABLE", hidden)
    lines = list(command.opening_lines(paper(), session(tmp_path, []), None, [], tmp_path / "log.jsonl"))
    said = [line for line in lines if "public checks only" in line]
    if hidden:
        assert said == [], lines
    else:
        assert len(said) == 1 and "the paper's own marking" in said[0], lines
