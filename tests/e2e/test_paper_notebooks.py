"""A paper from end to end, as a coach and two students use it: `grade paper render` writes alice's and bob's
notebooks, alice fills hers from the reference, `grade check` grades exactly the paper's parts with her numbers
(full marks, in the paper's points), and the same answers in bob's notebook fail the questions whose numbers
were drawn for him."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader.suites.hidden import kv_questions
from grader.variants import Variant, seed_of
from helpers import EXERCISES, check_here, check_notebook, command_here, copy_answers, fill_paper_notebook

# each `grade check` starts the isolated workers (several seconds on two cores), here on the session's warm Grader
pytestmark = pytest.mark.slow


PAPER = """title = "Paper for two"
minutes = 45
feedback = "score"

[parts.kvmemory]
points = 20

[parts.quiz]
points = 10
"""
SECRET = "5" * 64


@pytest.fixture(scope="module")
def sitting(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("paper")
    paper = folder / "two"
    paper.mkdir()
    (paper / "paper.toml").write_text(PAPER)
    (paper / "paper.secret").write_text(SECRET + "\n")
    made = {}
    for student in ("alice", "bob"):
        out = folder / f"{student}.ipynb"
        proc = command_here("paper", "render", str(paper), "--student", student, "--out", str(out), patches={})
        assert proc.returncode == 0, proc.stderr
        made[student] = out
    alice, bob = (seed_of(SECRET, "two", s) for s in ("alice", "bob"))
    for question in kv_questions.DRAWN:  # the secret is chosen so that every drawn answer differs
        assert question.answer(question.params(Variant(alice))) != question.answer(question.params(Variant(bob)))
    made["alice-filled"] = folder / "alice-filled.ipynb"
    fill_paper_notebook(made["alice"], alice, made["alice-filled"])
    made["bob-copied"] = folder / "bob-copied.ipynb"  # bob's notebook, alice's cells
    copy_answers(made["alice-filled"], made["bob"], made["bob-copied"])
    return made


def test_the_reference_answers_for_alice_get_full_marks_on_her_paper(sitting):
    report = check_notebook(sitting["alice-filled"])
    assert {m["id"] for m in report["milestones"]} == {"kvmemory", "quiz"}  # exactly the paper's parts
    failed = [c for c in report["all"] if not c["passed"]]
    assert not failed, failed
    assert report["variant"] == seed_of(SECRET, "two", "alice")
    paper = report["paper"]
    assert paper["student"] == "alice" and paper["score"] == paper["points"] == 30
    assert [(p["id"], p["score"], p["points"]) for p in paper["parts"]] == [("kvmemory", 20, 20), ("quiz", 10, 10)]


def test_alices_answers_in_bobs_notebook_fail_his_drawn_questions(sitting):
    report = check_notebook(sitting["bob-copied"], "-m", "kvmemory")
    failed = {c["name"] for c in report["all"] if not c["passed"]}
    # bob's drawn numbers, and each multiple choice whose right option his order puts at another letter than alice's
    alice, bob = (Variant(seed_of(SECRET, "two", s)) for s in ("alice", "bob"))
    apart = {
        q for q in kv_questions.IDS if kv_questions.question(q, alice).answer != kv_questions.question(q, bob).answer
    }
    assert apart >= {q.id for q in kv_questions.DRAWN}
    assert failed == {f"the answer to the check-yourself question [{q}]" for q in apart}, failed
    assert report["variant"] == seed_of(SECRET, "two", "bob")
    assert [m["id"] for m in report["milestones"]] == ["kvmemory"]
    part = report["paper"]["parts"]
    assert [p["id"] for p in part] == ["kvmemory"] and 0 < part[0]["score"] < 20


def test_the_text_report_gives_the_papers_points(sitting):
    proc = check_here(str(sitting["alice-filled"]), "-m", "quiz")
    assert proc.returncode == 0, proc.stderr
    assert "paper: Paper for two (student alice)" in proc.stdout
    assert "quiz" in proc.stdout and "10.00 / 10" in proc.stdout and "(of the paper's 30)" in proc.stdout
    assert "Total" not in proc.stdout, "one total, in the paper's points: the summary's, not the grader's"
    bad = check_here(str(sitting["alice-filled"]), "-m", "m1")
    assert bad.returncode == 2 and "no part m1" in bad.stderr and "Traceback" not in bad.stderr


def unanswered(report: dict, question: str) -> str:
    return next(c["message"] for c in report["all"] if c["name"].endswith(f"[{question}]"))


def test_an_unanswered_question_in_the_notebook_points_to_its_cell_not_to_the_exercise_file(sitting):
    message = unanswered(check_notebook(sitting["alice"], "-m", "kvmemory"), "Q_NUM3")
    assert message.endswith("Q_NUM3 is still None (the question is in the comment just above it)"), (
        "a paper's notebook has no m11_kvmemory.py: the question's comment is in the cell, as for the quiz\n" + message
    )


def test_an_unanswered_question_in_a_folder_names_the_exercise_file(tmp_path):
    folder = tmp_path / "work"
    shutil.copytree(EXERCISES, folder)
    out = tmp_path / "folder.json"
    proc = check_here(str(folder), "-m", "kvmemory", "--format", "json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    report["all"] = [c for m in report["milestones"] for c in m["checks"]]
    message = unanswered(report, "Q_NUM3")
    assert message.endswith("(the question is in the comment just above it, in m11_kvmemory.py)"), message
