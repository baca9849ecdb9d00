"""The command line as a user meets it: usage errors and output formats (notebooks: test_notebooks.py)."""

import json
import shutil
import subprocess
import sys

import pytest

from helpers import REPO, SOLUTIONS
from helpers import cli as run


@pytest.mark.parametrize(
    "args,phrase",
    [
        (["check", "solutions", "-m", "m9"], "unknown milestone"),
        (["check", "no/such/folder"], "does not exist"),
        (["check", "README.md"], "neither a folder nor a notebook"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args, phrase):
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    assert phrase in proc.stderr and "Traceback" not in proc.stderr


def test_grade_without_arguments_needs_an_exercises_folder(tmp_path):
    proc = run(cwd=tmp_path)
    assert proc.returncode == 2 and "no exercises/ folder" in proc.stderr


@pytest.mark.slow
def test_one_milestone_and_the_text_table():
    proc = run("check", "solutions", "-m", "m1")
    assert proc.returncode == 0, proc.stderr
    assert "Causal self-attention" in proc.stdout and "all passed" in proc.stdout
    assert "TinyGPT" not in proc.stdout, "only the chosen milestone is graded"


@pytest.mark.slow
def test_gradescope_results_schema(tmp_path):
    out = tmp_path / "results.json"
    proc = run("check", "solutions", "-m", "m4", "--format", "gradescope", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert {"score", "tests", "execution_time"} <= results.keys()
    assert results["tests"], "one entry per check"
    for test in results["tests"]:
        assert {"name", "score", "max_score", "output", "visibility", "tags"} <= test.keys()
        assert test["tags"] == ["m4"] and test["score"] == test["max_score"] > 0
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


@pytest.mark.slow
def test_a_suite_that_cannot_be_collected_is_named(tmp_path):
    """A broken hidden suite stops the grading with a message naming the file and the error, not a bare exit code"""
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "grader" / "suites", suites, ignore=shutil.ignore_patterns("__pycache__"))
    (suites / "hidden" / "test_m1_attention.py").write_text("def broken(:\n")
    script = f"""
from pathlib import Path
import grader.runner as runner
runner.SUITES, runner.HIDDEN = Path({str(suites)!r}), Path({str(suites / "hidden")!r})
try:
    runner.grade(Path({str(SOLUTIONS)!r}), ["m1"])
except runner.GraderError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300).stdout
    assert "the hidden suites did not run" in out and "test_m1_attention.py" in out and "SyntaxError" in out, out
