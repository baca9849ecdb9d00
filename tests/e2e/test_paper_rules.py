"""A paper puts a part's rules in force or leaves them out: the same correct-but-looping submission scores
full marks on attnvar without the rules and loses the rule's checks with them (the lesson has them all)."""

from __future__ import annotations

import pytest

from corpus.attnvar import BUGGY
from grader.grading import Request

pytestmark = pytest.mark.slow  # grades a submission three times


def by_name(name: str):
    return next(v for v in BUGGY if v.name == name)


@pytest.fixture(scope="module")
def looping(tmp_path_factory):
    """attnvar computed right, with map() over the heads: only the rules find fault with it."""
    return by_name("attnvar-map-over-heads").build(tmp_path_factory.mktemp("paper-rules") / "looping")


@pytest.fixture
def grade(grader):
    """Grade on the session's Grader, as `grade check --paper` would with the paper's rules."""
    return lambda folder, milestones, rules=None: grader.grade(Request(folder, tuple(milestones), rules=rules))


def failures(report) -> list[str]:
    return [c.message for c in report.of("attnvar") if not c.passed]


def test_the_lesson_puts_every_rule_in_force(looping, grade):
    assert any("grows with the number of heads" in m for m in failures(grade(looping, ["attnvar"])))


def test_a_paper_without_rules_for_the_part_grades_only_the_values(looping, grade):
    report = grade(looping, ["attnvar"], rules={"attnvar": frozenset()})
    assert failures(report) == [] and report.score("attnvar")[0] == report.score("attnvar")[1]


def test_a_paper_with_only_the_library_rule_lets_the_loop_pass(looping, grade):
    assert failures(grade(looping, ["attnvar"], rules={"attnvar": frozenset({"no-library-attention"})})) == []
