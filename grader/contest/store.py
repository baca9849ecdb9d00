"""The contest's records: ``DIR/contest.sqlite`` (WAL) and the uploads, ``DIR/uploads/<id>/``.

An accepted upload is written to its folder and its row committed, as ``queued``, before the server answers;
the grading queue marks a row graded (or failed) in one transaction with its result, and only while it is still
queued. So a server killed at any moment loses no accepted upload, and on restart each queued row is graded
again and recorded exactly once.

Times are stored as ISO 8601 with their UTC offset; scores as the grader's (``score`` of ``max_score`` for the
task's milestone), turned into the contest's points when read (``policy.task_points``), so that editing a
task's points in contest.toml rescales what is already graded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.contest.config import Contest
from grader.contest.policy import Status, Submission, task_points
from grader.errors import GptkitError, UserError

DATABASE = "contest.sqlite"
UPLOADS = "uploads"

QUEUED = "queued"
GRADED = "graded"
REJECTED = "rejected"
FAILED = "failed"
FAILED_RUN = "failed"  # a test run's verdict when the grader failed on it (its process died): never counted
NOT_COUNTED = "not counted: "  # a failed submission's error when the grader ran but no check could count
OPEN, ACCEPTED, DECLINED = "open", "accepted", "declined"  # a regrade request's status

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    task TEXT NOT NULL,
    received_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'graded', 'rejected', 'failed')),
    path TEXT,                      -- what is graded, relative to the contest folder: a folder or a notebook
    score REAL,
    max_score REAL,
    report TEXT,                    -- the grader's JSON report (graded)
    error TEXT,                     -- the grader's failure (failed) or why the upload was refused (rejected)
    graded_at TEXT,
    selected INTEGER NOT NULL DEFAULT 0,
    voided INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS submissions_student ON submissions (student, task);
CREATE TABLE IF NOT EXISTS logins (student TEXT PRIMARY KEY, first_login TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    student TEXT,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    author TEXT                     -- the coach who did it (the audit trail); NULL: the server or a student
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS extra_time (student TEXT PRIMARY KEY, minutes REAL NOT NULL);
CREATE TABLE IF NOT EXISTS start_delay (student TEXT PRIMARY KEY, minutes REAL NOT NULL);
CREATE TABLE IF NOT EXISTS announcements (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clarifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    task TEXT,                      -- the task asked about; NULL: the contest in general
    asked_at TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT,                    -- NULL: not answered yet
    answered_at TEXT,
    public INTEGER NOT NULL DEFAULT 0  -- 1: the answer (and the question) shown to every student
);
-- A submission's result before the coach had it graded again: the standings keep it until the new one lands,
-- and the coach's page shows old against new.
CREATE TABLE IF NOT EXISTS previous (
    sid INTEGER PRIMARY KEY,
    status TEXT NOT NULL,
    score REAL,
    max_score REAL,
    error TEXT,
    graded_at TEXT,
    requeued_at TEXT NOT NULL,
    report TEXT                     -- the grader's JSON report then (a metric task's leaderboards read it)
);
-- A student's test run on their own input (CMS's user tests): never a submission, so never a score, a cap or a
-- board's. Its files are kept in DIR/test-runs/<id>/ until it has run.
CREATE TABLE IF NOT EXISTS test_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    task TEXT NOT NULL,
    received_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'done')),
    verdict TEXT,                   -- ok, error, time limit, memory limit, output limit, crashed, failed
    error TEXT,
    output TEXT,                    -- the tail of what it printed (grader/sandbox/testrun.py: OUTPUT_KEPT)
    cut INTEGER NOT NULL DEFAULT 0, -- 1: the output was longer, only its end is kept
    seconds REAL,
    done_at TEXT
);
CREATE INDEX IF NOT EXISTS test_runs_student ON test_runs (student, task);
-- A student's request that a graded submission be graded again, and the coach's answer: accepted (the
-- submission queued again; its result then, new_*, beside the one it had, old_*) or declined.
CREATE TABLE IF NOT EXISTS regrade_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    submission INTEGER NOT NULL,
    task TEXT NOT NULL,
    reason TEXT NOT NULL,
    asked_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'accepted', 'declined')),
    answer TEXT,
    answered_at TEXT,
    answered_by TEXT,               -- the coach who answered (also in the audit trail)
    old_status TEXT,                -- the submission's result when the request was accepted
    old_score REAL,
    old_max_score REAL,
    new_status TEXT,                -- its result once graded again (NULL while it waits)
    new_score REAL,
    new_max_score REAL,
    regraded_at TEXT
);
-- One open request per submission, whatever the race between two forms sent at once.
CREATE UNIQUE INDEX IF NOT EXISTS regrade_requests_open ON regrade_requests (submission) WHERE status = 'open';
"""
TEST_RUNS = "test-runs"  # DIR/test-runs/<id>/: a test run's files, until it has run
DONE = "done"


COLUMNS = (
    "id",
    "student",
    "task",
    "received_at",
    "status",
    "path",
    "score",
    "max_score",
    "report",
    "error",
    "graded_at",
    "selected",
    "voided",
)


@dataclass(frozen=True)
class Row:
    """A submission as stored."""

    id: int
    student: str
    task: str
    received_at: datetime
    status: str
    path: str | None
    score: float | None
    max_score: float | None
    report: dict[str, Any] | None
    error: str | None
    graded_at: datetime | None
    selected: bool
    voided: bool
    set_aside: dict[str, Any] | None = None  # the report's checks set aside (checks, points, ...); None: none

    def points(self, contest: Contest) -> float:
        """The score in the contest's points for the task (0 if not graded)."""
        task = contest.task(self.task)
        if task is None or self.status != GRADED or self.score is None or self.max_score is None:
            return 0.0
        return task_points(task, self.score, self.max_score)

    def as_policy(self, contest: Contest, queued_as_graded: bool = False) -> Submission:
        """The policy engine's view. A voided submission counts for nothing (as a rejected one). A queued one
        is none of the policy's statuses: ``queued_as_graded`` counts it as graded (for the cap and the
        interval, so that a burst of uploads cannot pass the cap before the first is graded), else rejected."""
        if self.voided:
            status = Status.REJECTED
        elif self.status == QUEUED:
            status = Status.GRADED if queued_as_graded else Status.REJECTED
        else:
            status = Status(self.status)
        return Submission(self.task, self.received_at, status, self.points(contest), self.selected)


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _row(r: sqlite3.Row) -> Row:
    report = json.loads(r["report"]) if "report" in r.keys() and r["report"] else None
    # The report's set_aside (grader/results.py), or the column Store.all extracts when it reads no reports.
    aside = (
        report.get("set_aside") if report else json.loads(r["set_aside"] or "null") if "set_aside" in r.keys() else None
    )
    return Row(
        id=r["id"],
        student=r["student"],
        task=r["task"],
        received_at=datetime.fromisoformat(r["received_at"]),
        status=r["status"],
        path=r["path"],
        score=r["score"],
        max_score=r["max_score"],
        report=report,
        error=r["error"],
        graded_at=_time(r["graded_at"]),
        selected=bool(r["selected"]),
        voided=bool(r["voided"]),
        set_aside=aside if isinstance(aside, dict) and aside.get("checks") else None,
    )


class Repeated(GptkitError):
    """An upload sent again with the key and files of one already stored: ``sid`` is that submission. Not a
    failure: the store's answer that nothing new was recorded, caught by the upload's route."""

    def __init__(self, sid: int):
        super().__init__(sid)
        self.sid = sid


class Refused(UserError):
    """An upload the rules refuse at the moment it would be recorded; ``str()`` is the reason, for the student."""

    status = 403  # the HTTP status the server answers it with


class ConflictRefused(Refused):
    """A change that another's, made first, stands in the way of (a question claimed or answered): a 409."""

    status = 409


class TestRunRefused(Refused):
    """A test run refused (its limit used, one already waiting); ``status``: 429 or 409."""

    __test__ = False  # pytest: not a test class

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


class Store:
    """The contest folder's database; safe to share between threads (one connection, one lock)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.uploads = folder / UPLOADS
        self.uploads.mkdir(exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(folder / DATABASE, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a committed upload survives a power cut, not just kill -9
        self._db.executescript(SCHEMA)
        self._add_column("events", "author", "TEXT")  # an older contest.sqlite has no audit column
        # the key a client sends with an upload (``Idempotency-Key``) and its files' digest: the same key with the
        # same files again is the same submission, resent after a lost reply
        self._add_column("submissions", "client_key", "TEXT")
        self._add_column("submissions", "client_digest", "TEXT")
        # the jury member who took a question on, and when: another one answers it only by taking it over
        self._add_column("clarifications", "claimed_by", "TEXT")
        self._add_column("clarifications", "claimed_at", "TEXT")

    def _add_column(self, table: str, column: str, kind: str) -> None:
        if column in {r["name"] for r in self._db.execute(f"PRAGMA table_info({table})")}:
            return
        try:
            self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        except sqlite3.OperationalError as e:  # another Store of the folder added it a moment before
            if "duplicate column" not in str(e):
                raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # --- Submissions ---------------------------------------------------------------------------------------

    def accept(
        self,
        student: str,
        task: str,
        at: datetime | Callable[[], datetime],
        write: Callable[[Path], str],
        decide: Callable[[list[Row], datetime | None, datetime], str | None] | None = None,
        key: str | None = None,
        digest: str | None = None,
    ) -> int:
        """Record an accepted upload: ``write(folder)`` saves its files into the new, empty ``folder`` and
        returns the path to grade (relative to ``folder``); the queued row is committed only once they are
        written (and synced). Returns the submission's id.

        ``at`` is the time of acceptance, or a clock, read once the store's lock is held. ``decide(rows,
        first_login, at)`` says why the upload is refused (None: accepted), given the student's submissions and
        first login as they stand inside the same transaction: no other upload can be inserted between the
        decision and this one's insert, so six uploads at once cannot all pass a cap of 3. A refusal raises
        :class:`Refused` and records nothing.

        ``key``: the client's own key for this upload, and ``digest`` its files' (uploads.digest). An upload sent
        again with the key and files of one stored for the student and task (its reply was lost, and the client
        resent it) is that submission: :class:`Repeated` names it, and nothing is recorded or counted again.
        Other files under a used key (a stale page's form) are a new upload, decided as any other."""
        with self._transaction() as db:
            now = at() if callable(at) else at
            if key is not None:
                same = db.execute(
                    "SELECT id FROM submissions "
                    "WHERE student = ? AND task = ? AND client_key = ? AND client_digest = ?",
                    (student, task, key, digest),
                ).fetchone()
                if same is not None:
                    raise Repeated(int(same["id"]))
            if decide is not None:
                rows = [
                    _row(r) for r in db.execute("SELECT * FROM submissions WHERE student = ? ORDER BY id", (student,))
                ]
                login = db.execute("SELECT first_login FROM logins WHERE student = ?", (student,)).fetchone()
                reason = decide(rows, datetime.fromisoformat(login["first_login"]) if login else None, now)
                if reason:
                    raise Refused(reason)
            cursor = db.execute(
                "INSERT INTO submissions (student, task, received_at, status, client_key, client_digest) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (student, task, now.isoformat(), QUEUED, key, digest),
            )
            sid = int(cursor.lastrowid or 0)
            folder = self.uploads / str(sid)
            if folder.exists():  # left by an upload whose row was never committed (killed in between)
                shutil.rmtree(folder)
            folder.mkdir()
            try:
                inner = write(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            path = (folder / inner).relative_to(self.folder).as_posix()
            db.execute("UPDATE submissions SET path = ? WHERE id = ?", (path, sid))
        return sid

    def keyed(self, student: str, task: str, key: str) -> bool:
        """Whether ``student`` sent an upload to ``task`` with the client's ``key`` (whatever its files)."""
        found = self._query(
            "SELECT 1 FROM submissions WHERE student = ? AND task = ? AND client_key = ? LIMIT 1", (student, task, key)
        )
        return bool(found)

    def reject(self, student: str, task: str, at: datetime, reason: str) -> int:
        """Record an upload refused as not a valid submission (its files are not kept)."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO submissions (student, task, received_at, status, error) VALUES (?, ?, ?, ?, ?)",
                (student, task, at.isoformat(), REJECTED, reason),
            )
            return int(cursor.lastrowid or 0)

    def finish(self, sid: int, at: datetime, result: dict[str, Any]) -> bool:
        """Record the grader's ``result`` for a queued submission (``{"error": ...}``: failed), in one
        transaction; False (and nothing written) if it is no longer queued: it is graded exactly once. A regrade
        request the coach accepted for it records this result as its new one, in the same transaction."""
        with self._transaction() as db:
            row = db.execute("SELECT task, status FROM submissions WHERE id = ?", (sid,)).fetchone()
            if row is None or row["status"] != QUEUED:
                return False
            self._record(db, sid, row["task"], at, result)
            self._regraded(db, sid, at)
        return True

    @staticmethod
    def _record(db: sqlite3.Connection, sid: int, task: str, at: datetime, result: dict[str, Any]) -> None:
        """Write the grader's ``result`` into the queued submission ``sid`` (to ``task``): graded or failed."""
        error = result.get("error")
        if error:
            db.execute(
                "UPDATE submissions SET status = ?, error = ?, graded_at = ? WHERE id = ?",
                (FAILED, str(error), at.isoformat(), sid),
            )
            return
        milestone = next((m for m in result.get("milestones", []) if m.get("id") == task), None)
        checks = milestone.get("checks", []) if milestone else []
        if checks and not any(c.get("counted", True) for c in checks):
            # Every check set aside: no valid run (a metric task's time limit, crash or missing model, or the
            # grader's own failures). As at IOAI it costs nothing: failed, with why, not graded.
            why = str(checks[0].get("message", "")).removeprefix("not counted: ")
            db.execute(
                "UPDATE submissions SET status = ?, error = ?, report = ?, graded_at = ? WHERE id = ?",
                (FAILED, f"{NOT_COUNTED}{why}", json.dumps(result), at.isoformat(), sid),
            )
            return
        if milestone is None:
            db.execute(
                "UPDATE submissions SET status = ?, error = ?, report = ?, graded_at = ? WHERE id = ?",
                (FAILED, f"the report has no {task} milestone", json.dumps(result), at.isoformat(), sid),
            )
            return
        db.execute(
            "UPDATE submissions SET status = ?, score = ?, max_score = ?, report = ?, graded_at = ? WHERE id = ?",
            (
                GRADED,
                float(milestone.get("score", 0)),
                float(milestone.get("max_score", 0)),
                json.dumps(result),
                at.isoformat(),
                sid,
            ),
        )

    @staticmethod
    def _regraded(db: sqlite3.Connection, sid: int, at: datetime) -> None:
        """The result just written into ``sid``, as the new one of the request accepted for it (if any)."""
        db.execute(
            "UPDATE regrade_requests SET (new_status, new_score, new_max_score, regraded_at) = "
            "(SELECT status, score, max_score, ? FROM submissions WHERE id = ?) "
            "WHERE submission = ? AND status = ? AND regraded_at IS NULL",
            (at.isoformat(), sid, sid, ACCEPTED),
        )

    def requeue(self, sid: int, at: datetime | None = None) -> bool:
        """Queue again a failed submission, or a graded one with checks set aside (the coach, once the grader is
        fixed); False if it is neither."""
        with self._transaction() as db:
            eligible = db.execute(
                "SELECT id FROM submissions WHERE id = ? AND (status = ? OR (status = ? AND "
                "json_extract(report, '$.set_aside.checks') > 0))",
                (sid, FAILED, GRADED),
            ).fetchone()
            if eligible is None:
                return False
            self._queue_again(db, [sid], at)
            return True

    def requeue_task(self, task: str, at: datetime | None = None) -> list[int]:
        """Queue again every graded or failed submission to ``task`` (the coach, after fixing the task's grading);
        rejected and voided ones stay as they are. Returns their ids, oldest first."""
        with self._transaction() as db:
            ids = [
                r["id"]
                for r in db.execute(
                    "SELECT id FROM submissions WHERE task = ? AND status IN (?, ?) AND voided = 0 ORDER BY id",
                    (task, GRADED, FAILED),
                )
            ]
            self._queue_again(db, ids, at)
        return ids

    def _queue_again(self, db: sqlite3.Connection, ids: list[int], at: datetime | None) -> None:
        """Queue ``ids`` again, their results kept in ``previous`` (the coach's page shows old against new)."""
        self._keep_previous(db, ids, at)
        db.executemany(
            "UPDATE submissions SET status = ?, score = NULL, max_score = NULL, error = NULL, report = NULL, "
            "graded_at = NULL WHERE id = ?",
            [(QUEUED, sid) for sid in ids],
        )

    def _keep_previous(self, db: sqlite3.Connection, ids: list[int], at: datetime | None) -> None:
        """Keep the results of ``ids`` (graded or failed ones) as they are before they are queued again at ``at``
        (default: now)."""
        now = (at or datetime.now().astimezone()).isoformat()
        db.executemany(
            "INSERT OR REPLACE INTO previous (sid, status, score, max_score, error, graded_at, requeued_at, report) "
            "SELECT id, status, score, max_score, error, graded_at, ?, report FROM submissions WHERE id = ? "
            "AND status IN ('graded', 'failed')",
            [(now, sid) for sid in ids],
        )

    def previous(self, reports: bool = False) -> dict[int, dict[str, Any]]:
        """The results submissions had before they were last graded again, by id (``reports``: with the report,
        parsed; else without)."""
        found = {}
        for r in self._query("SELECT * FROM previous ORDER BY sid"):
            entry = dict(r)
            text = entry.pop("report", None)
            if reports:
                entry["report"] = json.loads(text) if text else None
            found[r["sid"]] = entry
        return found

    def get(self, sid: int) -> Row | None:
        rows = self._query("SELECT * FROM submissions WHERE id = ?", (sid,))
        return _row(rows[0]) if rows else None

    def queued(self) -> list[Row]:
        """Every submission still waiting for its grade, in arrival order."""
        return [_row(r) for r in self._query("SELECT * FROM submissions WHERE status = ? ORDER BY id", (QUEUED,))]

    def of(self, student: str) -> list[Row]:
        return [_row(r) for r in self._query("SELECT * FROM submissions WHERE student = ? ORDER BY id", (student,))]

    def all(self, reports: bool = True) -> list[Row]:
        """Every submission, oldest first; without ``reports`` their reports are not read (None): the scoreboard
        needs only the scores."""
        columns = "*" if reports else ", ".join(c for c in COLUMNS if c != "report")
        if not reports:  # the flag the coach's page shows, without the whole report
            columns += ", json_extract(report, '$.set_aside') AS set_aside"
        return [_row(r) for r in self._query(f"SELECT {columns} FROM submissions ORDER BY id")]

    def set_selected(self, sid: int, selected: bool) -> None:
        with self._transaction() as db:
            db.execute("UPDATE submissions SET selected = ? WHERE id = ?", (int(selected), sid))

    def set_voided(self, sid: int, voided: bool) -> bool:
        with self._transaction() as db:
            return db.execute("UPDATE submissions SET voided = ? WHERE id = ?", (int(voided), sid)).rowcount > 0

    # --- Logins, events, the coach's changes -----------------------------------------------------------------

    def first_login(self, student: str) -> datetime | None:
        rows = self._query("SELECT first_login FROM logins WHERE student = ?", (student,))
        return datetime.fromisoformat(rows[0]["first_login"]) if rows else None

    def first_logins(self) -> dict[str, datetime]:
        return {r["student"]: datetime.fromisoformat(r["first_login"]) for r in self._query("SELECT * FROM logins")}

    def record_login(self, student: str, at: datetime) -> datetime:
        """The student's first login, recorded now if this is it."""
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO logins (student, first_login) VALUES (?, ?)", (student, at.isoformat()))
        first = self.first_login(student)
        assert first is not None
        return first

    def event(self, at: datetime, student: str | None, kind: str, detail: str, author: str | None = None) -> None:
        """Record an event; ``author``: the coach who did it (the jury's audit trail)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO events (at, student, kind, detail, author) VALUES (?, ?, ?, ?, ?)",
                (at.isoformat(timespec="seconds"), student, kind, detail, author),  # read by people, not to the µs
            )

    def audit(self, limit: int = 200) -> list[dict[str, Any]]:
        """The coaches' actions, newest first, each with its ``author``."""
        rows = self._query("SELECT * FROM events WHERE author IS NOT NULL ORDER BY id DESC LIMIT ?", (limit,))
        return [dict(r) for r in rows]

    def events(self, student: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        if student is None:
            rows = self._query("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self._query("SELECT * FROM events WHERE student = ? ORDER BY id DESC LIMIT ?", (student, limit))
        return [dict(r) for r in rows]

    def setting(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM settings WHERE key = ?", (key,))
        return rows[0]["value"] if rows else None

    def set_setting(self, key: str, value: str | None) -> None:
        with self._transaction() as db:
            if value is None:
                db.execute("DELETE FROM settings WHERE key = ?", (key,))
            else:
                db.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, value))

    def extra_minutes(self) -> dict[str, float]:
        """The minutes the coach added to students' windows while the contest ran (beyond contest.toml's)."""
        return {r["student"]: r["minutes"] for r in self._query("SELECT * FROM extra_time")}

    def add_extra_minutes(self, student: str, minutes: float) -> float:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO extra_time (student, minutes) VALUES (?, ?) "
                "ON CONFLICT (student) DO UPDATE SET minutes = minutes + excluded.minutes",
                (student, minutes),
            )
        return self.extra_minutes()[student]

    def set_extra_minutes(self, student: str, minutes: float) -> float:
        """Set (not add) the minutes the coach gives the student: a form sent twice gives the same window."""
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO extra_time (student, minutes) VALUES (?, ?)", (student, minutes))
        return minutes

    def start_delays(self) -> dict[str, float]:
        """The minutes after the contest's start at which latecomers' fixed windows start (set by the coach)."""
        return {r["student"]: r["minutes"] for r in self._query("SELECT * FROM start_delay")}

    def set_start_delay(self, student: str, minutes: float) -> None:
        with self._transaction() as db:
            if minutes:
                db.execute("INSERT OR REPLACE INTO start_delay (student, minutes) VALUES (?, ?)", (student, minutes))
            else:
                db.execute("DELETE FROM start_delay WHERE student = ?", (student,))

    # --- Announcements and clarifications --------------------------------------------------------------------

    def announce(self, at: datetime, text: str) -> int:
        with self._transaction() as db:
            cursor = db.execute("INSERT INTO announcements (at, text) VALUES (?, ?)", (at.isoformat(), text))
            return int(cursor.lastrowid or 0)

    def announcements(self) -> list[dict[str, Any]]:
        """Every announcement, newest first."""
        return [dict(r) for r in self._query("SELECT * FROM announcements ORDER BY id DESC")]

    def ask(self, student: str, task: str | None, at: datetime, question: str) -> int:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO clarifications (student, task, asked_at, question) VALUES (?, ?, ?, ?)",
                (student, task, at.isoformat(), question),
            )
            return int(cursor.lastrowid or 0)

    def claim(self, cid: int, who: str, at: datetime, take_over: bool = False) -> str | None:
        """``who`` claims question ``cid``, to answer it; returns whom it was taken from (None: nobody, or
        ``who`` already). Refused (409) while another holds it and ``take_over`` is not given, or once it is
        answered; LookupError for no such question."""
        with self._transaction() as db:
            return self._claim(db, cid, who, at, take_over, answering=False)

    def _claim(
        self, db: sqlite3.Connection, cid: int, who: str, at: datetime, take_over: bool, answering: bool
    ) -> str | None:
        row = db.execute("SELECT claimed_by, answer FROM clarifications WHERE id = ?", (cid,)).fetchone()
        if row is None:
            raise LookupError(f"no question {cid}")
        if row["answer"] is not None and not answering:
            raise ConflictRefused(f"question #{cid} is answered already: nothing to claim")
        holder = row["claimed_by"]
        if holder and holder != who and not take_over:
            raise ConflictRefused(
                f"question #{cid} is claimed by {holder}: leave it to them, or take it over (take_over=1)"
            )
        if holder != who:
            db.execute(
                "UPDATE clarifications SET claimed_by = ?, claimed_at = ? WHERE id = ?", (who, at.isoformat(), cid)
            )
        return holder if holder and holder != who else None

    def answer(
        self,
        cid: int,
        at: datetime,
        text: str,
        public: bool,
        author: str | None = None,
        take_over: bool = False,
        replace: bool = False,
    ) -> bool:
        """Answer question ``cid``; False if there is no such question. ``author`` (a coach) claims it as they
        answer, refused (409) if another holds it and ``take_over`` is not given. A question answered already is
        refused unless ``replace``: then the old answer goes into the event log, in the same transaction, so
        that no answer a student may have read is lost."""
        with self._transaction() as db:
            row = db.execute("SELECT answer, answered_at, public FROM clarifications WHERE id = ?", (cid,)).fetchone()
            if row is None:
                return False
            if author is not None:
                self._claim(db, cid, author, at, take_over, answering=True)
            if row["answer"] is not None:
                if not replace:
                    raise ConflictRefused(
                        f"question #{cid} is answered already: to change the answer, tick replace (replace=1)"
                    )
                to = "every student" if row["public"] else "its student"
                db.execute(
                    "INSERT INTO events (at, student, kind, detail, author) VALUES (?, ?, ?, ?, ?)",
                    (
                        at.isoformat(timespec="seconds"),
                        None,
                        "answer replaced",
                        f"question #{cid}: the answer of {row['answered_at']} to {to} was: {row['answer']}",
                        author,
                    ),
                )
            db.execute(
                "UPDATE clarifications SET answer = ?, answered_at = ?, public = ? WHERE id = ?",
                (text, at.isoformat(), int(public), cid),
            )
            return True

    def clarifications(self, student: str | None = None) -> list[dict[str, Any]]:
        """The questions, newest first: all of them (the coach), or those ``student`` may read: their own and
        those answered to everyone."""
        if student is None:
            rows = self._query("SELECT * FROM clarifications ORDER BY id DESC")
        else:
            rows = self._query(
                "SELECT * FROM clarifications WHERE student = ? OR (public = 1 AND answer IS NOT NULL) "
                "ORDER BY id DESC",
                (student,),
            )
        return [{**dict(r), "public": bool(r["public"])} for r in rows]

    # --- Test runs (never submissions: no score, cap or board reads them) -------------------------------------

    def accept_test_run(
        self,
        student: str,
        task: str,
        at: Callable[[], datetime],
        write: Callable[[Path], None],
        decide: Callable[[list[dict[str, Any]]], tuple[int, str] | None],
    ) -> int:
        """Record a test run, queued: ``write(folder)`` saves its files into the new, empty ``folder``. ``decide``
        is given the student's test runs as they stand inside the transaction (so two sent at once cannot both
        pass the limit) and returns (HTTP status, reason) to refuse it: :class:`TestRunRefused`."""
        with self._transaction() as db:
            now = at()
            rows = [dict(r) for r in db.execute("SELECT * FROM test_runs WHERE student = ? ORDER BY id", (student,))]
            refusal = decide(rows)
            if refusal:
                raise TestRunRefused(*refusal)
            cursor = db.execute(
                "INSERT INTO test_runs (student, task, received_at, status) VALUES (?, ?, ?, ?)",
                (student, task, now.isoformat(), QUEUED),
            )
            rid = int(cursor.lastrowid or 0)
            folder = self.test_run_folder(rid)
            if folder.exists():  # left by a test run whose row was never committed (killed in between)
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            try:
                write(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
        return rid

    def test_run_folder(self, rid: int) -> Path:
        return self.folder / TEST_RUNS / str(rid)

    def finish_test_run(self, rid: int, at: datetime, result: dict[str, Any]) -> bool:
        """Record a queued test run's ``result`` (grader/sandbox/testrun.py's; ``{"error": ...}``: the grader
        failed) and delete its files; False if it is no longer queued."""
        failed = "verdict" not in result
        folder = self.test_run_folder(rid)
        # The files go before the status says done, so that anyone polling the status finds them gone once it
        # does: moved aside (one rename) before the status is committed, put back if it is not, removed after.
        finished = folder.with_name(f".finished-{rid}")
        shutil.rmtree(finished, ignore_errors=True)  # left by a store killed between the commit and the removal
        with contextlib.suppress(FileNotFoundError):
            os.rename(folder, finished)
        try:
            done = self._record_test_run(rid, at, result, failed)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rename(finished, folder)
            raise
        shutil.rmtree(finished, ignore_errors=True)
        return done > 0

    def _record_test_run(self, rid: int, at: datetime, result: dict[str, Any], failed: bool) -> int:
        """The UPDATE of ``finish_test_run``, committed: how many rows it changed (0: no longer queued)."""
        with self._transaction() as db:
            return db.execute(
                "UPDATE test_runs SET status = ?, verdict = ?, error = ?, output = ?, cut = ?, seconds = ?, "
                "done_at = ? WHERE id = ? AND status = ?",
                (
                    DONE,
                    FAILED_RUN if failed else str(result["verdict"]),
                    None if result.get("error") is None else str(result["error"]),
                    str(result.get("output", "")),
                    int(bool(result.get("cut"))),
                    result.get("seconds"),
                    at.isoformat(),
                    rid,
                    QUEUED,
                ),
            ).rowcount

    def test_run(self, rid: int) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM test_runs WHERE id = ?", (rid,))
        return {**dict(rows[0]), "cut": bool(rows[0]["cut"])} if rows else None

    def test_runs_of(self, student: str) -> list[dict[str, Any]]:
        """The student's test runs, newest first."""
        rows = self._query("SELECT * FROM test_runs WHERE student = ? ORDER BY id DESC", (student,))
        return [{**dict(r), "cut": bool(r["cut"])} for r in rows]

    def queued_test_runs(self) -> list[int]:
        """The test runs still to run (a server stopped before it ran them), oldest first."""
        return [r["id"] for r in self._query("SELECT id FROM test_runs WHERE status = ? ORDER BY id", (QUEUED,))]

    def test_run_counts(self) -> dict[str, int]:
        """Each student's test runs (the coach's page)."""
        return {r["student"]: r["n"] for r in self._query("SELECT student, COUNT(*) AS n FROM test_runs GROUP BY 1")}

    # --- Regrade requests ------------------------------------------------------------------------------------

    def request_regrade(self, student: str, sid: int, at: datetime, reason: str, most: int) -> int:
        """Record ``student``'s request that their submission ``sid`` be graded again, for ``reason``; returns
        its id. Refused (nothing recorded) unless ``sid`` is theirs and graded, with no open request yet, and
        they have made fewer than ``most`` requests: checked in the transaction that inserts it."""
        with self._transaction() as db:
            row = db.execute("SELECT student, task, status, voided FROM submissions WHERE id = ?", (sid,)).fetchone()
            if row is None or row["student"] != student:
                raise Refused(f"no submission {sid} of yours")
            if row["status"] != GRADED or row["voided"]:
                raise Refused(f"submission {sid} is {'voided' if row['voided'] else row['status']}: only a graded one")
            mine = db.execute(
                "SELECT submission, status FROM regrade_requests WHERE student = ?", (student,)
            ).fetchall()
            if any(r["submission"] == sid and r["status"] == OPEN for r in mine):
                raise Refused(f"submission {sid} has an open regrade request already: wait for the coach's answer")
            if most == 0:
                raise Refused("this contest takes no regrade requests ([regrades] per_student = 0)")
            if len(mine) >= most:
                raise Refused(f"you have made {len(mine)} regrade requests: at most {most} in this contest")
            cursor = db.execute(
                "INSERT INTO regrade_requests (student, submission, task, reason, asked_at) VALUES (?, ?, ?, ?, ?)",
                (student, sid, row["task"], reason, at.isoformat()),
            )
            return int(cursor.lastrowid or 0)

    def answer_regrade(self, rid: int, at: datetime, answer: str, author: str, accept: bool) -> dict[str, Any]:
        """Answer the open request ``rid``: ``accept`` queues its submission again (its result kept as the old
        one, in ``previous`` too, as the coach's regrade does), else it is declined. One transaction; Refused if
        there is no open request ``rid`` or its submission is no longer graded. Returns the request as stored."""
        with self._transaction() as db:
            asked = db.execute("SELECT * FROM regrade_requests WHERE id = ?", (rid,)).fetchone()
            if asked is None:
                raise LookupError(f"no regrade request {rid}")
            if asked["status"] != OPEN:
                raise Refused(f"regrade request {rid} is {asked['status']} already")
            sid = asked["submission"]
            row = db.execute("SELECT status, score, max_score FROM submissions WHERE id = ?", (sid,)).fetchone()
            if accept and row["status"] not in (GRADED, FAILED):
                raise Refused(f"submission {sid} is {row['status']}: wait until it is graded, then answer")
            db.execute(
                "UPDATE regrade_requests SET status = ?, answer = ?, answered_at = ?, answered_by = ?, "
                "old_status = ?, old_score = ?, old_max_score = ? WHERE id = ?",
                (ACCEPTED if accept else DECLINED, answer, at.isoformat(), author, *row, rid),
            )
            if accept:
                self._queue_again(db, [sid], at)
            return dict(db.execute("SELECT * FROM regrade_requests WHERE id = ?", (rid,)).fetchone())

    def regrade_requests(self, student: str | None = None) -> list[dict[str, Any]]:
        """The regrade requests, newest first: all of them (the coach), or ``student``'s."""
        if student is None:
            return [dict(r) for r in self._query("SELECT * FROM regrade_requests ORDER BY id DESC")]
        rows = self._query("SELECT * FROM regrade_requests WHERE student = ? ORDER BY id DESC", (student,))
        return [dict(r) for r in rows]
