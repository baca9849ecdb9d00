"""Regrade requests in a batch (grader/batch/regrades.py): a student's regrade.txt is listed with their
current score; one that is a link, a FIFO, too large or without a milestone is refused with its reason and never
followed (the same text as a regular file is listed: both directions); a declined request is kept with its answer;
a regrade grades the student again through the batch's path and keeps the old and new scores."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.batch.discover import FoundSubmission
from grader.batch.gradebook import Gradebook
from grader.batch.regrades import MOST_BYTES, REQUEST_FILE, parse, printable
from grader.cli import main
from grader.fingerprint import grader_fingerprint
from helpers import SOLUTIONS, cli, m4_report

REASON = "m4\nMy greedy decoding stops at max_new_tokens:\nthe second check ran out of time on a busy machine.\n"


@pytest.fixture
def klass(tmp_path) -> Path:
    """A class folder: alice (the reference, graded 4.5 of 9 on m4, and a request), bob (graded, no request)."""
    root = tmp_path / "class"
    for name in ("alice", "bob"):
        shutil.copytree(SOLUTIONS, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "alice" / REQUEST_FILE).write_text(REASON)
    book = Gradebook(root / "grades.sqlite")
    for name in ("alice", "bob"):
        found = FoundSubmission(name, root / name)
        book.record(
            name, str(found.path), found.digest(), "0", ["m4"], m4_report(4.5), fingerprint=grader_fingerprint()
        )
    book.close()
    return root


def regrades(*args: str):
    return CliRunner().invoke(main, ["regrades", *map(str, args)])


def test_a_request_file_is_listed_with_the_students_current_score(klass):
    listed = regrades("list", klass)
    assert listed.exit_code == 0, listed.output
    assert "1 open regrade request in" in listed.output
    assert "alice  m4  now 4.5 of 9 (in all 4.5 of 9)" in listed.output
    assert "the second check ran out of time on a busy machine." in listed.output
    assert "bob" not in listed.output
    assert f"grade regrades answer {klass} STUDENT --regrade|--decline" in listed.output


def test_nbgraders_layout_reads_the_request_beside_timestamp_txt(tmp_path):
    root = tmp_path / "course"
    folder = root / "submitted" / "carol" / "lesson"
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / REQUEST_FILE).write_text("m2\nthe shapes check is wrong")
    Gradebook(root / "grades.sqlite").close()
    listed = regrades("list", root)
    assert "carol  m2  now not in the gradebook" in listed.output and "the shapes check is wrong" in listed.output


def test_a_linked_request_file_is_refused_and_never_followed(klass, tmp_path):
    """bob's regrade.txt points at a file outside the class (or at alice's): refused with a clear line, its target's
    text never read. The same text in a regular file of bob's is a request: the refusal is the link's."""
    secret = tmp_path / "secret.txt"
    secret.write_text("m4\nTHE-INSTRUCTORS-SECRET")
    (klass / "bob" / REQUEST_FILE).symlink_to(secret)
    listed = regrades("list", klass)
    assert "bob: regrade.txt is a symbolic link, which the grader does not follow: refused" in listed.output
    assert "THE-INSTRUCTORS-SECRET" not in listed.output and "1 open regrade request" in listed.output
    refused = regrades("answer", klass, "bob", "--decline", "--message", "no")
    assert refused.exit_code == 2 and "symbolic link" in refused.output and "Traceback" not in refused.output
    (klass / "bob" / REQUEST_FILE).unlink()
    shutil.copyfile(secret, klass / "bob" / REQUEST_FILE)
    assert "2 open regrade requests" in regrades("list", klass).output, "a regular file with that text is a request"


def test_a_linked_student_folder_files_no_request(klass):
    """eve's folder is a link to alice's: grading refuses it, and alice's request is not read as eve's."""
    (klass / "eve").symlink_to(klass / "alice")
    listed = regrades("list", klass).output
    assert "eve" not in listed and "1 open regrade request" in listed


def test_an_oversized_request_file_and_a_fifo_are_refused_and_do_not_hang(klass):
    (klass / "bob" / REQUEST_FILE).write_text("m4\n" + "x" * MOST_BYTES)
    big = regrades("list", klass).output
    assert f"bob: regrade.txt is larger than {MOST_BYTES} bytes: refused" in big
    (klass / "bob" / REQUEST_FILE).unlink()
    (klass / "bob" / REQUEST_FILE).write_text("m4\n" + "x" * (MOST_BYTES - 3))
    assert "2 open regrade requests" in regrades("list", klass).output, "at the limit: read"
    (klass / "bob" / REQUEST_FILE).unlink()
    os.mkfifo(klass / "bob" / REQUEST_FILE)  # an open(2) of it would wait for a writer forever
    fifo = regrades("list", klass)
    assert fifo.exit_code == 0 and "bob: regrade.txt is not a regular file: refused" in fifo.output


def test_a_request_file_is_not_part_of_the_submissions_digest(klass):
    """Filing a request does not make the next `grade batch` grade the student again; an edit to their work does."""
    alice = FoundSubmission("alice", klass / "alice")
    before = alice.digest()
    (klass / "alice" / REQUEST_FILE).write_text("m4\nanother reason")
    assert alice.digest() == before
    (klass / "alice" / "m4_generate.py").write_text("# edited\n")
    assert alice.digest() != before


def test_a_request_without_a_milestone_or_a_reason_is_refused_with_why():
    assert parse("x", "please regrade\nit is right").problem.endswith("not 'please regrade'")
    assert "gives no reason" in (parse("x", "m3\n\n  ").problem or "")
    assert parse("x", " m3 \n because\n").reason == "because"


def test_a_reason_cannot_write_escape_sequences_to_the_terminal(klass):
    (klass / "alice" / REQUEST_FILE).write_text("m4\nplease\x1b[2J\x1b]0;owned\x07 regrade")
    listed = regrades("list", klass).output
    assert "\x1b" not in listed and "\x07" not in listed and "please\\x1b[2J" in listed
    assert printable("a\tb\nc\u202ed") == "a\tb\nc\\u202ed"


def test_a_declined_request_is_kept_with_its_answer_and_the_report_lists_it(klass):
    declined = regrades(
        "answer", klass, "alice", "--decline", "--message", "The check's time limit is fair.", "--by", "prof"
    )
    assert declined.exit_code == 0, declined.output
    assert "declined alice's request on m4" in declined.output
    listed = regrades("list", klass, "--all").output
    assert "0 open regrade requests" in listed
    assert "alice  m4  declined by prof: The check's time limit is fair." in listed
    again = regrades("answer", klass, "alice", "--regrade", "--message", "x")
    assert again.exit_code == 2 and "answered already" in again.output
    report = CliRunner().invoke(main, ["report", str(klass / "grades.sqlite")])
    assert "regrade requests: 1 answered" in report.output and "declined by prof" in report.output
    (klass / "alice" / REQUEST_FILE).write_text("m4\nA new reason: the first check too.")
    assert "1 open regrade request" in regrades("list", klass).output, "a new reason is a new request"


def test_a_regrade_of_a_milestone_the_grading_did_not_cover_is_refused(klass):
    (klass / "alice" / REQUEST_FILE).write_text("kvcache\nmy cache is right")
    assert "alice  kvcache  now not graded (in all 4.5 of 9)" in regrades("list", klass).output
    refused = regrades("answer", klass, "alice", "--regrade", "--message", "x")
    assert refused.exit_code == 2 and "latest grading covers m4, not kvcache" in refused.output, refused.output
    assert regrades("answer", klass, "alice", "--decline", "--message", "not graded here").exit_code == 0


@pytest.mark.parametrize(
    "args,says",
    [
        (("bob", "--decline", "--message", "x"), "bob has no regrade.txt in their folder"),
        (("zed", "--decline", "--message", "x"), "'zed' is not a student of"),
        (("alice", "--message", "x"), "--regrade (grade again) or --decline"),
        (("alice", "--decline", "--message", "  "), "--message is empty"),
    ],
)
def test_answer_usage_errors_say_what_to_do(klass, args, says):
    result = regrades("answer", klass, *args)
    assert result.exit_code == 2 and says in result.output, result.output
    assert Gradebook(klass / "grades.sqlite", create=False).answers() == []


@pytest.mark.slow
def test_a_regrade_grades_the_student_again_and_keeps_old_and_new_scores(klass):
    """Through `grade` as the instructor runs it: alice graded again on m4 (the reference: full marks), the
    gradebook's request keeping 4.5 -> 9 and both attempts; bob untouched. alice edited a file since her grading:
    the regrade grades it as it is now, and says so."""
    m4 = klass / "alice" / "m4_generate.py"
    m4.write_text(m4.read_text() + "\n# edited after the grading\n")
    done = cli("regrades", "answer", str(klass), "alice", "--regrade", "--message", "Regraded on a quiet machine.")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "regraded alice on m4: 4.5 -> 9 of 9" in done.stdout
    assert "note: alice's files changed since their grading of" in done.stdout
    with sqlite3.connect(klass / "grades.sqlite") as db:
        db.row_factory = sqlite3.Row
        (kept,) = [dict(r) for r in db.execute("SELECT * FROM regrade_requests")]
        latest = {r["student"]: dict(r) for r in db.execute("SELECT * FROM submissions")}
        alice_attempts = db.execute("SELECT COUNT(*) FROM attempts WHERE student = 'alice'").fetchone()[0]
    assert (kept["status"], kept["old_score"], kept["new_score"], kept["new_max_score"]) == ("accepted", 4.5, 9, 9)
    assert kept["new_attempt"] == latest["alice"]["attempt"] != kept["old_attempt"] and alice_attempts == 2
    assert json.loads(latest["alice"]["milestones"]) == ["m4"] and latest["bob"]["score"] == 4.5
    listed = regrades("list", klass, "--all").output
    assert "0 open regrade requests" in listed and "alice  m4  regraded by" in listed and ": 4.5 -> 9 of 9:" in listed


def test_a_class_with_no_gradebook_is_told_to_grade_it_first(tmp_path):
    (tmp_path / "alice").mkdir()
    missing = regrades("list", tmp_path)
    assert missing.exit_code == 2 and "does not exist: give grade batch's grades.sqlite" in missing.output
    assert "Traceback" not in missing.output
