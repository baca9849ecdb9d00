"""The scoreboard: each student's total under the tasks' scoring rules, ranked, as the coach sees it (live)
and as a student sees it at a moment (public, frozen or hidden), with the coach's freeze by hand or their
lifting of the scheduled one.

Ties go to whoever reached their total first (the time of their last change of total): the student who got
there earlier did the same work in less time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from grader.contest.config import Board, Contest
from grader.contest.policy import Status, Submission, contest_end, task_score


@dataclass(frozen=True)
class Row:
    rank: int | None  # equal totals and times share a rank; None where the rank is not shown (hidden board)
    student: str
    total: float
    tasks: dict[str, float]
    last_improvement: datetime | None  # when the student's total reached its present value; None: nothing yet


@dataclass(frozen=True)
class Standings:
    rows: tuple[Row, ...]
    frozen_at: datetime | None = None  # the board is as it was then
    hidden: bool = False  # only the viewer's own row is shown


def task_total(points: Iterable[float]) -> float:
    """The one rounding rule of a total (the board's and the export's alike): each task's points are already
    rounded to 0.01 (``policy.task_points``); their sum is rounded again only to drop the float's noise."""
    return round(sum(round(p, 2) for p in points), 2)


def _totals(contest: Contest, submissions: Sequence[Submission]) -> tuple[float, dict[str, float]]:
    per_task = {task.id: task_score(task, submissions).score for task in contest.tasks}
    return task_total(per_task.values()), per_task


def student_row(contest: Contest, student: str, submissions: Iterable[Submission]) -> Row:
    """The student's row (unranked): totals over their graded submissions, and when the total last changed."""
    graded = sorted((s for s in submissions if s.status is Status.GRADED), key=lambda s: s.time)
    total, per_task = _totals(contest, graded)
    when = None
    previous = 0.0
    for end in range(1, len(graded) + 1):
        so_far = _totals(contest, graded[:end])[0]
        if so_far != previous:
            when, previous = graded[end - 1].time, so_far
    return Row(None, student, total, per_task, when)


def _key(row: Row) -> tuple[float, float, str]:
    when = row.last_improvement.timestamp() if row.last_improvement else float("inf")
    return (-row.total, when, row.student)


def ranked(rows: Iterable[Row]) -> tuple[Row, ...]:
    """The rows best first, by total then time of last improvement (earlier wins); a full tie shares a rank."""
    result: list[Row] = []
    for position, row in enumerate(sorted(rows, key=_key), start=1):
        tied = result and _key(result[-1])[:2] == _key(row)[:2]
        rank = result[-1].rank if tied else position
        result.append(Row(rank, row.student, row.total, row.tasks, row.last_improvement))
    return tuple(result)


def live(
    contest: Contest, submissions: Mapping[str, Iterable[Submission]], students: Iterable[str] = ()
) -> tuple[Row, ...]:
    """Every student's row, ranked, from all their submissions (``students``: the roster, so that a student with
    no submission has a row too)."""
    names = dict.fromkeys([*students, *submissions])
    return ranked(student_row(contest, name, submissions.get(name, ())) for name in names)


def coach_view(
    contest: Contest, submissions: Mapping[str, Iterable[Submission]], students: Iterable[str] = ()
) -> Standings:
    """The coach's scoreboard: always live, whatever students see."""
    return Standings(live(contest, submissions, students))


def freeze_time(contest: Contest, window_end: datetime | None = None) -> datetime | None:
    """When a frozen board stops moving: ``freeze`` before the regular window's end; None for a board that
    does not freeze. With personal windows, the viewer's own: ``freeze`` before ``window_end``, the end of
    their window (so every student's last minutes are frozen, not only those of whoever is still at work near
    the hard end); a student whose window has not opened has none yet: the hard end's then."""
    if contest.scoreboard is not Board.FROZEN:
        return None
    window = contest.window
    if window.personal:
        end = window_end or window.hard_end
    else:
        end = window.start + window.duration if window.start else None
    return None if end is None else end - contest.freeze


def freeze_note(contest: Contest) -> str | None:
    """What a scheduled freeze does with personal windows, for the coach; None for a fixed window or no freeze."""
    if contest.scoreboard is not Board.FROZEN or not contest.window.personal:
        return None
    return (  # with no hard end there is no contest end to lift it: the contest file is refused (config.py)
        "Personal windows: each student's board freezes the freeze minutes before their own window ends, and "
        "every board is live again at the hard end, once every window is over."
    )


def student_view(
    contest: Contest,
    viewer: str,
    now: datetime,
    submissions: Mapping[str, Iterable[Submission]],
    students: Iterable[str] = (),
    window_end: datetime | None = None,
) -> Standings:
    """The scoreboard ``viewer`` may see at ``now``. Public: live. Frozen: from the freeze time (with personal
    windows, the viewer's own: ``window_end`` is when their window ends) until every window has ended,
    computed only from submissions made before the freeze. Hidden: only the viewer's own row, unranked, until
    every window has ended. After the end every board is live."""
    end = contest_end(contest)
    over = end is not None and now >= end
    if contest.scoreboard is Board.HIDDEN and not over:
        return Standings((student_row(contest, viewer, submissions.get(viewer, ())),), hidden=True)
    frozen_at = freeze_time(contest, window_end)
    if frozen_at is not None and frozen_at <= now and not over:
        before = {name: [s for s in subs if s.time < frozen_at] for name, subs in submissions.items()}
        return Standings(live(contest, before, students), frozen_at=frozen_at)
    return Standings(live(contest, submissions, students))


# --- The coach's freeze -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Freeze:
    """The freeze of the students' board, as the coach is shown it."""

    frozen: bool  # in effect now
    at: datetime | None = None  # since when (its submissions count, those received later not yet)
    by: str | None = None  # "coach" (by hand) or "schedule" (the contest's freeze_minutes)
    lifts: datetime | None = None  # when it lifts by itself; None for a hand freeze, which lasts until unfrozen
    scheduled: datetime | None = None  # when the contest's own freeze begins, while it is to come


def freeze_of(contest: Contest, now: datetime, by_hand: datetime | None, lifted: bool) -> Freeze:
    """The freeze at ``now``: the coach's (``by_hand``, when they froze the board; it outlasts the schedule),
    else the contest's scheduled one unless the coach ``lifted`` it (once begun, it does not come back)."""
    if by_hand is not None:
        return Freeze(True, by_hand, "coach")
    scheduled, end = freeze_time(contest), contest_end(contest)
    over = end is not None and now >= end
    if scheduled is None or over or lifted:
        return Freeze(False)
    if scheduled <= now:
        return Freeze(True, scheduled, "schedule", lifts=end)
    return Freeze(False, lifts=end, scheduled=scheduled)


def students_board(
    contest: Contest,
    viewer: str,
    now: datetime,
    submissions: Mapping[str, Iterable[Submission]],
    students: Iterable[str],
    by_hand: datetime | None,
    lifted: bool,
    window_end: datetime | None = None,
    revealed: frozenset[tuple[str, str]] = frozenset(),
) -> Standings:
    """The board ``viewer`` sees with the coach's changes: frozen by hand at ``by_hand`` (until the coach
    unfreezes, the contest's end included; a hidden board stays hidden), or live again where the coach
    ``lifted`` the scheduled freeze; else as :func:`student_view`."""
    if by_hand is not None:  # its results since the freeze stay hidden but those the resolver has ``revealed``
        before = {
            name: [s for s in subs if s.time < by_hand or (name, s.task) in revealed]
            for name, subs in submissions.items()
        }
        standings = student_view(contest, viewer, now, before, students, window_end)
        return standings if standings.hidden else replace(standings, frozen_at=by_hand)
    if contest.scoreboard is Board.FROZEN and lifted:
        contest = replace(contest, scoreboard=Board.PUBLIC)
    return student_view(contest, viewer, now, submissions, students, window_end)


def resolve_next(standings: Standings, pending: Mapping[str, Iterable[str]]) -> tuple[str, str] | None:
    """DOMjudge's resolver, one step: the student ranked lowest on the frozen board who still has results
    pending (``pending``: each student's tasks with submissions since the freeze, not yet revealed, in the
    contest's order), and their first such task; None once nothing is pending. Revealing from the bottom up
    keeps the top of the board for last, as a ceremony does."""
    for row in reversed(standings.rows):
        for task in pending.get(row.student, ()):
            return row.student, task
    return None
