"""The command line as a user meets it: usage errors and output formats (notebooks: test_notebooks.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, SOLUTIONS, Variant, check_here, grade
from helpers import cli as run


@pytest.mark.parametrize(
    "args,phrase",
    [
        (["solutions", "-m", "m9"], "unknown milestone"),
        (["no/such/folder"], "does not exist"),
        (["README.md"], "neither a folder nor a notebook"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args, phrase):
    """`grade check ARGS` in this process (its exit code and messages are the command's; an exception it let
    through would be raised here, a traceback)."""
    proc = check_here(*args)
    assert proc.returncode == 2, proc.stderr
    assert phrase in proc.stderr and "Traceback" not in proc.stderr


def test_grade_without_arguments_needs_an_exercises_folder(tmp_path):
    proc = run(cwd=tmp_path)
    assert proc.returncode == 2 and "no exercises/ folder" in proc.stderr


@pytest.mark.slow
def test_one_milestone_and_the_text_table():
    proc = check_here("solutions", "-m", "m1")  # the command's table, graded on the session's warm Grader
    assert proc.returncode == 0, proc.stderr
    assert "Causal self-attention" in proc.stdout and "all passed" in proc.stdout
    assert "TinyGPT" not in proc.stdout, "only the chosen milestone is graded"


@pytest.mark.slow
def test_gradescope_results_schema(tmp_path):
    out = tmp_path / "results.json"
    proc = check_here("solutions", "-m", "m4", "--format", "gradescope", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert {"score", "tests", "execution_time"} <= results.keys()
    assert results["tests"], "one entry per check"
    for test in results["tests"]:
        assert {"name", "score", "max_score", "output", "visibility", "tags"} <= test.keys()
        assert test["tags"] == ["m4"] and test["score"] == test["max_score"] > 0
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


def broken_suites(tmp_path, suite: str) -> Path:
    """A copy of the suites in which ``suite`` does not parse."""
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "grader" / "suites", suites, ignore=shutil.ignore_patterns("__pycache__"))
    (suites / "hidden" / suite).write_text("def broken(:\n")
    return suites


def use_broken_suite(tmp_path, suite: str) -> str:
    """Python lines that point the runner at a copy of the suites in which ``suite`` does not parse."""
    suites = broken_suites(tmp_path, suite)
    return f"""
from pathlib import Path
import grader.runner as runner
runner.SUITES, runner.HIDDEN = Path({str(suites)!r}), Path({str(suites / "hidden")!r})
"""


@pytest.mark.slow
def test_a_suite_that_cannot_be_collected_is_named(tmp_path, monkeypatch):
    """A broken hidden suite stops the grading with a message naming the file and the error, not a bare exit code.
    In this process: the suites are collected in the grading process, where the runner reads SUITES and HIDDEN;
    a Grader of the test's own, as the error drops the warm server the session's Grader would keep."""
    import grader.runner as runner
    from grader.grading import Grader, Request

    suites = broken_suites(tmp_path, "test_m1_attention.py")
    monkeypatch.setattr(runner, "SUITES", suites)
    monkeypatch.setattr(runner, "HIDDEN", suites / "hidden")
    with Grader() as grader, pytest.raises(runner.GraderError) as failed:
        grader.grade(Request(SOLUTIONS, ("m1",)))
    out = str(failed.value)
    assert "the hidden suites did not run" in out and "test_m1_attention.py" in out and "SyntaxError" in out, out


def same_checks(report: dict) -> list[tuple]:
    return [(c["milestone"], c["name"], c["passed"], c["score"], c["message"]) for c in report_checks(report)]


def report_checks(report: dict) -> list[dict]:
    return [c for m in report["milestones"] for c in m["checks"]]


@pytest.mark.slow
def test_side_by_side_gives_the_report_of_one_process(tmp_path):
    """`-j 2` grades the milestones in two processes; the report is the one `-j 1` gives, check by check."""
    from corpus import BUGGY

    bugs = {v.name: v for v in BUGGY}
    variant = Variant("two bugs", edits={**bugs["m1-mask-triu"].edits, **bugs["m3-no-zero-grad"].edits})
    submission = variant.build(tmp_path / "submission")
    milestones = [arg for m in ("m1", "m2", "m3", "m4", "sampling") for arg in ("-m", m)]
    # -j 1 is one grading process: this one, on the session's warm Grader (jobs=1); -j 2 needs the command itself.
    one, two = grade(submission, *milestones), grade(submission, *milestones, "-j", "2")
    assert one.report and two.report, one.stderr + two.stderr
    assert same_checks(two.report) == same_checks(one.report)
    assert [m["id"] for m in two.report["milestones"]] == ["m1", "m2", "m3", "m4", "sampling"]
    failed = {c["milestone"] for c in report_checks(two.report) if not c["passed"]}
    assert {"m1", "m3"} <= failed, "the bugs were not caught: the comparison proves nothing"
    assert two.report["workers"] > one.report["workers"], "-j 2 did not grade in two processes"


@pytest.mark.slow
def test_a_failing_grading_process_side_by_side_is_the_graders_error(tmp_path):
    """When the second process's suite cannot run, `grade` says the grader failed (exit 1), naming it."""
    script = f"""
{use_broken_suite(tmp_path, "test_m2_model.py")}
import sys
from grader.cli import main
sys.argv = ["grade", "check", {str(SOLUTIONS)!r}, "-m", "m1", "-m", "m2", "-j", "2"]
main()
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the grader itself failed" in proc.stderr and "grading m2 failed" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
