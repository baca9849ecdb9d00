"""The contest's rules at a moment: is a student's window open, may they submit, what counts for a task, and
which of the coach's changes a window can take (an extension, extra time; never one that empties a window).

Pure functions over plain data: the caller passes the clock (``now``, an aware datetime) and what it knows of a
student (their first login, their submissions), so the server stays a thin layer and the tests set the time with
no sleeps. What a student may see of a report is in ``feedback``, the scoreboard in ``scoreboard``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from enum import Enum

from grader.contest.config import Contest, Scoring, Task
from grader.contest.metric import finals_allowed, is_metric


class Phase(Enum):
    NOT_STARTED = "not started"
    OPEN = "open"
    ENDED = "ended"


class Status(Enum):
    """What became of a submission. Only a graded one counts against the limits or for the score: a rejected
    upload (not a valid submission) or a grader failure is not the student's doing and costs nothing."""

    GRADED = "graded"
    REJECTED = "rejected"
    FAILED = "failed"


@dataclass(frozen=True)
class Submission:
    task: str
    time: datetime
    status: Status
    score: float = 0.0  # in the contest's points for the task (see ``task_points``)
    selected: bool = False  # marked by the student to count, under Scoring.SELECTED


@dataclass(frozen=True)
class WindowState:
    phase: Phase
    start: datetime | None = None  # None: a personal window not opened yet (no login)
    end: datetime | None = None
    remaining: timedelta = timedelta(0)  # while open
    # Whether every student's window is over (``contest_end`` passed): until then another student may still be
    # sitting the same tasks, which what this student is shown after their own window must not help. False
    # where there is no common end (personal windows with no hard end): someone may always start later.
    all_ended: bool = False
    all_end: datetime | None = None  # when every window is over (``contest_end``); None: no common end


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""  # why not, for the student


def _aware(now: datetime) -> None:
    if now.utcoffset() is None:
        raise ValueError("the contest's clock needs an aware datetime (with a UTC offset)")


def window_of(contest: Contest, student: str, first_login: datetime | None = None) -> tuple[datetime, datetime] | None:
    """The student's window, start and end, with their extra time; None for a personal window not yet opened.
    A personal window's end never passes ``hard_end``, extra time included: the coach's hard stop is hard."""
    window = contest.window
    length = window.duration + contest.extra_time.get(student, timedelta(0))
    if not window.personal:
        assert window.start is not None
        start = window.start + contest.start_delay.get(student, timedelta(0))  # a latecomer's later start
        return start, start + length
    if first_login is None:
        return None
    end = first_login + length
    if window.hard_end is not None:
        end = min(end, window.hard_end)
    return first_login, end


def window_state(contest: Contest, student: str, now: datetime, first_login: datetime | None = None) -> WindowState:
    """Where the student's window stands at ``now``. ``first_login`` opens a personal window (the server
    records it); a personal window after ``hard_end`` is ended even for a student who never logged in."""
    _aware(now)
    last = contest_end(contest)

    def state(phase: Phase, start: datetime | None = None, end: datetime | None = None) -> WindowState:
        remaining = end - now if phase is Phase.OPEN and end is not None else timedelta(0)
        return WindowState(phase, start, end, remaining, last is not None and now >= last, last)

    window = window_of(contest, student, first_login)
    if window is None:
        hard_end = contest.window.hard_end
        if hard_end is not None and now >= hard_end:
            return state(Phase.ENDED, end=hard_end)
        return state(Phase.NOT_STARTED)
    start, end = window
    if now < start:
        return state(Phase.NOT_STARTED, start, end)
    if now >= end:
        return state(Phase.ENDED, start, end)
    return state(Phase.OPEN, start, end)


def contest_end(contest: Contest) -> datetime | None:
    """When every student's window is over: the fixed window's end plus the largest extra time and start delay
    (of one student together), or a personal contest's hard end; None when there is no common end (personal
    windows with no hard end)."""
    window = contest.window
    if window.personal:
        return window.hard_end
    assert window.start is not None
    zero = timedelta(0)
    names = {*contest.extra_time, *contest.start_delay}
    later = max((contest.extra_time.get(n, zero) + contest.start_delay.get(n, zero) for n in names), default=zero)
    return window.start + window.duration + max(later, zero)


def _minutes(span: timedelta) -> str:
    """A wait as a student reads it, rounded up: 0.4 s is "1 s", never "0 s" (which would invite a refused retry)."""
    seconds = max(1, math.ceil(span.total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{math.ceil(seconds / 60)} min"


def clock_text(at: datetime, now: datetime | None = None) -> str:
    """A time as the contest's pages print it, in UTC: "10:04:00 UTC", or "03-15 09:00 UTC" on another day than
    ``now``'s (with no ``now``: the time of day). Refusals use it too, so that they read as the pages do."""
    utc = at.astimezone(timezone.utc)
    if now is None or utc.date() == now.astimezone(timezone.utc).date():
        return utc.strftime("%H:%M:%S UTC")
    return utc.strftime("%m-%d %H:%M UTC")


def closed_reason(state: WindowState, now: datetime | None = None) -> str | None:
    """Why a student in ``state`` may not submit now (for the server's refusal and `grade submit` alike); None
    while their window is open. Times as the pages print them (``clock_text``)."""
    if state.phase is Phase.NOT_STARTED:
        opens = f": it opens at {clock_text(state.start, now)}" if state.start else ": log in to start it"
        return f"your contest window has not started{opens}"
    if state.phase is Phase.ENDED:
        return "your contest window has ended: submissions are closed"
    return None


def may_submit(
    contest: Contest,
    student: str,
    task_id: str,
    now: datetime,
    history: Iterable[Submission],
    first_login: datetime | None = None,
) -> Decision:
    """Whether the student may submit to ``task_id`` at ``now``, given their earlier submissions (any task,
    any status). Refused outside their window, over the task's cap, or sooner than ``min_interval`` after their
    last graded submission to the task; rejected and failed submissions count for neither."""
    task = contest.task(task_id)
    if task is None:
        return Decision(False, f"{task_id} is not a task of this contest: the tasks are {_ids(contest)}")
    closed = closed_reason(window_state(contest, student, now, first_login), now)
    if closed:
        return Decision(False, closed)
    graded = sorted((s for s in history if s.task == task_id and s.status is Status.GRADED), key=lambda s: s.time)
    if task.max_submissions is not None and len(graded) >= task.max_submissions:
        used = (
            "your one graded submission"
            if task.max_submissions == 1
            else f"all {task.max_submissions} graded submissions"
        )
        return Decision(False, f"you have used {used} to {task_id}")
    if graded and now - graded[-1].time < task.min_interval:
        wait = task.min_interval - (now - graded[-1].time)
        return Decision(
            False,
            f"wait {_minutes(wait)} more: {task_id} takes one graded submission every {_minutes(task.min_interval)}",
        )
    return Decision(True)


def _ids(contest: Contest) -> str:
    return ", ".join(t.id for t in contest.tasks)


def may_select(task: Task, history: Sequence[Submission], choice: Submission) -> Decision:
    """Whether the student may mark ``choice`` to count for ``task`` (Scoring.SELECTED), given ``history``,
    their submissions with their present marks: only a graded submission to the task, and at most ``select``."""
    metric = is_metric(task.id)  # a metric task's finals are selected too
    if task.scoring is not Scoring.SELECTED and not metric:
        return Decision(False, f"{task.id} counts your {task.scoring.value} submission: there is nothing to select")
    if choice.task != task.id or choice.status is not Status.GRADED:
        return Decision(False, f"only a graded submission to {task.id} can be selected")
    marked = [s for s in history if s.task == task.id and s.selected and s != choice]
    most = finals_allowed(task) if metric else task.select
    if most is not None and len(marked) >= most:
        return Decision(False, f"you have already selected {most} submissions to {task.id}: unselect one first")
    return Decision(True)


def task_points(task: Task, score: float, max_score: float) -> float:
    """A grader score for the task's milestone (``score`` of ``max_score``) in the contest's points for it."""
    if max_score <= 0:
        return 0.0
    return round(task.points * score / max_score, 2)


@dataclass(frozen=True)
class TaskScore:
    score: float
    submission: Submission | None  # the one that counts; None: no graded submission


def task_score(task: Task, submissions: Iterable[Submission]) -> TaskScore:
    """The student's score for ``task`` under its scoring rule, over their graded submissions to it.

    best: the highest (the earliest to reach it); last: the latest; selected: the best of the (at most
    ``select``, the latest marked if more) submissions the student marked, and with none marked the latest, so a
    student who forgets to choose is scored as under ``last``.
    """
    graded = sorted((s for s in submissions if s.task == task.id and s.status is Status.GRADED), key=lambda s: s.time)
    if not graded:
        return TaskScore(0.0, None)
    if task.scoring is Scoring.SELECTED:
        marked = [s for s in graded if s.selected][-(task.select or 1) :]
        graded = marked or graded[-1:]
    elif task.scoring is Scoring.LAST:
        graded = graded[-1:]
    best = max(graded, key=lambda s: (s.score, -s.time.timestamp()))
    return TaskScore(best.score, best)


# --- The coach's changes to the windows -------------------------------------------------------------------------

MOST_CHANGE_MINUTES = 24 * 60  # the largest change the coach may make at once: a day (a typo, not a plan, past it)
NOT_A_NUMBER = "minutes must be a number"


def change_refusal(minutes: float) -> str | None:
    """Why the coach may not add ``minutes`` to a window (the whole contest's, or a student's) in one change;
    None when they may. nan and inf are not minutes: a window cannot end at them."""
    if not math.isfinite(minutes):
        return NOT_A_NUMBER
    if not minutes or abs(minutes) > MOST_CHANGE_MINUTES:
        return "minutes must be a non-zero number of minutes, at most a day"
    return None


def with_changes(
    contest: Contest,
    extend_minutes: float,
    extra_minutes: Mapping[str, float],
    delay_minutes: Mapping[str, float] | None = None,
) -> Contest:
    """``contest`` with the coach's changes: the whole window (and its hard end) ``extend_minutes`` longer,
    each student in ``extra_minutes`` that much more time on top of the contest file's extra time, and each in
    ``delay_minutes`` starting that much later (a fixed window only: a personal one starts at the first login)."""
    added = timedelta(minutes=extend_minutes)
    window = contest.window
    if added:
        hard_end = window.hard_end + added if window.hard_end else None
        window = replace(window, duration=window.duration + added, hard_end=hard_end)
    extra = dict(contest.extra_time)
    for name, minutes in extra_minutes.items():
        extra[name] = extra.get(name, timedelta(0)) + timedelta(minutes=minutes)
    delay = dict(contest.start_delay)
    if not window.personal:
        for name, minutes in (delay_minutes or {}).items():
            delay[name] = timedelta(minutes=minutes)
    return replace(contest, window=window, extra_time=extra, start_delay=delay)


def set_refusal(minutes: float) -> str | None:
    """Why the coach may not SET a student's added time to ``minutes`` (a total, not a change: 0 takes it all
    back; sending the same form twice gives the same window); None when they may."""
    if not math.isfinite(minutes):
        return NOT_A_NUMBER
    if abs(minutes) > MOST_CHANGE_MINUTES:
        return "minutes must be at most a day"
    return None


def delay_refusal(contest: Contest, minutes: float) -> str | None:
    """Why the coach may not make a student's fixed window start ``minutes`` after the contest's start (a
    latecomer, who then gets the full duration); None when they may. 0 takes the delay back."""
    if contest.window.personal:
        return "this contest's windows are personal: each starts at the student's first login already"
    if not math.isfinite(minutes):
        return NOT_A_NUMBER
    if minutes < 0 or minutes > MOST_CHANGE_MINUTES:
        return "a start delay must be 0 or more minutes, at most a day"
    return None


def added_minutes(current: float, minutes: float, set_total: bool) -> float:
    """A student's added minutes after the coach's change: ``minutes`` more, or (``set_total``) ``minutes`` in
    all, whatever they had: a form sent twice then changes nothing the second time."""
    return minutes if set_total else current + minutes


def empty_window(contest: Contest, students: Iterable[str], first_logins: Mapping[str, datetime]) -> str | None:
    """Why ``contest`` leaves the whole window, or a student's (``students`` and those with extra time), with
    its end at or before its start; None if every window still has some time. A change the coach asks for is
    checked with this before it is stored: a window that cannot open would lock a student out for good."""
    if contest.window.duration <= timedelta(0):
        return "the contest's window would end at or before its start"
    for name in dict.fromkeys([*students, *contest.extra_time]):
        span = window_of(contest, name, first_logins.get(name))
        if contest.window.duration + contest.extra_time.get(name, timedelta(0)) <= timedelta(0) or (
            span is not None and span[1] <= span[0]
        ):
            return f"{name}'s window would end at or before its start"
    return None


# --- What a student may do outside submitting -------------------------------------------------------------------


def selection_refusal(state: WindowState) -> str | None:
    """Why a student in ``state`` may not change which submissions count; None while their window is open (after
    it, the selection is part of the result)."""
    return None if state.phase is Phase.OPEN else "your window is not open: the selection is fixed"


def notebook_refusal(state: WindowState) -> str | None:
    """Why a paper's notebook (its questions) is not handed to a student in ``state``; None while their window is
    open: before it the questions could be read before the clock runs."""
    if state.phase is Phase.OPEN:
        return None
    opens = f" (it opens at {clock_text(state.start)})" if state.start else ""
    when = f"has not started{opens}" if state.phase is Phase.NOT_STARTED else "has ended"
    return f"your contest window {when}: the paper's notebook is handed out while it is open"


VOIDABLE = (Status.GRADED.value, "queued")  # the store's statuses that can count: a queued one will be graded


def void_refusal(sid: int, status: str) -> str | None:
    """Why the coach may not void submission ``sid`` (of the store's ``status``); None when they may. A rejected
    or failed submission counts for nothing already: voiding it would be a no-op the coach mistook for a change."""
    if status in VOIDABLE:
        return None
    return (
        f"submission {sid} is {status}: it counts for nothing already; only a graded or queued submission can be voided"
    )
