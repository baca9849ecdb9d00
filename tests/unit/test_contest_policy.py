"""The contest's rules at a moment: windows, who may submit, what a student sees of a report, what counts and
the scoreboard. The clock is an argument, so every test sets it: no sleeps."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.contest.config import Contest, parse
from grader.contest.feedback import filter_report, guarded_tasks, visible_report
from grader.contest.metric import leaderboards_seen
from grader.contest.policy import (
    NOT_A_NUMBER,
    Phase,
    Status,
    Submission,
    change_refusal,
    contest_end,
    empty_window,
    may_select,
    may_submit,
    notebook_refusal,
    selection_refusal,
    task_points,
    task_score,
    void_refusal,
    window_state,
    with_changes,
)
from grader.contest.scoreboard import Freeze, coach_view, freeze_of, student_view, students_board
from grader.feedback import Feedback
from helpers import open_contest

START = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)
REPORT = json.loads((Path(__file__).parent / "data" / "graded-m1-m2.json").read_text())  # m1 with triu, m2 ReLU


def minutes(n: float) -> datetime:
    return START + timedelta(minutes=n)


def contest(
    tasks: str = "[tasks.m1]\npoints = 10\n[tasks.m2]\npoints = 20\n", window: dict | None = None, **board
) -> Contest:
    """The rules of an hour's contest from START, scores shown during it, 30 minutes more for slow; ``window``:
    open_contest's options for another window (PERSONAL); ``board``: its scoreboard and freeze_minutes."""
    board = {"scoreboard": None, **board}  # none: the file's default, a public board
    return parse(
        open_contest("t", tasks, feedback="score", more="[extra_time]\nslow = 30\n", **(window or {}), **board)
    )


def graded(task: str, at: float, score: float = 0.0, selected: bool = False) -> Submission:
    return Submission(task, minutes(at), Status.GRADED, score, selected)


PERSONAL = {"personal": True, "hard_end": datetime(2026, 3, 14, 12, 0, tzinfo=timezone.utc)}


# --- Windows ---------------------------------------------------------------------------------------------------


def test_a_fixed_window_is_not_started_then_open_then_ended():
    rules = contest()
    assert window_state(rules, "ann", minutes(-1)).phase is Phase.NOT_STARTED
    assert window_state(rules, "ann", minutes(0)).phase is Phase.OPEN
    assert window_state(rules, "ann", minutes(60)).phase is Phase.ENDED, "the end is exclusive"


def test_an_open_window_says_how_long_is_left():
    assert window_state(contest(), "ann", minutes(45)).remaining == timedelta(minutes=15)


def test_extra_time_lengthens_only_that_students_window():
    rules = contest()
    assert window_state(rules, "slow", minutes(80)).phase is Phase.OPEN
    assert window_state(rules, "ann", minutes(80)).phase is Phase.ENDED


def test_a_personal_window_opens_at_the_first_login():
    rules = contest(window=PERSONAL)
    assert window_state(rules, "ann", minutes(10)).phase is Phase.NOT_STARTED, "no login yet: not started"
    state = window_state(rules, "ann", minutes(10), first_login=minutes(5))
    assert (state.phase, state.remaining) == (Phase.OPEN, timedelta(minutes=55))
    assert window_state(rules, "ann", minutes(66), first_login=minutes(5)).phase is Phase.ENDED


def test_the_hard_end_cuts_a_personal_window_extra_time_included():
    rules = contest(window=PERSONAL)
    state = window_state(rules, "slow", minutes(170), first_login=minutes(150))
    assert state.end == minutes(180), "150 + 60 + 30 extra would pass the hard end at 180: the hard end wins"
    assert window_state(rules, "slow", minutes(180), first_login=minutes(150)).phase is Phase.ENDED


def test_after_the_hard_end_a_student_who_never_logged_in_has_ended():
    assert window_state(contest(window=PERSONAL), "ann", minutes(200)).phase is Phase.ENDED


def test_the_clock_must_know_its_time_zone():
    with pytest.raises(ValueError, match="aware"):
        window_state(contest(), "ann", datetime(2026, 3, 14, 9, 30))


# --- May a student submit? -------------------------------------------------------------------------------------

CAPPED = "[tasks.m1]\npoints = 10\nmax_submissions = 2\nmin_interval = 60\n[tasks.m2]\n"


def test_a_submission_is_refused_before_the_window_opens_and_says_when_it_opens():
    decision = may_submit(contest(), "ann", "m1", minutes(-5), [])
    assert not decision.allowed and "has not started: it opens at 09:00:00 UTC" in decision.reason


def test_a_submission_is_refused_after_the_window_ends():
    decision = may_submit(contest(), "ann", "m1", minutes(61), [])
    assert not decision.allowed and "has ended" in decision.reason


def test_a_submission_to_a_task_not_in_the_contest_is_refused():
    decision = may_submit(contest(), "ann", "m3", minutes(5), [])
    assert not decision.allowed and "m3 is not a task of this contest" in decision.reason


def test_the_cap_counts_graded_submissions_only():
    rules = contest(CAPPED)
    free = [Submission("m1", minutes(t), status) for t, status in ((1, Status.REJECTED), (2, Status.FAILED))] * 3
    assert may_submit(rules, "ann", "m1", minutes(10), [*free, graded("m1", 3)]).allowed, (
        "a rejected upload or a grader failure costs the student nothing"
    )
    decision = may_submit(rules, "ann", "m1", minutes(10), [*free, graded("m1", 3), graded("m1", 5)])
    assert not decision.allowed and "all 2 graded submissions to m1" in decision.reason


def test_the_cap_is_per_task():
    history = [graded("m1", 1), graded("m1", 3)]
    assert may_submit(contest(CAPPED), "ann", "m2", minutes(10), history).allowed


def test_a_graded_submission_sooner_than_the_interval_is_refused_with_the_wait():
    decision = may_submit(contest(CAPPED), "ann", "m1", minutes(1.5), [graded("m1", 1)])
    assert not decision.allowed and "wait 30 s more" in decision.reason


def test_a_wait_under_a_second_is_rounded_up_never_shown_as_0_s():
    decision = may_submit(contest(CAPPED), "ann", "m1", minutes(2) - timedelta(seconds=0.4), [graded("m1", 1)])
    assert not decision.allowed and "wait 1 s more" in decision.reason, decision.reason
    later = may_submit(contest(CAPPED), "ann", "m1", minutes(1) + timedelta(seconds=0.6), [graded("m1", 1)])
    assert "wait 60 s more" in later.reason, "59.4 s to wait is 60 s, not 59: the student must not retry too soon"


def test_a_long_wait_is_rounded_up_to_the_minute():
    rules = contest("[tasks.m1]\npoints = 10\nmin_interval = 600\n")
    decision = may_submit(rules, "ann", "m1", minutes(1) + timedelta(seconds=30), [graded("m1", 1)])
    assert "wait 10 min more" in decision.reason, decision.reason  # 9 min 30 s


def test_the_interval_runs_from_the_last_graded_submission_not_a_failed_one():
    history = [graded("m1", 1), Submission("m1", minutes(2), Status.FAILED)]
    assert may_submit(contest(CAPPED), "ann", "m1", minutes(2.1), history).allowed


def test_a_selection_is_refused_beyond_select_k():
    task = contest('[tasks.m1]\npoints = 10\nscoring = "selected"\nselect = 1\n').task("m1")
    assert task is not None
    first, second = graded("m1", 1, selected=True), graded("m1", 2)
    decision = may_select(task, [first, second], second)
    assert not decision.allowed and "already selected 1" in decision.reason
    assert may_select(task, [first, second], first).allowed, "re-marking the one already marked is no new choice"


# --- Feedback --------------------------------------------------------------------------------------------------


def _secrets(report: dict) -> list[str]:
    """Every check name and message of the report: what score, passfail and none must never show."""
    checks = [c for m in report["milestones"] for c in m["checks"]]
    return [text for c in checks for text in (c["name"], c["message"]) if text]


@pytest.mark.parametrize("policy", [Feedback.SCORE, Feedback.PASSFAIL, Feedback.NONE])
def test_no_check_name_or_message_appears_under_a_restricted_policy(policy):
    secrets = _secrets(REPORT)
    assert len(secrets) > 50, "the report must be a real one, with failures and their messages"
    shown = json.dumps(filter_report(contest(), REPORT, policy))
    leaked = [text for text in secrets if text in shown]
    assert not leaked, f"{policy.value} feedback shows what the hidden checks test: {leaked[:3]}"


def test_score_feedback_gives_each_tasks_score_in_contest_points():
    view = filter_report(contest(), REPORT, Feedback.SCORE)
    assert [(t["id"], t["score"], t["max_score"]) for t in view["tasks"]] == [
        ("m1", round(10 * 7.18 / 27, 2), 10),
        ("m2", round(20 * 16 / 24, 2), 20),
    ]


def test_passfail_feedback_says_only_whether_each_task_has_full_marks():
    view = filter_report(contest(), REPORT, Feedback.PASSFAIL)
    assert view["tasks"] == [
        {"id": "m1", "title": "Causal self-attention", "passed": False},
        {"id": "m2", "title": "The full TinyGPT", "passed": False},
    ]


def test_no_feedback_says_only_that_the_submission_was_received():
    assert filter_report(contest(), REPORT, Feedback.NONE) == {"feedback": "none", "received": True}


def with_verdicts(report: dict, failed: dict[str, str]) -> dict:
    """``report`` as graded today: each check with its verdict, ``failed[milestone]`` for its failing ones."""
    milestones = [
        {**m, "checks": [{**c, "verdict": "OK" if c["passed"] else failed[m["id"]]} for c in m["checks"]]}
        for m in report["milestones"]
    ]
    return {**report, "milestones": milestones}


@pytest.mark.parametrize("policy", [Feedback.SCORE, Feedback.PASSFAIL, Feedback.FULL])
def test_each_task_shows_its_verdict_a_class_that_names_no_check(policy):
    report = with_verdicts(REPORT, {"m1": "runtime error", "m2": "wrong answer"})
    view = filter_report(contest(), report, policy)
    assert [t.get("verdict") for t in view["tasks"]] == ["runtime error", "wrong answer"]


def test_no_feedback_shows_no_verdict():
    report = with_verdicts(REPORT, {"m1": "runtime error", "m2": "wrong answer"})
    assert "verdict" not in json.dumps(filter_report(contest(), report, Feedback.NONE))


def test_the_verdict_is_the_first_failure_the_grader_did_not_set_aside():
    report = with_verdicts(REPORT, {"m1": "wrong answer", "m2": "wrong answer"})
    m1 = report["milestones"][0]["checks"]
    first, second = [i for i, c in enumerate(m1) if not c["passed"]][:2]
    m1[first] = {**m1[first], "internal_error": True, "verdict": "not counted"}
    m1[second] = {**m1[second], "verdict": "time limit exceeded"}
    view = filter_report(contest(), report, Feedback.SCORE)
    assert view["tasks"][0]["verdict"] == "time limit exceeded"


def test_a_task_whose_checks_all_pass_is_ok():
    report = with_verdicts(REPORT, {"m1": "wrong answer", "m2": "wrong answer"})
    for check in report["milestones"][1]["checks"]:
        check.update(passed=True, verdict="OK")
    assert filter_report(contest(), report, Feedback.PASSFAIL)["tasks"][1]["verdict"] == "OK"


def test_a_report_graded_before_checks_had_verdicts_shows_none_rather_than_a_guess():
    view = filter_report(contest(), REPORT, Feedback.SCORE)
    assert all("verdict" not in task for task in view["tasks"])


def test_full_feedback_shows_every_check_and_message_but_not_the_graders_traceback():
    view = filter_report(contest(), REPORT, Feedback.FULL)
    shown = json.dumps(view)
    assert all(text in shown for text in _secrets(REPORT))
    assert all("traceback" not in check for task in view["tasks"] for check in task["checks"])


def test_a_milestone_that_is_not_a_task_is_left_out():
    view = filter_report(contest("[tasks.m2]\npoints = 20\n"), REPORT, Feedback.FULL)
    assert [t["id"] for t in view["tasks"]] == ["m2"]


def test_after_the_window_the_student_sees_the_after_policy():
    rules = contest()
    during = visible_report(rules, REPORT, window_state(rules, "ann", minutes(30)))
    after = visible_report(rules, REPORT, window_state(rules, "ann", minutes(61)))
    assert (during["feedback"], after["feedback"]) == ("score", "full")


def full_contest(tasks: str) -> Contest:
    return parse(open_contest("t", tasks, scoreboard=None))


def test_a_task_graded_with_the_graders_solution_of_another_task_shows_no_check_until_the_end():
    """m2's worker runs the grader's m1: with m1 a task too, m2's messages could carry m1's solution out."""
    rules = full_contest("[tasks.m1]\n[tasks.m2]\n")
    assert guarded_tasks(rules) == {"m2": ("m1",)}
    during = {t["id"]: t for t in visible_report(rules, REPORT, window_state(rules, "ann", minutes(30)))["tasks"]}
    assert "checks" in during["m1"] and "note" not in during["m1"]
    assert "checks" not in during["m2"] and "grader's own solution of m1" in during["m2"]["note"]
    assert during["m2"]["score"] == pytest.approx(
        REPORT["milestones"][1]["score"] / REPORT["milestones"][1]["max_score"] * 24
    )
    after = {t["id"]: t for t in visible_report(rules, REPORT, window_state(rules, "ann", minutes(61)))["tasks"]}
    assert "checks" in after["m2"] and "note" not in after["m2"]


def test_a_task_whose_trusted_milestone_is_not_a_task_keeps_full_feedback():
    rules = full_contest("[tasks.m2]\n[tasks.scaling]\n")
    assert guarded_tasks(rules) == {}
    view = visible_report(rules, REPORT, window_state(rules, "ann", minutes(30)))
    assert all("checks" in t for t in view["tasks"])


def test_the_lesson_as_a_task_guards_the_exercises_that_trust_its_files():
    assert guarded_tasks(full_contest("[tasks.lesson]\n[tasks.tying]\n[tasks.scaling]\n")) == {"tying": ("lesson",)}


# --- What counts for a task ------------------------------------------------------------------------------------


def _task(scoring: str):
    rules = contest(
        f'[tasks.m1]\npoints = 10\nscoring = "{scoring}"\n' + ("select = 2\n" if scoring == "selected" else "")
    )
    task = rules.task("m1")
    assert task is not None
    return task


HISTORY = [graded("m1", 1, 4), graded("m1", 2, 9), graded("m1", 3, 9), graded("m1", 4, 6)]


def test_best_counts_the_highest_score_first_reached():
    counted = task_score(_task("best"), HISTORY)
    assert counted.score == 9 and counted.submission == HISTORY[1]


def test_last_counts_the_latest_graded_even_if_lower():
    assert task_score(_task("last"), HISTORY).score == 6


def test_only_graded_submissions_count():
    history = [
        *HISTORY,
        Submission("m1", minutes(5), Status.FAILED, 10),
        Submission("m1", minutes(6), Status.REJECTED, 10),
    ]
    assert task_score(_task("last"), history).score == 6


def test_selected_counts_the_best_of_the_marked_ones():
    history = [graded("m1", 1, 4, True), graded("m1", 2, 9), graded("m1", 3, 6, True)]
    assert task_score(_task("selected"), history).score == 6, "9 was not marked: it does not count"


def test_selected_with_none_marked_counts_the_latest_graded():
    assert task_score(_task("selected"), HISTORY).score == 6


def test_selected_with_too_many_marked_counts_the_latest_k():
    history = [graded("m1", 1, 9, True), graded("m1", 2, 4, True), graded("m1", 3, 6, True)]
    assert task_score(_task("selected"), history).score == 6, "select = 2: the two latest marked, 4 and 6"


def test_no_graded_submission_scores_zero():
    assert task_score(_task("best"), []).score == 0 and task_score(_task("best"), []).submission is None


def test_a_grader_score_is_scaled_to_the_tasks_points():
    assert task_points(_task("best"), 13.5, 27) == 5.0


# --- The scoreboard --------------------------------------------------------------------------------------------

SUBMISSIONS = {
    "ann": [graded("m1", 10, 10), graded("m2", 20, 5)],
    "bob": [graded("m1", 5, 10), graded("m2", 15, 5)],  # the same total, reached earlier
    "cy": [graded("m1", 50, 10), graded("m2", 55, 20)],  # best, but all of it in the last 10 minutes
}
FROZEN = {"scoreboard": "frozen", "freeze_minutes": 15}


def _order(standings) -> list[str]:
    return [row.student for row in standings.rows]


def test_the_board_ranks_by_total_and_breaks_ties_by_the_earlier_last_improvement():
    rows = coach_view(contest(), SUBMISSIONS).rows
    assert [(r.rank, r.student, r.total) for r in rows] == [(1, "cy", 30), (2, "bob", 15), (3, "ann", 15)]
    assert rows[1].last_improvement == minutes(15)


def test_a_resubmission_with_the_same_score_does_not_move_the_last_improvement():
    history = {"ann": [graded("m1", 10, 10), graded("m1", 40, 10)]}
    assert coach_view(contest(), history).rows[0].last_improvement == minutes(10)


def test_a_student_on_the_roster_with_nothing_yet_is_ranked_last():
    rows = coach_view(contest(), SUBMISSIONS, students=["dee"]).rows
    assert (rows[-1].student, rows[-1].total, rows[-1].last_improvement) == ("dee", 0, None)


def test_a_public_board_is_live():
    assert _order(student_view(contest(), "ann", minutes(58), SUBMISSIONS)) == ["cy", "bob", "ann"]


def test_a_frozen_board_shows_the_standings_at_the_freeze():
    rules = contest(**FROZEN)
    view = student_view(rules, "ann", minutes(58), SUBMISSIONS)
    assert view.frozen_at == minutes(45)
    assert _order(view) == ["bob", "ann", "cy"], "cy's submissions came after the freeze: not on the board"
    assert view.rows[-1].total == 0


def test_a_frozen_board_is_live_before_the_freeze_and_after_everyones_end():
    rules = contest(**FROZEN)
    assert student_view(rules, "ann", minutes(40), SUBMISSIONS).frozen_at is None
    assert student_view(rules, "ann", minutes(60), SUBMISSIONS).frozen_at is not None, (
        "a student with extra time is still working until minute 90: the board stays frozen"
    )
    assert _order(student_view(rules, "ann", minutes(90), SUBMISSIONS)) == ["cy", "bob", "ann"]


def test_a_hidden_board_shows_only_the_viewers_own_row_until_the_end():
    rules = contest(scoreboard="hidden")
    view = student_view(rules, "ann", minutes(58), SUBMISSIONS)
    assert view.hidden and [(r.student, r.rank, r.total) for r in view.rows] == [("ann", None, 15)]
    assert _order(student_view(rules, "ann", minutes(90), SUBMISSIONS)) == ["cy", "bob", "ann"]


def test_the_coach_always_sees_the_live_board():
    rules = contest(**FROZEN)
    assert _order(coach_view(rules, SUBMISSIONS)) == ["cy", "bob", "ann"]


# --- The coach's changes to the windows ------------------------------------------------------------------------


@pytest.mark.parametrize("minutes", [math.nan, math.inf, -math.inf])
def test_a_change_that_is_not_a_number_of_minutes_is_refused(minutes):
    assert change_refusal(minutes) == NOT_A_NUMBER


@pytest.mark.parametrize("minutes", [0, 24 * 60 + 1, -24 * 60 - 1])
def test_a_change_of_nothing_or_of_more_than_a_day_is_refused(minutes):
    assert "non-zero number of minutes, at most a day" in (change_refusal(minutes) or "")


@pytest.mark.parametrize("minutes", [0.5, -10, 24 * 60, -24 * 60])
def test_a_change_of_some_minutes_up_to_a_day_is_allowed(minutes):
    assert change_refusal(minutes) is None


def test_an_extension_lengthens_everyones_window_and_extra_time_one_students():
    rules = with_changes(contest(), 15, {"ann": 5, "slow": -10})
    assert window_state(rules, "bob", minutes(70)).phase is Phase.OPEN, "60 + 15"
    assert window_state(rules, "bob", minutes(75)).phase is Phase.ENDED
    assert window_state(rules, "ann", minutes(79)).phase is Phase.OPEN, "60 + 15 + 5"
    assert window_state(rules, "slow", minutes(94)).phase is Phase.OPEN, "60 + 15 + 30 from the file - 10"
    assert window_state(rules, "slow", minutes(95)).phase is Phase.ENDED


def test_an_extension_moves_a_personal_windows_hard_end_too():
    rules = with_changes(contest(window=PERSONAL), 30, {})
    assert rules.window.hard_end == minutes(210) and rules.window.duration == timedelta(minutes=90)


def test_no_change_leaves_the_contest_as_it_is():
    assert with_changes(contest(), 0, {}) == contest()


def test_a_change_that_empties_the_whole_window_is_named():
    assert "the contest's window" in (empty_window(with_changes(contest(), -60, {}), ["ann"], {}) or "")
    assert empty_window(with_changes(contest(), -59, {}), ["ann"], {}) is None


def test_a_change_that_empties_one_students_window_names_them():
    assert "ann's window" in (empty_window(with_changes(contest(), 0, {"ann": -60}), ["ann", "bob"], {}) or "")
    shorter = with_changes(contest(), -50, {})  # 10 min left to all; slow's 30 extra keep him in
    assert empty_window(shorter, ["ann", "slow"], {}) is None
    assert "slow's window" in (empty_window(with_changes(contest(), -50, {"slow": -40}), [], {}) or ""), (
        "a student with extra time counts, on the roster or not"
    )


def test_a_personal_window_cut_to_nothing_by_the_hard_end_is_empty():
    rules = with_changes(contest(window=PERSONAL), -30, {})  # hard end 11:30
    assert empty_window(rules, ["ann"], {"ann": minutes(140)}) is None
    assert "ann's window" in (empty_window(rules, ["ann"], {"ann": minutes(150)}) or "")


# --- What a student may do outside submitting ------------------------------------------------------------------


def test_the_selection_is_fixed_outside_the_window():
    rules = contest()
    assert selection_refusal(window_state(rules, "ann", minutes(30))) is None
    for at in (-5, 61):
        assert "selection is fixed" in (selection_refusal(window_state(rules, "ann", minutes(at))) or "")


def test_a_papers_notebook_is_handed_out_only_while_the_window_is_open():
    rules = contest()
    assert notebook_refusal(window_state(rules, "ann", minutes(30))) is None
    early = notebook_refusal(window_state(rules, "ann", minutes(-5))) or ""
    assert "has not started (it opens at 09:00:00 UTC)" in early
    assert "has ended" in (notebook_refusal(window_state(rules, "ann", minutes(61))) or "")
    unopened = notebook_refusal(window_state(contest(window=PERSONAL), "ann", minutes(5))) or ""
    assert "has not started:" in unopened, "a personal window not opened yet has no time to give"


def test_only_a_graded_or_queued_submission_can_be_voided():
    assert void_refusal(7, "graded") is None and void_refusal(7, "queued") is None
    for status in ("rejected", "failed"):
        assert f"submission 7 is {status}: it counts for nothing already" in (void_refusal(7, status) or "")


# --- The coach's freeze ----------------------------------------------------------------------------------------

FROZEN = {"scoreboard": "frozen", "freeze_minutes": 15}


def test_a_hand_freeze_is_in_effect_until_the_coach_lifts_it_even_after_the_end():
    for rules in (contest(), contest(**FROZEN)):
        assert freeze_of(rules, minutes(200), minutes(20), lifted=False) == Freeze(True, minutes(20), "coach")


def test_the_scheduled_freeze_is_announced_then_in_effect_until_the_end():
    rules = contest(**FROZEN)  # the regular window ends at 60; slow's extra time at 90
    assert freeze_of(rules, minutes(30), None, False) == Freeze(False, lifts=minutes(90), scheduled=minutes(45))
    assert freeze_of(rules, minutes(50), None, False) == Freeze(True, minutes(45), "schedule", lifts=minutes(90))
    assert freeze_of(rules, minutes(90), None, False) == Freeze(False)


def test_a_lifted_scheduled_freeze_or_a_board_that_does_not_freeze_has_no_freeze():
    assert freeze_of(contest(**FROZEN), minutes(50), None, lifted=True) == Freeze(False)
    assert freeze_of(contest(), minutes(50), None, lifted=False) == Freeze(False)


def boards_submissions() -> dict[str, list[Submission]]:
    return {"ann": [graded("m1", 10, 5)], "bob": [graded("m1", 30, 10)]}


def test_a_hand_freeze_shows_students_the_board_before_it():
    board = students_board(contest(), "ann", minutes(40), boards_submissions(), ["ann", "bob"], minutes(20), False)
    assert board.frozen_at == minutes(20)
    assert [(r.student, r.total) for r in board.rows] == [("ann", 5), ("bob", 0)], "bob's 10 came after"


def test_a_hand_freeze_keeps_a_hidden_board_hidden():
    rules = contest(scoreboard="hidden")
    board = students_board(rules, "ann", minutes(40), boards_submissions(), ["ann", "bob"], minutes(20), False)
    assert board.hidden and board.frozen_at is None and [r.student for r in board.rows] == ["ann"]


def test_a_lifted_scheduled_freeze_shows_the_live_board():
    rules, subs = contest(**FROZEN), {"ann": [graded("m1", 50, 5)]}
    assert students_board(rules, "bob", minutes(55), subs, ["ann", "bob"], None, False).frozen_at == minutes(45)
    live = students_board(rules, "bob", minutes(55), subs, ["ann", "bob"], None, True)
    assert live.frozen_at is None and live.rows[0].total == 5


# --- The metric tasks' leaderboards ----------------------------------------------------------------------------


class Stored:
    """A store's row as the leaderboards read it (metric.entries)."""

    def __init__(self, id: int, student: str, at: float, a: float, b: float):
        self.id, self.student, self.received_at, self.task = id, student, minutes(at), "lmbudget"
        self.status, self.voided, self.selected = "graded", False, False
        checks = [{"name": f"loss on split {s}", "value": v} for s, v in (("A", a), ("B", b))]
        self.report = {"milestones": [{"id": "lmbudget", "checks": checks}]}


METRIC = "[tasks.lmbudget]\npoints = 10\n"
ROWS = [Stored(1, "ann", 10, 3.0, 3.1), Stored(2, "bob", 30, 2.0, 2.1)]


def test_split_b_is_sealed_for_students_until_revealed_and_never_for_the_coach():
    rules = contest(METRIC)
    (board,) = leaderboards_seen(rules, ROWS, ["ann", "bob"], "ann", revealed=())
    assert board["B"] is None and [r["student"] for r in board["A"]] == ["bob", "ann"] and not board["revealed"]
    (coach,) = leaderboards_seen(rules, ROWS, ["ann", "bob"], "coach", revealed=(), coach=True)
    assert [r["student"] for r in coach["B"]] == ["bob", "ann"]
    (shown,) = leaderboards_seen(rules, ROWS, ["ann", "bob"], "ann", revealed={"lmbudget"})
    assert shown["revealed"] and shown["B"] is not None


def test_the_leaderboards_follow_a_frozen_or_hidden_scoreboard():
    rules = contest(METRIC)
    (frozen,) = leaderboards_seen(rules, ROWS, ["ann", "bob"], "ann", (), frozen_at=minutes(20))
    assert frozen["frozen_at"] == "2026-03-14T09:20:00+00:00"
    assert [(r["student"], r["loss"]) for r in frozen["A"]] == [("ann", 3.0), ("bob", None)], "bob's came after"
    (hidden,) = leaderboards_seen(rules, ROWS, ["ann", "bob"], "ann", {"lmbudget"}, hidden=True)
    assert [(r["student"], r["rank"]) for r in hidden["A"]] == [("ann", None)] and hidden["B"][0]["rank"] is None


# --- A latecomer's start delay, extra time set ---------------------------------------------------------------------


def test_a_start_delay_moves_a_fixed_window_and_keeps_its_full_length():
    from grader.contest.policy import with_changes

    delayed = with_changes(contest(), 0, {}, {"ada": 30})
    late = window_state(delayed, "ada", minutes(20))
    assert late.phase is Phase.NOT_STARTED and late.start == minutes(30) and late.end == minutes(90)
    assert window_state(delayed, "ada", minutes(80)).phase is Phase.OPEN
    assert window_state(delayed, "alan", minutes(80)).phase is Phase.ENDED
    assert contest_end(delayed) == minutes(90)  # the board's end waits for the latecomer
    both = with_changes(contest(), 0, {"ada": 10}, {"ada": 30})
    assert window_state(both, "ada", minutes(35)).end == minutes(100)


def test_a_start_delay_is_refused_when_negative_not_a_number_or_personal():
    from grader.contest.policy import delay_refusal

    assert delay_refusal(contest(), 0) is None and delay_refusal(contest(), 30) is None
    assert "0 or more" in (delay_refusal(contest(), -1) or "")
    assert delay_refusal(contest(), math.nan) == "minutes must be a number"
    assert "0 or more" in (delay_refusal(contest(), 24 * 60 + 1) or "")
    personal = contest(window=PERSONAL)
    assert "personal" in (delay_refusal(personal, 10) or "")


def test_extra_time_set_is_a_total_and_added_is_a_change():
    from grader.contest.policy import added_minutes, set_refusal

    assert added_minutes(10, 10, set_total=True) == 10  # the same form twice: the same window
    assert added_minutes(10, 10, set_total=False) == 20
    assert set_refusal(0) is None and set_refusal(-5) is None
    assert set_refusal(math.inf) == "minutes must be a number" and set_refusal(24 * 60 + 1)
