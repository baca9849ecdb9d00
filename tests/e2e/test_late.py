"""Due dates and the late policy (grader/deadlines.py): a late notebook in nbgrader's submitted layout and a late
Gradescope submission lose the stated penalty, an extension removes it, an unknown time costs nothing and says so."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader import deadlines
from helpers import SOLUTIONS, autograder_here, batch_here, cli

DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
POLICY = """\
due = "2026-12-01T23:59:00+00:00"
[late]
per = "day"
penalty = 10
cap = 25
grace_minutes = 15
[extensions]
bob = 72                                  # hours
"dan@example.edu" = "2026-12-10T00:00:00Z"
"""


@pytest.fixture
def policy_file(tmp_path) -> Path:
    path = tmp_path / "late.toml"
    path.write_text(POLICY)
    return path


# ---------------------------------------------------------------- the policy itself


def test_the_policy_counts_started_days_caps_and_forgives_the_grace(policy_file):
    policy = deadlines.load(policy_file)
    assert policy.judge("alice", DUE - timedelta(hours=1)).percent == 0
    in_grace = policy.judge("alice", DUE + timedelta(minutes=10))
    assert in_grace.percent == 0 and "within the grace period" in in_grace.note
    one_day = policy.judge("alice", DUE + timedelta(hours=20))
    assert one_day.percent == 10 and "1 day x 10% = 10% off" in one_day.note and one_day.apply(50) == 45
    two_days = policy.judge("alice", DUE + timedelta(hours=30))
    assert two_days.percent == 20
    assert policy.judge("alice", DUE + timedelta(days=9)).percent == 25  # the cap
    assert policy.judge("bob", DUE + timedelta(hours=30)).percent == 0  # 72 hours more
    assert "with an extension" in policy.judge("bob", DUE + timedelta(hours=30)).note
    unknown = policy.judge("alice", None)
    assert unknown.percent == 0 and unknown.note == deadlines.UNKNOWN and unknown.apply(50) == 50


def test_per_hour_and_a_platforms_due_date(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[late]\nper = "hour"\npenalty = 2\n')
    policy = deadlines.load(path)
    assert policy.judge("x", DUE + timedelta(minutes=90), due=DUE).percent == 4  # two started hours
    no_due = policy.judge("x", DUE)
    assert no_due.percent == 0 and "no due date" in no_due.note


@pytest.mark.parametrize(
    "text,says",
    [
        ('due = "tomorrow"', "is not a time"),
        ('[late]\nper = "week"', "late.per"),
        ("[late]\npenalty = -1", "late.penalty"),
        ("deadline = 1", "unknown key"),
    ],
)
def test_a_policy_mistake_names_the_key(tmp_path, text, says):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(deadlines.PolicyError, match=says):
        deadlines.load(path)


# ---------------------------------------------------------------- nbgrader's submitted layout, through grade batch


def notebook(path: Path, *modules: str) -> Path:
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "source": (SOLUTIONS / f"{m}.py").read_text(),
            "outputs": [],
            "execution_count": None,
        }
        for m in modules
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


@pytest.mark.slow
def test_nbgrader_late_notebook_extension_and_unknown_time(tmp_path, policy_file):
    """submitted/STUDENT/hw1/: alice's timestamp.txt is 30 h late (2 started days: 20%), bob's the same with 72 h
    more (none), carol's folder has no timestamp.txt (none, said so)."""
    course = tmp_path / "course"
    for student in ("alice", "bob", "carol"):
        notebook(course / "submitted" / student / "hw1" / "tinygpt.ipynb", "m1_attention")
    late = (DUE + timedelta(hours=30)).strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"  # nbgrader's own format
    for student in ("alice", "bob"):
        (course / "submitted" / student / "hw1" / "timestamp.txt").write_text(late)
    db = tmp_path / "grades.sqlite"
    proc = batch_here(str(course), "--workers", "2", "-m", "m1", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "grades.csv"
    proc = cli(
        "export", str(db), "--csv", str(out), "--gradescope", str(tmp_path / "gs"), "--late-policy", str(policy_file)
    )
    assert proc.returncode == 0, proc.stderr
    table = {r["student"]: r for r in csv.DictReader(out.open())}
    alice, bob, carol = table["alice"], table["bob"], table["carol"]
    assert float(alice["score"]) > 0 and alice["late_penalty_percent"] == "20", alice
    assert float(alice["score_after_penalty"]) == pytest.approx(float(alice["score"]) * 0.8, abs=0.01)
    assert alice["submitted_at"].startswith("2026-12-03T05:59") and "2 days x 10% = 20% off" in alice["late_note"]
    assert bob["late_penalty_percent"] == "0" and "on time (with an extension)" == bob["late_note"], bob
    assert bob["score_after_penalty"] == bob["score"]
    assert carol["late_penalty_percent"] == "0" and carol["submitted_at"] == "", carol
    assert carol["late_note"] == deadlines.UNKNOWN and carol["score_after_penalty"] == carol["score"]
    results = json.loads((tmp_path / "gs" / "alice" / "results.json").read_text())
    assert results["score"] == pytest.approx(float(alice["score_after_penalty"])) and "20% off" in results["output"]
    assert deadlines.UNKNOWN in json.loads((tmp_path / "gs" / "carol" / "results.json").read_text())["output"]

    proc = cli("report", str(db), "--late-policy", str(policy_file))
    assert proc.returncode == 0, proc.stderr
    assert "late policy: 1 of 3 submissions penalised" in proc.stdout, proc.stdout
    assert "  alice: " in proc.stdout and "submission time unknown, no penalty applied: carol" in proc.stdout

    # nbgrader copies a student's files with the dates they had: --times-from-mtime reads none of them
    os.utime(course / "submitted" / "carol" / "hw1" / "tinygpt.ipynb", (0, (DUE + timedelta(days=5)).timestamp()))
    proc = cli("export", str(db), "--csv", str(out), "--late-policy", str(policy_file), "--times-from-mtime")
    assert proc.returncode == 0, proc.stderr
    carol = {r["student"]: r for r in csv.DictReader(out.open())}["carol"]
    assert carol["late_penalty_percent"] == "0" and "nbgrader copies a student's files" in carol["time_from"], carol


# ---------------------------------------------------------------- Gradescope's submission metadata


def metadata(created: datetime | None, due: datetime, email: str, own_due: datetime | None = None) -> dict:
    user: dict = {"email": email, "name": email.split("@")[0], "sid": "1"}
    if own_due is not None:
        user["assignment"] = {"due_date": own_due.isoformat()}
    data: dict = {"assignment": {"due_date": due.isoformat(), "title": "hw1"}, "users": [user], "id": 1}
    if created is not None:
        data["created_at"] = created.isoformat()
    return data


@pytest.mark.slow
def test_gradescope_late_submission_extension_and_unknown_time(tmp_path, policy_file):
    """The zip built with --late-policy: created_at 30 h past the metadata's due date costs 20%; Gradescope's own
    extension for the submitter, or one in the policy by email, removes it; no created_at costs nothing."""
    root = tmp_path / "autograder"
    proc = cli("gradescope", str(tmp_path / "a.zip"), "--late-policy", str(policy_file))
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert "late-policy.toml" in zf.namelist()
        zf.extractall(root / "source")
    (root / "submission").mkdir(parents=True)
    shutil.copy(SOLUTIONS / "m1_attention.py", root / "submission")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADE_PYTHON": sys.executable}
    gs_due = DUE + timedelta(days=1)  # Gradescope's due date is the one that counts

    def run(meta: dict | None, script: bool = False) -> dict:
        """run_autograder's results for ``meta``: the script itself (``script``), else its step in this process
        (helpers.autograder_here), which reads the policy and the metadata the script names."""
        shutil.rmtree(root / "results", ignore_errors=True)
        (root / "submission_metadata.json").unlink(missing_ok=True)
        if meta is not None:
            (root / "submission_metadata.json").write_text(json.dumps(meta))
        if not script:
            return autograder_here(root)
        subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, timeout=600)
        return json.loads((root / "results" / "results.json").read_text())

    # the script passes the zip's policy and Gradescope's metadata on; the other cases are the policy's own
    late = run(metadata(gs_due + timedelta(hours=30), gs_due, "eve@example.edu"), script=True)
    full = sum(t["score"] for t in late["tests"])
    assert full > 0 and late["score"] == pytest.approx(round(full * 0.8, 2)), late["output"]
    assert "Late policy: " in late["output"] and "20% off the score" in late["output"]
    extended = run(
        metadata(gs_due + timedelta(hours=30), gs_due, "eve@example.edu", own_due=gs_due + timedelta(days=3))
    )
    assert extended["score"] == pytest.approx(full) and "on time" in extended["output"], extended["output"]
    by_policy = run(metadata(gs_due + timedelta(hours=30), gs_due, "dan@example.edu"))
    assert by_policy["score"] == pytest.approx(full) and "with an extension" in by_policy["output"]
    unknown = run(None)
    assert unknown["score"] == pytest.approx(full) and deadlines.UNKNOWN in unknown["output"], unknown["output"]


def test_a_students_own_timestamp_a_link_or_a_huge_stamp_is_no_time(tmp_path):
    """timestamp.txt is nbgrader's only where nbgrader writes it: one in a folder of the student's is not read
    before it, and a link or an oversized stamp gives no time rather than a time or a crash."""
    from grader.deadlines import nbgrader_time

    assignment = tmp_path / "submitted" / "ada" / "ps1"
    inner = assignment / "work"
    inner.mkdir(parents=True)
    (assignment / "timestamp.txt").write_text("2026-12-02 10:00:00 UTC")
    (inner / "timestamp.txt").write_text("2020-01-01 00:00:00 UTC")  # the student's claim
    when, name = nbgrader_time(inner)
    assert name == "ps1" and when is not None and when.year == 2026, (when, name)
    (assignment / "timestamp.txt").unlink()
    (assignment / "timestamp.txt").symlink_to(inner / "timestamp.txt")
    assert nbgrader_time(assignment) == (None, "ps1")
    (assignment / "timestamp.txt").unlink()
    (assignment / "timestamp.txt").write_text("2026-12-02 10:00:00 UTC\n" + "#" * 10_000)
    assert nbgrader_time(assignment) == (None, "ps1")


def test_the_newest_mtime_of_a_tree_too_deep_is_unknown_not_a_crash(tmp_path):
    from grader.deadlines import newest_mtime
    from grader.nofollow import MAX_DEPTH

    deep = tmp_path / "sub"
    folder = deep
    for _ in range(MAX_DEPTH + 2):
        folder = folder / "d"
    folder.mkdir(parents=True)
    (folder / "m1_attention.py").write_text("x = 1\n")
    assert newest_mtime(deep) is None
    shallow = tmp_path / "ok"
    shallow.mkdir()
    (shallow / "m1_attention.py").write_text("x = 1\n")
    assert newest_mtime(shallow) is not None
