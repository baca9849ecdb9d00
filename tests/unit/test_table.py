"""The terminal table of a metric-scored task: its measure is shown, and a run that failed is not "all passed"."""

from __future__ import annotations

from grader.results import CheckResult, Report
from grader.table import render_text

LOSS_A = "loss on split A: 3.4672 bits/char; points 0.26 of 10 between the baseline 3.5013 and the best 2.2020"


def lmbudget(**check: object) -> Report:
    fields = {"name": "loss on split A", "milestone": "lmbudget", "score": 0.26, "max_score": 10.0, "passed": True}
    return Report("sub", [CheckResult(**{**fields, **check})])


def test_a_metric_score_shows_its_measure_not_all_passed():
    text = render_text(lmbudget(message=LOSS_A, value=3.4672), color=False)
    assert "all passed" not in text, text
    assert "loss on split A: 3.4672 bits/char" in text.split("Total")[0], "the table names the measure"
    assert "points 0.26 of 10" in text.split("Total")[1], "the full message is printed under the table"


def test_a_failed_run_counts_nothing_and_says_so():
    text = render_text(
        lmbudget(
            score=0.0,
            passed=False,
            counted=False,
            message="not counted: time limit exceeded: train_within_budget returned no model within 65 s",
            verdict="time limit exceeded",
        ),
        color=False,
    )
    assert "all passed" not in text and "nothing counted" in text, text
    assert "the run failed (see above)" in text and "could not observe" not in text, text
