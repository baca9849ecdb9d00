"""The Gradescope autograder zip, run locally against a fake /autograder tree (same layout, in a temp dir)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import EXERCISES, SOLUTIONS, Variant, cli


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    """/autograder with the zip unpacked into source/, as Gradescope does (setup.sh's install is this venv)."""
    root = tmp_path_factory.mktemp("autograder")
    bundle = root / "autograder.zip"
    proc = cli("gradescope", str(bundle))
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    return root


def run_autograder(root: Path, submission: Path) -> dict:
    """Put `submission` (a folder's files, or one notebook) in submission/ and run run_autograder."""
    target = root / "submission"
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    if submission.is_dir():
        shutil.copytree(submission, target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        target.mkdir()
        shutil.copy(submission, target)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADE_PYTHON": sys.executable}
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, timeout=600)
    return json.loads((root / "results" / "results.json").read_text())


def test_the_zip_holds_the_scripts_the_grader_and_the_reference(autograder):
    names = {p.relative_to(autograder / "source").as_posix() for p in (autograder / "source").rglob("*")}
    assert {"setup.sh", "run_autograder", "pyproject.toml", "grader/cli.py", "grader/suites/test_m1_attention.py",
            "solutions/m1_attention.py"} <= names
    assert not any("__pycache__" in n or n.startswith(("tests/", "exercises/")) for n in names)


def test_reference_scores_full_marks(autograder):
    results = run_autograder(autograder, SOLUTIONS)
    assert results["tests"] and all(t["status"] == "passed" for t in results["tests"]), results
    assert results["score"] == pytest.approx(sum(t["max_score"] for t in results["tests"]))
    for test in results["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility", "tags"} <= test.keys()


def test_stubs_score_zero(autograder):
    results = run_autograder(autograder, EXERCISES)
    assert results["score"] == 0 and results["tests"], results
    assert all(t["output"].startswith("not implemented yet") for t in results["tests"])


def test_buggy_submission_loses_points_in_its_milestone(autograder, tmp_path):
    leaky = Variant("leaky", "m1", edits={"m1_attention.py": [("torch.tril(", "torch.triu(")]})
    results = run_autograder(autograder, leaky.build(tmp_path / "leaky"))
    by_tag = {}
    for test in results["tests"]:
        got, top = by_tag.get(test["tags"][0], (0, 0))
        by_tag[test["tags"][0]] = (got + test["score"], top + test["max_score"])
    assert by_tag["m1"][0] < by_tag["m1"][1], by_tag
    assert all(got == pytest.approx(top) for tag, (got, top) in by_tag.items() if tag not in ("m1", "lesson"))


def test_an_ungradable_submission_still_gets_results(autograder, tmp_path):
    (tmp_path / "work.ipynb").write_text("{not json")
    results = run_autograder(autograder, tmp_path / "work.ipynb")
    assert results["score"] == 0 and "could not grade" in results["output"], results
