"""nbgrader's own pipeline on the generated course, offline: generate_assignment, then autograde three submissions.

alice hands in the source notebook (the reference), bob the untouched release, carol
the reference with one bug in m4 (the first position's logits instead of the last).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import SOLUTIONS, cli, function_bodies, normalized

pytest.importorskip("nbgrader", reason="nbgrader is a dev dependency: pip install -e '.[dev]'")

NOTEBOOK = Path("source/lesson/tinygpt.ipynb")
BUG = ("next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)",
       "next_token = logits[:, 0, :].argmax(dim=-1, keepdim=True)")


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    # nbgrader shells out to alembic: the environment's bin/ must be on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    proc = cli("nbgrader", str(course))
    assert proc.returncode == 0, proc.stderr
    nbgrader(course, "generate_assignment", "lesson")
    return course


@pytest.fixture(scope="module")
def gradebook(course) -> dict[str, dict[str, float]]:
    """Each student's score per autograder-test cell, after `nbgrader autograde` and `nbgrader export`."""
    source = (course / NOTEBOOK).read_text()
    assert json.dumps(BUG[0])[1:-1] in source, "the bug's line is not in the notebook"
    notebooks = {"alice": source, "bob": (course / "release/lesson/tinygpt.ipynb").read_text(),
                 "carol": source.replace(json.dumps(BUG[0])[1:-1], json.dumps(BUG[1])[1:-1])}
    for student, text in notebooks.items():
        folder = course / "submitted" / student / "lesson"
        folder.mkdir(parents=True)
        (folder / "tinygpt.ipynb").write_text(text)
    nbgrader(course, "autograde", "lesson")
    nbgrader(course, "export")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        cells = {s: {g.name: g.score for g in gb.find_submission_notebook("tinygpt", "lesson", s).grades}
                 for s in notebooks}
    with open(course / "grades.csv") as f:
        totals = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}
    return {"cells": cells, "totals": totals}


def test_source_metadata_validates_against_nbgrader_schema(course):
    import nbformat
    from nbgrader.nbgraderformat import MetadataValidator

    MetadataValidator().validate_nb(nbformat.read(course / NOTEBOOK, as_version=4))


def test_release_has_no_solution_and_no_hidden_test(course):
    release = (course / "release/lesson/tinygpt.ipynb").read_text()
    text = normalized("\n".join("".join(c["source"]) for c in json.loads(release)["cells"]))
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert 'check("tinygpt.ipynb", "m1")' not in text and 'check("tinygpt.ipynb", "m1", public=True)' in text
    leaked = [name for path in sorted(SOLUTIONS.glob("*.py")) for name, body in function_bodies(path)
              if body in text]
    assert not leaked, f"reference bodies in the release: {leaked}"


def test_reference_scores_full_marks(gradebook):
    score, max_score = gradebook["totals"]["alice"]
    assert score == max_score > 0, gradebook["cells"]["alice"]


def test_untouched_release_scores_zero(gradebook):
    assert gradebook["totals"]["bob"][0] == 0, gradebook["cells"]["bob"]


def test_buggy_submission_loses_the_right_cells_only(gradebook):
    cells = gradebook["cells"]["carol"]
    lost = sorted(name for name, score in cells.items() if score < gradebook["cells"]["alice"][name])
    assert lost == ["lesson-tests", "m4-tests"], cells
    assert 0 < gradebook["totals"]["carol"][0] < gradebook["totals"]["carol"][1]
