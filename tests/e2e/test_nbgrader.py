"""nbgrader's own pipeline on the generated course, offline: generate_assignment, autograde, export.

alice hands in the source notebook (the reference), bob the untouched release, carol
the reference with one bug in m4 (the first position's logits instead of the last), dave
the reference with one bug in m3 (the gradients never zeroed). The same four notebooks
also go through `grade batch`: both give the same totals.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import (
    EXERCISES,
    SOLUTIONS,
    SessionGrader,
    batch_here,
    cli,
    command_here,
    explain,
    function_bodies,
    grade,
    normalized,
)

pytest.importorskip("nbgrader", reason="nbgrader is a dev dependency: pip install -e '.[dev]'")

from grader.milestones import MILESTONES  # noqa: E402

pytestmark = pytest.mark.slow  # every test here grades whole submissions

MODULES = [name for m in MILESTONES.values() for name in m.modules]
NOTEBOOK = Path("source/lesson/tinygpt.ipynb")
RELEASE = Path("release/lesson/tinygpt.ipynb")
BUGS = {
    "carol": (
        "next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)",
        "next_token = logits[:, 0, :].argmax(dim=-1, keepdim=True)",
    ),
    "dave": ("opt.zero_grad()", "pass  # opt.zero_grad()"),
}


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    # nbgrader shells out to alembic: the environment's bin/ must be on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    # nbgrader only logs a config file that fails to load, and goes on without it
    assert "[ERROR]" not in proc.stderr and "| ERROR]" not in proc.stderr, proc.stderr[-3000:]
    return proc


def cells(path: Path) -> dict[str, dict]:
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in json.loads(path.read_text())["cells"]}


def source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    # `grade nbgrader` in this process, its sanity grading of the reference on the session's warm Grader
    proc = command_here("nbgrader", str(course), patches={"grader.cli.Grader": SessionGrader})
    assert proc.returncode == 0, proc.stderr
    nbgrader(course, "generate_assignment", "lesson")
    return course


@pytest.fixture(scope="module")
def gradebook(course) -> dict:
    """Each student's score per autograder-test cell (nbgrader), nbgrader's and `grade batch`'s totals."""
    text = (course / NOTEBOOK).read_text()
    notebooks = {"alice": text, "bob": (course / RELEASE).read_text()}
    for student, (good, bad) in BUGS.items():
        assert json.dumps(good)[1:-1] in text, f"{student}'s bug: {good!r} is not in the notebook"
        notebooks[student] = text.replace(json.dumps(good)[1:-1], json.dumps(bad)[1:-1])
    for student, notebook in notebooks.items():
        folder = course / "submitted" / student / "lesson"
        folder.mkdir(parents=True)
        (folder / "tinygpt.ipynb").write_text(notebook)
    autograde = nbgrader(course, "autograde", "lesson")
    nbgrader(course, "export")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = {s: gb.find_submission_notebook("tinygpt", "lesson", s).grades for s in notebooks}
        scores = {s: {g.name: g.score for g in found} for s, found in grades.items()}
        most = {g.name: g.max_score for g in grades["alice"]}
    with open(course / "grades.csv") as f:
        totals = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}
    db, out = course.parent / "batch.sqlite", course.parent / "batch.csv"
    proc = batch_here(str(course / "submitted"), "--db", str(db), "--workers", "2")  # in this process
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = cli("export", str(db), "--csv", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out) as f:
        batch = {row["student"]: row for row in csv.DictReader(f)}
    return {"cells": scores, "max": most, "totals": totals, "batch": batch, "log": autograde.stdout + autograde.stderr}


def test_source_metadata_validates_against_nbgrader_schema(course):
    import nbformat
    from nbgrader.nbgraderformat import MetadataValidator

    MetadataValidator().validate_nb(nbformat.read(course / NOTEBOOK, as_version=4))


def test_release_has_no_solution(course):
    text = normalized("\n".join(source(c) for c in cells(course / RELEASE).values()))
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    leaked = [name for path in sorted(SOLUTIONS.glob("*.py")) for name, body in function_bodies(path) if body in text]
    assert not leaked, f"reference bodies in the release: {leaked}"


def _stub_code(module: str) -> str:
    """The stub's code as a notebook cell shows it: no module docstring, no demo, no imports of sibling files."""
    body = ast.parse((EXERCISES / f"{module}.py").read_text()).body[1:]
    return ast.unparse(
        ast.Module(
            [
                n
                for n in body
                if not (isinstance(n, ast.If) and "__main__" in ast.unparse(n))
                and not (isinstance(n, ast.ImportFrom) and n.module in MODULES)
            ],
            [],
        )
    )


@pytest.mark.parametrize("milestone", [m for m in MILESTONES if len(MILESTONES[m].modules) == 1])
def test_release_answer_cell_is_the_stub(course, milestone):
    """Every constant, question, signature, docstring and stub line of the stub, and nothing else."""
    released = source(cells(course / RELEASE)[f"{milestone}-answer"])
    assert ast.unparse(ast.parse(released)) == _stub_code(MILESTONES[milestone].modules[0])
    stub = (EXERCISES / f"{MILESTONES[milestone].modules[0]}.py").read_text().split("\nif __name__")[0].splitlines()
    for line, after in zip(stub, stub[1:]):  # the comments too (the quiz's questions), but a sibling import's
        if line.lstrip().startswith("#") and not after.startswith(("from m", "import m")):
            assert line in released, line


def test_release_markdown_has_no_command_line_instructions(course):
    text = "\n".join(source(c) for c in cells(course / RELEASE).values() if c["cell_type"] == "markdown")
    for phrase in ("Check yourself from the folder", "python m", "grade check -m"):
        assert phrase not in text, phrase
    # The files' demos are left out of the notebook, so no section may point at one or at what it prints.
    assert not re.search(r"demo|should print|printed", text, re.I), re.findall(r"[^\n]*(?:demo|print)[^\n]*", text)
    assert "pip install" in source(cells(course / RELEASE)["intro"])


def test_intro_says_what_the_release_holds(course):
    """The intro names the stub lines the answer cells really hold, and a set-up a notebook user can follow."""
    intro = source(cells(course / RELEASE)["intro"])
    answers = "\n".join(source(c) for name, c in cells(course / RELEASE).items() if name.endswith("-answer"))
    assert 'raise NotImplementedError("' in answers and "raise NotImplementedError(...)" in intro
    assert "`raise NotImplementedError()`" not in intro, "the cells hold the stub's raise, with its message"
    # a notebook user has only the notebook: the kit comes from the instructor (a course server's image, or
    # the student release to install), not from a folder they were assumed to have
    assert "your instructor installs it" in intro and "student release from your instructor" in intro, intro


def test_test_cells_are_the_same_in_source_and_release(course):
    """No hidden-test region: nbgrader autograde has no "checksum has changed" to log."""
    src, rel = cells(course / NOTEBOOK), cells(course / RELEASE)
    for m in MILESTONES:
        assert source(src[f"{m}-tests"]) == source(rel[f"{m}-tests"])
        assert f'check("tinygpt.ipynb", "{m}")' in source(rel[f"{m}-tests"])


def test_reference_scores_full_marks_in_every_section(gradebook):
    score, max_score = gradebook["totals"]["alice"]
    assert score == max_score > 0, gradebook["cells"]["alice"]
    cells_ = gradebook["cells"]["alice"]
    assert set(cells_) == {f"{m}-tests" for m in MILESTONES}
    assert all(0 < cells_[f"{m}-tests"] == gradebook["max"][f"{m}-tests"] for m in MILESTONES), cells_


def test_untouched_release_scores_zero(gradebook):
    assert gradebook["totals"]["bob"][0] == 0, gradebook["cells"]["bob"]


def test_buggy_submission_loses_the_right_cells_only_with_partial_credit(gradebook):
    alice = gradebook["cells"]["alice"]
    for student, lost_cells in (("carol", ["lesson-tests", "m4-tests"]), ("dave", ["lesson-tests", "m3-tests"])):
        cells_ = gradebook["cells"][student]
        lost = sorted(name for name, score in cells_.items() if score < alice[name])
        assert lost == lost_cells, cells_
        assert any(0 < cells_[name] < alice[name] for name in lost), f"no partial credit: {cells_}"


@pytest.mark.parametrize("student", ["alice", "bob", "carol", "dave"])
def test_nbgrader_and_batch_give_the_same_grade(gradebook, student):
    row = gradebook["batch"][student]
    assert row["status"] == "graded", row
    nb_score, nb_max = gradebook["totals"][student]
    assert round(nb_score, 2) == round(float(row["score"]), 2)
    assert round(nb_max, 2) == round(float(row["max_score"]), 2)
    for m in MILESTONES:
        assert round(gradebook["cells"][student][f"{m}-tests"], 2) == round(float(row[m] or 0), 2), m


def test_no_checksum_warnings(gradebook):
    assert "checksum" not in gradebook["log"].lower(), gradebook["log"][-3000:]


def flat(text: object) -> str:
    """The text with its line breaks as spaces: the feedback wraps long lines, anywhere between words."""
    return " ".join(str(text).split())


def test_feedback_names_the_likely_cause(course, gradebook):
    m3 = cells(course / "autograded/dave/lesson/tinygpt.ipynb")["m3-tests"]
    text = flat("".join("".join(o.get("text", "")) for o in m3["outputs"] if o["output_type"] == "stream"))
    assert "never zeroed" in text and "zero_grad() every step" in text, text
    assert not any(o["output_type"] == "error" or o.get("name") == "stderr" for o in m3["outputs"]), m3["outputs"]


def test_unanswered_quiz_feedback_points_into_the_notebook(course, gradebook):
    """The notebook has no quiz.py: the feedback points at the question where the notebook shows it."""
    quiz = cells(course / "autograded/bob/lesson/tinygpt.ipynb")["quiz-tests"]
    text = flat("".join("".join(o.get("text", "")) for o in quiz["outputs"] if o["output_type"] == "stream"))
    assert "Q1 is still None (the question is in the comment just above it)" in text, text
    assert "quiz.py" not in text, text


def test_student_kit_fails_the_cell_on_public_failures(course):
    """Public checks only (a student's kit): the cell raises, with every failing check, or passes quietly."""
    from grader import nbgrader_hook

    with pytest.raises(AssertionError, match="public check") as failed:
        nbgrader_hook.check(str(course / RELEASE), "m1", public=True)
    # names that end in brackets of their own are not case ids: each is shown whole
    assert "out[0] = [-0.0835, -0.0235, 0.1744, 2.2983]:" in flat(failed.value), failed.value
    assert "its weights are [0.2689, 0.7311]:" in flat(failed.value), failed.value
    with pytest.raises(AssertionError, match="public check") as failed:
        nbgrader_hook.check(str(course / RELEASE), "attnvar", public=True)
    # the cases of one parametrized check (the runner records each case id) on one line
    assert "- (public) 4 heads: (2, 5, 16) in, (2, 5, 16) out (3 cases):" in flat(failed.value), failed.value
    assert nbgrader_hook.check(str(course / NOTEBOOK), "m1", public=True) is None


def test_failing_cases_group_by_case_id_not_by_trailing_brackets():
    from grader.nbgrader_hook import _grouped

    def failed(name: str, case: str = "") -> dict:
        return {"name": name + (f" [{case}]" if case else ""), "case": case, "message": f"{name} failed"}

    lines = _grouped(
        [
            failed("its weights are [0.2689, 0.7311]"),
            failed("its weights are [0.5, 0.5]"),  # differs only in its trailing brackets: another check
            failed("shape", "mha"),
            failed("shape", "gqa"),
            failed("out is [1, 2]", "3-9"),  # a parametrized check whose own name ends in brackets
            {"name": "an old report [x]", "message": "no case recorded"},  # a report from before `case`
        ]
    )
    assert lines == [
        "- its weights are [0.2689, 0.7311]: its weights are [0.2689, 0.7311] failed",
        "- its weights are [0.5, 0.5]: its weights are [0.5, 0.5] failed",
        "- shape (2 cases): shape failed",
        "- out is [1, 2]: out is [1, 2] failed",
        "- an old report [x]: no case recorded",
    ]


def test_each_section_filled_alone_scores_full_marks(course, gradebook, tmp_path):
    """The release with only one section's answer cell filled in (the stub's functions with the reference's
    bodies, and the helpers those bodies use): that milestone scores full marks, whatever the other sections hold.
    Each notebook is graded on its own section's milestone (as `grade check NOTEBOOK -m M`): the other sections
    hold the stubs, and test_untouched_release_scores_zero grades those."""
    src, release = cells(course / NOTEBOOK), json.loads((course / RELEASE).read_text())
    sections = [m for m in MILESTONES if len(MILESTONES[m].modules) == 1]
    scored = {}
    for m in sections:
        notebook = json.loads(json.dumps(release))
        for cell in notebook["cells"]:
            if cell["metadata"]["nbgrader"]["grade_id"] == f"{m}-answer":
                cell["source"] = "".join(
                    line
                    for line in src[f"{m}-answer"]["source"]
                    if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
                )
        (tmp_path / f"{m}.ipynb").write_text(json.dumps(notebook))
        result = grade(tmp_path / f"{m}.ipynb", "-m", m)
        assert result.returncode == 0 and result.report, explain(result)
        scored[m] = result.milestone(m)["score"]
    assert scored == {m: gradebook["max"][f"{m}-tests"] for m in sections}


def test_an_existing_nbgrader_config_is_not_overwritten(tmp_path):
    """A folder with the instructor's own nbgrader_config.py (their course_id, their exchange) but no source/
    yet: refused like a folder that holds a course, at once, with nothing written."""
    config = tmp_path / "course" / "nbgrader_config.py"
    config.parent.mkdir()
    config.write_text('c = get_config()\nc.CourseDirectory.course_id = "ml101"\n')
    proc = cli("nbgrader", str(config.parent))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "already holds a course (nbgrader_config.py): choose a new folder (nothing was overwritten)" in (
        proc.stderr
    ), proc.stderr
    assert config.read_text() == 'c = get_config()\nc.CourseDirectory.course_id = "ml101"\n'
    assert [p.name for p in config.parent.iterdir()] == ["nbgrader_config.py"]


def test_a_cell_that_never_ends_costs_minutes_once_not_a_checks_cell_each(course, tmp_path, monkeypatch):
    """The shipped config: nbgrader interrupts a student's cell after a minute (it used to wait 600 s for every
    cell), and gives a checks cell more than the hook's limit on grading the notebook. The hook stops a grading
    past that limit and keeps its failure, so the other checks cells answer at once (they used to wait up to
    600 s each, 13 times)."""
    import nbformat
    from nbgrader.preprocessors import Execute
    from traitlets.config.loader import PyFileConfigLoader

    from grader import nbgrader_hook

    execute = Execute(config=PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config())
    notebook = nbformat.read(course / RELEASE, as_version=4)
    by_id = {c.metadata.nbgrader.grade_id: c for c in notebook.cells if "nbgrader" in c.metadata}
    assert execute._get_timeout(by_id["m3-answer"]) == 60
    assert execute._get_timeout(by_id["m3-tests"]) > nbgrader_hook.GRADE_SECONDS

    monkeypatch.setattr(nbgrader_hook, "GRADE_SECONDS", 1)  # a notebook that takes longer than that to grade
    saved = tmp_path / "tinygpt.ipynb"
    saved.write_text((course / NOTEBOOK).read_text())
    started = time.monotonic()
    with pytest.raises(AssertionError, match="the grading took more than 1 s and was stopped"):
        nbgrader_hook.check(str(saved), "m1")
    with pytest.raises(AssertionError, match="the grading took more than 1 s and was stopped"):
        nbgrader_hook.check(str(saved), "m2")
    assert time.monotonic() - started < 10
