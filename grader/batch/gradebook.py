"""The SQLite gradebook: every grading of every submission kept, each written in one transaction.

``attempts`` holds one row per grading run of a student (its time in graded_at), ``checks`` each attempt's checks
(by ``attempt``), and ``submissions`` each student's latest attempt: the one exported and reported.

A batch killed at any moment (even ``kill -9``) leaves every committed submission
whole and nothing half-written: SQLite's journal rolls back an unfinished
transaction on the next open.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    student TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL, grader_version TEXT NOT NULL,
    milestones TEXT NOT NULL, status TEXT NOT NULL, error TEXT, score REAL, max_score REAL,
    n_checks INTEGER NOT NULL, seconds REAL, protections TEXT, graded_at TEXT NOT NULL, worker_cpu REAL,
    grader_hash TEXT, attempt INTEGER);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, source TEXT NOT NULL, hash TEXT NOT NULL,
    grader_version TEXT NOT NULL, milestones TEXT NOT NULL, status TEXT NOT NULL, error TEXT, score REAL,
    max_score REAL, n_checks INTEGER NOT NULL, seconds REAL, protections TEXT, graded_at TEXT NOT NULL,
    worker_cpu REAL, grader_hash TEXT);
CREATE INDEX IF NOT EXISTS attempts_by_student ON attempts (student);
CREATE TABLE IF NOT EXISTS checks (
    student TEXT NOT NULL, milestone TEXT NOT NULL, name TEXT NOT NULL, score REAL NOT NULL,
    max_score REAL NOT NULL, passed INTEGER NOT NULL, message TEXT NOT NULL, seconds REAL,
    internal_error INTEGER NOT NULL DEFAULT 0, attempt INTEGER, counted INTEGER NOT NULL DEFAULT 1, case_id TEXT);
CREATE INDEX IF NOT EXISTS checks_by_student ON checks (student);
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
)


class Gradebook:
    def __init__(self, path: Path):
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        for table, column, kind in ADDED:
            if column not in {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        self._number_old_results()
        self.db.execute("CREATE INDEX IF NOT EXISTS checks_by_attempt ON checks (attempt)")

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
        """Graded already, from these very files, by this grading code (its fingerprint), on these milestones."""
        row = self.db.execute(
            "SELECT hash, grader_hash, milestones, status FROM submissions WHERE student = ?", (student,)
        ).fetchone()
        return row is not None and row[:3] == (digest, fingerprint, json.dumps(milestones)) and row[3] == "graded"

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
    ) -> int:
        """Add this result as the student's latest attempt, all in one transaction; returns the attempt's id.

        The student's earlier attempts and their checks stay (``attempts``); ``submissions`` points at this one.
        ``version``: the package's version; ``fingerprint``: the grading code's (grader.fingerprint).
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
            )
            for m in (report or {}).get("milestones", [])
            for c in m["checks"]
        ]
        values = (
            student,
            source,
            digest,
            version,
            json.dumps(milestones),
            "error" if error else "graded",
            error,
            report and report["score"],
            report and report["max_score"],
            len(checks),
            report and report["seconds"],
            report and json.dumps(report["protections"]),
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            report and report.get("worker_cpu_seconds"),
            fingerprint,
        )
        marks = ", ".join("?" * len(COLUMNS))
        with self.db:
            attempt = self.db.execute(f"INSERT INTO attempts ({', '.join(COLUMNS)}) VALUES ({marks})", values).lastrowid
            assert attempt is not None  # an INSERT always sets it
            self.db.execute(
                f"INSERT OR REPLACE INTO submissions ({', '.join(COLUMNS)}, attempt) VALUES ({marks}, ?)",
                (*values, attempt),
            )
            self.db.executemany(
                "INSERT INTO checks (student, milestone, name, score, max_score, passed, message, seconds, "
                "internal_error, counted, case_id, attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
