"""The contest a server serves: one :class:`ContestState` on ``app.state.contest``, owning the store, the clock,
the coach's changes (extensions, extra time, the freeze, revealed leaderboards: kept in the store, so that a
restart keeps them) and the grading queue. It reads and stores; what the rules make of it is the pure modules'.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.contest import policy
from grader.contest.config import Contest, load
from grader.contest.grading import (
    LOCAL,
    METRIC,
    METRIC_NICE,
    QUICK,
    GradingQueue,
    Remote,
    lane_of,
    lane_plan,
)
from grader.contest.layout import CONTEST_FILE, ROSTER
from grader.contest.metric import is_metric, leaderboards_seen
from grader.contest.policy import Submission, WindowState, window_state
from grader.contest.reaper import end_leftovers
from grader.contest.scoreboard import Freeze, Standings, coach_view, freeze_of, students_board
from grader.contest.store import GRADED, QUEUED, Row, Store
from grader.contest.testruns import TestRunQueue
from grader.contest.web.limits import BODY_SECONDS, Limiter
from grader.contest.web.pages import templates
from grader.contest.web.tokens import Tokens, Who
from grader.options import limits as default_limits
from grader.paper.config import SECRET_FILE
from grader.roster import read_roster
from grader.variants import read_or_make_secret, seed_of

log = logging.getLogger("grader.contest")

# The store's settings the coach's changes are kept in.
EXTEND = "extend_minutes"  # the minutes added to the whole window
FROZEN_AT = "frozen_at"  # when the coach froze the board by hand
FREEZE_LIFTED = "freeze_lifted"  # when the coach lifted the contest's scheduled freeze
RESOLVED = "resolved"  # the (student, task) pairs the resolver has revealed on the coach's frozen board, as JSON
REVEALED = "revealed:"  # + a metric task's id: when the coach revealed its leaderboard B


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


SQLITE_IDS = range(-(2**63), 2**63)  # the ids SQLite can hold: any other names no submission (not an overflow)


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the server grades and how much it lets through (see :func:`grader.contest.web.app.create_app`)."""

    workers: int = 1
    limits: Any = None
    metric_workers: int | None = None  # the metric lane's (grading.lane_slots); None: half the workers, at least 1
    metric_nice: int = METRIC_NICE  # added to the metric lane's processes' niceness (grading.METRIC_NICE)
    executor: Executor | None = None
    slots: int | None = None
    remote: Remote | None = None  # the lanes ``executor`` grades (by default all) and how the coach is told of it
    uploads_per_minute: int = 10
    body_seconds: float = BODY_SECONDS
    refusals_per_minute: int = 10
    address_per_minute: int = 60
    messages_per_minute: int = 5  # questions a student, or announcements and answers the coach, send in a minute


class ContestState:
    """The contest in ``folder`` at ``clock``'s time, with the coach's changes."""

    def __init__(self, folder: Path, clock: Callable[[], datetime], settings: Settings):
        self.folder = folder
        self.clock = clock
        self.settings = settings
        self.base = load(folder / CONTEST_FILE)  # the contest file's rules, before the coach's changes
        self.tokens = Tokens(folder)
        roster = read_roster(folder / ROSTER, paper=self.base.paper is not None) if (folder / ROSTER).exists() else ()
        self.students = tuple(dict.fromkeys([*roster, *self.tokens.names()]))
        self.store = Store(folder)
        self.queue: GradingQueue | None = None  # while the app's lifespan runs
        # test runs: a process of their own, made on the first one (testruns.py), not only within the lifespan
        self.test_runs = TestRunQueue(self.store, clock, settings.limits or default_limits())
        # refused uploads, per token and per address (a classroom behind one router shares one)
        self.failures = Limiter({"token": settings.refusals_per_minute, "address": settings.address_per_minute})
        # wrong logins, per address, counted apart: a room's refused uploads must not lock its students out of the
        # login form, where past the limit even a right token waits (guessing stops)
        self.wrong_logins = Limiter({"address": settings.address_per_minute})
        self.uploads = Limiter({"token": settings.uploads_per_minute})
        self.messages = Limiter({"token": settings.messages_per_minute})
        self.templates = templates(clock)
        # The paper's own secret: the numbers `grade paper render PAPER --student NAME` writes are those graded here.
        paper = self.base.paper
        self._secret = read_or_make_secret((paper.folder or folder) / SECRET_FILE) if paper else ""
        # each student's paper notebook, made once (routes/student.py): (paper, student, seed, minutes) -> JSON
        self.notebooks: dict[tuple[str, str, int, float], str] = {}
        self.notebooks_lock = threading.Lock()

    # --- Grading ---------------------------------------------------------------------------------------------

    def paper_options(self, student: str, task: str) -> dict[str, Any]:
        """On a paper's part: the student's own numbers (their variant) and the paper's rules for each part. A
        task of the contest's own, beside the paper, is graded on the lesson's numbers, without rules."""
        paper = self.base.paper
        if paper is None or paper.part(task) is None:
            return {}
        rules = {part.id: frozenset(part.rules) for part in paper.parts}
        return {"seed": seed_of(self._secret, paper.id, student), "rules": rules}

    def start_grading(self) -> None:
        """Start the grading queue, and write the start (a restart, after a crash or not) to the event log."""
        left = len(self.store.queued())
        again = f": {left} submission(s) left queued are graded now" if left else ""
        plan = self.lane_plan()
        if any(processes for processes, _ in plan.values()):  # its own processes: end what a server killed left
            ended = end_leftovers(self.folder)
            again += f"; ended {ended} grading process(es) an earlier server left running" if ended else ""
        lanes = {name: self.lane_where(processes, n) for name, (processes, n) in plan.items()}
        metric = f" and {lanes[METRIC]} for the metric tasks" if METRIC in lanes else ""
        self.store.event(self.clock(), None, "server started", f"grading started with {lanes[QUICK]}{metric}{again}")
        s = self.settings
        queue = GradingQueue(
            self.store,
            self.clock,
            s.workers,
            s.limits,
            executor=s.executor,
            options=self.paper_options,
            slots=s.slots,
            metric_workers=self.metric_workers(),
            remote=s.remote,
            metric_nice=s.metric_nice,
        )
        queue.start()
        self.queue = queue
        self.test_runs.start()

    def stop_grading(self) -> None:
        self.test_runs.close()  # first: the grading queue's close stops the fork server both start processes from
        queue, self.queue = self.queue, None
        if queue is not None:
            queue.close()

    def enqueue(self, sid: int) -> None:
        """Hand submission ``sid`` to the grading queue; without one (no lifespan) it stays queued in the store."""
        if self.queue is not None:
            self.queue.enqueue(sid)

    def row(self, sid: int) -> Row | None:
        """Submission ``sid``, or None where there is none (an id too large for SQLite included)."""
        return self.store.get(sid) if sid in SQLITE_IDS else None

    # --- The rules with the coach's changes ------------------------------------------------------------------

    def extend_minutes(self) -> float:
        """The minutes the coach added to the whole window; a stored value that is not a finite number (written
        by an older server, or by hand) is ignored with a warning: it must never take the contest down."""
        text = self.store.setting(EXTEND)
        try:
            minutes = float(text or 0)
        except ValueError:
            minutes = math.nan
        if not math.isfinite(minutes):
            log.warning("ignoring the stored extension %r: it is not a number of minutes", text)
            return 0.0
        return minutes

    def extra_minutes(self) -> dict[str, float]:
        """The minutes the coach added to each student's window, the ones that are not finite numbers ignored."""
        extra: dict[str, float] = {}
        for name, minutes in self.store.extra_minutes().items():
            if isinstance(minutes, (int, float)) and math.isfinite(minutes):
                extra[name] = float(minutes)
            else:
                log.warning("ignoring the stored extra time %r of %s: it is not a number of minutes", minutes, name)
        return extra

    def start_delays(self) -> dict[str, float]:
        """The minutes after the contest's start each latecomer's fixed window starts, the ones that are not
        finite numbers ignored."""
        return {
            n: float(m)
            for n, m in self.store.start_delays().items()
            if isinstance(m, (int, float)) and math.isfinite(m)
        }

    def rules(
        self, extend: float | None = None, extra: dict[str, float] | None = None, delay: dict[str, float] | None = None
    ) -> Contest:
        """The contest with the coach's changes: those stored, or ``extend``, ``extra`` and ``delay`` (the changes
        a coach asks for, to check them before they are stored)."""
        return policy.with_changes(
            self.base,
            self.extend_minutes() if extend is None else extend,
            self.extra_minutes() if extra is None else extra,
            self.start_delays() if delay is None else delay,
        )

    def empty_window(self, contest: Contest) -> str | None:
        """Why ``contest`` (with a change the coach asks for) leaves a window empty; None if none."""
        return policy.empty_window(contest, self.students, self.store.first_logins())

    def window(self, name: str, login: bool = False) -> tuple[Contest, WindowState]:
        """The rules now and where ``name``'s window stands; ``login``: this visit is a login (it opens a
        personal window, recorded)."""
        contest, now = self.rules(), self.clock()
        first = self.store.record_login(name, now) if login else self.store.first_login(name)
        return contest, window_state(contest, name, now, first)

    # --- The board, its freeze and the metric tasks' leaderboards ----------------------------------------------

    def frozen_by_hand(self) -> datetime | None:
        """When the coach froze the board by hand (it stays so until they unfreeze it); None if they did not. A
        stored value that is not a time is ignored with a warning."""
        text = self.store.setting(FROZEN_AT)
        try:
            return datetime.fromisoformat(text) if text else None
        except ValueError:
            log.warning("ignoring the stored freeze %r: it is not a time", text)
            return None

    def freeze_lifted(self) -> bool:
        return self.store.setting(FREEZE_LIFTED) is not None

    def resolved(self) -> frozenset[tuple[str, str]]:
        """The (student, task) pairs whose results since the coach's freeze the resolver has revealed."""
        try:
            return frozenset((str(s), str(t)) for s, t in json.loads(self.store.setting(RESOLVED) or "[]"))
        except (ValueError, TypeError):
            log.warning("ignoring the stored resolver steps: not a list of pairs")
            return frozenset()

    def resolve(self, pair: tuple[str, str] | None) -> None:
        """Reveal ``pair`` too; None: forget every step (the board unfrozen, or frozen anew)."""
        steps = sorted(self.resolved() | {pair}) if pair else None
        self.store.set_setting(RESOLVED, json.dumps(steps) if steps else None)

    def freeze(self, contest: Contest) -> Freeze:
        return freeze_of(contest, self.clock(), self.frozen_by_hand(), self.freeze_lifted())

    def revealed(self, task_id: str) -> bool:
        return self.store.setting(f"{REVEALED}{task_id}") is not None

    def sealed(self, contest: Contest) -> frozenset[str]:
        """The metric tasks whose leaderboard B no student may see yet."""
        return frozenset(t.id for t in contest.tasks if is_metric(t.id) and not self.revealed(t.id))

    def standing_rows(self, reports: bool = False) -> list[Row]:
        """Every submission as the standings count it: one queued again by the coach with its previous grade,
        until the new one lands, so that a regrade never takes a task's points off the board (or a metric
        task's leaderboards) while it runs."""
        previous = self.store.previous(reports)
        rows = []
        for row in self.store.all(reports=reports):
            before = previous.get(row.id)
            if row.status == QUEUED and before and before["status"] == GRADED:
                keep = {k: before[k] for k in ("score", "max_score", "report") if k in before}
                row = dataclasses.replace(row, status=GRADED, graded_at=_time(before["graded_at"]), **keep)
            rows.append(row)
        return rows

    def submissions(self, contest: Contest) -> dict[str, list[Submission]]:
        """Every student's submissions as the policy reads them (see :meth:`standing_rows`)."""
        grouped: dict[str, list[Submission]] = defaultdict(list)
        for row in self.standing_rows():
            grouped[row.student].append(row.as_policy(contest))
        return grouped

    def metric_workers(self) -> int | None:
        """The metric lane's size: none (0) in a contest without a metric task, else the settings' (None: the
        default, grading.default_metric_workers)."""
        return self.settings.metric_workers if any(is_metric(t.id) for t in self.base.tasks) else 0

    def lane_plan(self) -> dict[str, tuple[int, int]]:
        """Each lane's (grading processes of its own, submissions graded at once): grading.lane_plan."""
        s = self.settings
        remote = (s.remote or Remote()).lanes if s.executor is not None else ()
        return lane_plan(s.workers, self.metric_workers(), s.slots, remote)

    def lane_sizes(self) -> dict[str, int]:
        """Each lane's size: its grading processes, or on an executor not the server's own (a Dask client's) the
        submissions it hands it at once."""
        return {name: processes or n for name, (processes, n) in self.lane_plan().items()}

    def lane_where(self, processes: int, slots: int) -> str:
        """How a lane grades, as the event log says it: "2 local process(es)", "4 at once on the Dask cluster at X"."""
        if processes:
            return f"{processes} local process(es)"
        return f"{slots} at once on {(self.settings.remote or Remote()).where}"

    def health(self) -> dict[str, Any]:
        """The grading's health for the coach: worker processes alive (of those asked for), submissions waiting,
        the oldest waiting one's age in seconds, pools replaced after a grading process died; the same for each
        lane in ``lanes`` (the quick tasks', the metric tasks': grading.py), with the submissions being graded
        (``busy``) and those waiting for a slot (``waiting``), where it grades (``where``: grading.LOCAL, or the
        cluster's name) and a cluster's threads alive now (``threads``; None for local processes)."""
        queued, now = self.store.queued(), self.clock()
        queue = self.queue
        running = queue.lane_health() if queue is not None else {}
        sizes = {name: lane["workers"] for name, lane in running.items()} or self.lane_sizes()
        planned = {
            name: LOCAL if processes else (self.settings.remote or Remote()).where
            for name, (processes, _) in self.lane_plan().items()
        }
        lanes = []
        for name, size in sizes.items():
            mine = [row for row in queued if lane_of(row.task, sizes) == name]
            busy = running.get(name, {}).get("busy", 0)
            lanes.append(
                {
                    "lane": name,
                    "workers": size,
                    "alive": running.get(name, {}).get("alive", 0),
                    "busy": busy,
                    "waiting": max(0, len(mine) - busy),
                    "oldest_wait_seconds": round((now - mine[0].received_at).total_seconds()) if mine else None,
                    "replaced": running.get(name, {}).get("replaced", 0),
                    "where": running.get(name, {}).get("where", planned.get(name, LOCAL)),
                    "threads": running.get(name, {}).get("threads"),
                }
            )
        oldest = round((now - queued[0].received_at).total_seconds()) if queued else None
        return {
            "running": queue is not None,
            "workers": sum(sizes.values()),
            "alive": sum(lane["alive"] for lane in lanes),
            "queued": len(queued),
            "oldest_wait_seconds": oldest,
            "replaced": queue.replaced if queue is not None else 0,
            "lanes": lanes,
        }

    def board(self, who: Who, contest: Contest) -> Standings:
        """The scoreboard as ``who`` may see it now: the coach's always live."""
        submissions = self.submissions(contest)
        if who.coach:
            return coach_view(contest, submissions, self.students)
        now, by_hand = self.clock(), self.frozen_by_hand()
        end = window_state(contest, who.name, now, self.store.first_login(who.name)).end  # their freeze's
        lifted, resolved = self.freeze_lifted(), self.resolved()
        return students_board(contest, who.name, now, submissions, self.students, by_hand, lifted, end, resolved)

    def leaderboards(self, who: Who, contest: Contest, standings: Standings) -> list[dict[str, Any]]:
        """The metric tasks' leaderboards as ``who`` may see them, with their scoreboard's ``standings``."""
        revealed = {t.id for t in contest.tasks if self.revealed(t.id)}
        rows: list[Row] = self.standing_rows(reports=True) if any(is_metric(t.id) for t in contest.tasks) else []
        frozen_at, hidden = standings.frozen_at, standings.hidden
        return leaderboards_seen(contest, rows, self.students, who.name, revealed, frozen_at, hidden, who.coach)
