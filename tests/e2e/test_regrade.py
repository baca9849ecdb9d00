"""Regrading after the grader changes: the grading code's fingerprint, the gradebook that keys on it, and
`grade report`'s count of what an older grader graded.

The batches fingerprint temp copies of grader/ and solutions/ (GPTKIT_GRADER_ROOT points the fingerprint at
one), a changed suite being a copy with one suite edited: the real files are never edited, and edits to them
while the tests run change nothing here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from grader.batch.gradebook import Gradebook
from grader.fingerprint import PROJECT, ROOT_VARIABLE, fingerprint_of, grader_fingerprint
from helpers import CORE, EXERCISES, REPO, SOLUTIONS, batch_here, cli

SUITE = Path("grader/suites/hidden/test_m1_attention.py")
# The gradebook of grader 0.1.0, before fingerprints and internal errors were stored.
SCHEMA_0_1_0 = """
CREATE TABLE submissions (
    student TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL, grader_version TEXT NOT NULL,
    milestones TEXT NOT NULL, status TEXT NOT NULL, error TEXT, score REAL, max_score REAL,
    n_checks INTEGER NOT NULL, seconds REAL, protections TEXT, graded_at TEXT NOT NULL, worker_cpu REAL);
CREATE TABLE checks (
    student TEXT NOT NULL, milestone TEXT NOT NULL, name TEXT NOT NULL, score REAL NOT NULL,
    max_score REAL NOT NULL, passed INTEGER NOT NULL, message TEXT NOT NULL, seconds REAL);
CREATE INDEX checks_by_student ON checks (student);
"""


def reference(folder: Path) -> Path:
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def rows(db: Path) -> dict[str, dict]:
    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        found = {r["student"]: dict(r) for r in con.execute("SELECT * FROM submissions")}
    con.close()
    return found


def grader_copy(folder: Path) -> Path:
    """grader/ and solutions/ as they are now, in ``folder``, to be changed there."""
    for name in ("grader", "solutions"):
        shutil.copytree(REPO / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def edit(path: Path, extra: str = "\n# a fix to the suite\n") -> str:
    """Append to a file; returns its old text."""
    old = path.read_text()
    path.write_text(old + extra)
    return old


def with_root(root: Path) -> dict[str, str]:
    return {**os.environ, ROOT_VARIABLE: str(root)}


def root_is(root: Path) -> dict[str, str]:
    """The variable of ``with_root`` alone, for a batch run in this process (``batch_here`` sets it for the run)."""
    return {ROOT_VARIABLE: str(root)}


# ---------------------------------------------------------------- the fingerprint


def test_fingerprint_changes_with_the_grading_code_and_nothing_else(tmp_path, monkeypatch):
    assert PROJECT == REPO, "by default, the grader in use is fingerprinted"
    kit = grader_copy(tmp_path / "kit")
    before = fingerprint_of(kit)
    assert re.fullmatch(r"[0-9a-f]{16}", before) and fingerprint_of(kit) == before
    same = shutil.copytree(kit, tmp_path / "elsewhere")
    assert fingerprint_of(same) == before, "the same files elsewhere must give the same fingerprint"

    (kit / "grader" / "suites" / "__pycache__").mkdir(exist_ok=True)
    (kit / "grader" / "suites" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"\0junk")
    (kit / "grader" / "suites" / "notes.txt").write_text("not grading code")
    (kit / "solutions" / "README.md").write_text("not a solution")
    assert fingerprint_of(kit) == before, "caches and other files decide no grade"

    for changed in (
        SUITE,
        Path("grader/suites/pytest.ini"),
        Path("grader/sandbox/worker/request_handler.py"),
        Path("solutions/m1_attention.py"),
    ):
        old = edit(kit / changed)
        assert fingerprint_of(kit) != before, f"{changed} decides grades"
        (kit / changed).write_text(old)
        assert fingerprint_of(kit) == before

    (kit / SUITE).rename(kit / SUITE.with_name("test_m1_renamed.py"))
    assert fingerprint_of(kit) != before, "a renamed suite is another suite"
    (kit / SUITE.with_name("test_m1_renamed.py")).rename(kit / SUITE)
    shutil.rmtree(kit / "solutions")
    assert fingerprint_of(kit) != before, "a student release (no reference) is another grader"

    started = time.perf_counter()
    monkeypatch.setenv(ROOT_VARIABLE, str(kit))
    assert grader_fingerprint() == fingerprint_of(kit)
    assert time.perf_counter() - started < 2, "the fingerprint must be cheap"
    edit(kit / SUITE)
    assert grader_fingerprint() != fingerprint_of(kit), "computed once per process"
    assert grader_fingerprint(same) == fingerprint_of(same)


# ---------------------------------------------------------------- grade batch and grade report


@pytest.mark.slow
def test_batch_regrades_after_a_suite_changes_and_only_then(tmp_path):
    root = tmp_path / "class"
    reference(root / "alice")
    shutil.copytree(EXERCISES, root / "bob")
    db = root / "grades.sqlite"
    quick = (str(root), "--workers", "2", "-m", "m1")
    old = grader_copy(tmp_path / "old")  # the grader now
    new = shutil.copytree(old, tmp_path / "new")  # the grader after a fix to one suite
    edit(new / SUITE)
    assert fingerprint_of(old) != fingerprint_of(new)

    proc = batch_here(*quick, env=root_is(old))
    assert proc.returncode == 0 and "2 graded, 0 already" in proc.stderr, proc.stderr
    first = rows(db)
    assert {r["grader_hash"] for r in first.values()} == {fingerprint_of(old)}, first
    assert first["alice"]["score"] == first["alice"]["max_score"] > 0 and first["bob"]["score"] == 0, first

    proc = batch_here(*quick, env=root_is(old))
    assert "0 graded, 2 already" in proc.stderr and rows(db) == first, proc.stderr
    proc = cli("report", str(db), env=with_root(old))
    assert proc.returncode == 0 and "older grader" not in proc.stdout, proc.stdout

    proc = cli("report", str(db), env=with_root(new))
    assert f"2 of 2 submissions were graded by an older grader: run `grade batch {root} -m m1` again" in proc.stdout, (
        proc.stdout
    )

    proc = batch_here(*quick, env=root_is(new))
    assert proc.returncode == 0 and "2 graded, 0 already" in proc.stderr, proc.stderr
    second = rows(db)
    assert {r["grader_hash"] for r in second.values()} == {fingerprint_of(new)}, second
    assert all(second[s]["graded_at"] >= r["graded_at"] and second[s]["score"] == r["score"] for s, r in first.items())
    proc = batch_here(*quick, env=root_is(new))
    assert "0 graded, 2 already" in proc.stderr and rows(db) == second, proc.stderr
    proc = cli("report", str(db), env=with_root(new))
    assert proc.returncode == 0 and "older grader" not in proc.stdout, proc.stdout


def test_an_old_gradebook_is_migrated_and_counts_as_older(tmp_path):
    db = tmp_path / "grades.sqlite"
    with sqlite3.connect(db) as con:
        con.executescript(SCHEMA_0_1_0)
        for student in ("alice", "bob"):
            con.execute(
                "INSERT INTO submissions VALUES (?, ?, 'abc', '0.1.0', ?, 'graded', NULL, 1, 1, 1, 2.0, "
                "'[]', '2025-01-01T00:00:00', 0.5)",
                (student, f"/class/{student}", json.dumps(["m1"])),
            )
            con.execute("INSERT INTO checks VALUES (?, 'm1', 'shapes', 1, 1, 1, '', 0.1)", (student,))
    con.close()

    kit = grader_copy(tmp_path / "kit")  # the grader in use, for the rows recorded now
    book = Gradebook(db)
    try:
        current = fingerprint_of(kit)
        assert not book.is_current("alice", "abc", current, ["m1"]), "an old row matches no grader"
        assert [r["grader_hash"] for r in book.rows()] == [None, None]
        assert [c["internal_error"] for c in book.checks()] == [0, 0]
        report = {
            "score": 1,
            "max_score": 2,
            "seconds": 1.0,
            "protections": [],
            "worker_cpu_seconds": 0.2,
            "milestones": [
                {
                    "id": "m1",
                    "checks": [
                        {
                            "name": "shapes",
                            "score": 1,
                            "max_score": 1,
                            "passed": True,
                            "message": "",
                            "seconds": 0.1,
                            "internal_error": False,
                        },
                        {
                            "name": "causal mask",
                            "score": 0,
                            "max_score": 1,
                            "passed": False,
                            "seconds": 0.1,
                            "message": "InternalError: the grader broke\nmore",
                            "internal_error": True,
                        },
                    ],
                }
            ],
        }
        book.record("alice", "/class/alice", "abc", "0.2.0", ["m1"], report, fingerprint=current)
        assert book.is_current("alice", "abc", current, ["m1"])
        assert not book.is_current("alice", "abc", "0" * 16, ["m1"]), "another grader's row is not current"
        assert [(c["name"], c["internal_error"]) for c in book.checks() if c["student"] == "alice"] == [
            ("shapes", 0),
            ("causal mask", 1),
        ]
    finally:
        book.close()

    proc = cli("report", str(db), env=with_root(kit))
    assert proc.returncode == 0, proc.stderr
    assert (
        f"1 of 2 submissions was graded by an older grader: run `grade batch {tmp_path} -m m1` again to "
        "regrade it" in proc.stdout
    ), proc.stdout
    assert "1 check could not be graded (grader errors" in proc.stdout, proc.stdout
    assert "  alice  m1: causal mask: InternalError: the grader broke\n" in proc.stdout, proc.stdout
    assert "m1: causal mask" not in proc.stdout.split("most often failed checks")[1], "not the student's failure"

    proc = cli("export", str(db), "--csv", str(tmp_path / "grades.csv"), env=with_root(kit))
    assert proc.returncode == 0 and "1 of 2 submissions was graded by an older grader" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- grading some milestones again


def milestone_report(**scores: tuple[float, float]) -> dict:
    """A report with one check per milestone: ``m1=(score, max_score)``."""
    return {
        "score": sum(got for got, _ in scores.values()),
        "max_score": sum(top for _, top in scores.values()),
        "seconds": 1.0,
        "protections": [],
        "milestones": [
            {
                "id": m,
                "checks": [{"name": f"{m} check", "score": got, "max_score": top, "passed": got == top, "message": ""}],
            }
            for m, (got, top) in scores.items()
        ],
    }


def test_regrading_some_milestones_keeps_the_others_only_from_the_same_files_and_grader(tmp_path):
    """A student graded again on m4 alone keeps their m1 to m3 results if those came from the same files and the
    same grader: their grade still covers all four. Otherwise those results are stale: the grade covers m4 alone,
    and ``not_kept`` says why, for the batch to tell the teacher."""
    book = Gradebook(tmp_path / "grades.sqlite")
    try:
        everything = milestone_report(m1=(27, 27), m2=(50, 100), m3=(0, 75), m4=(9, 9))
        for student in ("alice", "bob", "carol"):
            book.record(student, f"/class/{student}", "files", "0.2.0", list(CORE), everything, fingerprint="grader")
        assert book.not_kept("alice", "files", "grader", ["m4"]) is None
        assert book.not_kept("bob", "edited", "grader", ["m4"]) == "files"
        assert book.not_kept("carol", "files", "fixed", ["m4"]) == "grader"
        assert book.not_kept("bob", "edited", "grader", list(CORE)) is None, "nothing dropped"

        m4_again = milestone_report(m4=(4.5, 9))
        for student, digest, fingerprint in (
            ("alice", "files", "grader"),
            ("bob", "edited", "grader"),
            ("carol", "files", "fixed"),
        ):
            book.record(
                student,
                f"/class/{student}",
                digest,
                "0.2.0",
                ["m4"],
                m4_again,
                fingerprint=fingerprint,
                keep_others=True,
            )
        latest = {r["student"]: r for r in book.rows()}
        checks = [(c["milestone"], c["score"]) for c in book.checks() if c["student"] == "alice"]
    finally:
        book.close()
    assert (latest["alice"]["score"], latest["alice"]["max_score"], latest["alice"]["n_checks"]) == (81.5, 211, 4)
    assert json.loads(latest["alice"]["milestones"]) == list(CORE)
    assert checks == [("m1", 27), ("m2", 50), ("m3", 0), ("m4", 4.5)], "m4's new result, the others kept, in order"
    for student in ("bob", "carol"):
        assert (latest[student]["score"], latest[student]["max_score"]) == (4.5, 9), "stale results are not kept"
        assert json.loads(latest[student]["milestones"]) == ["m4"]
