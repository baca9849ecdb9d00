"""The release's locked answers against a contest on practice paper 2, end to end: ada downloads her notebook
from the contest, a notebook holding only the answers hash-searched out of the release scores no better than
a guess on the questions (it used to score 26 of the concepts part's 66 without reading a question), while a
notebook answered by reading ada's own options scores every fixed question: the notebook she is handed, the
contest's grading, `grade check` and `grade practice` on her notebook all agree on what she was asked."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from grader.suites import locked
from grader.suites.bank import stub_comment
from grader.suites.hidden import concept_questions
from grader.suites.locked_answers import LOCKED
from grader.variants import Variant, seed_of
from helpers import (
    REPO,
    ContestClock,
    auth,
    check_notebook,
    contest_folder,
    open_contest,
    practice_here,
    upload,
)

pytestmark = pytest.mark.slow  # three gradings of the concepts part

PAPER = REPO / "papers" / "practice-2"
SECRET = "4" * 64
FIXED = [q.id for q in concept_questions.FIXED]  # 12 multiple choice and the line number


def search_locks() -> dict[str, Any]:
    """The release's concepts locks hash-searched (``locked.is_right``, the release's own check): every set of
    letters of each multiple choice, each whole number up to 100."""
    found: dict[str, Any] = {}
    for question, lock in LOCKED["concepts"].items():
        if lock["kind"] == "letters":
            choices = lock["choices"]
            guesses: list[Any] = ["".join(c) for n in range(1, len(choices) + 1) for c in combinations(choices, n)]
        else:
            guesses = list(range(101))
        hit = next((g for g in guesses if locked.is_right(question, g, lock)), None)
        if hit is not None:
            found[question] = hit
    return found


def options(comment: str) -> dict[str, str]:
    """A multiple choice's options as a comment shows them, one line or several: letter -> words."""
    text = " ".join(line.lstrip("#").strip() for line in comment.splitlines())
    parts = re.split(r"(?<!\w)\(([a-d])\) ", text)
    return {parts[i]: " ".join(parts[i + 1].split()) for i in range(1, len(parts), 2)}


def read_and_answer(cell: str, question: str) -> Any:
    """What a student who knows the subject writes after reading their own question: the letters of the right
    statements among their options (the hidden pool's right ones: a paper shows none of the lesson's options), the
    number of their listing's wrong line (the listing drawn from the hidden pool)."""
    from grader.suites.hidden.concept_pools import BUGLINE, POOLS

    mine = stub_comment(cell, question)
    assert mine is not None
    if question == "Q_BUGLINE":
        lines = re.findall(r"^#\s+(\d+)  (.*)$", mine, re.M)
        drawn = next(listing for listing in BUGLINE if listing.lines == tuple(code for _, code in lines))
        return int(lines[drawn.bug - 1][0])
    right = {o.text for pool in POOLS if pool.id == question for o in pool.right}
    return "".join(sorted(c for c, words in options(mine).items() if words in right))


def answered(book: dict, answers: dict[str, Any]) -> dict:
    """The notebook with ``answers`` in its concepts question cells, the code cells left as handed out."""
    book = json.loads(json.dumps(book))
    for cell in book["cells"]:
        for question, value in answers.items():
            if cell["id"] == f"concepts-{question}-answer":
                source = "".join(cell["source"])
                cell["source"] = source.replace(f"{question} = None", f"{question} = {value!r}")
    return book


def wait_graded(client, folder: Path, who: str, sid: int, seconds: float = 300) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        entry = client.get(f"/api/submissions/{sid}", headers=auth(folder, who)).json()
        if entry["status"] != "queued":
            return entry
        time.sleep(0.3)
    raise AssertionError(f"submission {sid} not graded in {seconds} s")


@pytest.fixture(scope="module")
def sitting(tmp_path_factory) -> dict[str, Any]:
    """ada's notebook from a contest on practice paper 2 (its secret known), answered twice: with the release's
    hash-searched answers, and by reading her options; both uploaded to the concepts part and graded."""
    from fastapi.testclient import TestClient

    from grader.contest.web.app import create_app

    tmp = tmp_path_factory.mktemp("shuffle")
    text = open_contest("Round on paper 2", tasks="", paper="paper1", duration=120)
    folder = contest_folder(tmp / "round", text, paper=(PAPER / "paper.toml").read_text())
    (folder / "paper1" / "paper.secret").write_text(SECRET + "\n")
    release = search_locks()
    assert set(FIXED) <= set(release), "the release's locks give every fixed question's lesson answer"
    clock = ContestClock()
    made: dict[str, Any] = {"release-answers": release, "paper": folder / "paper1"}
    with TestClient(create_app(folder, clock)) as client:
        book = client.get("/paper.ipynb", headers=auth(folder, "ada")).json()
        assert book["metadata"]["gptkit"]["paper"]["seed"] == seed_of(SECRET, "paper1", "ada")
        cells = {c["id"]: "".join(c["source"]) for c in book["cells"]}
        reader = {q: read_and_answer(cells[f"concepts-{q}-answer"], q) for q in FIXED}
        made["reader-answers"] = reader
        for name, answers in (("release", release), ("reader", reader)):
            path = tmp / f"{name}.ipynb"
            path.write_text(json.dumps(answered(book, answers)))
            made[f"{name}-notebook"] = path
            clock.now += timedelta(minutes=1)
            response = upload(client, folder, "ada", "concepts", [("ada.ipynb", path.read_bytes())])
            assert response.status_code == 202, response.text
            entry = wait_graded(client, folder, "ada", response.json()["id"])
            made[f"{name}-score"] = entry["feedback"]["tasks"][0]["score"]
    return made


def predicted(answers: dict[str, Any]) -> float:
    """The concepts part's points (2 a question) the hidden grading gives ``answers`` for ada, the code left
    unwritten."""
    variant = Variant(seed_of(SECRET, "paper1", "ada"))
    return 2.0 * sum(concept_questions.question(q, variant).mark(a).correct for q, a in answers.items())


def test_the_releases_answers_score_no_better_than_a_guess_in_the_contest(sitting):
    """The contest scores the notebook of hash-searched answers as the hidden grading does, with ada's variant:
    on the fixed questions about what a guess scores (6 of their 26 points), not the 26 it scored before."""
    release = sitting["release-answers"]
    assert sitting["release-score"] == pytest.approx(predicted(release))
    assert predicted({q: release[q] for q in FIXED}) <= 12, {q: release[q] for q in FIXED}


def test_reading_the_notebooks_options_finds_each_answer_where_the_contest_marks_it(sitting):
    """The notebook ada is handed and the contest's grading agree: the right statements among her options, and her
    listing's wrong line, found by reading her notebook, are right at her letters and her line number, all 13."""
    reader = sitting["reader-answers"]
    assert predicted(reader) == 26
    assert sitting["reader-score"] == pytest.approx(26)
    assert reader != {q: sitting["release-answers"][q] for q in FIXED}, "ada's letters are not the lesson's"


def test_grade_check_and_grade_practice_on_the_notebook_agree_with_the_contest(sitting, tmp_path):
    # grade check from the student's side: the notebook's metadata names the paper (its id paper1) and ada's seed
    report = check_notebook(sitting["reader-notebook"], "-m", "concepts")
    part = report["paper"]["parts"][0]
    assert part["id"] == "concepts" and part["score"] == pytest.approx(sitting["reader-score"])
    # grade practice on the contest's paper (the same paper.toml, its id paper1), timed from the notebook's seed
    paper = sitting["paper"] / "paper.toml"
    proc = practice_here(str(paper), str(sitting["release-notebook"]), "--minutes", "5", stdin="g\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    expected = f"| concepts | {sitting['release-score']:g} / 66 |"
    assert expected in proc.stdout, proc.stdout


# The release's own check (the public suite) holds the lesson's key: on ada's notebook it may say only that a
# question she was asked in her own letters is answered (locked.judges), never that her right answer is wrong.
def test_the_releases_check_on_the_notebook_calls_no_right_answer_wrong(sitting):
    report = check_notebook(sitting["reader-notebook"], "--public", "-m", "concepts")
    wrong = [c["name"] for c in report["all"] if not c["passed"] and "is not right" in (c["message"] or "")]
    assert not wrong, wrong
