"""The contest file, ``contest.toml``: read, checked, and turned into frozen dataclasses.

Every value is checked here, once, so that the policy engine and the server can trust what they get. A mistake
is an error that names the key and its line (``contest.toml, line 12: tasks.m1.points must be a positive number,
not "ten"``), and an unknown key is an error too: a typo such as ``max_submision`` must not quietly leave a
contest without its cap. ``grader/templates/contest.toml`` is the commented example.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path

from grader.errors import InputError
from grader.feedback import Feedback
from grader.milestones import GRADABLE
from grader.paper.config import Paper, PaperFileError
from grader.paper.config import load as load_paper
from grader.suites.points import milestone_points
from grader.tomlfile import Reader, show_key


class Scoring(Enum):
    """Which of a student's graded submissions to a task counts."""

    BEST = "best"
    LAST = "last"
    SELECTED = "selected"  # the best of up to ``select`` the student marks; none marked: the latest graded


class Board(Enum):
    """What students see of the scoreboard (the coach always sees it live)."""

    PUBLIC = "public"  # live
    FROZEN = "frozen"  # the standings at the freeze (``freeze_minutes`` before the end) until the end
    HIDDEN = "hidden"  # only their own row until the end


@dataclass(frozen=True)
class Task:
    id: str  # a milestone or metric task id (grader.milestones.GRADABLE)
    points: float
    scoring: Scoring = Scoring.BEST
    select: int | None = None  # with Scoring.SELECTED: how many submissions a student may mark
    max_submissions: int | None = None  # graded submissions; None: no cap
    min_interval: timedelta = timedelta(0)  # between two graded submissions to this task
    test_runs: int = 20  # test runs of one student on their own input (never scored); 0: none


@dataclass(frozen=True)
class Window:
    """When students may submit: a fixed window (``start``) or a personal one, opened by each student's first
    login (``personal``), cut short by ``hard_end`` if given."""

    duration: timedelta
    start: datetime | None = None  # fixed window: aware datetime
    personal: bool = False
    hard_end: datetime | None = None  # personal window only


@dataclass(frozen=True)
class Contest:
    title: str
    tasks: tuple[Task, ...]
    window: Window
    feedback_during: Feedback
    feedback_after: Feedback = Feedback.FULL
    scoreboard: Board = Board.PUBLIC
    freeze: timedelta = timedelta(0)  # Board.FROZEN: the last part of the window the board does not move in
    extra_time: dict[str, timedelta] = field(default_factory=dict)  # student -> added to their window
    # student -> how much later their fixed window starts (a latecomer; set by the coach): the full duration after
    start_delay: dict[str, timedelta] = field(default_factory=dict)
    paper: Paper | None = None  # the paper the tasks come from (``paper = "..."``): its rules and variants
    # [clarifications]: what a question may be about besides a task, and the jury's ready answers
    categories: tuple[str, ...] = ("general", "technical")
    canned: tuple[str, ...] = ("No comment.", "Read the statement again.", "Yes.", "No.")
    # [regrades] per_student: the regrade requests a student may make in the contest; 0: none
    regrade_requests: int = 5

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)


class ContestFileError(InputError):
    """A contest file that cannot be used; ``str()`` names the file, the line and the key."""


KNOWN = {
    (): {
        "title",
        "paper",
        "tasks",
        "window",
        "extra_time",
        "feedback",
        "scoreboard",
        "defaults",
        "clarifications",
        "regrades",
    },
    ("regrades",): {"per_student"},
    ("clarifications",): {"categories", "canned"},
    ("window",): {"start", "duration", "personal", "hard_end"},
    ("feedback",): {"during", "after"},
    ("scoreboard",): {"mode", "freeze_minutes"},
    ("defaults",): {"scoring", "select", "max_submissions", "min_interval", "test_runs"},  # a task's but its points
}
TASK_KEYS = {"points", "scoring", "select", "max_submissions", "min_interval", "test_runs"}


def load(path: Path) -> Contest:
    """Read and check the contest file at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContestFileError(f"there is no {path}: `grade contest init` writes an example to edit") from None
    except OSError as e:
        raise ContestFileError(f"{path}: cannot read it: {e.strerror or e}") from None
    return parse(text, path.name, path.parent)


def parse(text: str, name: str = "contest.toml", folder: Path | None = None) -> Contest:
    """Check the contest file's ``text`` (``name`` is the file's, for the messages; ``folder`` the one a
    ``paper`` path is relative to, the current one if None)."""
    read, data = Reader.of(text, name, ContestFileError)
    top = read.table(data, (), KNOWN[()])
    title = read.title(top)
    window = _window(read, read.table(top, ("window",), KNOWN[("window",)]))
    feedback = read.table(top, ("feedback",), KNOWN[("feedback",)])
    board = read.table(top, ("scoreboard",), KNOWN[("scoreboard",)])
    mode = read.choice(board, ("scoreboard", "mode"), Board, Board.PUBLIC)
    paper = _paper(read, top, folder or Path("."))
    asked = _clarifications(read, read.table(top, ("clarifications",), KNOWN[("clarifications",)]))
    regrades = read.table(top, ("regrades",), KNOWN[("regrades",)])
    per_student = read.number(regrades, ("regrades", "per_student"), positive=False, integer=True)
    return Contest(
        title=title,
        tasks=_paper_tasks(read, top, paper) if paper else _tasks(read, top),
        paper=paper,
        window=window,
        feedback_during=read.choice(feedback, ("feedback", "during"), Feedback, None),
        feedback_after=read.choice(feedback, ("feedback", "after"), Feedback, Feedback.FULL),
        scoreboard=mode,
        freeze=_freeze(read, board, mode, window),
        extra_time=_extra_time(read, read.table(top, ("extra_time",), None)),
        categories=asked.get("categories", Contest.categories),
        canned=asked.get("canned", Contest.canned),
        regrade_requests=Contest.regrade_requests if per_student is None else int(per_student),
    )


def _clarifications(read: Reader, table: dict) -> dict[str, tuple[str, ...]]:
    """``[clarifications]``: ``categories`` (what a question may be about besides a task) and ``canned`` (the
    jury's ready answers), each a list of short texts; the defaults where a key is absent."""
    found = {}
    for key in ("categories", "canned"):
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value) or not value:
            raise read.bad(("clarifications", key), value, "a list of texts, none empty")
        if any(len(v) > 200 for v in value):
            raise read.bad(("clarifications", key), value, "texts of at most 200 characters")
        found[key] = tuple(v.strip() for v in value)
    return found


def _window(read: Reader, table: dict) -> Window:
    if not table:
        raise read.fail(("window",), "[window] is required: a start and a duration, or personal = true and a duration")
    duration = read.number(table, ("window", "duration"), positive=True)
    if duration is None:
        raise read.fail(("window",), "window.duration is required: the window's length in minutes")
    personal = table.get("personal", False)
    if not isinstance(personal, bool):
        raise read.bad(("window", "personal"), personal, "true or false")
    start = read.moment(table, ("window", "start"))
    hard_end = read.moment(table, ("window", "hard_end"))
    if personal and start is not None:
        raise read.fail(
            ("window", "start"),
            "window.start is for a fixed window: with personal = true each student's window starts at their first "
            "login (use window.hard_end to close it for everyone)",
        )
    if not personal and start is None:
        raise read.fail(("window",), "window.start is required for a fixed window (or set personal = true)")
    if not personal and hard_end is not None:
        raise read.fail(
            ("window", "hard_end"), "window.hard_end is for a personal window: a fixed window ends at start + duration"
        )
    return Window(duration=timedelta(minutes=duration), start=start, personal=personal, hard_end=hard_end)


def _paper(read: Reader, top: dict, folder: Path) -> Paper | None:
    """The paper named by ``paper = "PATH"`` (a paper.toml or its folder, relative to the contest file)."""
    where = top.get("paper")
    if where is None:
        return None
    if not isinstance(where, str) or not where.strip():
        raise read.bad(("paper",), where, "the path of a paper.toml (or its folder), relative to this file")
    try:
        return load_paper(folder / where)
    except PaperFileError as e:
        raise read.fail(("paper",), f"paper = {json.dumps(where)}: {e}") from None


def _paper_tasks(read: Reader, top: dict, paper: Paper) -> tuple[Task, ...]:
    """A task per part of the paper, with its points, and the contest's [defaults] for the rest; then the
    contest's own [tasks] (the metric task, say), which must not repeat a part: one round, one token."""
    defaults = read.table(top, ("defaults",), KNOWN[("defaults",)])
    parts = tuple(_task(read, part.id, {**defaults, "points": part.points}, set()) for part in paper.parts)
    if "tasks" not in top:
        return parts
    extra = _tasks(read, top)
    for task in extra:
        if paper.part(task.id) is not None:
            raise read.fail(
                ("tasks", task.id),
                f"{task.id} is a part of the paper, which sets its points and rules: remove [tasks.{task.id}]",
            )
    return parts + extra


def _tasks(read: Reader, top: dict) -> tuple[Task, ...]:
    defaults = read.table(top, ("defaults",), KNOWN[("defaults",)])
    tasks = read.table(top, ("tasks",), None)
    if not tasks:
        raise read.fail(
            ("tasks",), "the contest has no tasks: add a [tasks.ID] table for each exercise, e.g. [tasks.m1]"
        )
    result = []
    for task_id in tasks:
        if task_id not in GRADABLE:
            raise read.fail(
                ("tasks", task_id),
                f"tasks.{show_key((task_id,))} is not an exercise id; the ids are {', '.join(GRADABLE)}",
            )
        table = read.table(tasks, ("tasks", task_id), TASK_KEYS)
        result.append(_task(read, task_id, {**defaults, **table}, set(table)))
    return tuple(result)


def _task(read: Reader, task_id: str, table: dict, own: set[str]) -> Task:
    def path(key: str) -> tuple[str, ...]:
        return ("tasks", task_id, key) if key in own else ("defaults", key)

    points = read.number(table, path("points"), positive=True)
    if points is None:
        points = milestone_points(task_id)
        if points is None:
            raise read.fail(
                ("tasks", task_id), f"tasks.{task_id}.points is required: the grader cannot tell this exercise's points"
            )
    scoring = read.choice(table, path("scoring"), Scoring, Scoring.BEST)
    select = read.number(table, path("select"), positive=True, integer=True)
    if scoring is Scoring.SELECTED and select is None:
        raise read.fail(
            path("scoring"), f'tasks.{task_id}.scoring = "selected" needs select = K: how many submissions count'
        )
    if scoring is not Scoring.SELECTED and select is not None and "select" in own:
        raise read.fail(path("select"), f'tasks.{task_id}.select only applies with scoring = "selected"')
    interval = read.number(table, path("min_interval"), positive=False)
    test_runs = read.number(table, path("test_runs"), positive=False, integer=True)
    return Task(
        id=task_id,
        points=float(points),
        scoring=scoring,
        select=int(select) if scoring is Scoring.SELECTED and select is not None else None,
        max_submissions=_int(read.number(table, path("max_submissions"), positive=True, integer=True)),
        min_interval=timedelta(seconds=interval or 0),
        test_runs=Task.test_runs if test_runs is None else int(test_runs),
    )


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _freeze(read: Reader, table: dict, mode: Board, window: Window) -> timedelta:
    minutes = read.number(table, ("scoreboard", "freeze_minutes"), positive=True)
    if mode is not Board.PUBLIC and window.personal and window.hard_end is None:
        raise read.fail(("scoreboard", "mode"), _NO_END.format(mode=mode.value))
    if mode is not Board.FROZEN:
        if minutes is not None:
            raise read.fail(
                ("scoreboard", "freeze_minutes"), 'scoreboard.freeze_minutes only applies with mode = "frozen"'
            )
        return timedelta(0)
    if minutes is None:
        raise read.fail(("scoreboard", "mode"), 'scoreboard.mode = "frozen" needs freeze_minutes: the last N minutes')
    if timedelta(minutes=minutes) > window.duration and not window.personal:
        raise read.bad(("scoreboard", "freeze_minutes"), minutes, "at most the window's duration")
    return timedelta(minutes=minutes)


_NO_END = (
    'scoreboard.mode = "{mode}" needs a common end to the contest: personal windows have none '
    "unless window.hard_end is set"
)


def _extra_time(read: Reader, table: dict) -> dict[str, timedelta]:
    extra = {}
    for student in table:
        minutes = read.number(table, ("extra_time", student), positive=False)
        extra[student] = timedelta(minutes=minutes or 0)
    return extra
