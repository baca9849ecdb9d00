"""A class's metric task on a held-out text students have (grader/lmbudget/task.py ``held_out_refusal``, the rule a
contest applies): a model that carries the text scores full marks with a lookup, so every grading path of a
class treats it as the contest does.

* `grade batch -m lmbudget` refuses it, unless told to grade anyway (--allow-public-held-out); then its summary,
  `grade report` and every export (the CSV, each results.json) say that the scores prove nothing;
* a gradebook graded before that refusal says so too (the lmbudget checks' own warnings);
* the Gradescope zip and the nbgrader course grade no metric task, and their builders refuse one whose text is
  not secret.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from grader.batch.gradebook import Gradebook
from grader.bundles import gradescope, nbgrader
from grader.lmbudget import task as lmbudget_task
from grader.lmbudget.task import ENV_VAR, TASK_FILE, load_task, write_task
from grader.milestones import METRIC_TASKS
from helpers import REPO, batch_here, command_here

BIGRAM = (REPO / "grader" / "lmbudget" / "baseline.py").read_text()
# The lmbudget suite's words on the default corpus (grader/suites/hidden/test_lmbudget.py), as a gradebook keeps them.
SUITE_WARNING = (
    "warning: students have this task's held-out text (the 'grader' corpus is a snapshot of the grader's own "
    "sources, which the student release ships): a model that carries it scores full marks, so the score proves "
    'nothing; for one that does, set corpus = "file:PATH" in the task file'
)


def tiny(folder: Path, **changes) -> Path:
    """A task file with a budget of 2 CPU seconds (the default corpus unless ``changes`` say otherwise)."""
    task = dataclasses.replace(
        load_task(TASK_FILE),
        budget_cpu_seconds=2.0,
        budget_wall_seconds=12.0,
        margin_seconds=1.0,
        eval_windows=64,
        probe_windows=32,
        eval_cpu_seconds=1.0,
        **changes,
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_task(task, folder / "task.toml")
    return folder / "task.toml"


def klass(root: Path) -> Path:
    (root / "ada").mkdir(parents=True)
    (root / "ada" / "lmbudget.py").write_text(BIGRAM)
    return root


def test_batch_refuses_a_metric_task_on_a_text_students_have(tmp_path):
    """Before, `grade batch -m lmbudget` graded the default corpus without a word."""
    root = klass(tmp_path / "klass")
    db = tmp_path / "grades.sqlite"
    proc = batch_here(str(root), "-m", "lmbudget", "--db", str(db), env={ENV_VAR: str(tiny(tmp_path / "task"))})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "students have the held-out text (the 'grader' corpus" in proc.stderr, proc.stderr
    assert "--allow-public-held-out" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not db.exists(), "refused before anything was written"


@pytest.mark.slow  # one lmbudget run (a 2-second budget) and its evaluation
def test_batch_grades_it_when_told_and_every_report_and_export_says_the_scores_prove_nothing(tmp_path):
    root = klass(tmp_path / "klass")
    db = tmp_path / "grades.sqlite"
    env = {ENV_VAR: str(tiny(tmp_path / "task"))}
    proc = batch_here(str(root), "-m", "lmbudget", "--allow-public-held-out", "--db", str(db), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Graded anyway (--allow-public-held-out): its scores prove nothing" in proc.stderr, proc.stderr
    assert "WARNING: lmbudget (1 student: ada): graded on a held-out text that students have" in proc.stderr
    report = command_here("report", str(db), patches={})
    assert report.returncode == 0, report.stderr
    assert "WARNING: lmbudget (1 student: ada)" in report.stdout.splitlines()[1], report.stdout
    out = tmp_path / "grades.csv"
    export = command_here("export", str(db), "--csv", str(out), "--gradescope", str(tmp_path / "gs"), patches={})
    assert export.returncode == 0 and "WARNING: lmbudget" in export.stderr, export.stderr
    (row,) = csv.DictReader(out.open())
    assert row["warning"].startswith("lmbudget: graded on a held-out text") and "prove nothing" in row["warning"]
    results = json.loads((tmp_path / "gs" / "ada" / "results.json").read_text())
    assert "Warning: lmbudget was graded on a held-out text" in results["output"], results["output"]


def test_a_gradebook_graded_before_the_refusal_says_so_too(tmp_path):
    """lmbudget graded on the default corpus by an earlier batch: its checks carry the suite's warning, and the
    report and export read it there; a student without such a score has no warning in their row."""
    db = tmp_path / "grades.sqlite"
    book = Gradebook(db)
    for student, message in (("ada", f"loss on split A: 2.9 bits/char; {SUITE_WARNING}"), ("bob", "loss 3.1")):
        check = {"name": "loss on split A", "score": 10.0, "max_score": 10.0, "passed": True, "message": message}
        report = {
            "milestones": [{"id": "lmbudget", "checks": [check]}],
            "score": 10.0,
            "max_score": 10.0,
            "seconds": 1.0,
            "protections": [],
        }
        book.record(student, f"/class/{student}", "abc", "0.2.0", ["lmbudget"], report, fingerprint="f" * 16)
    book.close()
    proc = command_here("report", str(db), patches={})
    assert "WARNING: lmbudget (1 student: ada): graded on a held-out text" in proc.stdout, proc.stdout
    out = tmp_path / "grades.csv"
    assert command_here("export", str(db), "--csv", str(out), patches={}).returncode == 0
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert "prove nothing" in rows["ada"]["warning"] and rows["bob"]["warning"] == "", rows


def test_the_gradescope_zip_and_the_nbgrader_course_grade_no_metric_task():
    assert not set(gradescope.GRADED) & set(METRIC_TASKS)
    assert not set(nbgrader.SECTIONS) & set(METRIC_TASKS)
    assert lmbudget_task.held_out_refusal(gradescope.GRADED) is None  # no metric task: no task file read


def test_the_bundles_refuse_a_metric_task_on_a_text_students_have(tmp_path):
    """Were a metric task graded by the zip or the course, its text must be secret, as in a contest."""
    env = {ENV_VAR: str(tiny(tmp_path / "task"))}
    with_metric = (*gradescope.GRADED, *METRIC_TASKS)
    proc = command_here(
        "gradescope", str(tmp_path / "a.zip"), patches={"grader.bundles.gradescope.GRADED": with_metric}, env=env
    )
    assert proc.returncode == 2 and "students have the held-out text" in proc.stderr, (proc.stdout, proc.stderr)
    assert not (tmp_path / "a.zip").exists()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, env[ENV_VAR])
        patch.setattr(nbgrader, "SECTIONS", (*nbgrader.SECTIONS, *METRIC_TASKS))
        with pytest.raises(gradescope.HeldOutRefused, match="students have the held-out text"):
            nbgrader.build(tmp_path / "course", {})
    assert not (tmp_path / "course" / "source").exists()


@pytest.mark.slow  # a fork server started to learn what a worker sees
def test_a_text_of_the_coachs_own_is_not_refused(tmp_path):
    private = tmp_path / "private.txt"
    private.write_text("alpha brook cinder dune ember fjord glade heath inlet juniper " * 2000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, str(tiny(tmp_path / "task", corpus=f"file:{private}")))
        assert lmbudget_task.held_out_refusal(["lmbudget"]) is None
