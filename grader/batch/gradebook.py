"""The SQLite gradebook: one row per submission and one per check, each submission written in one transaction.

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
    grader_hash TEXT);
CREATE TABLE IF NOT EXISTS checks (
    student TEXT NOT NULL, milestone TEXT NOT NULL, name TEXT NOT NULL, score REAL NOT NULL,
    max_score REAL NOT NULL, passed INTEGER NOT NULL, message TEXT NOT NULL, seconds REAL,
    internal_error INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS checks_by_student ON checks (student);
"""
# Columns that later versions added, each appended to an older gradebook's table as it opens. An older row's
# grader_hash stays NULL: it matches no grader, so the next batch regrades it.
ADDED = (("submissions", "worker_cpu", "REAL"), ("submissions", "grader_hash", "TEXT"),
         ("checks", "internal_error", "INTEGER NOT NULL DEFAULT 0"))


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

    def close(self) -> None:
        self.db.close()

    def is_current(self, student: str, digest: str, fingerprint: str, milestones: list[str]) -> bool:
        """Graded already, from these very files, by this grading code (its fingerprint), on these milestones."""
        row = self.db.execute("SELECT hash, grader_hash, milestones, status FROM submissions WHERE student = ?",
                              (student,)).fetchone()
        return row is not None and row[:3] == (digest, fingerprint, json.dumps(milestones)) and row[3] == "graded"

    def record(self, student: str, source: str, digest: str, version: str, milestones: list[str],
               report: dict | None, error: str | None = None, *, fingerprint: str) -> None:
        """Replace the student's rows with this result, all in one transaction.

        ``version``: the package's version; ``fingerprint``: the grading code's (grader.fingerprint).
        """
        checks = [(student, m["id"], c["name"], c["score"], c["max_score"], int(c["passed"]), c["message"],
                   c.get("seconds"), int(bool(c.get("internal_error"))))
                  for m in (report or {}).get("milestones", []) for c in m["checks"]]
        with self.db:
            self.db.execute("DELETE FROM checks WHERE student = ?", (student,))
            self.db.execute(
                "INSERT OR REPLACE INTO submissions (student, source, hash, grader_version, milestones, status, "
                "error, score, max_score, n_checks, seconds, protections, graded_at, worker_cpu, grader_hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (
                    student, source, digest, version, json.dumps(milestones), "error" if error else "graded", error,
                    report and report["score"], report and report["max_score"], len(checks),
                    report and report["seconds"], report and json.dumps(report["protections"]),
                    time.strftime("%Y-%m-%dT%H:%M:%S"), report and report.get("worker_cpu_seconds"), fingerprint))
            self.db.executemany(
                "INSERT INTO checks (student, milestone, name, score, max_score, passed, message, seconds, "
                "internal_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", checks)

    def rows(self) -> list[dict]:
        cursor = self.db.execute("SELECT * FROM submissions ORDER BY student")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def checks(self) -> list[dict]:
        cursor = self.db.execute("SELECT * FROM checks ORDER BY student, rowid")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]
