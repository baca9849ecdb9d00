"""The reference answers a grading process remembers (``checks.remembered``) never change a verdict.

A batch grades hundreds of submissions in one process, so the suites work out the
reference's side of a check once. If a key left out something the answer depends on,
the answer would be whatever the first submission graded made it: so a submission
graded after others must get exactly the report it gets in a fresh process.
"""

from __future__ import annotations

import pytest

from corpus import BUGGY
from helpers import SOLUTIONS, Variant, grade_many

pytestmark = pytest.mark.slow  # every test here grades whole submissions

# One bug in each milestone whose checks remember something: the formula checked over
# hypothesis's examples (then shrunk), the reference training run, and m4's tokens for
# the KV cache. The lesson's pipeline is remembered too, and fails through the m3 bug.
BUGS = ("tied-head-counted-twice", "m3-no-zero-grad", "position-not-advanced")
MILESTONES = ["scaling", "m3", "lesson", "kvcache"]


def combined() -> Variant:
    variants = [v for v in BUGGY if v.name in BUGS]
    assert len(variants) == len(BUGS), "a bug named here is no longer in the corpus"
    return Variant("remembered", edits={f: e for v in variants for f, e in v.edits.items()})


def checks(report: dict) -> list[tuple]:
    return [(c["name"], c["passed"], c["message"]) for m in report["milestones"] for c in m["checks"]]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> tuple[dict, dict]:
    """The buggy submission graded alone, then by a process that graded the reference first."""
    root = tmp_path_factory.mktemp("remembered")
    buggy = combined().build(root / "buggy")
    (root / "alone").mkdir()
    (root / "after").mkdir()
    (alone,) = grade_many([(buggy, MILESTONES)], root / "alone", new_process=True)
    _, after = grade_many([(SOLUTIONS, MILESTONES), (buggy, MILESTONES)], root / "after", new_process=True)
    assert alone.report and after.report, alone.stderr + after.stderr
    return alone.report, after.report


def test_a_submission_graded_after_others_gets_the_same_report(reports):
    """Every check's verdict and message is the same whether the answers were remembered or not."""
    alone, after = reports
    assert checks(after) == checks(alone)


@pytest.mark.parametrize("milestone", MILESTONES)
def test_each_bug_is_still_caught(reports, milestone):
    """The comparison above is not vacuous: each milestone loses points to its bug."""
    _, after = reports
    graded = next(m for m in after["milestones"] if m["id"] == milestone)
    assert graded["score"] < graded["max_score"], f"{milestone} kept full marks"


def test_a_wrong_formula_is_still_shrunk_to_a_small_example(reports):
    """The formula's failure names hypothesis's simplest failing configuration, not the first one tried."""
    _, after = reports
    message = next(
        c["message"]
        for m in after["milestones"]
        for c in m["checks"]
        if c["name"].startswith("gpt_parameter_count equals the parameters") and not c["passed"]
    )
    assert message.startswith("gpt_parameter_count(1, 1, 0, 1, tied=True) is 5, but"), message
