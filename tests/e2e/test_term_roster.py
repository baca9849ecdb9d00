"""An instructor's term: a class of 25 on a roster (roster.csv: id, email, name) in nbgrader's layout, through `grade
batch`, `grade report`, `grade export`, the Gradescope zip's step and `grade regrades`.

One student on the roster handed nothing in, one folder is not on the roster, one student is late with an extension
keyed by their id, another late without one, and one filed a regrade request beside nbgrader's timestamp.txt. The
class is recorded in the gradebook as `grade batch` records it (its own discovery, digests and fingerprint), so the
batch finds every submission current and grades none: what is tested is what the commands read and say."""

from __future__ import annotations

import csv
import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.batch.discover import discover
from grader.batch.gradebook import NO_SUBMISSION, Gradebook
from grader.batch.regrades import REQUEST_FILE
from grader.bundles import gradescope
from grader.deadlines import gradescope_submission
from grader.fingerprint import ROOT_VARIABLE, grader_fingerprint
from helpers import REPO, batch_here, cli, command_here, m4_report

DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
LATE = DUE + timedelta(hours=30)  # 2 started days: 20% off
STUDENTS = [f"s{i:02d}" for i in range(1, 26)]
ABSENT = "s07"  # on the roster, no submission
STRANGER = "zed"  # a folder not on the roster
EXTENDED = "s20"  # late, with an extension keyed by id
PENALISED = "s03"  # late, no extension
ASKING = "s05"  # a regrade request beside timestamp.txt
POLICY = f"""\
due = "{DUE.isoformat()}"
[late]
per = "day"
penalty = 10
[extensions]
{EXTENDED} = 72
"""


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    """The grading code's fingerprint taken from a snapshot (as tests/e2e/test_batch.py pins it): the gradebook
    recorded here stays current for the batch, however the shared checkout changes meanwhile."""
    snapshot = tmp_path_factory.mktemp("grader_snapshot")
    for name in ("grader", "solutions"):
        shutil.copytree(REPO / name, snapshot / name, ignore=shutil.ignore_patterns("__pycache__"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ROOT_VARIABLE, str(snapshot))
        yield snapshot


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"  # nbgrader's own format


@pytest.fixture(scope="module")
def term(pinned, tmp_path_factory) -> Path:
    """course/submitted/STUDENT/hw1/ for every student but ABSENT, and STRANGER; roster.csv and late.toml beside it;
    course/grades.sqlite holding each one graded on m4 (s01 scores 0, the others 9 of 9, s02 4.5)."""
    course = tmp_path_factory.mktemp("term") / "course"
    for student in [s for s in STUDENTS if s != ABSENT] + [STRANGER]:
        folder = course / "submitted" / student / "hw1"
        folder.mkdir(parents=True)
        (folder / "m4_generate.py").write_text(f"# {student}'s generation\n")
        late = student in (EXTENDED, PENALISED)
        (folder / "timestamp.txt").write_text(stamp(LATE if late else DUE - timedelta(hours=2)))
    (course / "submitted" / ASKING / "hw1" / REQUEST_FILE).write_text("m4\nMy sampling was right, please look again\n")
    rows = ["student,email,name"] + [f"{s},{s}@uni.edu,Student {s[1:]}" for s in STUDENTS]
    (course / "roster.csv").write_text("\n".join(rows) + "\n")
    (course / "late.toml").write_text(POLICY)
    book = Gradebook(course / "grades.sqlite")
    for found in discover(course, empty=True):
        score = {"s01": 0.0, "s02": 4.5}.get(found.student, 9.0)
        book.record(
            found.student,
            str(found.path),
            found.digest(),
            "0",
            ["m4"],
            m4_report(score),
            fingerprint=grader_fingerprint(),
            time_from=found.time_from,
        )
    book.close()
    return course


def exported(course: Path, *args: str) -> tuple[dict[str, dict], str]:
    out = course.parent / "grades.csv"
    proc = cli("export", str(course / "grades.sqlite"), "--csv", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    return {r["student"]: r for r in csv.DictReader(out.open())}, proc.stderr


# ---------------------------------------------------------------- the roster: the missing student, the stranger


def test_batch_lists_the_missing_student_and_names_the_folder_not_on_the_roster(term, tmp_path):
    elsewhere = tmp_path / "roster.csv"  # not beside the class: read only when given
    shutil.copy(term / "roster.csv", elsewhere)
    (term / "roster.csv").rename(term / "roster.kept")
    try:
        plain = batch_here(str(term), "-m", "m4")
        assert plain.returncode == 0, plain.stderr
        assert "0 graded, 25 already in" in plain.stderr and "25 submissions: 25 graded" in plain.stderr, plain.stderr
        assert ABSENT not in plain.stderr and "not on the roster" not in plain.stderr, "no roster: nothing to say"
        given = batch_here(str(term), "-m", "m4", "--roster", str(elsewhere))
    finally:
        (term / "roster.kept").rename(term / "roster.csv")
    assert given.returncode == 0, given.stderr
    assert f"1 with {NO_SUBMISSION} (0 points)" in given.stderr, given.stderr
    assert f"1 student on the roster with {NO_SUBMISSION}, listed with 0 points: {ABSENT}" in given.stderr
    assert f"WARNING: 1 submission not on the roster {elsewhere}: {STRANGER}." in given.stderr
    found = batch_here(str(term), "-m", "m4")  # roster.csv in the class folder is found without the option
    assert found.returncode == 0 and f"with 0 points: {ABSENT}" in found.stderr, found.stderr


def test_export_and_report_list_the_missing_student_with_0_and_no_submission(term):
    hidden = term / "roster.kept"
    (term / "roster.csv").rename(hidden)
    try:
        table, _ = exported(term)
    finally:
        hidden.rename(term / "roster.csv")
    assert ABSENT not in table and STRANGER in table, "without a roster the missing student is absent"

    table, said = exported(term, "--gradescope", str(term.parent / "gs"))
    assert len(table) == 26 and table[ABSENT]["status"] == NO_SUBMISSION, table[ABSENT]
    assert table[ABSENT]["score"] == "0.0" and table[ABSENT]["max_score"] == "9.0"
    assert table["s10"]["email"] == "s10@uni.edu" and table["s10"]["name"] == "Student 10"
    assert table[STRANGER]["email"] == "" and f"not on the roster {term / 'roster.csv'}: {STRANGER}" in said
    results = json.loads((term.parent / "gs" / ABSENT / "results.json").read_text())
    assert results["score"] == 0 and results["tests"] == [] and "No submission of yours" in results["output"]

    proc = cli("report", str(term / "grades.sqlite"), "--png", str(term.parent / "charts"))
    assert proc.returncode == 0, proc.stderr
    assert f"with 0 points: {ABSENT}" in proc.stdout and f"1 with {NO_SUBMISSION}" in proc.stdout, proc.stdout
    assert (term.parent / "charts" / "score-distribution.png").stat().st_size > 0


# ---------------------------------------------------------------- one identity: late policy, Gradescope


def test_an_extension_keyed_by_id_applies_in_export_and_report_and_the_scores_are_penalised(term):
    table, _ = exported(term, "--late-policy", str(term / "late.toml"))
    assert table[PENALISED]["late_penalty_percent"] == "20" and table[PENALISED]["score_after_penalty"] == "7.2"
    assert table[EXTENDED]["late_penalty_percent"] == "0" and "with an extension" in table[EXTENDED]["late_note"]
    assert table[ABSENT]["score_after_penalty"] == "0.0"
    proc = cli("report", str(term / "grades.sqlite"), "--late-policy", str(term / "late.toml"))
    assert proc.returncode == 0, proc.stderr
    assert f"  {PENALISED}: 9.0 -> 7.2" in proc.stdout and f"  {EXTENDED}:" not in proc.stdout, proc.stdout
    assert "after late penalties" in proc.stdout


def test_a_key_that_names_no_one_is_refused_with_a_roster_and_warned_of_without(term, tmp_path):
    wrong = tmp_path / "late.toml"
    wrong.write_text(POLICY + 'nobody = 24\n"s10@uni.edu" = 48\n')
    db = str(term / "grades.sqlite")
    refused = cli("export", db, "--csv", str(tmp_path / "x.csv"), "--late-policy", str(wrong))
    assert refused.returncode == 2 and "'nobody' names no student on the roster" in refused.stderr, refused.stderr
    assert not (tmp_path / "x.csv").exists() and "Traceback" not in refused.stderr
    table, said = exported(term, "--late-policy", str(term / "late.toml"))  # every key on the roster: no word
    assert "names no student" not in said and "warning" not in said
    hidden = term / "roster.kept"
    (term / "roster.csv").rename(hidden)
    try:
        warned = cli("export", db, "--csv", str(tmp_path / "x.csv"), "--late-policy", str(wrong))
    finally:
        hidden.rename(term / "roster.csv")
    assert warned.returncode == 0, warned.stderr
    assert "warning: the late policy's extensions 'nobody', 's10@uni.edu' name no student" in warned.stderr


def gradescope_step(tmp_path: Path, zipped: Path, email: str, monkeypatch) -> dict:
    """The zip's run_autograder step (``python -m grader.bundles.gradescope`` with what the script passes it) for
    a submission by ``email`` made at LATE: the grading itself stood in for by full marks (it is not what is
    tested), the late policy, the metadata and the roster read as the autograder reads them."""
    import zipfile

    root = tmp_path / "autograder"
    shutil.rmtree(root, ignore_errors=True)
    with zipfile.ZipFile(zipped) as zf:
        names = [n for n in zf.namelist() if n in (gradescope.LATE_POLICY, gradescope.ROSTER, "run_autograder")]
        zf.extractall(root / "source", members=names)
    (root / "submission").mkdir()
    meta = {
        "created_at": LATE.isoformat(),
        "assignment": {"due_date": DUE.isoformat()},
        "users": [{"email": email, "name": "A Student", "sid": "1"}],
    }
    (root / "submission_metadata.json").write_text(json.dumps(meta))
    script = (root / "source" / "run_autograder").read_text()
    assert '--roster "$ROSTER"' in script and 'ROSTER="$ROOT/source/roster.csv"' in script
    monkeypatch.setattr(gradescope, "results", lambda *a: ({"score": 9.0, "output": "Graded.", "tests": []}, 0))
    source = root / "source"
    out = root / "results.json"
    args = [str(root / "submission"), str(out), "--late-policy", str(source / gradescope.LATE_POLICY)]
    gradescope.main(
        args + ["--metadata", str(root / "submission_metadata.json"), "--roster", str(source / "roster.csv")]
    )
    return json.loads(out.read_text())


@pytest.mark.parametrize("with_roster", [True, False])
def test_gradescope_applies_the_extension_keyed_by_id_when_the_roster_travels_in_the_zip(
    term, tmp_path, monkeypatch, with_roster
):
    zipped = tmp_path / "a.zip"
    args = ["gradescope", str(zipped), "--late-policy", str(term / "late.toml")]
    built = cli(*args, *(["--roster", str(term / "roster.csv")] if with_roster else []))
    assert built.returncode == 0, built.stderr
    results = gradescope_step(tmp_path, zipped, f"{EXTENDED}@uni.edu", monkeypatch)
    if with_roster:
        assert "without a roster" not in built.stderr
        assert results["score"] == 9.0 and "with an extension" in results["output"], results["output"]
        other = gradescope_step(tmp_path, zipped, f"{PENALISED}@uni.edu", monkeypatch)
        assert other["score"] == 7.2 and "20% off" in other["output"], "the roster waives only the extended"
    else:  # the id reaches no one on Gradescope: the zip's build says so, and the student loses 20%
        assert f"'{EXTENDED}' is keyed by no email" in built.stderr and "--roster" in built.stderr, built.stderr
        assert results["score"] == 7.2 and "20% off" in results["output"], results["output"]


def test_a_zip_refuses_a_late_policy_key_that_names_no_one_on_its_roster(term, tmp_path):
    wrong = tmp_path / "late.toml"
    wrong.write_text(POLICY + "nobody = 24\n")
    proc = cli("gradescope", str(tmp_path / "a.zip"), "--late-policy", str(wrong), "--roster", str(term / "roster.csv"))
    assert proc.returncode == 2 and "'nobody' names no student on the roster" in proc.stderr, proc.stderr
    assert not (tmp_path / "a.zip").exists()


def test_gradescope_metadata_gives_the_submitters_email_and_name(tmp_path):
    meta = tmp_path / "m.json"
    meta.write_text(json.dumps({"users": [{"email": "S20@uni.edu", "name": "Student 20"}]}))
    found = gradescope_submission(meta)
    assert (found.email, found.name, found.student) == ("S20@uni.edu", "Student 20", "S20@uni.edu")


# ---------------------------------------------------------------- regrades in nbgrader's layout, either folder


@pytest.mark.parametrize("given", ["course", "submitted"])
def test_a_regrade_request_beside_timestamp_txt_is_found_from_either_folder(term, given):
    folder = term if given == "course" else term / "submitted"
    proc = command_here("regrades", "list", str(folder), "--db", str(term / "grades.sqlite"), patches={})
    assert proc.returncode == 0, proc.stderr
    assert "1 open regrade request in" in proc.stdout, proc.stdout
    assert f"{ASKING}  m4  now 9 of 9" in proc.stdout and "My sampling was right" in proc.stdout


def test_a_request_in_a_students_own_folder_below_the_assignment_is_not_nbgraders(term):
    """nbgrader's layout read from the course folder: only the assignment's folder holds a request (below it is
    the student's own); and one at the top of a plain batch's student folder is still found."""
    inner = term / "submitted" / "s06" / "hw1" / "deeper"
    inner.mkdir()
    (inner / REQUEST_FILE).write_text("m4\nplease\n")
    try:
        proc = command_here("regrades", "list", str(term), patches={})
    finally:
        shutil.rmtree(inner)
    assert "1 open regrade request in" in proc.stdout and "s06" not in proc.stdout, proc.stdout


# ---------------------------------------------------------------- the export's Gradescope layout, as the zip's


def test_the_gradescope_export_is_grouped_and_hidden_as_the_zip_is(term):
    out = term.parent / "gs-layout"
    proc = cli("export", str(term / "grades.sqlite"), "--gradescope", str(out))
    assert proc.returncode == 0 and "a test per milestone, hidden checks after_published" in proc.stderr
    results = json.loads((out / "s02" / "results.json").read_text())
    (test,) = results["tests"]
    assert test["name"].startswith("m4: ") and test["visibility"] == "after_published"
    assert test["score"] == 4.5 and test["max_score"] == 9 and "once your instructor publishes" in results["output"]
    proc = cli(
        "export", str(term / "grades.sqlite"), "--gradescope", str(out), "--tests", "check", "--visibility", "visible"
    )
    assert proc.returncode == 0, proc.stderr
    tests = json.loads((out / "s02" / "results.json").read_text())["tests"]
    assert len(tests) == 2 and {t["visibility"] for t in tests} == {"visible"}
