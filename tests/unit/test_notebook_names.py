"""The nbgrader notebook runs every exercise in one kernel: a name two exercises define is overwritten by the
later one, and the earlier exercise's cells then call the wrong function (m12's ``attend`` once broke attnvar's)."""

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


# Helpers the reference writes alike in two exercises: whichever cell runs last serves both.
SAME_IN_BOTH = {"solutions/split_heads", "solutions/_positive"}


def test_no_two_exercises_define_the_same_name():
    owners: dict[str, list[str]] = defaultdict(list)
    for folder in ("exercises", "solutions"):
        for path in sorted((REPO / folder).glob("*.py")):
            for name in top_level_names(path) - {"__all__"}:
                owners[f"{folder}/{name}"].append(path.name)
    shared = {
        name: files
        for name, files in owners.items()
        if len(files) > 1 and name not in SAME_IN_BOTH and not name.rsplit("/", 1)[1].isupper()
    }
    assert not shared, f"defined in more than one exercise (one notebook kernel runs them all): {shared}"
