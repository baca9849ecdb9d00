"""`grade practice` as a student runs it: a paper, their work, commands typed (here piped) into the terminal."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import EXERCISES, REPO, SOLUTIONS, practice_here

PAPER = """
title = "Tiny paper"
minutes = 30
feedback = "passfail"

[parts.m1]
points = 60

[parts.quiz]
points = 40
"""


def practice(*args, stdin: str = "", cwd: Path = REPO) -> subprocess.CompletedProcess:
    """`grade practice ARGS` in this process on the session's warm Grader (helpers.practice_here), the commands
    typed (``stdin``) read from a pipe as from a terminal. What only a process shows (the clock running out with
    no command typed) runs the command itself:
    test_the_time_running_out_grades_the_saved_work_and_each_notebook_has_its_own_session."""
    return practice_here(*map(str, args), stdin=stdin, cwd=cwd)


@pytest.fixture
def paper(tmp_path):
    path = tmp_path / "paper" / "paper.toml"
    path.parent.mkdir()
    path.write_text(PAPER)
    return path


@pytest.mark.parametrize(
    "args,phrase",
    [
        ((), "Missing argument 'PAPER'"),
        (("nowhere/paper.toml",), "there is no nowhere/paper.toml"),
        (("{bad}",), "minutes must be a positive number"),
        (("{paper}", "no/such/folder"), "there is no no/such/folder"),
        (("{paper}", "{paper}"), "neither a folder nor a notebook"),
        (("{paper}", ".", "--minutes", "0"), "--minutes must be a positive number"),
        (("{paper}", ".", "--minutes", "-5"), "--minutes must be a positive number"),
    ],
)
def test_bad_input_is_a_message_and_exit_2(tmp_path, paper, args, phrase):
    bad = tmp_path / "bad.toml"
    bad.write_text(PAPER.replace("minutes = 30", "minutes = -3"))
    proc = practice(*(a.format(paper=paper, bad=bad) for a in args), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert phrase in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / ".practice").exists(), "nothing written for bad input"


@pytest.mark.slow
def test_the_solutions_get_full_marks_and_their_first_solved_time(tmp_path, paper):
    work = tmp_path / "work"
    shutil.copytree(SOLUTIONS, work)
    proc = practice(paper, work, stdin="\ns\nq\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "m1: 60 points" in out and "quiz: 40 points" in out and "the time is up at" in out
    assert "whether each part has full marks" in out
    during, final = out.split("# Practice: Tiny paper")
    assert "attempt 1 at 0:0" in during and "m1: passed" in during and "quiz: passed" in during
    assert "points" not in during.split("attempt 1")[1], "passfail: no score while the time runs"
    assert "m1: full marks at 0:0" in during, "s: the status"
    assert "handed in" in final and "| **Total** | **100 / 100** |" in final
    assert "| m1 | 60 / 60 | attempt 1 | 0:0" in final and "| quiz | 40 / 40 | attempt 1 | 0:0" in final
    assert re.search(r"\d+ of \d+ checks passed", final), "full feedback at the end"
    report = (work / ".practice" / "report.md").read_text()
    assert report.startswith("# Practice: Tiny paper") and "| m1 | 60 / 60 |" in report
    records = [json.loads(line) for line in (work / ".practice" / "log.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records] == ["start", "attempt", "end"]
    assert records[1]["counted"] and records[1]["scores"] == {"m1": 60.0, "quiz": 40.0}
    assert records[1]["report"]["milestones"][0]["checks"], "the full report is logged"
    assert records[2]["reason"] == "quit"

    again = practice(paper, work, stdin="\n")
    assert again.returncode == 0, again.stderr
    assert "handed in at" in again.stdout and "--new" in again.stdout and "grading" not in again.stdout
    assert "| m1 | 60 / 60 | attempt 1 |" in again.stdout


@pytest.mark.slow
def test_the_stubs_are_not_solved(tmp_path, paper):
    work = tmp_path / "work"
    shutil.copytree(EXERCISES, work)
    log = tmp_path / "my-log.jsonl"
    proc = practice(paper, work, "--minutes", "5", "--log", log, stdin="g\nwhat\n")  # then the input ends
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "5 minutes" in out and "m1: not yet full marks" in out and "unknown command 'what'" in out
    assert "the input ended" in out and "| m1 | 0 / 60 | attempt 1 | not solved |" in out
    assert "FAIL " in out.split("# Practice")[1] and "NotImplementedError" in out.split("# Practice")[1]
    assert [json.loads(line)["kind"] for line in log.read_text().splitlines()] == ["start", "attempt", "end"]
    assert (work / ".practice" / "report.md").is_file() and not (work / ".practice" / "log.jsonl").exists()


@pytest.mark.slow
def test_the_live_line_names_an_unanswered_question_and_a_broken_rule(tmp_path):
    """The line after an attempt said "(wrong answer)" for both; it says what the cause is."""
    paper = tmp_path / "paper" / "paper.toml"
    paper.parent.mkdir()
    paper.write_text(
        PAPER.replace("[parts.m1]\npoints = 60", '[parts.attnvar]\npoints = 60\nrules = ["no-library-attention"]')
    )
    work = tmp_path / "work"
    shutil.copytree(SOLUTIONS, work)
    shutil.copy(EXERCISES / "quiz.py", work / "quiz.py")  # every answer still None
    attnvar = work / "m10_attnvar.py"
    own = "    return merge_heads(attend(q, k, v)) @ w_o\n\n\ndef grouped_query_attention"
    library = own.replace("attend(q, k, v)", "F.scaled_dot_product_attention(q, k, v, is_causal=True)")
    assert own in attnvar.read_text()
    attnvar.write_text(attnvar.read_text().replace(own, library))
    proc = practice(paper, work, stdin="\nq\n")
    assert proc.returncode == 0, proc.stderr
    during = proc.stdout.split("# Practice: Tiny paper")[0]
    assert "quiz: not yet full marks (not answered)" in during, during
    assert "attnvar: not yet full marks (rule broken: no library attention)" in during, during
    assert "wrong answer" not in during


def notebook(path, *modules, folder=SOLUTIONS):
    """A notebook with one code cell per file of ``folder`` (the reference, or the stubs)."""
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    cells = [{**cell, "source": (folder / m).read_text()} for m in modules]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


@pytest.mark.slow
def test_the_time_running_out_grades_the_saved_work_and_each_notebook_has_its_own_session(tmp_path, paper):
    """alice never presses Enter: at time-up her saved notebook is graded and counted, as a contest's final
    submission. bob's notebook beside hers is a session of its own, with its own report."""
    work = tmp_path / "work"
    work.mkdir()
    alice = notebook(work / "alice.ipynb", "m1_attention.py", "quiz.py")
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "practice", str(paper), str(alice), "--minutes", "0.1"],
        stdin=subprocess.PIPE,  # kept open and silent: no command is ever typed
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "the time is up" in out and "grading your saved work as you hand it in" in out, out
    final = out.split("# Practice: Tiny paper")[1]
    assert "| **Total** | **100 / 100** |" in final, final
    alices = (work / ".practice" / "alice.ipynb" / "report.md").read_text()

    bob = notebook(work / "bob.ipynb", "m1_attention.py", "quiz.py", folder=EXERCISES)
    proc = practice(paper, bob, stdin="q\n")  # bob's session is the command's, not the process's: in this one
    assert proc.returncode == 0, proc.stderr
    assert "handed in at" not in proc.stdout and "--new" not in proc.stdout, "bob's is a new session"
    assert "| **Total** | **0 / 100** |" in proc.stdout, proc.stdout
    assert (work / ".practice" / "alice.ipynb" / "report.md").read_text() == alices, "alice's report untouched"
    assert (work / ".practice" / "bob.ipynb" / "report.md").is_file()
