"""`grade batch`: every layout found, parallel grading into SQLite, resume, and nothing lost to kill -9."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from grader.batch.discover import NOTHING_TO_GRADE, FoundSubmission, discover, unpacked
from grader.batch.gradebook import EMPTY, Gradebook
from grader.fingerprint import ROOT_VARIABLE, fingerprint_of
from helpers import EXERCISES, REPO, SOLUTIONS, batch_here, cli, m4_report, proc_fields

QUICK = ("-m", "m1", "-m", "m4")


@pytest.fixture(autouse=True, scope="module")
def pinned_grader(tmp_path_factory):
    """The batches here count a row as current against a snapshot of the grading code (grader/, solutions/),
    so that an edit to the real files while they run (a shared checkout) regrades nothing they resume."""
    snapshot = tmp_path_factory.mktemp("grader_snapshot")
    for name in ("grader", "solutions"):
        shutil.copytree(REPO / name, snapshot / name, ignore=shutil.ignore_patterns("__pycache__"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ROOT_VARIABLE, str(snapshot))
        yield snapshot


def reference(folder: Path) -> Path:
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def slow_reference(folder: Path, seconds: float = 3.0) -> Path:
    """The reference, its m1_attention.py sleeping ``seconds`` at import: a batch of these leaves time to be
    interrupted between two results, however fast the machine and however warm the disk cache."""
    reference(folder)
    m1 = folder / "m1_attention.py"
    m1.write_text(f"import time\ntime.sleep({seconds})\n" + m1.read_text())
    return folder


def notebook_of(folder: Path, path: Path) -> Path:
    cells = [
        {"cell_type": "code", "metadata": {}, "source": p.read_text(), "outputs": [], "execution_count": None}
        for p in sorted(folder.glob("m[1-4]_*.py"))
    ]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


def zip_of(folder: Path, path: Path, extra: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for p in sorted(folder.glob("*.py")):
            zf.write(p, f"work/{p.name}")
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
    return path


def batch(*args: str) -> subprocess.CompletedProcess:
    """`grade batch ARGS` in a process of its own, as a user runs it: for what a process does (its signals, its
    exit, its pool and fork server, a cluster's workers, its usage errors as printed)."""
    return cli("batch", *args)


def rows(db: Path) -> dict[str, dict]:
    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        subs = {r["student"]: dict(r) for r in con.execute("SELECT * FROM submissions")}
        for student, count in con.execute(
            "SELECT c.student, COUNT(*) FROM checks c JOIN submissions s ON "
            "c.student = s.student AND c.attempt = s.attempt GROUP BY c.student"
        ):
            if student in subs:  # else committed between the two reads, while a batch runs: not in this snapshot
                subs[student]["checks_stored"] = count  # the latest attempt's: the gradebook keeps every attempt
    return subs


def interruptible(command: list[str]) -> subprocess.Popen:
    """A batch started to be interrupted, in a session of its own, with Ctrl-C's default as a terminal's shell gives
    it: a test run started in the background (a CI job, `cmd &`) ignores SIGINT, and an ignored signal stays ignored
    across exec, so the batch would never see the Ctrl-C the test sends, and grade everything."""
    return subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def committed(db: Path) -> int:
    """Submissions in the gradebook so far; 0 before the batch has created its tables."""
    try:
        return len(rows(db)) if db.exists() else 0
    except sqlite3.OperationalError:  # the file exists a moment before its schema
        return 0


def graded_already(db: Path, root: Path, kit: Path, students: dict[str, float]) -> None:
    """Record each of ``students`` (name: m4 score) as graded on m4 by the grader in ``kit`` from the files in
    ``root/NAME`` now (a name without a folder: from files since removed), so that a batch grades none again."""
    book = Gradebook(db)
    try:
        for name, score in students.items():
            folder = root / name
            digest = FoundSubmission(name, folder).digest() if folder.exists() else "gone"
            book.record(name, str(folder), digest, "0.2.0", ["m4"], m4_report(score), fingerprint=fingerprint_of(kit))
    finally:
        book.close()


# ---------------------------------------------------------------- finding submissions


def test_discovers_folders_notebooks_zips(tmp_path):
    root = tmp_path / "class"
    reference(root / "alice")
    shutil.copytree(EXERCISES, root / "bob" / "inner")  # one level down
    notebook_of(SOLUTIONS, root / "carol.ipynb")
    zip_of(SOLUTIONS, root / "dave.zip")
    (root / "empty").mkdir()
    (root / ".hidden").mkdir()
    found = {f.student: f.path.relative_to(root).as_posix() for f in discover(root)}
    assert found == {"alice": "alice", "bob": "bob/inner", "carol": "carol.ipynb", "dave": "dave.zip"}


def test_a_students_folder_with_nothing_to_grade_is_found_with_why(tmp_path):
    """No student is silently lost: each folder is a student's, and one that holds nothing to grade says why.
    Other files (notes, the gradebook) and hidden or private names are not students."""
    root = tmp_path / "class"
    reference(root / "alice")
    (root / "empty").mkdir()
    (root / "readme").mkdir()
    (root / "readme" / "README.md").write_text("my work is on my laptop")
    (root / "two_notebooks").mkdir()
    for name in ("a", "b"):
        notebook_of(SOLUTIONS, root / "two_notebooks" / f"{name}.ipynb")
        reference(root / "two_folders" / name)
    for name in (".git", "_private", "__MACOSX"):
        (root / name).mkdir()
    (root / "notes.txt").write_text("not a student")
    (root / "grades.sqlite").write_bytes(b"")
    found = {f.student: f.problem for f in discover(root, empty=True)}
    assert found == {
        "alice": None,
        "empty": f"{NOTHING_TO_GRADE} (the folder is empty)",
        "readme": f"{NOTHING_TO_GRADE} (it holds only README.md)",
        "two_notebooks": f"{NOTHING_TO_GRADE} (2 notebooks (a.ipynb, b.ipynb): which one is the submission?)",
        "two_folders": f"{NOTHING_TO_GRADE} (2 folders (a/, b/): which one is the submission?)",
    }, found
    assert NOTHING_TO_GRADE.startswith("no exercise file (m1_attention.py"), NOTHING_TO_GRADE
    assert [f.student for f in discover(root)] == ["alice"], "without empty=True: the submissions alone"


def test_discovers_nbgrader_layout(tmp_path):
    submitted = tmp_path / "course" / "submitted"
    (submitted / "alice" / "lesson").mkdir(parents=True)
    notebook_of(SOLUTIONS, submitted / "alice" / "lesson" / "tinygpt.ipynb")
    for assignment in ("lesson", "extra"):
        reference(submitted / "bob" / assignment)
    found = {f.student: f.path.relative_to(submitted).as_posix() for f in discover(tmp_path / "course")}
    assert found == {"alice": "alice/lesson/tinygpt.ipynb", "bob/extra": "bob/extra", "bob/lesson": "bob/lesson"}


def test_zip_members_cannot_escape(tmp_path):
    bundle = zip_of(SOLUTIONS, tmp_path / "evil.zip", {"../escaped.py": "x = 1", "/abs.py": "x = 1"})
    with unpacked(bundle) as inner:
        assert (inner / "m1_attention.py").is_file()
    assert not (tmp_path / "escaped.py").exists() and not Path("/abs.py").exists()


# ---------------------------------------------------------------- grading, resuming, regrading


@pytest.mark.slow
def test_batch_grades_resumes_and_regrades_what_changed(tmp_path):
    root = tmp_path / "class"
    reference(root / "alice")
    shutil.copytree(EXERCISES, root / "bob")
    notebook_of(SOLUTIONS, root / "carol.ipynb")
    zip_of(SOLUTIONS, root / "dave.zip")
    db = root / "grades.sqlite"
    proc = batch_here(str(root), "--workers", "2", *QUICK)
    assert proc.returncode == 0 and "4 graded, 0 already" in proc.stderr, proc.stderr
    first = rows(db)
    assert {s: (r["score"], r["max_score"]) for s, r in first.items()} == {
        "alice": (36, 36),
        "bob": (0, 36),
        "carol": (36, 36),
        "dave": (36, 36),
    }, first
    assert all(r["checks_stored"] == r["n_checks"] > 0 and r["status"] == "graded" for r in first.values())

    proc = batch_here(str(root), *QUICK)
    assert "0 graded, 4 already" in proc.stderr and rows(db) == first, proc.stderr

    (root / "bob" / "m4_generate.py").write_text((SOLUTIONS / "m4_generate.py").read_text())
    proc = batch_here(str(root), *QUICK)
    assert "1 graded, 3 already" in proc.stderr, proc.stderr
    assert rows(db)["bob"]["score"] == 9 and rows(db)["alice"] == first["alice"]

    # Regrading m4 alone keeps each student's m1 results: the same files, the same grader.
    proc = batch_here(str(root), "--regrade", "-m", "m4")
    assert "4 graded, 0 already" in proc.stderr and "note:" not in proc.stderr, proc.stderr
    regraded = rows(db)
    assert {s: (r["score"], r["max_score"], json.loads(r["milestones"])) for s, r in regraded.items()} == {
        "alice": (36, 36, ["m1", "m4"]),
        "bob": (9, 36, ["m1", "m4"]),
        "carol": (36, 36, ["m1", "m4"]),
        "dave": (36, 36, ["m1", "m4"]),
    }, regraded
    assert all(r["checks_stored"] == r["n_checks"] == first[s]["n_checks"] for s, r in regraded.items())
    proc = batch_here(str(root), "-m", "m4")
    assert "0 graded, 4 already" in proc.stderr, "m4 is current in grades that cover m1 and m4"

    out, gradescope = tmp_path / "grades.csv", tmp_path / "gradescope"
    proc = cli("export", str(db), "--csv", str(out), "--gradescope", str(gradescope))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().splitlines()[:3] == [
        "student,score,max_score,status,m1,m4",
        "alice,36.0,36.0,graded,27.0,9.0",
        "bob,9.0,36.0,graded,0.0,9.0",
    ]
    results = json.loads((gradescope / "bob" / "results.json").read_text())
    m4 = [t for t in results["tests"] if t["tags"] == ["m4"]]
    assert results["score"] == 9 and m4 and all(t["status"] == "passed" for t in m4), results
    assert {t["tags"][0] for t in results["tests"]} == {"m1", "m4"}, results

    proc = cli("report", str(db), "--png", str(tmp_path / "charts"))
    assert proc.returncode == 0 and "4 submissions: 4 graded" in proc.stdout, proc.stderr
    for chart in ("score-distribution.png", "check-failure-rates.png"):
        assert (tmp_path / "charts" / chart).read_bytes().startswith(b"\x89PNG")

    # Files changed since: their m1 results are stale, not carried over, and the batch says so.
    (root / "bob" / "m4_generate.py").write_text((SOLUTIONS / "m4_generate.py").read_text() + "\n# edited\n")
    proc = batch_here(str(root), "-m", "m4")
    assert "1 graded, 3 already" in proc.stderr, proc.stderr
    assert (
        "note: 1 student's grade now covers only m4 (bob): 1 changed their files since the other milestones "
        "were graded, so those results were not carried over" in proc.stderr
    ), proc.stderr
    assert (rows(db)["bob"]["score"], rows(db)["bob"]["max_score"]) == (9, 9)


@pytest.mark.slow
def test_report_names_the_most_failed_check(tmp_path):
    root = tmp_path / "class"
    reference(root / "alice")
    shutil.copytree(SOLUTIONS, root / "bob", ignore=shutil.ignore_patterns("__pycache__"))
    generate = root / "bob" / "m4_generate.py"
    generate.write_text(generate.read_text().replace("logits[:, -1, :]", "logits[:, 0, :]"))
    assert batch_here(str(root), "-m", "m4").returncode == 0
    proc = cli("report", str(root / "grades.sqlite"), "--top", "1")
    assert "50.0%     1 of 2  m4: each new token is the argmax" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_kill_9_loses_nothing_and_a_rerun_finishes(tmp_path):
    root = tmp_path / "class"
    for i in range(6):
        reference(root / f"s{i}")
    db = root / "grades.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "batch", str(root), "--workers", "1", "-m", "m1", "-m", "m2"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if 1 <= committed(db) < 6:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = rows(db)
    assert 1 <= len(before) < 6, "the kill came too late to test anything"
    assert all(r["checks_stored"] == r["n_checks"] > 0 for r in before.values()), before
    rerun = batch(str(root), "--workers", "1", "-m", "m1", "-m", "m2")
    assert f"{6 - len(before)} graded, {len(before)} already" in rerun.stderr, rerun.stderr
    left = 6 - len(before)
    assert f"{len(before)} of 6 already in grades.sqlite (unchanged): grading the other {left}" in rerun.stderr
    assert f" {left}/{left} " in rerun.stderr and "/6 " not in rerun.stderr, "the bar counts what is left"
    after = rows(db)
    assert len(after) == 6 and all(r["score"] == r["max_score"] for r in after.values())
    assert all(after[s]["graded_at"] == r["graded_at"] for s, r in before.items()), "a committed result was redone"


@pytest.mark.slow
def test_ctrl_c_says_what_was_saved_and_a_rerun_resumes(tmp_path):
    root = tmp_path / "class"
    for i in range(4):
        (reference if i == 0 else slow_reference)(root / f"s{i}")
    db = root / "grades.sqlite"
    command = [sys.executable, "-m", "grader", "batch", str(root), "--workers", "1", "-m", "m1"]
    proc = interruptible(command)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not 1 <= committed(db) < 4:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends (to the batch process; a terminal sends it to all)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the batch did not stop within 60 s of Ctrl-C") from None
    saved = len(rows(db))
    assert 1 <= saved < 4, f"the interrupt came too late to test anything (exit {proc.returncode}): {stderr[-800:]}"
    assert proc.returncode == 130, stderr
    assert (
        f"interrupted: {saved} result{'s' * (saved != 1)} saved by this run ({saved} of 4 submissions in {db}); "
        "run the same command again to resume" in stderr
    ), stderr
    rerun = batch(str(root), "--workers", "1", "-m", "m1")
    assert rerun.returncode == 0 and f"{4 - saved} graded, {saved} already" in rerun.stderr, rerun.stderr
    assert len(rows(db)) == 4


def test_batch_records_the_students_with_nothing_to_grade(tmp_path, pinned_grader):
    """An empty folder, or one with a README alone, is a row with 0 points of the class's 9, its error saying why,
    listed by the batch's summary, the CSV and the report; a rerun adds no attempt for it."""
    root = tmp_path / "class"
    reference(root / "alice")
    (root / "empty").mkdir()
    (root / "readme").mkdir()
    (root / "readme" / "README.md").write_text("my work is on my laptop")
    db = root / "grades.sqlite"
    graded_already(db, root, pinned_grader, {"alice": 9})
    proc = batch_here(str(root), "-m", "m4")
    assert proc.returncode == 0 and "0 graded, 1 already" in proc.stderr, proc.stderr
    assert (
        f"2 students with nothing to grade, recorded with 0 points (status '{EMPTY}'): "
        f"empty: {NOTHING_TO_GRADE} (the folder is empty); readme: {NOTHING_TO_GRADE} (it holds only README.md)"
    ) in proc.stderr, proc.stderr
    book = rows(db)
    assert {s: (r["status"], r["score"], r["max_score"]) for s, r in book.items()} == {
        "alice": ("graded", 9, 9),
        "empty": (EMPTY, 0, 9),
        "readme": (EMPTY, 0, 9),
    }, book
    assert book["empty"]["error"] == f"{NOTHING_TO_GRADE} (the folder is empty)"

    out = tmp_path / "grades.csv"
    proc = cli("export", str(db), "--csv", str(out))
    assert proc.returncode == 0 and "(3 submissions)" in proc.stderr, proc.stderr
    assert out.read_text().splitlines()[1:] == [
        "alice,9.0,9.0,graded,9.0",
        f"empty,0.0,9.0,{EMPTY},",
        f"readme,0.0,9.0,{EMPTY},",
    ]
    proc = cli("report", str(db))
    assert "3 submissions: 1 graded, 0 with errors, 2 with nothing to grade (empty, readme)" in proc.stdout, proc.stdout

    assert batch_here(str(root), "-m", "m4").returncode == 0
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM attempts WHERE student = 'empty'").fetchone() == (1,), (
            "nothing changed: no new attempt"
        )
    con.close()


def test_batch_says_which_students_of_the_gradebook_have_no_submission_any_more(tmp_path, pinned_grader):
    """A student whose folder was removed keeps their row (nothing is lost), and the batch says so."""
    root = tmp_path / "class"
    reference(root / "alice")
    db = root / "grades.sqlite"
    graded_already(db, root, pinned_grader, {"alice": 9, "bob": 4.5, "carol": 0})  # bob's and carol's folders: gone
    proc = batch_here(str(root), "-m", "m4")
    assert proc.returncode == 0 and "0 graded, 1 already" in proc.stderr, proc.stderr
    assert (
        f"note: 2 students in the gradebook have no submission in {root} any more: kept (bob, carol)" in proc.stderr
    ), proc.stderr
    proc = cli("export", str(db), "--csv", str(tmp_path / "grades.csv"))
    assert [line.split(",")[0] for line in (tmp_path / "grades.csv").read_text().splitlines()[1:]] == [
        "alice",
        "bob",
        "carol",
    ], "their rows are kept"


def in_group(pgid: int, text: str) -> bool:
    """Whether a process of group ``pgid`` runs a command line holding ``text`` (Linux's /proc)."""
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if int(proc_fields(process.name)[2]) == pgid and text in (process / "cmdline").read_text():
                return True
        except (OSError, IndexError, ValueError):
            continue  # a process that ended meanwhile
    return False


@pytest.mark.slow
@pytest.mark.parametrize("when", ["while the workers start", "while grading"])
def test_ctrl_c_in_a_terminal_prints_no_traceback(tmp_path, when):
    """A terminal's Ctrl-C goes to every process of the batch: Python's fork server and the workers leave it to
    the batch, which alone answers (no KeyboardInterrupt traceback from another process), and stops them all."""
    root = tmp_path / "class"
    students = 8  # room to be interrupted between the first result and the last (4 were once all saved first)
    for i in range(students):
        (reference if i < 2 else slow_reference)(root / f"s{i}")
    db = root / "grades.sqlite"
    command = [sys.executable, "-m", "grader", "batch", str(root), "--workers", "2", "-m", "m1"]
    proc = interruptible(command)

    def ready() -> bool:
        if when == "while grading":
            return 1 <= committed(db) < students
        return in_group(proc.pid, "multiprocessing.forkserver")

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends: to the whole process group
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the batch did not stop within 60 s of Ctrl-C") from None
    saved = committed(db)
    assert saved < students, f"the interrupt came too late to test anything (exit {proc.returncode}): {stderr[-800:]}"
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert f"interrupted: {saved} result{'s' * (saved != 1)} saved by this run" in stderr, stderr
    time.sleep(1)
    assert not in_group(proc.pid, "python"), "a process of the batch outlived it"


@pytest.mark.parametrize("args,phrase", [(["--workers", "0"], "--workers"), ([], "no submissions found")])
def test_batch_usage_errors(tmp_path, args, phrase):
    proc = batch(str(tmp_path), *args)
    assert proc.returncode == 2 and phrase in proc.stderr, proc.stderr


@pytest.mark.slow
def test_batch_on_a_dask_cluster(tmp_path):
    """--scheduler: the same gradebook and resume, with the grading done by a LocalCluster's workers."""
    distributed = pytest.importorskip("distributed")
    root = tmp_path / "class"
    reference(root / "alice")
    shutil.copytree(EXERCISES, root / "bob")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        proc = batch(str(root), "--scheduler", cluster.scheduler_address, *QUICK)
        assert proc.returncode == 0 and "2 graded, 0 already" in proc.stderr, proc.stderr
        again = batch(str(root), "--scheduler", cluster.scheduler_address, *QUICK)
        assert "0 graded, 2 already" in again.stderr, again.stderr
    assert {s: r["score"] for s, r in rows(root / "grades.sqlite").items()} == {"alice": 36, "bob": 0}


@pytest.mark.slow
def test_submission_time_limit_fails_the_checks_past_it(tmp_path):
    """--submission-timeout: a submission whose every call sleeps 0.3 s runs out of its 4 s; the checks after
    that fail unrun, saying why, and the submission's grading ends soon after its limit."""
    root = tmp_path / "class"
    slow = reference(root / "slow") / "m1_attention.py"
    first_line = "    T, d_k = q.shape[-2], q.shape[-1]\n"
    slow.write_text(slow.read_text().replace(first_line, "    __import__('time').sleep(0.3)\n" + first_line))
    proc = batch_here(str(root), "-m", "m1", "--submission-timeout", "4")
    assert proc.returncode == 0, proc.stderr
    row = rows(root / "grades.sqlite")["slow"]
    with sqlite3.connect(root / "grades.sqlite") as con:
        unrun = [m for (m,) in con.execute("SELECT message FROM checks WHERE NOT passed") if "time limit of 4 s" in m]
    assert unrun and row["score"] < row["max_score"], row
    assert row["seconds"] < 4 + 20 + 5, f"the submission took {row['seconds']:.0f} s with a 4 s limit"


def test_batch_refuses_a_db_that_is_not_a_gradebook_and_writes_nothing_to_it(tmp_path):
    """`--db course/gradebook.db` (nbgrader's, also called a gradebook) got the batch's tables added to it."""
    shutil.copytree(EXERCISES, tmp_path / "class" / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    db = tmp_path / "gradebook.db"
    with sqlite3.connect(db) as con:
        con.executescript("CREATE TABLE assignment (id TEXT); CREATE TABLE grade_cell (id TEXT);")
    con.close()
    before = db.read_bytes()
    proc = batch(str(tmp_path / "class"), "--db", str(db), *QUICK)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{db} is not a gptkit gradebook (it has tables: assignment, grade_cell); nbgrader's" in proc.stderr, (
        proc.stderr
    )
    assert db.read_bytes() == before, "the batch wrote to a file that is not its gradebook"


@pytest.mark.parametrize("db,phrase", [("afile/grades.sqlite", "afile is a file, not a folder"), ("bad", "")])
def test_batch_db_paths_that_cannot_be_a_gradebook_are_usage_errors(tmp_path, db, phrase):
    """A --db under an existing file, or a file that is no database at all: a usage error, no traceback."""
    shutil.copytree(EXERCISES, tmp_path / "class" / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "bad").write_text("garbage")
    proc = batch(str(tmp_path / "class"), "--db", str(tmp_path / db), *QUICK)
    phrase = phrase or f"{tmp_path / db} is not a gptkit gradebook: it is not an SQLite database"
    assert proc.returncode == 2 and phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_batch_makes_the_folder_of_a_new_db(tmp_path):
    """`--db out/grades.sqlite` with no out/ yet: made, as the exports make theirs (SQLite ended in a traceback)."""
    (tmp_path / "class" / "alice").mkdir(parents=True)  # nothing to grade: recorded without grading
    proc = batch(str(tmp_path / "class"), "--db", str(tmp_path / "out" / "grades.sqlite"), *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert rows(tmp_path / "out" / "grades.sqlite")["alice"]["status"] == EMPTY


def test_an_unreadable_notebook_tells_its_student_why_without_class_names_or_paths(tmp_path):
    """The results.json of `grade export --gradescope` goes to the student: no "SubmissionError: " and no path of
    the instructor's machine, only their file's name."""
    (tmp_path / "class2").mkdir()
    (tmp_path / "class2" / "eve.ipynb").write_text("{not json")
    db = tmp_path / "grades.sqlite"
    proc = batch_here(str(tmp_path / "class2"), "--db", str(db), "--workers", "1", *QUICK)
    assert proc.returncode == 0, proc.stderr
    proc = cli("export", str(db), "--gradescope", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    output = json.loads((tmp_path / "out" / "eve" / "results.json").read_text())["output"]
    assert output.startswith("eve.ipynb is not a readable Jupyter notebook (JSONDecodeError: "), output
    assert "SubmissionError" not in output and "class2" not in output, output
