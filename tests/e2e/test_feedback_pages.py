"""`grade feedback` (grader/batch/handback.py): each student's HTML and Markdown page from a graded class, in both
directions: a failed check's message on its student's page and on no other's; the checks' details held back at the
hidden visibilities and shown once published; a student's hostile text shown as text; a regrade answer on its
student's page only; the late penalty the one `grade export` applies; a roster's student without a submission told
so; and every student's folder inside OUT, whatever their name."""

from __future__ import annotations

import csv
import os
import re
import shutil
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.batch.discover import NOTHING_TO_GRADE
from grader.batch.gradebook import Gradebook
from grader.batch.handback import MESSAGE_CHARS, _cut, _fenced, _md, folder_name
from grader.batch.regrades import REQUEST_FILE
from grader.cli import main
from grader.fingerprint import grader_fingerprint
from helpers import EXERCISES, SOLUTIONS, cli, m4_report

# bob's bug (the first position's logits), and the words of the message each of its checks gives.
BUG = ("logits[:, -1, :]", "logits[:, 0, :]")
BOBS_MESSAGE = "but the greedy choice is"  # then the token, and why: the first position's logits
# dave's generate raises with markup in its text: the grader quotes it in every check's message.
HOSTILE = "<script>alert('owned')</script><img src=x onerror=alert(2)>"
ANSWER = "The first position is wrong: see logits[:, -1] in the lesson."
LATE_POLICY = 'due = "2026-11-01T23:59:00+00:00"\n[late]\nper = "day"\npenalty = 10\ncap = 50\n'


def grade(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """A class graded on m4: alice (the reference), bob (the first position's logits, and a declined regrade
    request), carol (the untouched stubs), dave (raises hostile text), eve (the reference in a zip, 34.5 hours
    late by its modification time) and gina (an empty folder: nothing to grade)."""
    root = tmp_path_factory.mktemp("feedback") / "class"
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("alice", "bob", "dave"):
        shutil.copytree(SOLUTIONS, root / name, ignore=ignore)
    shutil.copytree(EXERCISES, root / "carol", ignore=ignore)
    generate = root / "bob" / "m4_generate.py"
    generate.write_text(generate.read_text().replace(*BUG))
    generate = root / "dave" / "m4_generate.py"
    generate.write_text(generate.read_text().replace("    idx = start\n", f"    raise ValueError({HOSTILE!r})\n", 1))
    with zipfile.ZipFile(root / "eve.zip", "w") as zf:
        for p in sorted(SOLUTIONS.glob("*.py")):
            zf.write(p, p.name)
    late = datetime(2026, 11, 3, 10, 30, tzinfo=timezone.utc).timestamp()
    os.utime(root / "eve.zip", (late, late))
    (root / "gina").mkdir()
    done = cli("batch", str(root), "-m", "m4", "--workers", "2")
    assert done.returncode == 0 and "5 graded" in done.stderr, done.stderr
    (root / "bob" / REQUEST_FILE).write_text(f"m4\nMy argmax is right {HOSTILE}\n")
    answered = grade("regrades", "answer", root, "bob", "--decline", "--message", ANSWER, "--by", "prof")
    assert answered.exit_code == 0, answered.output
    (root.parent / "late.toml").write_text(LATE_POLICY)
    return root


def pages(graded: Path, out: Path, *args: object) -> dict[str, tuple[str, str]]:
    """`grade feedback` on the class's gradebook into ``out``: each folder's (HTML, Markdown)."""
    done = grade("feedback", graded / "grades.sqlite", out, *args)
    assert done.exit_code == 0, done.output
    return {
        p.name: ((p / "feedback.html").read_text(), (p / "feedback.md").read_text())
        for p in out.iterdir()
        if p.is_dir()
    }


def outside_fences(markdown: str) -> str:
    """The Markdown's lines that are not in a fenced code block: what a viewer reads as Markdown and HTML."""
    kept, fence = [], None
    for line in markdown.splitlines():
        opened = re.match(r"\s*(`{3,})", line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            kept.append(line)
    return "\n".join(kept)


@pytest.mark.slow
def test_each_student_gets_a_page_in_both_formats_and_the_index_links_them(graded, tmp_path):
    written = pages(graded, tmp_path / "out", "--published")
    assert set(written) == {"alice", "bob", "carol", "dave", "eve", "gina"}
    index = (tmp_path / "out" / "index.html").read_text()
    assert all(f'href="{name}/feedback.html"' in index for name in written)
    alice_html, alice_md = written["alice"]
    assert "Total: 9 of 9 points" in alice_html and "**Total: 9 of 9 points**" in alice_md
    assert "failed" not in alice_html and "passed" in alice_html
    gina_html, gina_md = written["gina"]
    assert f"Nothing in your submission could be graded: {NOTHING_TO_GRADE} (the folder is empty)" in gina_html
    assert "Nothing in your submission could be graded" in gina_md and "Total: 0 of 9 points" in gina_md


@pytest.mark.slow
def test_a_failed_checks_first_message_is_on_its_students_page_and_no_other(graded, tmp_path):
    written = pages(graded, tmp_path / "out", "--visibility", "visible")
    bob_html, bob_md = written["bob"]
    assert BOBS_MESSAGE in bob_html and BOBS_MESSAGE in bob_md
    # a parametrized check's four failing cases: one line, its first case's message once
    assert "(4 cases, 4 failed)" in bob_md
    assert bob_md.count(BOBS_MESSAGE) == len(re.findall(r"^- \*\*failed\*\*", bob_md, re.M)) == 5
    for other in ("alice", "carol", "dave", "eve", "gina"):
        assert all(BOBS_MESSAGE not in text for text in written[other]), other
    assert "not implemented yet" in written["carol"][0] and "not implemented yet" not in bob_html


@pytest.mark.slow
def test_the_checks_details_are_held_back_until_published(graded, tmp_path):
    """The Gradescope zip's default (after_published) holds the checks back, its points and total shown; --published
    shows them; hidden never does; visible always does."""
    held = pages(graded, tmp_path / "default")
    shown = pages(graded, tmp_path / "published", "--published")
    hidden = pages(graded, tmp_path / "hidden", "--visibility", "hidden", "--published")
    visible = pages(graded, tmp_path / "visible", "--visibility", "visible")
    for name, written in (("default", held), ("hidden", hidden)):
        html, md = written["bob"]
        assert BOBS_MESSAGE not in html and BOBS_MESSAGE not in md, name
        assert "each new token is the argmax" not in html, f"{name}: a check's name is a detail too"
        assert "Total: 1 of 9 points" in html and "m4: Greedy generation" in html and "1 of 9" in md, name
    assert "shown once your instructor publishes the grades" in held["bob"][0]
    assert "not shown to students" in hidden["bob"][0]
    for written in (shown, visible):
        assert all(BOBS_MESSAGE in text for text in written["bob"])
        assert "shown once your instructor" not in written["bob"][0]


@pytest.mark.slow
def test_after_due_date_shows_the_details_once_the_students_due_date_has_passed(graded, tmp_path):
    past = pages(
        graded, tmp_path / "past", "--visibility", "after_due_date", "--late-policy", graded.parent / "late.toml"
    )
    assert BOBS_MESSAGE in past["bob"][0]
    future = tmp_path / "future.toml"
    future.write_text(LATE_POLICY.replace("2026-11-01", "2099-11-01"))
    before = pages(graded, tmp_path / "future", "--visibility", "after_due_date", "--late-policy", future)
    assert BOBS_MESSAGE not in before["bob"][0] and "shown after the due date" in before["bob"][0]
    refused = grade("feedback", graded / "grades.sqlite", tmp_path / "x", "--visibility", "after_due_date")
    assert refused.exit_code == 2 and "needs --late-policy FILE" in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_students_hostile_text_is_shown_as_text(graded, tmp_path):
    """dave's exception and bob's regrade reason carry markup: the HTML escapes it, the Markdown fences it (a viewer
    renders raw HTML elsewhere); the text itself is there to read."""
    written = pages(graded, tmp_path / "out", "--published")
    for name in ("dave", "bob"):
        html, md = written[name]
        assert "<script" not in html.lower() and "<img" not in html.lower(), name
        assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in html, name
        assert HOSTILE in md, f"{name}: the Markdown holds the text as it is, in a code block"
        assert "<script" not in outside_fences(md) and "<img" not in outside_fences(md), name
    assert "default-src 'none'" in written["dave"][0], "and no script would run even if one got through"


def test_markdown_fences_outgrow_the_text_and_inline_text_is_escaped():
    assert _fenced("x ``` y").startswith("````text\n") and _fenced("x ``` y").endswith("\n````")
    assert _fenced("plain").startswith("```text\n")
    assert outside_fences(_fenced("a\n```\n<script>x</script>")) == "", "a fence in the text does not close it"
    assert _md("<b>*a*</b> [l](u) `c` | x\ny") == r"\<b\>\*a\*\</b\> \[l\](u) \`c\` \| x y"
    assert _md("plain words, 3.5 of 9") == "plain words, 3.5 of 9"
    assert _cut("short") == "short" and _cut("x" * 10**6) == "x" * MESSAGE_CHARS + " [... cut]"


@pytest.mark.slow
def test_a_regrade_answer_is_on_that_students_page_only(graded, tmp_path):
    written = pages(graded, tmp_path / "out")  # the details held back: the answer is the student's all the same
    bob_html, bob_md = written["bob"]
    assert "m4: declined" in bob_html and ANSWER in bob_html and "Answer from prof" in bob_html
    assert "### m4: declined" in bob_md and ANSWER in bob_md
    assert "My argmax is right" in bob_md, "the request it answers"
    for other in ("alice", "carol", "dave", "eve", "gina"):
        assert all(ANSWER not in text and "regrade" not in text.lower() for text in written[other]), other


@pytest.mark.slow
def test_the_late_penalty_shown_is_the_one_grade_export_applies(graded, tmp_path):
    policy = graded.parent / "late.toml"
    written = pages(graded, tmp_path / "out", "--late-policy", policy, "--times-from-mtime")
    exported = grade(
        "export", graded / "grades.sqlite", "--csv", tmp_path / "g.csv", "--late-policy", policy, "--times-from-mtime"
    )
    assert exported.exit_code == 0, exported.output
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open())}
    assert float(rows["eve"]["late_penalty_percent"]) == 20, "eve's zip is 34.5 hours late: the test can fail"
    for student in ("alice", "eve"):
        row = rows[student]
        html, md = written[student]
        percent, after = f"{float(row['late_penalty_percent']):g}", f"{float(row['score_after_penalty']):g}"
        assert f"Late penalty: {percent}% ({row['late_note']})" in html, html
        assert f"After the penalty: {after} of 9 points" in html and f"After the penalty: {after} of 9" in md
    assert "After the penalty: 7.2 of 9" in written["eve"][0] and "After the penalty: 9 of 9" in written["alice"][0]
    without = pages(graded, tmp_path / "plain")
    assert "Late penalty" not in without["eve"][0] and "After the penalty" not in without["eve"][1]


@pytest.mark.slow
def test_an_extension_keyed_by_the_rosters_email_reaches_the_page_as_it_reaches_the_export(graded, tmp_path):
    """eve's extension names her by the roster's email: the page and the export both waive her penalty."""
    roster = tmp_path / "roster.csv"
    roster.write_text("student,email\nalice,alice@uni.example\neve,eve@uni.example\n")
    policy = tmp_path / "late.toml"
    policy.write_text(LATE_POLICY + '[extensions]\n"eve@uni.example" = 48\n')
    args = ("--late-policy", policy, "--times-from-mtime", "--roster", roster)
    written = pages(graded, tmp_path / "out", *args)
    exported = grade("export", graded / "grades.sqlite", "--csv", tmp_path / "g.csv", *args)
    assert exported.exit_code == 0, exported.output
    eve = next(r for r in csv.DictReader((tmp_path / "g.csv").open()) if r["student"] == "eve")
    assert float(eve["late_penalty_percent"]) == 0 and "with an extension" in eve["late_note"]
    assert f"Late penalty: 0% ({eve['late_note']})" in written["eve"][0]
    assert "After the penalty: 9 of 9 points" in written["eve"][0]


@pytest.mark.slow
def test_a_roster_student_without_a_submission_gets_a_page_saying_so(graded, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student,email\nalice,a@x\nbob,b@x\nfrank,f@x\n")
    written = pages(graded, tmp_path / "out", "--roster", roster)
    assert "No submission" in written["frank"][0] and "**No submission.**" in written["frank"][1]
    assert "No submission" not in written["alice"][0]
    index = (tmp_path / "out" / "index.html").read_text()
    assert "frank" in index and "no submission" in index and "carol <span" in index, "carol is not on the roster"
    assert "frank" not in pages(graded, tmp_path / "no-roster"), "without a roster, no one is missing"


def test_every_students_folder_is_inside_out_whatever_the_name(tmp_path):
    """Names a gradebook may hold (nbgrader's student/assignment, a contest's, a recorded one): each page in a
    folder of its own directly under OUT, none outside it, none on the index page, none shared."""
    db = tmp_path / "grades.sqlite"
    names = ["../escape", ".hidden", "alice/hw1", "alice-hw1", "index.html", "Bob", "bob", "tab\there"]
    book = Gradebook(db)
    for name in names:
        book.record(name, "x", "d", "0", ["m4"], m4_report(4.5), fingerprint=grader_fingerprint())
    book.close()
    out = tmp_path / "deep" / "out"
    done = grade("feedback", db, out, "--visibility", "visible")
    assert done.exit_code == 0, done.output
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == len(names) and all((p / "feedback.html").is_file() for p in folders)
    assert not (tmp_path / "deep" / "escape").exists() and (out / "index.html").read_text().startswith("<!DOCTYPE")
    assert {p.name for p in folders} >= {"alice-hw1", "Bob", "_hidden"}
    taken: set[str] = set()
    assert [folder_name(n, taken) for n in ("a/b", "a-b", "A-B")][:1] == ["a-b"]
    assert len(taken) == 3, "a clash gets a name of its own"


def test_a_check_the_grader_failed_is_not_counted_and_an_ungraded_submission_says_why(tmp_path):
    """ann's second check failed inside the grader: "not counted", never "failed", and her points are her counted
    checks'. ben's notebook could not be read: his page gives the reason as he can act on it (no class name)."""
    db = tmp_path / "grades.sqlite"
    report = m4_report(9)
    report["milestones"][0]["checks"][1].update(counted=False, internal_error=True, passed=False, message="boom")
    book = Gradebook(db)
    book.record("ann", "x", "d", "0", ["m4"], report, fingerprint=grader_fingerprint())
    error = "SubmissionError: ben.ipynb is not a notebook (not JSON)"
    book.record("ben", "x", "d", "0", ["m4"], None, error=error, fingerprint=grader_fingerprint())
    book.close()
    done = grade("feedback", db, tmp_path / "out", "--visibility", "visible")
    assert done.exit_code == 0, done.output
    ann = (tmp_path / "out" / "ann" / "feedback.md").read_text()
    assert "- not counted: stops at max\\_new\\_tokens (the grader failed here, not your code)" in ann, ann
    assert "failed" not in ann.replace("the grader failed here", "") and "boom" not in ann
    assert "- passed (4.5 of 4.5): each new token is the argmax" in ann
    ben = (tmp_path / "out" / "ben" / "feedback.html").read_text()
    assert "Your submission could not be graded: ben.ipynb is not a notebook (not JSON)" in ben
    assert "SubmissionError" not in ben and "Total: 0 points" in ben


def test_a_file_that_is_not_a_gradebook_is_a_usage_error(tmp_path):
    bad = tmp_path / "gradebook.db"
    bad.write_text("not a database")
    done = grade("feedback", bad, tmp_path / "out")
    assert done.exit_code == 2 and "is not a gptkit gradebook" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "out").exists()
