"""A symbolic link in a submission is never graded as the student's work.

What a link points to is someone else's: the kit's ``solutions/`` (beside the submission in Gradescope's
layout), another student's notebook in a class folder. Every path reads submissions without following links
(grader/nofollow.py): a submission that is a link is refused with a sentence naming it, a link inside a folder
is left out (the check that misses its file says so), a zip holding a link is refused. Each attack goes through
the real path: the Gradescope script in a temporary /autograder, `grade batch`, `grade check`, the contest
server's upload route; the honest students beside the attackers keep their marks.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from grader import nofollow
from grader.batch.discover import FoundSubmission, discover
from grader.batch.gradebook import EMPTY
from grader.contest.uploads import MAX_ZIP_DEPTH, MAX_ZIP_MEMBERS, UploadError, check_upload
from grader.contest.web.app import create_app
from grader.sandbox.client import copy_submission
from helpers import REPO, SOLUTIONS, ContestClock, auth, batch_here, check_here, cli, grade

LINKED = "is a symbolic link, which the grader does not follow"


def link(at: Path, to: Path) -> Path:
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(to)
    return at


def notebook_of(folder: Path, path: Path) -> Path:
    """A notebook whose code cells are ``folder``'s milestone files."""
    cells = [
        {"cell_type": "code", "metadata": {}, "source": p.read_text(), "outputs": [], "execution_count": None}
        for p in sorted(folder.glob("m[1-4]_*.py"))
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


# ---------------------------------------------------------------- Gradescope


@pytest.mark.slow
def test_gradescope_a_link_to_the_kits_solutions_scores_nothing(tmp_path):
    """The submission's only entry links to /autograder/source/solutions: 214/214 before, 0 now, and the
    output (which the student sees) names the link."""
    root = tmp_path / "autograder"
    proc = cli("gradescope", str(tmp_path / "autograder.zip"))
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        zf.extractall(root / "source")
    link(root / "submission" / "solutions", Path("..") / "source" / "solutions")
    assert (root / "submission" / "solutions" / "m1_attention.py").is_file()  # the link does reach the answers
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADE_PYTHON": sys.executable}
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, timeout=600)
    results = json.loads((root / "results" / "results.json").read_text())
    scored = [t for t in results["tests"] if "public" not in t["tags"]]
    assert results["score"] == 0 and scored and not any(t["score"] for t in scored), results["score"]
    assert f"solutions/ {LINKED}" in results["output"], results["output"]
    assert str(root) not in results["output"]


# ---------------------------------------------------------------- grade batch


@pytest.mark.slow
def test_batch_grades_no_student_through_a_link(tmp_path):
    """alice hands in a notebook; eve's entry is a link to alice's notebook; mallory's folder holds only a link
    to the kit's solutions/. alice keeps her marks; eve and mallory get nothing, each told why."""
    root = tmp_path / "class"
    alice = notebook_of(SOLUTIONS, root / "alice.ipynb")
    link(root / "eve.ipynb", alice)
    link(root / "mallory" / "exercises", SOLUTIONS)
    db = tmp_path / "grades.sqlite"
    proc = batch_here(str(root), "-m", "m1", "--db", str(db))  # its discovery and gradebook, in this process
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        book = {r["student"]: dict(r) for r in con.execute("SELECT * FROM submissions")}
    con.close()
    assert book["alice"]["status"] == "graded" and book["alice"]["score"] == book["alice"]["max_score"] > 0, book
    for student, entry in (("eve", "eve.ipynb"), ("mallory", "exercises/")):
        row = book[student]
        assert (row["status"], row["score"]) == (EMPTY, 0), row
        assert f"{entry} {LINKED}" in row["error"], row["error"]


def test_discovery_finds_links_as_students_with_nothing_to_grade(tmp_path):
    """Quick, no grading: nbgrader's layout too (a student folder, an assignment folder that is a link), and a
    link loop, which makes Path.resolve raise, is a student with a reason, not a traceback."""
    course = tmp_path / "course"
    notebook_of(SOLUTIONS, course / "submitted" / "alice" / "lesson" / "tinygpt.ipynb")
    link(course / "submitted" / "bob", course / "submitted" / "alice")
    link(course / "submitted" / "carol" / "lesson", course / "submitted" / "alice" / "lesson")
    found = {f.student: f.problem for f in discover(course, empty=True)}
    assert found["alice"] is None
    assert found["bob"] == nofollow.refused("bob/") and found["carol"] == nofollow.refused("lesson/"), found

    flat = tmp_path / "flat"
    link(flat / "loop.ipynb", flat / "loop.ipynb")
    link(flat / "dave" / "m1_attention.py", SOLUTIONS / "m1_attention.py")
    found = {f.student: f for f in discover(flat, empty=True)}
    assert found["loop"].problem == nofollow.refused("loop.ipynb")
    assert found["dave"].problem is not None and f"m1_attention.py {LINKED}" in found["dave"].problem
    assert found["loop"].digest() != found["dave"].digest()  # a link's digest is of the link, never its target


def test_a_link_swapped_in_after_discovery_is_not_graded(tmp_path):
    """The student's folder is found, then replaced by a link to the kit's solutions before it is graded:
    grading (batch's grade_one, what each batch and contest worker runs) refuses it, and grades nothing."""
    from grader.batch.run import grade_one
    from grader.options import limits

    root = tmp_path / "class"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "m1_attention.py").write_text("raise NotImplementedError\n")
    [found] = discover(root)
    assert found.path == root / "alice"
    (root / "alice" / "m1_attention.py").unlink()
    (root / "alice").rmdir()
    link(root / "alice", SOLUTIONS)
    result = grade_one(str(found.path), ["m1"], limits())
    assert result == {"error": f"SubmissionError: {nofollow.refused('alice')}"}, str(result)[:300]


def test_copying_never_follows_a_link_even_one_swapped_in_after_listing(tmp_path, monkeypatch):
    """copy_submission (each worker's copy) leaves out links at any depth, and a file replaced by a link between
    the folder's listing and its opening is left out too, not read through."""
    src = tmp_path / "sub"
    (src / "deep" / "er").mkdir(parents=True)
    (src / "m2_model.py").write_text("x = 1\n")
    (src / "deep" / "er" / "helper.py").write_text("y = 2\n")
    link(src / "deep" / "er" / "answers", SOLUTIONS)  # a folder link deep inside
    link(src / "deep" / "m3_train.py", SOLUTIONS / "m3_train.py")
    (src / "m1_attention.py").write_text("z = 3\n")

    listed = nofollow.walk

    def swapping(root, *args, **kwargs):
        for entry in listed(root, *args, **kwargs):
            if entry.path.name == "m1_attention.py":  # listed as a file; a link takes its place before it is read
                (src / "m1_attention.py").unlink()
                link(src / "m1_attention.py", SOLUTIONS / "m1_attention.py")
            yield entry

    monkeypatch.setattr(nofollow, "walk", swapping)
    skipped = copy_submission(src, tmp_path / "copy")
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["deep", "deep/er", "deep/er/helper.py", "m2_model.py"], copied
    assert sorted(skipped) == ["deep/er/answers", "deep/m3_train.py", "m1_attention.py"], skipped
    assert not any(p.is_symlink() for p in (tmp_path / "copy").rglob("*"))


def test_a_deep_or_crowded_tree_is_refused_with_its_reason(tmp_path):
    """The walk is bounded: a folder nested 1,500 deep (walked whole before, for every worker) is refused by
    `grade check` as the student's, naming the limit, before any grading; so is one with more than MAX_ENTRIES
    entries."""
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "m1_attention.py").write_bytes((SOLUTIONS / "m1_attention.py").read_bytes())
    levels = [deep / Path(*["d"] * n) for n in range(1, 1501)]
    for level in levels:  # one at a time: mkdir(parents=True) recurses once a level
        level.mkdir()
    try:
        proc = check_here(str(deep), "-m", "m1")  # the command in this process: a traceback would be raised here
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-2000:])
        assert f"the submission's folders nest more than {nofollow.MAX_DEPTH} deep (d/...)" in proc.stderr
    finally:
        for level in reversed(levels):  # no recursion: shutil.rmtree would hit the limit the test is about
            level.rmdir()
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(nofollow.MAX_ENTRIES + 1):
        (crowded / f"f{i}").touch()
    from grader.submission import SubmissionError, prepared

    with pytest.raises(SubmissionError, match=f"more than {nofollow.MAX_ENTRIES} files and folders"), prepared(crowded):
        pass


# ---------------------------------------------------------------- grade check


@pytest.mark.parametrize("target", ["solutions", "notebook"])
def test_check_refuses_a_submission_that_is_a_link(tmp_path, target):
    """`grade check LINK`: a usage error naming the link (exit 2, no traceback), nothing graded."""
    if target == "solutions":
        submission = link(tmp_path / "work", SOLUTIONS)
    else:
        submission = link(tmp_path / "work.ipynb", notebook_of(SOLUTIONS, tmp_path / "theirs" / "alice.ipynb"))
    proc = check_here(str(submission), "-m", "m1")  # the command in this process: its exit code and messages
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert nofollow.refused(submission.name) in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_check_leaves_out_a_linked_file_and_says_so(tmp_path):
    """A folder whose m1_attention.py links to the reference's: m1 scores nothing, and its checks say the file
    is a link; the student's own file beside it is graded (m4: the reference's, copied, keeps its marks)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "m4_generate.py").write_bytes((SOLUTIONS / "m4_generate.py").read_bytes())
    link(work / "m1_attention.py", SOLUTIONS / "m1_attention.py")
    graded = grade(work, "-m", "m1", "-m", "m4")
    assert graded.report, graded.stderr
    assert graded.milestone("m1")["score"] == 0
    assert f"there is no m1_attention.py in the submission: m1_attention.py {LINKED}" in graded.messages("m1")
    assert graded.full("m4"), graded.messages("m4")


# ---------------------------------------------------------------- the contest


def zipped(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """A zip of ``members``, and of ``links`` stored as symbolic links (as ``zip -y`` stores them)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return out.getvalue()


REFERENCE = (SOLUTIONS / "m1_attention.py").read_bytes()


@pytest.mark.parametrize(
    "upload, reason",
    [
        (zipped({}, {"work/m1_attention.py": "../../../solutions/m1_attention.py"}), "a symbolic link, not a file"),
        (
            zipped({"work/m1_attention.py": REFERENCE}, {"work/solutions": str(REPO / "solutions")}),
            "a symbolic link, not a file",
        ),
        (zipped({"/".join(["d"] * (MAX_ZIP_DEPTH + 1) + ["m1_attention.py"]): REFERENCE}), "nest more than"),
        (
            zipped({**{f"d{i}/": b"" for i in range(MAX_ZIP_MEMBERS)}, "m1_attention.py": REFERENCE}),
            f"at most {MAX_ZIP_MEMBERS}",
        ),
        (  # refused before zipfile parses the directory (200,000 entries fit in an upload: 1.3 s of the event loop)
            zipped({**{f"{i:05d}/": b"" for i in range(6000)}, "m1_attention.py": REFERENCE}),
            "list of files is over",
        ),
    ],
    ids=["link-file", "link-folder", "too-deep", "too-many-folders", "huge-directory"],
)
def test_a_contest_upload_with_a_link_or_a_hostile_tree_is_refused(contest, upload, reason):
    """Through the server's upload route: a 400 naming the cause, nothing stored; the same zip without the
    link is accepted (the honest direction)."""
    folder = contest(title="Links")
    client = TestClient(create_app(folder, ContestClock()))
    refused = client.post(
        "/submit/m1", files=[("files", ("work.zip", upload, "application/zip"))], headers=auth(folder, "ada")
    )
    assert refused.status_code == 400 and reason in refused.json()["detail"], (refused.status_code, refused.text)
    assert not any((folder / "uploads").rglob("*.py"))
    with pytest.raises(UploadError, match=reason):
        check_upload("m1", [("work.zip", upload)])
    honest = client.post(
        "/submit/m1",
        files=[("files", ("work.zip", zipped({"work/m1_attention.py": REFERENCE}), "application/zip"))],
        headers=auth(folder, "alan"),
    )
    assert honest.status_code == 202, honest.text  # queued for grading


def test_the_digest_does_not_read_through_links(tmp_path):
    """batch's digest (what says a submission changed) hashes a link as a link, never what it points to: an
    entry that is a link to another student's notebook (or to /dev/zero) reads nothing of it."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m1_attention.py").write_text("x = 1\n")
    target = tmp_path / "alice.ipynb"
    target.write_text("a\n")
    link(tmp_path / "sub" / "other.py", target)
    eve = FoundSubmission("eve", link(tmp_path / "eve.ipynb", target))
    before = FoundSubmission("s", tmp_path / "sub").digest(), eve.digest()
    target.write_text("b\n")
    assert (FoundSubmission("s", tmp_path / "sub").digest(), eve.digest()) == before
    assert FoundSubmission("zero", link(tmp_path / "zero.ipynb", Path("/dev/zero"))).digest()


# ---------------------------------------------------------------- nbgrader's hook


def test_the_nbgrader_hook_refuses_a_linked_notebook(tmp_path, monkeypatch):
    """The test cell's check() refuses a notebook that is a link, and one nbgrader copied into autograded/ from
    a link in submitted/ (nbgrader's copy follows links: the hook sees a plain file there), grading nothing."""
    from grader.nbgrader_hook import check

    alice = notebook_of(SOLUTIONS, tmp_path / "submitted" / "alice" / "lesson" / "tinygpt.ipynb")
    link(tmp_path / "submitted" / "eve" / "lesson" / "tinygpt.ipynb", alice)
    copied = tmp_path / "autograded" / "eve" / "lesson" / "tinygpt.ipynb"
    copied.parent.mkdir(parents=True)
    copied.write_bytes(alice.read_bytes())
    monkeypatch.setattr("grader.nbgrader_hook.subprocess.run", lambda *a, **k: pytest.fail("graded a link"))
    for where in (copied.parent, alice.parent.parent.parent / "eve" / "lesson"):
        monkeypatch.chdir(where)
        with pytest.raises(AssertionError, match=f"m1 was not graded: tinygpt.ipynb {LINKED}"):
            check("tinygpt.ipynb", "m1")


def test_a_batch_zip_holding_a_link_is_refused(tmp_path):
    """A student's zip in a class folder: a member stored as a link is refused with its name (it was unpacked as
    a file holding the link's target before), and so is one nested deeper than a walk goes."""
    from grader.batch.discover import unpacked

    (tmp_path / "eve.zip").write_bytes(zipped({}, {"work/m1_attention.py": "../../solutions/m1_attention.py"}))
    with (
        pytest.raises(ValueError, match=f"eve.zip holds work/m1_attention.py, which {LINKED}"),
        unpacked(tmp_path / "eve.zip"),
    ):
        pass
    deep = "/".join(["d"] * (nofollow.MAX_DEPTH + 1) + ["m1_attention.py"])
    (tmp_path / "deep.zip").write_bytes(zipped({deep: REFERENCE}))
    with pytest.raises(ValueError, match="nest more than"), unpacked(tmp_path / "deep.zip"):
        pass
