"""`grade release --no-answer-locks`: a release for a class that will sit a paper on the quiz's, kvmemory's and
concepts' questions. A release's locked answers open to a search in seconds, and those of the questions a paper
asks alike of every student (the quiz, kvmemory's Q_TEXT1) answer the paper too; the others are each student's
own (tests/unit/test_paper_shuffle.py). Without locks the release holds no answer, and its public checks say
whether each question is answered, never whether it is right."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from grader.suites.locked_answers import LOCKED
from helpers import SOLUTIONS, cli

pytestmark = pytest.mark.slow  # builds a release and grades in it

LOCKS = Path("grader/suites/locked_answers.py")


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "gptkit-release"
    proc = cli("release", str(out), "--no-answer-locks")
    assert proc.returncode == 0, proc.stderr
    return out


def shipped_locks(release: Path) -> dict:
    tree = ast.parse((release / LOCKS).read_text())
    (value,) = (n.value for n in tree.body if isinstance(n, ast.AnnAssign))
    assert value is not None
    return ast.literal_eval(value)


def test_the_release_holds_every_question_and_no_answer(release):
    locks = shipped_locks(release)
    assert {e: set(q) for e, q in locks.items()} == {e: set(q) for e, q in LOCKED.items()}
    assert all(lock == {"withheld": True} for questions in locks.values() for lock in questions.values())
    assert "hashes" not in (release / LOCKS).read_text(), "no lock of any answer ships"


def test_its_checks_say_answered_and_nothing_of_right_or_wrong(release, tmp_path):
    """The reference's answers and wrong ones pass alike (answered); an unanswered question fails as unanswered."""
    wrong = tmp_path / "wrong"
    shutil.copytree(SOLUTIONS, wrong, ignore=shutil.ignore_patterns("__pycache__"))
    quiz = (wrong / "quiz.py").read_text()
    (wrong / "quiz.py").write_text(quiz.replace("Q7 = 1e10", "Q7 = 1e11").replace("Q1 = ", "Q1 = None  # ", 1))
    proc = cli("check", str(wrong), "-m", "quiz", "-m", "concepts", "--format", "json", cwd=release)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["checks"] == "public", report
    failed = {c["name"]: c["message"] for m in report["milestones"] for c in m["checks"] if not c["passed"]}
    assert len(failed) == 1 and "Q1" in next(iter(failed)), failed
    assert next(iter(failed.values())).startswith("not implemented yet"), failed
