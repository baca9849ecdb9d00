"""The exercises' declaration (grader/milestones.py) agrees with the tree and the docs.

Each exercise is declared once; the files an exercise adds (stub, reference, suites, corpus) and the docs that
describe it are found from the declaration. Here: each declared file exists and each such file is declared; the
declared points are the hidden suite's marks; the README's exercise table, docs/exercises.md's sections and points
table and docs/contract.md's core points list exactly the declared exercises. tests/e2e/test_new_exercise.py runs
this file in a copy of the project with a toy exercise added by the recipe of docs/contributing.md.
"""

from __future__ import annotations

import re

from corpus import BUGGY, EXERCISES
from grader.milestones import CORE_MILESTONE_FILES, GRADABLE, MILESTONES, STUDENT_MODULES
from grader.suites.fixtures import GradingPlugin
from grader.suites.points import HIDDEN, milestone_points, suite_points
from helpers import CORE, REPO, SOLUTIONS
from helpers import EXERCISES as STUBS

PUBLIC = REPO / "grader" / "suites" / "public"
# The core milestones and the lesson's integration check: specified (and their points listed) in docs/contract.md;
# the rest in docs/exercises.md.
CONTRACT = (*CORE, "lesson")
LATER = [m for m in GRADABLE if m not in CONTRACT]
POINTS = re.compile(r"^\| `(\w+)` \|(?: [^|]* \|)? (\d+(?:\.\d+)?) \|$", re.M)  # | `id` | (checks |) points |


def test_declared_points_are_the_hidden_suites_marks():
    for m in GRADABLE.values():
        marks = suite_points(HIDDEN / m.suite)
        assert marks == m.points, f"{m.id} declares {m.points} points; its {m.suite}'s checks add up to {marks}"
        assert milestone_points(m.id) == m.points, m.id


def test_every_declared_file_exists():
    for m in GRADABLE.values():
        assert (HIDDEN / m.suite).is_file() and (PUBLIC / m.suite).is_file(), f"{m.id}: a suite is missing"
        for module in m.modules:
            assert (STUBS / f"{module}.py").is_file() and (SOLUTIONS / f"{module}.py").is_file(), module


def test_every_exercise_file_and_suite_is_declared():
    suites = {m.suite for m in GRADABLE.values()}
    for folder in (HIDDEN, PUBLIC):
        assert {p.name for p in folder.glob("test_*.py")} == suites, folder
    for folder in (STUBS, SOLUTIONS):
        assert {p.stem for p in folder.glob("*.py")} == set(STUDENT_MODULES), folder


def test_trusted_modules_are_earlier_milestones_files():
    seen: set[str] = set()
    for m in GRADABLE.values():
        assert set(m.trusted) <= seen, f"{m.id} trusts {set(m.trusted) - seen}, no earlier milestone's file"
        seen |= set(m.modules)
    assert set(CORE_MILESTONE_FILES) <= seen


def test_each_exercise_has_its_fixture_and_suites_ask_for_it():
    for m in GRADABLE.values():
        assert callable(getattr(GradingPlugin, m.id, None)), m.id
        # The lesson's suite asks for the four core milestones' own fixtures, lmbudget's for a module-wide view.
        if m.id != "lesson" and not m.metric:
            for folder in (HIDDEN, PUBLIC):
                text = (folder / m.suite).read_text()
                assert re.search(rf"^\s*def \w+\([^)]*\b{m.id}\b", text, re.M), f"{folder.name}/{m.suite}"


def test_the_corpus_has_a_module_and_bugs_for_each_exercise():
    """tests/corpus/ holds ID.py per exercise (core.py for the core), each found without being listed."""
    names = {module.__name__.removeprefix("corpus.") for module in EXERCISES}
    assert names == {"core", *(m for m in LATER if not GRADABLE[m].metric)}, names
    assert {v.milestone for v in BUGGY} == {m for m in MILESTONES if m != "lesson"}


def test_the_readme_table_lists_each_milestone_and_its_file():
    rows = re.findall(r"^\| `(\w+)` \| (`[\w.]+`|all four) \|", (REPO / "README.md").read_text(), re.M)
    assert [row[0] for row in rows] == list(MILESTONES)
    for milestone, file in rows:
        modules = MILESTONES[milestone].modules
        assert file == (f"`{modules[0]}.py`" if len(modules) == 1 else "all four"), milestone


def test_docs_exercises_has_a_section_and_points_for_each_later_exercise():
    text = (REPO / "docs" / "exercises.md").read_text()
    sections = re.findall(r"^## `(\w+)`: `([\w.]+)`", text, re.M)
    assert sections == [(m, f"{GRADABLE[m].modules[0]}.py") for m in LATER]
    table = text.split("## Points")[1]
    points = {m: float(p) for m, p in POINTS.findall(table)}
    assert list(points) == LATER
    for m in LATER:
        if not GRADABLE[m].metric:
            assert points[m] == GRADABLE[m].points, f"docs/exercises.md gives {m} {points[m]:g} points"
    core = dict(re.findall(r"`(\w+)` (\d+)", table.split("The core milestones add")[1].split(":")[0]))
    assert {m: float(p) for m, p in core.items()} == {m: GRADABLE[m].points for m in CONTRACT}


def test_docs_give_the_declared_totals():
    """The grand total is stated once, in docs/exercises.md (the other pages link there); the core's in both."""
    total = sum(m.points or 0 for m in MILESTONES.values())
    core = sum(MILESTONES[m].points or 0 for m in CONTRACT)
    exercises, contract = (
        " ".join((REPO / "docs" / page).read_text().split()) for page in ("exercises.md", "contract.md")
    )
    assert f"The core milestones add {core:g} " in exercises and f" {total:g} points in all." in exercises
    assert f"That is {core:g} points for the core" in contract


def test_docs_contract_lists_the_core_points():
    rows = dict(POINTS.findall((REPO / "docs" / "contract.md").read_text()))
    assert {m: float(p) for m, p in rows.items()} == {m: GRADABLE[m].points for m in CONTRACT}
