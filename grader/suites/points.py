"""A milestone's own points, read from its hidden suite without running it, so that a contest task's points
can default to them.

The grader gives each test function its ``@pytest.mark.points(N)`` (1 without the mark), shared among its
parametrized cases, so a suite's total is the sum over its test functions. ``N`` is read when it is a number
or ``len(NAME)`` of a list written out in the module; anything else, or a missing suite (the student release
ships none), gives None and the contest file must then say the points itself.
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


@cache
def milestone_points(milestone: str) -> float | None:
    """The points milestone ``milestone`` is worth in the full grader, or None where they cannot be read."""
    suite = HIDDEN / GRADABLE[milestone].suite
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
