"""The SQLite gradebook: every grading of every submission kept, each written in one transaction.

``attempts`` holds one row per grading run of a student (its time in graded_at), ``checks`` each attempt's checks
(by ``attempt``), and ``submissions`` each student's latest attempt: the one exported and reported.

A batch killed at any moment (even ``kill -9``) leaves every committed submission
whole and nothing half-written: SQLite's journal rolls back an unfinished
transaction on the next open.

A student graded on some milestones only keeps their latest results for the others, where those came from the
same files and the same grading code (``record``'s ``keep_others``); a student's folder that held nothing to
grade gets a row too (``record_empty``), so that no student is missing from the exports.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from pathlib import Path

from grader.errors import BadUsage
from grader.milestones import GRADABLE

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    student TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL, grader_version TEXT NOT NULL,
    milestones TEXT NOT NULL, status TEXT NOT NULL, error TEXT, score REAL, max_score REAL,
    n_checks INTEGER NOT NULL, seconds REAL, protections TEXT, graded_at TEXT NOT NULL, worker_cpu REAL,
    grader_hash TEXT, attempt INTEGER, time_from TEXT);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, source TEXT NOT NULL, hash TEXT NOT NULL,
    grader_version TEXT NOT NULL, milestones TEXT NOT NULL, status TEXT NOT NULL, error TEXT, score REAL,
    max_score REAL, n_checks INTEGER NOT NULL, seconds REAL, protections TEXT, graded_at TEXT NOT NULL,
    worker_cpu REAL, grader_hash TEXT, time_from TEXT);
CREATE INDEX IF NOT EXISTS attempts_by_student ON attempts (student);
CREATE TABLE IF NOT EXISTS checks (
    student TEXT NOT NULL, milestone TEXT NOT NULL, name TEXT NOT NULL, score REAL NOT NULL,
    max_score REAL NOT NULL, passed INTEGER NOT NULL, message TEXT NOT NULL, seconds REAL,
    internal_error INTEGER NOT NULL DEFAULT 0, attempt INTEGER, counted INTEGER NOT NULL DEFAULT 1, case_id TEXT);
CREATE INDEX IF NOT EXISTS checks_by_student ON checks (student);
CREATE TABLE IF NOT EXISTS regrade_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, milestone TEXT NOT NULL, reason TEXT NOT NULL,
    status TEXT NOT NULL, answer TEXT NOT NULL, answered_at TEXT NOT NULL, answered_by TEXT,
    old_attempt INTEGER, old_score REAL, old_max_score REAL, new_attempt INTEGER, new_score REAL,
    new_max_score REAL);
"""
# The columns of a submission's row, the same in ``attempts`` (which adds its id).
COLUMNS = (
    "student",
    "source",
    "hash",
    "grader_version",
    "milestones",
    "status",
    "error",
    "score",
    "max_score",
    "n_checks",
    "seconds",
    "protections",
    "graded_at",
    "worker_cpu",
    "grader_hash",
    # Where the submission's time may come from, as grade batch found it (grader/deadlines.py recorded_time):
    # NULL where not known (an older gradebook's rows, a contest's), whose time is then unknown.
    "time_from",
)
# A row's ``source`` in a contest's view (``grade contest export``): where ``grade export`` tells the coach to
# regrade from (the contest's coach page, not ``grade batch``).
SOURCE_PREFIX = "contest:"
EMPTY = "nothing to grade"  # the status of a student's folder that held nothing to grade (its error says why)
# The status of a student on the roster with nothing in the class folder (grader/batch/term.py): a row the
# commands add as they read the gradebook, never one it holds.
NO_SUBMISSION = "no submission"
# The columns of a check's row, as ``record`` writes them (``attempt`` added).
CHECK_COLUMNS = (
    "student",
    "milestone",
    "name",
    "score",
    "max_score",
    "passed",
    "message",
    "seconds",
    "internal_error",
    "counted",
    "case_id",
    "verdict",
)
# The columns of an answered regrade request's row (grader/batch/regrades.py), as ``record_answer`` writes them.
REQUEST_COLUMNS = (
    "student",
    "milestone",
    "reason",
    "status",
    "answer",
    "answered_at",
    "answered_by",
    "old_attempt",
    "old_score",
    "old_max_score",
    "new_attempt",
    "new_score",
    "new_max_score",
)
# Columns that later versions added, each appended to an older gradebook's table as it opens. An older row's
# grader_hash stays NULL: it matches no grader, so the next batch regrades it.
ADDED = (
    ("submissions", "worker_cpu", "REAL"),
    ("submissions", "grader_hash", "TEXT"),
    ("checks", "internal_error", "INTEGER NOT NULL DEFAULT 0"),
    ("submissions", "attempt", "INTEGER"),
    ("checks", "attempt", "INTEGER"),
    ("checks", "counted", "INTEGER NOT NULL DEFAULT 1"),
    ("checks", "case_id", "TEXT"),  # a parametrized check's case ("" for a plain check; NULL in older books)
    ("checks", "verdict", "TEXT"),  # a check's Verdict (grader.results): a hang or a crash is told apart by it
    ("submissions", "time_from", "TEXT"),
    ("attempts", "time_from", "TEXT"),
)


# The tables a gradebook may hold (an older one lacks attempts), and the columns that tell its submissions
# table from another program's (a contest's own database has one too).
TABLES = {"submissions", "attempts", "checks", "regrade_requests"}
KEY_COLUMNS = {"student", "source", "hash", "grader_version"}
# Other programs' SQLite files that are easy to mistake for a gradebook: tables they hold, and what to say.
LOOKALIKES = (
    ({"assignment", "grade_cell"}, "nbgrader's gradebook? give grade batch's grades.sqlite"),
    ({"logins", "events"}, "a contest's own database? give the grades.sqlite that `grade contest export` writes"),
)


class NotAGradebook(BadUsage, ValueError):  # ValueError: what callers caught before
    """The file is not this kit's gradebook (another program's database, or no database at all): opening it
    wrote nothing to it."""


class Gradebook:
    def __init__(self, path: Path, *, create: bool = True):
        """Open the gradebook at ``path``, adding what later versions added; ``create``: make a new gradebook
        where the file does not exist or holds no tables (``grade batch``), else (``grade report``,
        ``grade export``) raise NotAGradebook there. Any other file is refused the same way before anything
        is written to it: grade tables added to nbgrader's own gradebook.db would be a silent mess."""
        self.path = path
        if not create and not path.is_file():
            raise NotAGradebook(f"{path} does not exist: give grade batch's grades.sqlite")
        self.db = sqlite3.connect(path)
        try:
            self._refuse_others(create)
        except BaseException:
            self.db.close()
            raise
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        for table, column, kind in ADDED:
            if column not in {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        self._number_old_results()
        self.db.execute("CREATE INDEX IF NOT EXISTS checks_by_attempt ON checks (attempt)")

    def _refuse_others(self, create: bool) -> None:
        """Raise NotAGradebook unless the file is a gradebook, or (``create``) an empty database; reads only."""
        try:
            tables = [
                name
                for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if not name.startswith("sqlite_")  # SQLite's own (sqlite_sequence, ANALYZE's sqlite_stat1)
            ]
        except sqlite3.DatabaseError as e:  # "file is not a database" and the like
            raise NotAGradebook(f"{self.path} is not a gptkit gradebook: it is not an SQLite database ({e})") from None
        if not tables:
            if create:
                return
            raise NotAGradebook(f"{self.path} is not a gptkit gradebook: it holds no tables")
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(submissions)")}
        if set(tables) <= TABLES and KEY_COLUMNS <= columns:
            return
        shown = ", ".join(tables[:6]) + (f" and {len(tables) - 6} more" if len(tables) > 6 else "")
        hint = next((why for marks, why in LOOKALIKES if marks <= set(tables)), "give grade batch's grades.sqlite")
        raise NotAGradebook(f"{self.path} is not a gptkit gradebook (it has tables: {shown}); {hint}")

    def _number_old_results(self) -> None:
        """A gradebook from before attempts were kept: each student's one result becomes their first attempt."""
        cols = ", ".join(COLUMNS)
        with self.db:
            for (student,) in self.db.execute("SELECT student FROM submissions WHERE attempt IS NULL").fetchall():
                attempt = self.db.execute(
                    f"INSERT INTO attempts ({cols}) SELECT {cols} FROM submissions WHERE student = ?", (student,)
                ).lastrowid
                self.db.execute("UPDATE submissions SET attempt = ? WHERE student = ?", (attempt, student))
                self.db.execute(
                    "UPDATE checks SET attempt = ? WHERE student = ? AND attempt IS NULL", (attempt, student)
                )

    def close(self) -> None:
        self.db.close()

    def is_current(self, student: str, digest: str, fingerprint: str, milestones: list[str]) -> bool:
        """Graded already, from these very files, by this grading code (its fingerprint), on these milestones
        (and maybe more)."""
        row = self._latest(student)
        return (
            row is not None
            and self._can_keep(row, digest, fingerprint)
            and set(milestones) <= set(json.loads(row["milestones"]))
        )

    def _latest(self, student: str) -> sqlite3.Row | None:
        cursor = self.db.execute("SELECT * FROM submissions WHERE student = ?", (student,))
        cursor.row_factory = sqlite3.Row
        return cursor.fetchone()

    def not_kept(self, student: str, digest: str, fingerprint: str, milestones: list[str]) -> str | None:
        """Why grading the student on ``milestones`` now drops results of other milestones that their latest
        grading covered ("files": their files changed since; "grader": the grading code did), results that
        ``record(..., keep_others=True)`` therefore does not carry over; None where it drops nothing."""
        row = self._latest(student)
        if row is None or row["status"] != "graded" or self._can_keep(row, digest, fingerprint):
            return None
        if not [m for m in json.loads(row["milestones"]) if m not in milestones]:
            return None
        return "files" if row["hash"] != digest else "grader"

    @staticmethod
    def _can_keep(row: sqlite3.Row, digest: str, fingerprint: str) -> bool:
        """The row was graded from these very files by this grading code: its results still hold."""
        return (row["hash"], row["grader_hash"], row["status"]) == (digest, fingerprint, "graded")

    def record(
        self,
        student: str,
        source: str,
        digest: str,
        version: str,
        milestones: list[str],
        report: dict | None,
        error: str | None = None,
        *,
        fingerprint: str,
        keep_others: bool = False,
        time_from: str | None = None,
    ) -> int:
        """Add this result as the student's latest attempt, all in one transaction; returns the attempt's id.

        The student's earlier attempts and their checks stay (``attempts``); ``submissions`` points at this one.
        ``version``: the package's version; ``fingerprint``: the grading code's (grader.fingerprint).

        ``keep_others``: a student graded on some milestones keeps their latest results for the others, if those
        were graded from the same files (``digest``) by the same grading code: the new attempt holds those
        checks too, its score, max_score and milestones over them all. Results from other files or another
        grader are not carried over (``not_kept`` names them).

        ``time_from``: where the submission's time may come from (grader/batch/discover.py), None: unknown.
        """
        checks = [
            (
                student,
                m["id"],
                c["name"],
                c["score"],
                c["max_score"],
                int(c["passed"]),
                c["message"],
                c.get("seconds"),
                int(bool(c.get("internal_error"))),
                int(bool(c.get("counted", True))),
                c.get("case"),
                c.get("verdict"),
            )
            for m in (report or {}).get("milestones", [])
            for c in m["checks"]
        ]
        score, max_score = (report["score"], report["max_score"]) if report else (None, None)
        previous = self._latest(student) if keep_others and report and not error else None
        if previous is not None and self._can_keep(previous, digest, fingerprint):
            kept = [m for m in json.loads(previous["milestones"]) if m not in milestones]
            carried = self.db.execute(
                f"SELECT {', '.join(CHECK_COLUMNS)} FROM checks WHERE attempt = ? ORDER BY rowid",
                (previous["attempt"],),
            ).fetchall()
            carried = [c for c in carried if c[1] in kept]
            order = {m: i for i, m in enumerate(GRADABLE)}
            checks = sorted(checks + carried, key=lambda c: order.get(c[1], len(order)))  # stable: each one's order
            milestones = sorted({*milestones, *kept}, key=lambda m: order.get(m, len(order)))
            score = round(score + sum(c[3] for c in carried if c[9]), 2)
            max_score = round(max_score + sum(c[4] for c in carried if c[9]), 2)
        values = (
            student,
            source,
            digest,
            version,
            json.dumps(milestones),
            "error" if error else "graded",
            error,
            score,
            max_score,
            len(checks),
            report and report["seconds"],
            report and json.dumps(report["protections"]),
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            report and report.get("worker_cpu_seconds"),
            fingerprint,
            time_from,
        )
        return self._insert(values, checks)

    def record_empty(
        self,
        student: str,
        source: str,
        digest: str,
        version: str,
        milestones: list[str],
        why: str,
        *,
        fingerprint: str,
        time_from: str | None = None,
    ) -> int | None:
        """Record a student's folder that held nothing to grade (``why``): status EMPTY, 0 points of the class's
        maximum on ``milestones`` (``full_marks``). Returns the attempt's id, or None where the student's
        latest row already says just this (a rerun adds no attempt)."""
        max_score = self.full_marks(milestones, fingerprint)
        row = self._latest(student)
        if row is not None and (row["status"], row["hash"], row["error"], row["milestones"], row["max_score"]) == (
            EMPTY,
            digest,
            why,
            json.dumps(milestones),
            max_score,
        ):
            return None
        values = (
            student,
            source,
            digest,
            version,
            json.dumps(milestones),
            EMPTY,
            why,
            0.0,
            max_score,
            0,
            0.0,
            None,
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            None,
            fingerprint,
            time_from,
        )
        return self._insert(values, [])

    def found_at(self, student: str, time_from: str | None) -> None:
        """Where the student's submission was found now (its ``time_from``), for their latest row: a batch that
        does not grade them again still finds them, maybe in another layout (the course folder given, where
        nbgrader's submitted/ was before), and their time comes from where they are now."""
        if time_from is not None:
            with self.db:
                self.db.execute("UPDATE submissions SET time_from = ? WHERE student = ?", (time_from, student))

    def full_marks(self, milestones: list[str], fingerprint: str) -> float | None:
        """The points at stake on ``milestones``, as this grading code graded the class: each milestone's most
        common total over the students' latest attempts (counted checks). None where one was never graded."""
        totals: dict[str, Counter] = {}
        for milestone, points in self.db.execute(
            "SELECT c.milestone, SUM(c.max_score) FROM checks c JOIN submissions s ON c.student = s.student "
            "AND c.attempt = s.attempt WHERE s.grader_hash = ? AND s.status = 'graded' AND c.counted "
            "GROUP BY c.student, c.milestone",
            (fingerprint,),
        ):
            totals.setdefault(milestone, Counter())[round(points, 6)] += 1
        if not all(m in totals for m in milestones):
            return None
        return round(sum(totals[m].most_common(1)[0][0] for m in milestones), 2)

    def _insert(self, values: tuple, checks: list[tuple]) -> int:
        """A submission's row (``COLUMNS``' values) and its checks (``CHECK_COLUMNS``'), as the latest attempt."""
        marks = ", ".join("?" * len(COLUMNS))
        with self.db:
            attempt = self.db.execute(f"INSERT INTO attempts ({', '.join(COLUMNS)}) VALUES ({marks})", values).lastrowid
            assert attempt is not None  # an INSERT always sets it
            self.db.execute(
                f"INSERT OR REPLACE INTO submissions ({', '.join(COLUMNS)}, attempt) VALUES ({marks}, ?)",
                (*values, attempt),
            )
            self.db.executemany(
                f"INSERT INTO checks ({', '.join(CHECK_COLUMNS)}, attempt) VALUES "
                f"({', '.join('?' * (len(CHECK_COLUMNS) + 1))})",
                [(*c, attempt) for c in checks],
            )
        return attempt

    def rows(self) -> list[dict]:
        cursor = self.db.execute("SELECT * FROM submissions ORDER BY student")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def checks(self) -> list[dict]:
        """The checks of each student's latest attempt."""
        cursor = self.db.execute(
            "SELECT checks.* FROM checks JOIN submissions ON checks.student = "
            "submissions.student AND checks.attempt = submissions.attempt "
            "ORDER BY checks.student, checks.rowid"
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def attempts(self, student: str | None = None) -> list[dict]:
        """Every grading run kept (of one student, or of all), oldest first; ``id`` numbers them."""
        cursor = self.db.execute(
            "SELECT * FROM attempts" + (" WHERE student = ?" if student else "") + " ORDER BY student, id",
            (student,) if student else (),
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    # --- Regrade requests (grader/batch/regrades.py) ------------------------------------------------------------

    def milestone_score(self, attempt: int, milestone: str) -> tuple[float, float] | None:
        """(score, max_score) of ``milestone`` in ``attempt``, over its counted checks; None where it has none."""
        score, max_score = self.db.execute(
            "SELECT SUM(score), SUM(max_score) FROM checks WHERE attempt = ? AND milestone = ? AND counted",
            (attempt, milestone),
        ).fetchone()
        return None if max_score is None else (round(score, 2), round(max_score, 2))

    def record_answer(self, request: dict) -> int:
        """Keep an answered regrade request: ``request``'s values of REQUEST_COLUMNS (a missing one NULL)."""
        columns = REQUEST_COLUMNS
        with self.db:
            cursor = self.db.execute(
                f"INSERT INTO regrade_requests ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [request.get(c) for c in columns],
            )
        return int(cursor.lastrowid or 0)

    def answers(self) -> list[dict]:
        """The answered regrade requests, oldest first."""
        cursor = self.db.execute("SELECT * FROM regrade_requests ORDER BY id")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def latest(self, student: str) -> dict | None:
        """The student's latest row (``submissions``), or None."""
        row = self._latest(student)
        return None if row is None else dict(row)
