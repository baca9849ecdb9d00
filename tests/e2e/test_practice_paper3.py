"""Practice paper 3 (papers/practice-3), built on the `problems` exercise: each student's notebook has their own
numbers (one draw per problem) and options in their own order; `grade check` gives alice's reference-filled notebook
the paper's 100 points and bob's copy of her cells loses exactly his parts whose answers differ; `grade practice`
sits it blind (nothing shown while the clock runs, everything at the end); a contest on it with feedback "none"
shows a student nothing until the window closes, then the scores, with the numpy-only rule zeroing torch code."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from grader.paper import render
from grader.paper.config import RULES, load
from grader.suites.hidden import problem_questions as bank
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
    open_contest,
    practice_here,
    rendered_notebooks,
    upload,
)

PAPER = REPO / "papers" / "practice-3"
SECRET = "3" * 64
CHECKPOINT = 4  # points of a checkpoint in the paper: 2 in the exercise, the part worth twice the exercise
CODE = 10  # softmax_xent_grad's points in the paper
REFERENCE_CODE = (SOLUTIONS / "m13_problems.py").read_text().split("# Check yourself")[0]
TORCH_CODE = REFERENCE_CODE.replace(
    "    z = np.asarray(logits, dtype=np.float64)\n",
    "    import torch\n\n"
    "    z = torch.as_tensor(logits, dtype=torch.float64)\n"
    "    log_p = torch.log_softmax(z, dim=1)\n"
    "    rows, t = torch.arange(z.shape[0]), torch.as_tensor(targets)\n"
    "    grad = log_p.exp()\n"
    "    grad[rows, t] -= 1.0\n"
    "    return float(-log_p[rows, t].mean()), (grad / z.shape[0]).numpy()\n"
    "    z = np.asarray(logits, dtype=np.float64)\n",
)


def cells(notebook: dict) -> dict[str, str]:
    return {c["id"]: "".join(c["source"]) for c in notebook["cells"]}


def fill(notebook: dict, seed: int, code: str = REFERENCE_CODE) -> dict:
    """The notebook answered as the student of ``seed`` was asked: ``code`` for softmax_xent_grad, the reference's
    scaling, and each checkpoint's answer for their numbers and letters."""
    variant = Variant(seed)
    for cell in notebook["cells"]:
        if cell["id"] == "problems-answer":
            cell["source"] = code
        elif cell["id"] == "scaling-answer":
            cell["source"] = (SOLUTIONS / "m5_scaling.py").read_text().split("\nif __name__")[0]
        for name in bank.IDS:
            if cell["id"] == f"problems-{name}-answer":
                value = bank.question(name, variant).answer  # type: ignore[attr-defined]
                cell["source"] = "".join(cell["source"]).replace(f"{name} = None", f"{name} = {value!r}")
    return notebook


def differ(paper: str, one: str, other: str, secret: str = SECRET) -> set[str]:
    """The checkpoints whose answers differ between two students (an answer of 1 or a small square may repeat)."""
    a, b = (Variant(seed_of(secret, paper, who)) for who in (one, other))
    return {q for q in bank.IDS if bank.question(q, a).answer != bank.question(q, b).answer}  # type: ignore[attr-defined]


def test_each_student_renders_with_their_own_numbers_and_the_rule():
    paper = load(PAPER)
    seeds = {who: seed_of(SECRET, "practice-3", who) for who in ("alice", "bob")}
    books = {who: cells(render.build(paper, who, seed)) for who, seed in seeds.items()}
    for question in bank.DRAWN:
        key = f"problems-{question.id}-answer"
        for who, seed in seeds.items():
            assert question.comment(question.params(Variant(seed))) in books[who][key], (who, question.id)
    apart = [
        q.id for q in bank.DRAWN if books["alice"][f"problems-{q.id}-answer"] != books["bob"][f"problems-{q.id}-answer"]
    ]
    assert len(apart) == len(bank.DRAWN), f"alice and bob are asked the same in {set(bank.IDS) - set(apart)}"
    lesson = cells(render.build(paper))
    for question in bank.DRAWN:
        assert question.comment(question.lesson) in lesson[f"problems-{question.id}-answer"]
    intro = books["alice"]["problems-intro"]
    assert RULES["numpy-only"][1] in intro and "**Rules for this part:**" in intro
    meta = render.build(paper, "alice", seeds["alice"])["metadata"]["gptkit"]["paper"]
    assert [(p["id"], p["rules"]) for p in meta["parts"]] == [("problems", ["numpy-only"]), ("scaling", [])]


@pytest.fixture(scope="module")
def sitting(tmp_path_factory) -> dict[str, Path]:
    """alice's and bob's notebooks rendered by `grade paper render` from a copy of the paper with a known secret;
    alice's filled with the reference and her answers; bob's with alice's cells."""
    folder = tmp_path_factory.mktemp("paper3")
    made = rendered_notebooks(folder, PAPER, SECRET, ("alice", "bob"))
    made["alice-filled"] = folder / "alice-filled.ipynb"
    book = fill(json.loads(made["alice"].read_text()), seed_of(SECRET, "practice-3", "alice"))
    made["alice-filled"].write_text(json.dumps(book))
    made["bob-copied"] = folder / "bob-copied.ipynb"  # bob's notebook, alice's cells
    copy_answers(made["alice-filled"], made["bob"], made["bob-copied"])
    return made


@pytest.mark.slow
def test_alices_reference_answers_score_the_papers_100(sitting):
    report = check_notebook(sitting["alice-filled"])
    failed = [(c["name"], c["message"]) for c in report["all"] if not c["passed"]]
    assert not failed, failed
    paper = report["paper"]
    assert paper["student"] == "alice" and paper["score"] == paper["points"] == 100
    assert [(p["id"], p["score"]) for p in paper["parts"]] == [("problems", 70), ("scaling", 30)]


@pytest.mark.slow
def test_alices_answers_in_bobs_notebook_lose_exactly_his_own_parts(sitting):
    report = check_notebook(sitting["bob-copied"], "-m", "problems")
    failed = {c["case"] for c in report["all"] if not c["passed"]}
    lost = differ("practice-3", "alice", "bob")
    assert failed == lost and len(lost) >= 12, (failed, lost)
    part = report["paper"]["parts"][0]
    assert part["id"] == "problems" and part["score"] == 70 - CHECKPOINT * len(lost)


def practice(*args, stdin: str, cwd: Path) -> subprocess.CompletedProcess:
    return practice_here(*map(str, args), stdin=stdin, cwd=cwd)


@pytest.mark.slow
def test_grade_practice_sits_it_blind_the_reference_full_the_stubs_nothing(tmp_path):
    done, stubs = tmp_path / "done", tmp_path / "stubs"
    shutil.copytree(SOLUTIONS, done, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXERCISES, stubs, ignore=shutil.ignore_patterns("__pycache__"))
    proc = practice(PAPER, done, stdin="\nq\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    during, _, after = proc.stdout.partition("# Practice: ")
    attempt = during.split("grading...")[1].split("time left")[0]  # what the attempt printed while the clock ran
    assert "graded (this paper shows no feedback while the time runs)" in attempt, during
    assert "/ 70" not in during and "checks passed" not in during and "(OK)" not in during, during
    assert "| problems | 70 / 70 | attempt 1 |" in after and "| **Total** | **100 / 100** |" in after, after
    assert "## problems (rules: numpy-only)" in after
    proc = practice(PAPER, stubs, "--minutes", "5", stdin="g\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "| problems | 0 / 70 | attempt 1 | not solved |" in proc.stdout, proc.stdout
    assert "| **Total** | **0 / 100** |" in proc.stdout


def wait_graded(client, folder: Path, who: str, sid: int, seconds: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        entry = client.get(f"/api/submissions/{sid}", headers=auth(folder, who)).json()
        if entry["status"] != "queued":
            return entry
        time.sleep(0.3)
    raise AssertionError(f"submission {sid} not graded in {seconds} s")


@pytest.mark.slow
def test_a_blind_contest_shows_nothing_until_the_window_closes_then_each_students_score(tmp_path):
    """ada and alan each download their notebook of practice paper 3 and answer their own numbers; ada writes
    softmax_xent_grad in NumPy, alan in torch. While the window is open the contest (feedback "none") tells them
    only that their work was received; once it closes, ada has the part's 70 points and alan 60: the numpy-only
    rule zeroed his code, with the rule's words."""
    from fastapi.testclient import TestClient

    from grader.contest.web.app import create_app

    text = open_contest("Round on paper 3", tasks="", paper="paper1", duration=150, feedback="none")
    folder = contest_folder(tmp_path / "round", text, paper=(PAPER / "paper.toml").read_text())
    clock = ContestClock()
    sids, code = {}, {"ada": REFERENCE_CODE, "alan": TORCH_CODE}
    with TestClient(create_app(folder, clock)) as client:
        for who in ("ada", "alan"):
            book = client.get("/paper.ipynb", headers=auth(folder, who)).json()
            assert book["metadata"]["gptkit"]["paper"]["student"] == who
            filled = fill(book, book["metadata"]["gptkit"]["paper"]["seed"], code[who])
            clock.now += timedelta(minutes=1)
            response = upload(client, folder, who, "problems", [(f"{who}.ipynb", json.dumps(filled).encode())])
            assert response.status_code == 202, response.text
            sids[who] = response.json()["id"]
        during = {who: wait_graded(client, folder, who, sid) for who, sid in sids.items()}
        for entry in during.values():
            shown = json.dumps(entry["feedback"])
            assert entry["feedback"]["feedback"] == "none" and "score" not in shown and "70" not in shown, entry
            assert "rule broken" not in shown and "softmax_xent_grad" not in shown, entry
        clock.now += timedelta(minutes=150)  # the window has closed
        after = {
            who: client.get(f"/api/submissions/{sid}", headers=auth(folder, who)).json() for who, sid in sids.items()
        }
    tasks = {who: entry["feedback"]["tasks"][0] for who, entry in after.items()}
    assert tasks["ada"]["score"] == 70, after["ada"]
    assert tasks["alan"]["score"] == pytest.approx(70 - CODE), after["alan"]
    assert "rule broken (NumPy only, no torch)" in json.dumps(after["alan"]), after["alan"]
