"""Practice paper 2 (papers/practice-2), drawn from the `concepts` exercise: it renders a notebook per student with
their own numbers, `grade check` gives alice's reference-filled notebook the paper's 100 points and bob's copy of
it loses only his drawn questions, `grade practice` sits it (the reference full, the stubs nothing), and a contest
on it grades each student on their own numbers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from grader.paper import render
from grader.paper.config import load
from grader.suites.hidden import concept_questions
from grader.variants import Variant, seed_of
from helpers import (
    EXERCISES,
    REPO,
    SOLUTIONS,
    ContestClock,
    auth,
    check_notebook,
    contest_folder,
    copy_answers,
    fill_paper_notebook,
    open_contest,
    practice_here,
    rendered_notebooks,
    upload,
)

PAPER = REPO / "papers" / "practice-2"
SECRET = "7" * 64
DRAWN_IDS = {q.id for q in concept_questions.DRAWN}


def differ(paper: str, one: str, other: str, secret: str = SECRET) -> set[str]:
    """The questions whose answers differ between two students: drawn numbers (a small range of answers, such as a
    width, may give two students the same one with other numbers), a multiple choice whose right option each one's
    order puts at another letter, the line number of a listing numbered from each one's own first line."""
    a, b = (Variant(seed_of(secret, paper, who)) for who in (one, other))
    return {
        q
        for q in concept_questions.IDS
        if concept_questions.question(q, a).answer != concept_questions.question(q, b).answer
    }


def words(cell: str) -> list[str]:
    """A question's words, without its options' letters and its listing's line numbers: what each student reads."""
    return sorted(w for w in cell.replace("#", " ").split() if not w.isdigit() and not re.fullmatch(r"\([a-d]\)", w))


def cells(notebook: dict) -> dict[str, str]:
    return {c["id"]: "".join(c["source"]) for c in notebook["cells"]}


def test_the_paper_has_multiple_choice_numeric_and_code_parts_worth_100():
    paper = load(PAPER)
    assert paper.id == "practice-2" and paper.minutes == 120 and paper.total == 100
    assert [(p.id, p.points) for p in paper.parts] == [("concepts", 66), ("m3", 18), ("quiz", 16)]
    kinds = {type(concept_questions.question(i, Variant())).__name__ for i in concept_questions.IDS}
    assert kinds == {"MultipleChoice", "Numeric"}
    readme = (PAPER / "README.md").read_text()
    for section in ("A: multiple choice", "B: numeric", "C: code"):
        assert section in readme


def test_each_student_renders_with_their_own_numbers():
    paper = load(PAPER)
    seeds = {who: seed_of(SECRET, "practice-2", who) for who in ("alice", "bob")}
    books = {who: cells(render.build(paper, who, seed)) for who, seed in seeds.items()}
    for question in concept_questions.DRAWN:
        key = f"concepts-{question.id}-answer"
        for who, seed in seeds.items():
            assert question.comment(question.params(Variant(seed))) in books[who][key], (who, question.id)
        assert books["alice"][key] != books["bob"][key], f"{question.id}: alice and bob are asked the same"
    lesson = cells(render.build(paper))
    for question in concept_questions.DRAWN:
        assert question.comment(question.lesson) in lesson[f"concepts-{question.id}-answer"]
    # each one's options and listing, drawn from the hidden pools: none of the lesson's words, and not each other's
    fixed = set(concept_questions.IDS) - DRAWN_IDS
    for question in fixed:
        key = f"concepts-{question}-answer"
        assert f"# {question}." in books["alice"][key] and books["alice"][key] != lesson[key], question
    assert (
        sum(words(books["alice"][f"concepts-{q}-answer"]) != words(books["bob"][f"concepts-{q}-answer"]) for q in fixed)
        >= 10
    )
    meta = render.build(paper, "alice", seeds["alice"])["metadata"]["gptkit"]["paper"]
    assert meta["seed"] == seeds["alice"] and [p["id"] for p in meta["parts"]] == ["concepts", "m3", "quiz"]


@pytest.fixture(scope="module")
def sitting(tmp_path_factory) -> dict[str, Path]:
    """alice's and bob's notebooks rendered by `grade paper render` from a copy of the paper with a known secret;
    alice's filled with the reference and her answers; bob's with alice's cells."""
    folder = tmp_path_factory.mktemp("paper2")
    made = rendered_notebooks(folder, PAPER, SECRET, ("alice", "bob"))
    made["alice-filled"] = folder / "alice-filled.ipynb"
    fill_paper_notebook(made["alice"], seed_of(SECRET, "practice-2", "alice"), made["alice-filled"])
    made["bob-copied"] = folder / "bob-copied.ipynb"  # bob's notebook, alice's cells
    copy_answers(made["alice-filled"], made["bob"], made["bob-copied"])
    return made


@pytest.mark.slow
def test_alices_reference_answers_score_the_papers_100(sitting):
    report = check_notebook(sitting["alice-filled"])
    failed = [(c["name"], c["message"]) for m in report["milestones"] for c in m["checks"] if not c["passed"]]
    assert not failed, failed
    paper = report["paper"]
    assert paper["student"] == "alice" and paper["score"] == paper["points"] == 100
    assert [(p["id"], p["score"]) for p in paper["parts"]] == [("concepts", 66), ("m3", 18), ("quiz", 16)]


@pytest.mark.slow
def test_alices_answers_in_bobs_notebook_lose_exactly_his_drawn_questions(sitting):
    report = check_notebook(sitting["bob-copied"], "-m", "concepts")
    failed = {c["case"] for m in report["milestones"] for c in m["checks"] if not c["passed"]}
    lost = differ("practice-2", "alice", "bob")
    assert failed == lost and len(lost) >= 5, failed
    part = report["paper"]["parts"][0]
    assert part["id"] == "concepts" and part["score"] == 66 - 2 * len(lost)


def practice(*args, stdin: str, cwd: Path) -> subprocess.CompletedProcess:
    return practice_here(*map(str, args), stdin=stdin, cwd=cwd)


@pytest.mark.slow
def test_grade_practice_sits_the_paper_the_reference_full_the_stubs_nothing(tmp_path):
    done, stubs = tmp_path / "done", tmp_path / "stubs"
    shutil.copytree(SOLUTIONS, done, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXERCISES, stubs, ignore=shutil.ignore_patterns("__pycache__"))
    proc = practice(PAPER, done, stdin="\nq\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "concepts: 66 points" in proc.stdout and "| **Total** | **100 / 100** |" in proc.stdout, proc.stdout
    assert "| concepts | 66 / 66 | attempt 1 |" in proc.stdout
    proc = practice(PAPER, stubs, "--minutes", "5", stdin="g\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "| concepts | 0 / 66 | attempt 1 | not solved |" in proc.stdout, proc.stdout
    assert "| **Total** | **0 / 100** |" in proc.stdout


def wait_graded(client, folder: Path, who: str, sid: int, seconds: float = 300) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        entry = client.get(f"/api/submissions/{sid}", headers=auth(folder, who)).json()
        if entry["status"] != "queued":
            return entry
        time.sleep(0.3)
    raise AssertionError(f"submission {sid} not graded in {seconds} s")


@pytest.mark.slow
def test_a_contest_on_the_paper_grades_each_student_on_their_own_numbers(tmp_path):
    """ada downloads her notebook of practice paper 2, fills it with the reference and her own answers and uploads
    it to the concepts task: its 66 points. alan's upload of ada's notebook loses 2 points for each of his drawn
    questions whose answer is not ada's."""
    from fastapi.testclient import TestClient

    from grader.contest.web.app import create_app

    text = open_contest("Round on paper 2", tasks="", paper="paper1", duration=120)
    folder = contest_folder(tmp_path / "round", text, paper=(PAPER / "paper.toml").read_text())
    clock = ContestClock()
    with TestClient(create_app(folder, clock)) as client:
        book = client.get("/paper.ipynb", headers=auth(folder, "ada")).json()
        assert "Q_CROSS" in json.dumps(book["cells"]) and book["metadata"]["gptkit"]["paper"]["student"] == "ada"
        (tmp_path / "ada.ipynb").write_text(json.dumps(book))
        fill_paper_notebook(tmp_path / "ada.ipynb", book["metadata"]["gptkit"]["paper"]["seed"], tmp_path / "f.ipynb")
        filled = [("ada.ipynb", (tmp_path / "f.ipynb").read_bytes())]
        graded = {}
        for who in ("ada", "alan"):
            clock.now += timedelta(minutes=1)
            response = upload(client, folder, who, "concepts", filled)
            assert response.status_code == 202, response.text
            graded[who] = wait_graded(client, folder, who, response.json()["id"])
    tasks = {who: entry["feedback"]["tasks"][0] for who, entry in graded.items()}
    assert tasks["ada"]["score"] == 66, graded["ada"]
    secret = (folder / "paper1" / "paper.secret").read_text().strip()
    drawn_apart = differ("paper1", "ada", "alan", secret)
    # the checks themselves wait for the window's end (concepts trusts the grader's m3, a task of this contest)
    assert len(drawn_apart) >= 4 and tasks["alan"]["score"] == pytest.approx(66 - 2 * len(drawn_apart)), tasks["alan"]
