"""A milestone's own points, so that a contest task's or a paper part's points can default to them.

They are declared with the exercise (``Milestone.points`` in grader/milestones.py). Where the grader has no
hidden suite (the student release ships none, and grades only the public checks, worth 0) or the task is
metric-scored, there are none: the contest file must then say the points itself.

``suite_points`` reads the same total from a hidden suite without running it, for the test that keeps the
declaration and the suites in agreement (tests/unit/test_milestones.py). The grader gives each test function
its ``@pytest.mark.points(N)`` (1 without the mark), shared among its parametrized cases, so a suite's total is
the sum over its test functions. ``N`` is read when it is a number or ``len(NAME)`` of a list written out in the
module; anything else gives None.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from grader.milestones import GRADABLE

HIDDEN = Path(__file__).resolve().parent / "hidden"


def _literal_lists(tree: ast.Module) -> dict[str, int]:
    """Module-level ``NAME = [...]`` or ``(...)``: NAME -> its length."""
    lengths = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    lengths[target.id] = len(node.value.elts)
    return lengths


def _points(decorator: ast.expr, lengths: dict[str, int]) -> float | None:
    """The N of a ``pytest.mark.points(N)`` decorator; None for another decorator; ValueError if N is unreadable."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
        return None
    if decorator.func.attr != "points" or len(decorator.args) != 1:
        return None
    arg = decorator.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float)) and not isinstance(arg.value, bool):
        return float(arg.value)
    if (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Name)
        and arg.func.id == "len"
        and len(arg.args) == 1
        and isinstance(arg.args[0], ast.Name)
        and arg.args[0].id in lengths
    ):
        return float(lengths[arg.args[0].id])
    raise ValueError("unreadable points")


def milestone_points(milestone: str) -> float | None:
    """The points milestone ``milestone`` is worth in the full grader, or None where the grader cannot tell."""
    declared = GRADABLE[milestone]
    return float(declared.points) if declared.points is not None and (HIDDEN / declared.suite).is_file() else None


@cache
def suite_points(suite: Path) -> float | None:
    """The total of a hidden suite's ``@pytest.mark.points``, read from its source; None where unreadable."""
    try:
        tree = ast.parse(suite.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    lengths = _literal_lists(tree)
    total = 0.0
    try:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                marks = [p for p in (_points(d, lengths) for d in node.decorator_list) if p is not None]
                total += marks[0] if marks else 1.0
    except ValueError:
        return None
    return total or None
