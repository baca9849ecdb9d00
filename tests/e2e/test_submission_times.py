"""Where a submission's time comes from (grader/deadlines.py), tried as a student who wants a late submission to
show on time: only from what the platform wrote, never from a file or a date inside the student's own upload.

* a timestamp.txt of the student's own, in every place a batch could find one: their folder in a plain batch,
  beside their notebook, in a folder inside theirs, in an imitation of nbgrader's layout inside theirs, behind a
  link, inside their zip, in a folder inside an nbgrader assignment's (with nbgrader's stamp above it, and
  without), and in nbgrader's submitted/ folder given to `grade batch` itself: never read;
* `--times-from-mtime`: a student's folder whose files carry the dates their archive gave them (as an unzip
  restores them) is no time; a zip or notebook in the batch folder is dated as the instructor's copy has it
  (never its members' dates);
* Gradescope: a submission_metadata.json inside the upload is not Gradescope's, and Gradescope's own is read
  before the student's code runs (a submission that rewrote it while it was graded changes nothing);
* every export and report says where each time came from, and why an unknown one is unknown.
"""

from __future__ import annotations

import csv
import json
import os
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader import deadlines
from grader.batch.gradebook import Gradebook
from helpers import REPO, batch_here, command_here, stand_ins

DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
POLICY = 'due = "2026-12-01T23:59:00+00:00"\n[late]\nper = "day"\npenalty = 10\ncap = 50\n'
EARLY = "2026-11-20 09:00:00.000000 UTC"  # what a student would write into a timestamp.txt of their own
LATE = (DUE + timedelta(hours=30)).strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"  # nbgrader's format: 2 days, 20%
STUB = (REPO / "exercises" / "m1_attention.py").read_text()
OLD_DATE = datetime(2020, 1, 1, tzinfo=timezone.utc).timestamp()  # the date a student's archive gives its files


def put(path: Path, text: str = STUB) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def notebook(path: Path) -> Path:
    cell = {"cell_type": "code", "metadata": {}, "source": STUB, "outputs": [], "execution_count": None}
    return put(path, json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}))


def dated(path: Path, when: float) -> Path:
    os.utime(path, (when, when))
    return path


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    return put(tmp_path_factory.mktemp("policy") / "late.toml", POLICY)


def graded(root: Path, db: Path) -> str:
    """`grade batch ROOT -m m1` into ``db``; its stderr (the summary and notes)."""
    proc = batch_here(str(root), "--workers", "1", "-m", "m1", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def exported(db: Path, policy: Path, *options: str) -> dict[str, dict]:
    out = db.with_suffix(".csv")
    proc = command_here("export", str(db), "--csv", str(out), "--late-policy", str(policy), *options, patches={})
    assert proc.returncode == 0, proc.stderr
    return {r["student"]: r for r in csv.DictReader(out.open())}


def unknown(row: dict) -> None:
    assert row["submitted_at"] == "" and row["late_note"] == deadlines.UNKNOWN, row
    assert row["late_penalty_percent"] == "0" and row["score_after_penalty"] == row["score"], row
    assert row["time_from"].startswith("unknown: "), row


# ---------------------------------------------------------------- a plain batch folder: the students' own files


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[Path, str]:
    """A class of student folders, each trying its own timestamp.txt (or its own dates), graded once."""
    root = tmp_path_factory.mktemp("plain") / "klass"
    put(root / "alice" / "m1_attention.py")
    put(root / "alice" / "timestamp.txt", EARLY)  # beside the files
    notebook(root / "bob" / "tinygpt.ipynb")
    put(root / "bob" / "timestamp.txt", EARLY)  # beside the notebook
    put(root / "carol" / "work" / "deeper" / "m1_attention.py")
    put(root / "carol" / "work" / "timestamp.txt", EARLY)  # in a folder above the one graded, inside hers
    put(root / "dan" / "submitted" / "dan" / "hw1" / "m1_attention.py")
    put(root / "dan" / "submitted" / "dan" / "hw1" / "timestamp.txt", EARLY)  # nbgrader's layout, imitated
    put(root / "erin" / "m1_attention.py")
    (root / "erin" / "timestamp.txt").symlink_to(put(root.parent / "elsewhere" / "stamp.txt", EARLY))
    for name in ("m1_attention.py", "notes.md"):  # unzipped from her own archive: the dates she chose
        dated(put(root / "fay" / name), OLD_DATE)
    dated(root / "fay", OLD_DATE)
    with zipfile.ZipFile(root / "gus.zip", "w") as zf:  # his archive's members carry his dates; the zip is late
        zf.writestr(zipfile.ZipInfo("m1_attention.py", date_time=(2020, 1, 1, 0, 0, 0)), STUB)
        zf.writestr(zipfile.ZipInfo("timestamp.txt", date_time=(2020, 1, 1, 0, 0, 0)), EARLY)
    dated(root / "gus.zip", (DUE + timedelta(hours=30)).timestamp())
    dated(notebook(root / "hal.ipynb"), (DUE + timedelta(hours=30)).timestamp())
    db = root.parent / "grades.sqlite"
    return db, graded(root, db)


@pytest.mark.slow  # a class graded (the stub of m1: its checks fail at once)
def test_a_students_own_timestamp_is_never_their_time(plain, policy):
    """Before, each of these timestamp.txt files was read as nbgrader's: the late submissions showed on time."""
    db, said = plain
    table = exported(db, policy)
    for student in ("alice", "bob", "carol", "dan", "erin", "fay", "gus", "hal"):
        unknown(table[student])
        assert "a batch folder has no platform time" in table[student]["time_from"], table[student]
    assert "timestamp.txt (alice, bob, carol, dan, erin): never read" in said, said


@pytest.mark.slow  # a class graded (the stub of m1: its checks fail at once)
def test_times_from_mtime_reads_a_zips_or_notebooks_own_date_never_a_folders(plain, policy):
    """fay's files carry the date her archive gave them (an unzip keeps it): before, that date was her time. A zip
    or notebook in the batch folder is dated as the instructor's copy has it, never by the zip's members."""
    db, _ = plain
    table = exported(db, policy, "--times-from-mtime")
    for student in ("alice", "bob", "carol", "dan", "erin", "fay"):
        unknown(table[student])
        assert "may be the student's own" in table[student]["time_from"], table[student]
    for student in ("gus", "hal"):
        row = table[student]
        assert row["late_penalty_percent"] == "20" and row["submitted_at"].startswith("2026-12-03T05:59"), row
        assert row["time_from"] == deadlines.FROM_MTIME, row


# ---------------------------------------------------------------- nbgrader's layout: its stamp, and only its


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("nbgrader") / "course"
    submitted = root / "submitted"
    put(submitted / "ann" / "hw1" / "timestamp.txt", LATE)  # nbgrader's
    put(submitted / "ann" / "hw1" / "work" / "deeper" / "m1_attention.py")
    put(submitted / "ann" / "hw1" / "work" / "timestamp.txt", EARLY)  # hers, nearer to her files
    put(submitted / "ben" / "hw1" / "work" / "m1_attention.py")  # no stamp of nbgrader's
    put(submitted / "ben" / "hw1" / "work" / "timestamp.txt", EARLY)
    notebook(submitted / "cat" / "hw1" / "tinygpt.ipynb")
    put(submitted / "cat" / "hw1" / "timestamp.txt", "2026-12-03 14:59:00.000000+09:00")  # 05:59 UTC: 20%
    put(submitted / "dee" / "hw1" / "m1_attention.py")
    (submitted / "dee" / "hw1" / "timestamp.txt").symlink_to(put(submitted / "dee" / "hw1" / "mine.txt", EARLY))
    db = root / "grades.sqlite"
    graded(root, db)
    return root, db


@pytest.mark.slow  # a class graded (the stub of m1: its checks fail at once)
def test_nbgrader_stamp_only_in_the_assignments_folder(course, policy):
    """ann's own stamp in a folder inside her assignment was read before nbgrader's above it; ben's, where
    nbgrader's was missing. Now only nbgrader's counts, in any time zone; a link in its place is no time."""
    _, db = course
    table = exported(db, policy)
    for student in ("ann", "cat"):
        row = table[student]
        assert row["late_penalty_percent"] == "20", row
        assert datetime.fromisoformat(row["submitted_at"]) == DUE + timedelta(hours=30), row
        assert row["time_from"] == "nbgrader's timestamp.txt", row
    unknown(table["ben"])
    assert "unknown: no nbgrader's timestamp.txt in " in table["ben"]["time_from"], table["ben"]
    unknown(table["dee"])
    assert "is not nbgrader's stamp" in table["dee"]["time_from"] and "symbolic link" in table["dee"]["time_from"]
    # nbgrader copies a student's files with their own dates: no time from them either
    dated(course[0] / "submitted" / "ben" / "hw1" / "work" / "m1_attention.py", OLD_DATE)
    row = exported(db, policy, "--times-from-mtime")["ben"]
    unknown(row)
    assert "nbgrader copies a student's files with the dates they had" in row["time_from"], row


@pytest.mark.slow  # a class graded (the stub of m1: its checks fail at once)
def test_the_report_says_where_each_time_came_from(course, policy):
    _, db = course
    proc = command_here("report", str(db), "--late-policy", str(policy), patches={})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "late policy: 2 of 4 submissions penalised" in out, out
    assert "  times from: nbgrader's timestamp.txt (2)" in out, out
    assert "  submission time unknown, no penalty applied: ben, dee" in out, out
    assert "    ben: no nbgrader's timestamp.txt in " in out and "    dee: " in out, out


@pytest.mark.slow  # a class graded (the stub of m1: its checks fail at once)
def test_nbgrader_submitted_folder_given_itself_gives_no_time_and_says_why(tmp_path, policy):
    """Given submitted/ itself, a batch reads student folders, where a timestamp.txt is the student's: before,
    one in STUDENT/ (above the assignment's) was read first. The batch says which folder to give instead."""
    submitted = tmp_path / "course" / "submitted"
    put(submitted / "ann" / "hw1" / "m1_attention.py")
    put(submitted / "ann" / "hw1" / "timestamp.txt", LATE)
    put(submitted / "ann" / "timestamp.txt", EARLY)
    db = tmp_path / "grades.sqlite"
    said = graded(submitted, db)
    assert f"give the course folder that holds it (grade batch {submitted.parent})" in said, said
    unknown(exported(db, policy)["ann"])
    # given the course folder, nbgrader's stamp counts (the student is found there, and is current: not regraded)
    said = graded(submitted.parent, db)
    assert "give the course folder" not in said, said
    row = exported(db, policy)["ann"]
    assert row["late_penalty_percent"] == "20" and row["time_from"] == "nbgrader's timestamp.txt", row


def test_a_gradebook_that_does_not_say_where_a_submission_was_found_gives_no_time(tmp_path, policy):
    """An older gradebook's rows: their time is unknown, and the export says to run the batch again."""
    folder = put(tmp_path / "klass" / "ann" / "m1_attention.py").parent
    put(folder / "timestamp.txt", LATE)
    db = tmp_path / "grades.sqlite"
    book = Gradebook(db)
    report = {"milestones": [], "score": 0.0, "max_score": 1.0, "seconds": 0.1, "protections": []}
    book.record("ann", str(folder), "abc", "0.2.0", ["m1"], report, fingerprint="f" * 16)
    book.close()
    row = exported(db, policy)["ann"]
    unknown(row)
    assert row["time_from"] == deadlines.NOT_RECORDED, row


# ---------------------------------------------------------------- Gradescope: its metadata, read first


def gradescope_run(tmp_path: Path, created: datetime, upload: dict[str, str], during=None) -> dict:
    """run_autograder's step (python -m grader.bundles.gradescope) with a late policy and Gradescope's metadata,
    its grading stood in for by ``during`` (what a submission's code could do while it is graded), fast."""
    from grader.bundles import gradescope

    root = tmp_path / "autograder"
    for name, text in upload.items():
        put(root / "submission" / name, text)
    meta = {"created_at": created.isoformat(), "assignment": {"due_date": DUE.isoformat()}, "users": []}
    put(root / "submission_metadata.json", json.dumps(meta))
    policy = put(root / "source" / "late-policy.toml", POLICY)
    results = root / "results" / "results.json"

    def graded_here(*_args, **_kwargs):
        if during:
            during(root)
        return {"score": 10.0, "tests": [], "output": ""}, 0

    with stand_ins({"grader.bundles.gradescope.results": graded_here}):
        gradescope.main(
            [str(root / "submission"), str(results), "--late-policy", str(policy)]
            + ["--metadata", str(root / "submission_metadata.json")]
        )
    return json.loads(results.read_text())


def test_a_metadata_file_in_the_upload_is_not_gradescopes(tmp_path):
    forged = json.dumps({"created_at": "2026-11-20T09:00:00+00:00", "assignment": {"due_date": "2027-01-01"}})
    out = gradescope_run(
        tmp_path, DUE + timedelta(hours=30), {"submission_metadata.json": forged, "m1_attention.py": STUB}
    )
    assert out["score"] == 8.0 and "20% off the score" in out["output"], out
    assert f"Submission time: {deadlines.FROM_GRADESCOPE}." in out["output"], out


def test_gradescopes_metadata_is_read_before_the_students_code_runs(tmp_path):
    """A submission that reached Gradescope's file while it was graded (where a sandbox is weaker than this
    machine's) and wrote an early time into it: before, the file was read after grading, and the time was its."""

    def rewrite(root: Path) -> None:
        meta = {"created_at": "2026-11-20T09:00:00+00:00", "assignment": {"due_date": "2027-01-01T00:00:00Z"}}
        (root / "submission_metadata.json").write_text(json.dumps(meta))

    out = gradescope_run(tmp_path, DUE + timedelta(hours=30), {"m1_attention.py": STUB}, during=rewrite)
    assert out["score"] == 8.0 and "20% off the score" in out["output"], out


# ---------------------------------------------------------------- the readers themselves


def test_an_nbgrader_stamp_is_read_as_nbgrader_writes_it_or_not_at_all(tmp_path):
    assignment = tmp_path / "submitted" / "ann" / "hw1"
    stamp = put(assignment / "timestamp.txt", "2026-12-02 10:11:12.123456 UTC")
    assert deadlines.stamp_time(assignment).when == datetime(2026, 12, 2, 10, 11, 12, 123456, tzinfo=timezone.utc)
    stamp.write_text("2026-12-02T10:11:12")  # no zone: UTC
    assert deadlines.stamp_time(assignment).when == datetime(2026, 12, 2, 10, 11, 12, tzinfo=timezone.utc)
    stamp.write_text("2026-12-02 10:11:12.123456 CET")  # a zone by name (nbgrader's %Z): not guessed
    found = deadlines.stamp_time(assignment)
    assert found.when is None and "does not read as a time" in found.source, found
    stamp.write_text("2026-12-02 10:11:12 UTC\n" + "#" * 5000)
    assert "larger than 4 KB" in deadlines.stamp_time(assignment).source
    stamp.write_bytes(b"\xff\xfe")
    assert "not UTF-8 text" in deadlines.stamp_time(assignment).source
    stamp.unlink()
    os.mkfifo(stamp)  # a FIFO would hang an open() that waits for a writer
    assert "not a regular file" in deadlines.stamp_time(assignment).source


def test_nbgrader_time_reads_only_the_assignments_folder(tmp_path):
    """From a folder the student made inside the assignment's, the stamp read is the assignment's, never one in
    between; a path outside the layout has none."""
    assignment = tmp_path / "submitted" / "ann" / "hw1"
    put(assignment / "timestamp.txt", LATE)
    inner = assignment / "work" / "deeper"
    put(inner / "m1_attention.py")
    put(assignment / "work" / "timestamp.txt", EARLY)
    when, name = deadlines.nbgrader_time(inner)
    assert name == "hw1" and when == DUE + timedelta(hours=30), (when, name)
    put(tmp_path / "klass" / "alice" / "timestamp.txt", EARLY)
    assert deadlines.nbgrader_time(tmp_path / "klass" / "alice") == (None, None)
