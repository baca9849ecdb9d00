"""docs/lesson-map.md covers the whole lesson, and every item it names is a real check that the reference passes in
full and the stubs score 0 on.

An item is `exercise:selector`: the checks of that exercise whose case is the selector (a question's id, a
parametrized case) or whose name starts with it. The steps are the lesson outline's (Lesson 89: parts 1 to 3, the
project), the companion page's points and the five objectives.
"""

from __future__ import annotations

import ast
import re

import pytest

from grader.milestones import MILESTONES
from grader.suites.hidden import concept_questions
from helpers import EXERCISES, REPO, SOLUTIONS, grade

MAP = REPO / "docs" / "lesson-map.md"
ITEM = re.compile(r"`(\w+):([^`]+)`")
# The outline's numbered steps: part 1 (4-15), part 2 (17-29), part 3 (31-47), the project (49-57).
STEPS = [*range(4, 16), *range(17, 30), *range(31, 48), *range(49, 58)]
COMPANION_POINTS = 13  # nine points a student can be checked on, and four trade-offs
SPOKEN = {57}  # "show it off": said aloud, not graded


def rows(section: str) -> list[list[str]]:
    """The table rows (cells) of the section headed ``section``, without the header and rule rows."""
    text = MAP.read_text().split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            found.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return found[1:]


def step_rows() -> dict[int, list[str]]:
    steps: dict[int, list[str]] = {}
    for section in ("Part 1", "Part 2", "Part 3", "The project"):
        for cells in rows(section):
            for number in re.findall(r"\d+", cells[0]):
                assert int(number) not in steps, f"step {number} is mapped twice"
                steps[int(number)] = cells
    return steps


def items() -> list[tuple[str, str]]:
    return list(dict.fromkeys(ITEM.findall(MAP.read_text())))


def test_every_step_of_the_outline_is_mapped_once_and_has_an_item_or_says_why_not():
    steps = step_rows()
    assert sorted(steps) == STEPS, f"missing {sorted(set(STEPS) - set(steps))}, extra {sorted(set(steps) - set(STEPS))}"
    for number, cells in steps.items():
        graded = ITEM.findall(cells[-1])
        if number in SPOKEN:
            assert cells[-1] == "not graded" and "not graded:" in cells[-2] and "instead" in cells[-2], cells
        else:
            assert graded, f"step {number} names no graded item: {cells}"


def test_the_objectives_and_the_companion_page_are_mapped():
    objectives = rows("Objectives")
    assert [cells[0] for cells in objectives] == ["1", "2", "3", "4", "5"]
    companion = rows("The companion page")
    assert len(companion) == COMPANION_POINTS
    for cells in (*objectives, *companion):
        assert ITEM.findall(cells[-1]), cells


def test_every_item_names_a_declared_exercise_and_every_concepts_item_is_on_the_map():
    named = items()
    assert {m for m, _ in named} <= set(MILESTONES), {m for m, _ in named} - set(MILESTONES)
    concepts = {s for m, s in named if m == "concepts"}
    tree = ast.parse((EXERCISES / "m12_concepts.py").read_text())
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    functions -= {"self_attend"}  # given, not graded
    assert set(concept_questions.IDS) | functions <= concepts, (set(concept_questions.IDS) | functions) - concepts


def matching(report: dict, milestone: str, selector: str) -> list[dict]:
    checks = next(m["checks"] for m in report["milestones"] if m["id"] == milestone)
    return [c for c in checks if c.get("case") == selector or c["name"].startswith(selector)]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    milestones = [m for m in MILESTONES if m in {m for m, _ in items()}]
    options = [arg for m in milestones for arg in ("-m", m)]
    return {name: grade(folder, *options).report for name, folder in (("ref", SOLUTIONS), ("stub", EXERCISES))}


@pytest.mark.slow
@pytest.mark.parametrize("milestone,selector", items(), ids=lambda x: x)
def test_each_item_is_a_check_the_reference_passes_and_the_stub_fails(reports, milestone, selector):
    ref = matching(reports["ref"], milestone, selector)
    assert ref, f"{milestone}:{selector} names no check of {milestone}"
    assert all(c["score"] == c["max_score"] > 0 for c in ref), [(c["name"], c["message"]) for c in ref]
    stub = matching(reports["stub"], milestone, selector)
    assert [c["name"] for c in stub] == [c["name"] for c in ref]
    assert all(c["score"] == 0 for c in stub), [(c["name"], c["score"]) for c in stub]
