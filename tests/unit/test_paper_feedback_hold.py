"""A contest on a paper holds its "full" feedback (every check's message: a question's working, the expected
numbers) back from a student whose window has ended until every student's window on that paper has ended: extra
time, a late start or a personal window leave others sitting it, and what one is shown can be handed on to them.
Until then the student sees the after-policy's scores, not its checks, and a task graded with the grader's own
solution of another stays guarded. A contest with no paper keeps its after-policy at each student's own end.

These tests use only what the kit had before the hold (window_state, visible_report), so that they run, and
fail, on it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.contest.config import Contest, parse
from grader.contest.feedback import policy_at, visible_report
from grader.contest.policy import Phase, window_state, with_changes
from grader.feedback import Feedback
from helpers import open_contest

START = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)
HARD_END = datetime(2026, 3, 14, 12, 0, tzinfo=timezone.utc)
REPORT = json.loads((Path(__file__).parent / "data" / "graded-m1-m2.json").read_text())  # m1 with triu, m2 ReLU
PAPER = 'title = "P"\nminutes = 60\n[parts.m1]\npoints = 10\n[parts.m2]\npoints = 20\n'
WORKING = "row i must allow columns 0..i (torch.tril, not triu)"  # a failed check's message: the working


def minutes(n: float) -> datetime:
    return START + timedelta(minutes=n)


def on_paper(tmp_path: Path, feedback: str = "score", after: str | None = None, more: str = "", **window) -> Contest:
    """An hour's contest from START on a paper of m1 and m2 (m2 is graded with the grader's m1), ``feedback``
    during the window and ``after`` it (by default full)."""
    (tmp_path / "paper1").mkdir(exist_ok=True)
    (tmp_path / "paper1" / "paper.toml").write_text(PAPER)
    text = open_contest("t", "", paper="paper1", feedback=feedback, more=more, scoreboard=None, **window)
    if after is not None:
        text = text.replace(f'during = "{feedback}"\n', f'during = "{feedback}"\nafter = "{after}"\n')
    return parse(text, folder=tmp_path)


def seen(rules: Contest, who: str, at: datetime, first_login: datetime | None = None) -> dict:
    return visible_report(rules, REPORT, window_state(rules, who, at, first_login))


def checks_shown(view: dict) -> bool:
    return any("checks" in task for task in view.get("tasks", [])) or WORKING in json.dumps(view)


def test_a_student_whose_window_ended_sees_no_check_while_another_has_extra_time(tmp_path):
    rules = on_paper(tmp_path, more="[extra_time]\nslow = 30\n")
    ended = seen(rules, "ann", minutes(61))
    assert window_state(rules, "ann", minutes(61)).phase is Phase.ENDED
    assert not checks_shown(ended), "slow still sits the paper until 10:30: ann's checks would reach them"
    assert ended["feedback"] == "score" and all("score" in task for task in ended["tasks"])
    assert all("every student's window on this paper has ended, at 10:30:00 UTC" in t["note"] for t in ended["tasks"])
    assert policy_at(rules, window_state(rules, "ann", minutes(61))) is Feedback.SCORE
    over = seen(rules, "ann", minutes(90))
    assert over["feedback"] == "full" and checks_shown(over) and WORKING in json.dumps(over)
    assert all("note" not in task for task in over["tasks"])


def test_a_late_start_the_coach_gives_holds_the_checks_until_the_latecomers_end(tmp_path):
    rules = with_changes(on_paper(tmp_path), 0, {}, {"late": 20})
    assert not checks_shown(seen(rules, "ann", minutes(70)))
    assert checks_shown(seen(rules, "ann", minutes(80)))


def test_personal_windows_hold_the_checks_until_the_hard_end(tmp_path):
    rules = on_paper(tmp_path, personal=True, hard_end=HARD_END)
    assert not checks_shown(seen(rules, "ann", minutes(61), first_login=minutes(0))), "others may still log in"
    assert checks_shown(seen(rules, "ann", HARD_END, first_login=minutes(0)))


def test_personal_windows_with_no_hard_end_never_show_the_checks(tmp_path):
    """No common end: a student may start the paper at any time, so the working is never handed out."""
    rules = on_paper(tmp_path, personal=True)
    view = seen(rules, "ann", minutes(60 * 24 * 30), first_login=minutes(0))
    assert not checks_shown(view) and view["tasks"][0]["score"] is not None
    assert "personal windows with no hard end" in view["tasks"][0]["note"]


def test_full_feedback_during_the_window_stays_but_a_guarded_task_stays_guarded_until_every_window_ends(tmp_path):
    """With every check shown while sitting, the end of one's window adds nothing: the checks stay. But m2's
    messages could carry the grader's m1, a part others may still submit: m2 shows none until every window ends."""
    rules = on_paper(tmp_path, feedback="full", more="[extra_time]\nslow = 30\n")
    ended = {t["id"]: t for t in seen(rules, "ann", minutes(61))["tasks"]}
    assert "checks" in ended["m1"]
    assert "checks" not in ended["m2"] and "every window on the paper has ended" in ended["m2"]["note"]
    over = {t["id"]: t for t in seen(rules, "ann", minutes(90))["tasks"]}
    assert "checks" in over["m2"] and "note" not in over["m2"]


@pytest.mark.parametrize("after", ["score", "passfail", "none"])
def test_an_after_policy_without_checks_is_shown_as_it_is(tmp_path, after):
    rules = on_paper(tmp_path, after=after, more="[extra_time]\nslow = 30\n")
    view = seen(rules, "ann", minutes(61))
    assert view["feedback"] == after and not checks_shown(view)


def test_a_contest_with_no_paper_shows_its_after_policy_at_each_students_own_end():
    rules = parse(open_contest("t", "[tasks.m1]\n", feedback="score", more="[extra_time]\nslow = 30\n"))
    view = visible_report(rules, REPORT, window_state(rules, "ann", minutes(61)))
    assert view["feedback"] == "full" and checks_shown(view)
