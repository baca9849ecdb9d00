"""A new feedback policy is honoured by every screen: the filter and the one renderer next to it
(grader/contest/feedback.py) decide what is shown, and the terminal (``grade submit``), the contest page
(me.html) and ``grade practice`` show what they get, none of them looking at the policy.

The policy here, ``verdict``, is one the kit does not have: each task's verdict only, no score, no pass or fail,
no check. It is defined by what it shows (grader/feedback.py ``Shows``), as docs/contributing.md says
("Adding a feedback policy"); a real one is the same plus its member of ``Feedback``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from jinja2 import Environment, PackageLoader, select_autoescape

from grader.contest.config import parse
from grader.contest.feedback import filter_report, render
from grader.contest.submit import feedback_lines
from grader.feedback import SHOWS, Feedback, Shows
from grader.paper.config import parse as parse_paper
from grader.practice.session import Session
from helpers import open_contest

VERDICT = SimpleNamespace(
    value="verdict",
    shows=Shows(tasks=True, scores=False, passed=False, checks=False, words="each part's verdict only"),
)
T0 = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)
SECRET = "the hidden check's message"


def report() -> dict:
    """m1 failed with a runtime error (its check's name and message must not show), quiz passed."""

    def milestone(mid: str, score: float, verdict: str) -> dict:
        check = {
            "name": f"{mid} hidden check",
            "score": score,
            "max_score": 8,
            "passed": score == 8,
            "message": "" if score == 8 else SECRET,
            "verdict": verdict,
        }
        return {"id": mid, "title": mid.upper(), "score": score, "max_score": 8, "checks": [check]}

    return {"milestones": [milestone("m1", 3, "runtime error"), milestone("quiz", 8, "OK")]}


def contest():
    return parse(
        open_contest("C", "[tasks.m1]\npoints = 10\n[tasks.quiz]\npoints = 10\n", personal=True, scoreboard=None)
    )


def hides_all_but_verdicts(text: str) -> None:
    assert "runtime error" in text and "OK" in text, text
    for hidden in (SECRET, "hidden check", "points", "/ 10", "passed", "full marks"):
        assert hidden not in text, (hidden, text)


def test_the_filter_and_the_renderer_honour_it():
    view = filter_report(contest(), report(), VERDICT)  # type: ignore[arg-type]
    assert view["tasks"] == [
        {"id": "m1", "title": "M1", "verdict": "runtime error"},
        {"id": "quiz", "title": "QUIZ", "verdict": "OK"},
    ]
    shown = render(view)
    assert not shown.withheld and [(t.id, t.result, t.verdict) for t in shown.tasks] == [
        ("m1", "", "runtime error"),
        ("quiz", "", "OK"),
    ]


def test_the_terminal_honours_it():
    view = filter_report(contest(), report(), VERDICT)  # type: ignore[arg-type]
    lines = feedback_lines({"id": 3, "task": "m1", "status": "graded", "feedback": dict(view)})  # the server's JSON
    assert lines == ["submission 3 to m1: graded", "  m1: runtime error", "  quiz: OK"]
    hides_all_but_verdicts("\n".join(lines[1:]))


def test_the_contest_page_honours_it():
    templates = Environment(loader=PackageLoader("grader.templates", "contest"), autoescape=select_autoescape(["html"]))
    templates.filters["clock"] = lambda moment: str(moment)
    view = filter_report(contest(), report(), VERDICT)  # type: ignore[arg-type]
    submission = {"id": 3, "task": "m1", "received_at": "", "status": "graded", "feedback": view}
    page = templates.get_template("me.html").render(
        student="ada",
        phase="open",
        remaining_seconds=60,
        refusals=[],
        paper=False,
        tasks=[],
        submissions=[submission],
        selectable=set(),
        waiting=False,
        start=None,
        end=None,
        messages={"announcements": [], "clarifications": []},
    )
    cell = page[page.index('<td class="feedback">') : page.index("</td>", page.index('<td class="feedback">'))]
    hides_all_but_verdicts(cell)
    assert "received" not in cell


def test_practice_honours_it(tmp_path):
    paper = parse_paper('title = "P"\nminutes = 60\n[parts.m1]\npoints = 10\n[parts.quiz]\npoints = 10\n')
    paper = dataclasses.replace(paper, feedback=VERDICT)
    clock = SimpleNamespace(now=T0)
    session = Session(paper, lambda: clock.now, report, tmp_path / "log.jsonl")
    clock.now = T0 + timedelta(minutes=5)
    attempt = session.attempt()
    assert attempt.counted and attempt.scores == {"m1": 3.75, "quiz": 10.0}
    hides_all_but_verdicts("\n".join(session.attempt_lines(attempt)[1:-1]))
    status = "\n".join(session.status()[2:])
    hides_all_but_verdicts(status)
    clock.now = T0 + timedelta(minutes=61)  # the time is up: full feedback, as for any policy
    assert "m1: best 3.75 / 10" in "\n".join(session.status())


def test_every_policy_of_the_kit_says_what_it_shows():
    assert set(SHOWS) == set(Feedback)
    assert all(isinstance(policy.shows.words, str) and policy.shows.words for policy in Feedback)
