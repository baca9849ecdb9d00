"""Metric-scored tasks in a contest (``grader.milestones.METRIC_TASKS``, e.g. ``lmbudget``): two leaderboards.

As at IOAI, a submission is measured on two held-out splits. Split A decides the task's points on the
scoreboard, as any task's score does, so its leaderboard shows students what their scoreboard does: frozen with
it, or only their own row while it is hidden (the server filters, by the viewer's standings). Split B decides the
final ranking and stays hidden until the coach reveals it: until then no student sees a B loss, their own
included. For B each student's finals count: the
submissions they selected (at most ``select``, 2 by default), or, with none selected, their best on A. The B
points of a submission use the task's own normalisation (between the recorded baseline and best).

The grader's report gives each split's loss as the ``value`` of the check named ``loss on split A`` or
``loss on split B`` (grader/lmbudget/task.py ``LOSS_FORMAT``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from grader.contest.config import Contest, Task
from grader.milestones import METRIC_TASKS

FINALS = 2  # submissions a student may select for split B when the contest file says no other number
SPLITS = ("A", "B")


def is_metric(task_id: str) -> bool:
    return task_id in METRIC_TASKS


def finals_allowed(task: Task) -> int:
    return task.select or FINALS


def split_check(check: dict[str, Any]) -> str | None:
    """Which split a report's check measures ("A", "B"), or None for any other check."""
    name = str(check.get("name", ""))
    return next((split for split in SPLITS if name.startswith(f"loss on split {split}")), None)


def losses(report: dict[str, Any] | None, task_id: str) -> dict[str, float]:
    """The losses a graded submission's report gives for ``task_id``, by split."""
    found: dict[str, float] = {}
    for milestone in (report or {}).get("milestones", []):
        if milestone.get("id") != task_id:
            continue
        for check in milestone.get("checks", []):
            split, value = split_check(check), check.get("value")
            if split and isinstance(value, int | float) and check.get("counted", True):
                found[split] = float(value)
    return found


def points_for(task: Task, loss: float) -> float:
    """The task's contest points for a loss, with the task's own normalisation (its recorded baseline and best)."""
    from grader.lmbudget.task import load_task  # the one metric task today; its file holds the calibration

    return round(task.points * load_task().fraction(loss), 2)


@dataclass(frozen=True)
class Entry:
    """One graded submission to a metric task, as the leaderboards read it."""

    id: int
    student: str
    time: datetime
    selected: bool
    a: float | None  # the loss on split A (None: not measured)
    b: float | None


def entries(rows: Iterable[Any], task_id: str) -> list[Entry]:
    """The graded, not voided submissions to ``task_id`` among the store's ``rows`` (with their reports)."""
    found = []
    for row in rows:
        if row.task != task_id or row.status != "graded" or row.voided:
            continue
        split = losses(row.report, task_id)
        found.append(Entry(row.id, row.student, row.received_at, row.selected, split.get("A"), split.get("B")))
    return found


def finals(task: Task, mine: list[Entry]) -> list[Entry]:
    """A student's finals for split B: the latest ``finals_allowed`` they selected, else their best on A."""
    chosen = [e for e in sorted(mine, key=lambda e: e.time) if e.selected][-finals_allowed(task) :]
    if chosen:
        return chosen
    measured = [e for e in mine if e.a is not None]
    return [min(measured, key=lambda e: (e.a, e.time))] if measured else []


def _order(row: dict) -> tuple:
    when = row["at"].timestamp() if row["at"] else float("inf")
    return (row["loss"] is None, row["loss"] if row["loss"] is not None else 0.0, when, row["student"])


def leaderboard(contest: Contest, task_id: str, rows: Iterable[Any], students: Iterable[str], split: str) -> list[dict]:
    """Split ``split``'s leaderboard: each student's best loss (A: over every graded submission; B: over their
    finals) and its points, best first; a tie goes to the earlier submission."""
    task = contest.task(task_id)
    assert task is not None
    every = entries(rows, task_id)
    board = []
    for student in dict.fromkeys([*students, *(e.student for e in every)]):
        mine = [e for e in every if e.student == student]
        pool = mine if split == "A" else finals(task, mine)
        scored = [(getattr(e, split.lower()), e) for e in pool if getattr(e, split.lower()) is not None]
        if scored:
            loss, best = min(scored, key=lambda pair: (pair[0], pair[1].time))
            row = {"student": student, "loss": loss, "points": points_for(task, loss), "submission": best.id}
            board.append({**row, "at": best.time})
        else:
            board.append({"student": student, "loss": None, "points": 0.0, "submission": None, "at": None})
    board.sort(key=_order)
    for rank, row in enumerate(board, start=1):
        row["rank"] = rank if row["loss"] is not None else None
        row["at"] = row["at"].isoformat() if row["at"] else None
    return board


def leaderboards_seen(
    contest: Contest,
    rows: Iterable[Any],
    students: Iterable[str],
    viewer: str,
    revealed: Collection[str],
    frozen_at: datetime | None = None,
    hidden: bool = False,
    coach: bool = False,
) -> list[dict]:
    """The metric tasks' leaderboards as ``viewer`` may see them, over the store's ``rows``. They follow the
    viewer's scoreboard (``frozen_at``, ``hidden``: its standings'), since split A is the scoreboard's points:
    frozen, only the submissions received before the freeze; hidden, the viewer's own row only, unranked (a rank
    would tell where the others stand). Split B only for the ``coach`` or a task the coach ``revealed``."""
    students = tuple(students)
    every = [r for r in rows if frozen_at is None or r.received_at < frozen_at]
    boards = []
    for task in contest.tasks:
        if not is_metric(task.id):
            continue
        mine = [r for r in every if r.task == task.id]
        split = {
            name: leaderboard(contest, task.id, mine, students, name)
            if name == "A" or coach or task.id in revealed
            else None
            for name in SPLITS
        }
        if hidden:
            split = {
                name: None if lb is None else [{**row, "rank": None} for row in lb if row["student"] == viewer]
                for name, lb in split.items()
            }
        at = frozen_at.isoformat(timespec="seconds") if frozen_at else None
        boards.append(
            {"task": task.id, "revealed": task.id in revealed, "finals": finals_allowed(task), "frozen_at": at}
            | {"hidden": hidden, **split}
        )
    return boards
