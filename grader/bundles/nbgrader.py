"""An nbgrader course: ``nbgrader_config.py`` and ``source/lesson/tinygpt.ipynb``, built from the kit.

One notebook for the lesson, a section per milestone, in the lesson's order (a
teacher releases the lesson as it is taught; the exercises build on each other
in one kernel). Each section has:

- a markdown cell: the stub's own explanation and instructions;
- one answer cell: the stub's signatures and teaching docstrings around the
  reference's bodies, each between ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  (helpers the reference adds are hidden whole), so ``generate_assignment``
  leaves exactly the stub;
- one locked autograder-test cell worth the milestone's points: the public checks,
  then the hidden suite between ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``.

Both run through :mod:`grader.nbgrader_hook`, which grades the saved notebook with
``grade check`` (the isolated workers, out of the kernel's reach) and fails the cell
unless every check of the milestone passed. nbgrader itself still executes the
student's cells in its own kernel, where a student can tamper with anything; for
grades that must hold, run ``grade check`` on the submitted notebooks.
"""
from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

from grader.milestones import MILESTONES
from grader.submission import SIBLING_IMPORT

PROJECT = Path(__file__).resolve().parents[2]
ASSIGNMENT, NOTEBOOK = "lesson", "tinygpt.ipynb"

CONFIG = '''\
c = get_config()
c.CourseDirectory.course_id = "gptkit"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# The first test cell grades the whole notebook out of process (about 10 s here); give it room.
c.ExecutePreprocessor.timeout = 600
'''

INTRO = """\
# Build a GPT, milestone by milestone

Each section below is one milestone: read the explanation, fill in the answer cell,
then run the checks cell under it. The checks grade the **saved** notebook (save
first), in a separate, isolated process. Here you see the public checks; the
grade also counts hidden ones.
"""


def build(out: Path, points: dict[str, float], project: Path = PROJECT) -> Path:
    """Write the course to ``out``; ``points`` gives each milestone's maximum score. Returns the notebook's path."""
    if (out / "source").exists():
        raise FileExistsError(f"{out} already holds a course: choose a new folder (nothing was overwritten)")
    notebook = out / "source" / ASSIGNMENT / NOTEBOOK
    notebook.parent.mkdir(parents=True)
    (out / "nbgrader_config.py").write_text(CONFIG)
    cells = [markdown(INTRO, "intro")]
    for m in MILESTONES.values():
        if len(m.modules) == 1:
            module = m.modules[0]
            stub = (project / "exercises" / f"{module}.py").read_text()
            cells.append(markdown(f"## {m.id}: {m.title}\n\n{ast.get_docstring(ast.parse(stub))}", f"{m.id}-intro"))
            cells.append(answer(answer_source(stub, (project / "solutions" / f"{module}.py").read_text()), m.id))
        else:
            cells.append(markdown(f"## {m.id}: {m.title}\n\nNothing new to write: your sections above, together.",
                                  f"{m.id}-intro"))
        cells.append(tests(m.id, points[m.id]))
    notebook.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5},
        indent=1) + "\n")
    return notebook


# ---------------------------------------------------------------- cells

def _nbgrader(grade_id: str, **flags) -> dict:
    return {"nbgrader": {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3,
                         "solution": False, "task": False, **flags}}


def markdown(text: str, grade_id: str) -> dict:
    return {"cell_type": "markdown", "id": grade_id, "metadata": _nbgrader(grade_id, locked=True), "source": text}


def answer(source: str, milestone: str) -> dict:
    return {"cell_type": "code", "id": f"{milestone}-answer", "execution_count": None, "outputs": [],
            "metadata": _nbgrader(f"{milestone}-answer", solution=True), "source": source}


def tests(milestone: str, points: float) -> dict:
    source = (f"# Checks for {milestone} ({points:g} points). They grade the SAVED notebook: save it first.\n"
              "from grader.nbgrader_hook import check\n\n"
              f'check("{NOTEBOOK}", "{milestone}", public=True)  # the public checks\n'
              "### BEGIN HIDDEN TESTS\n"
              f'check("{NOTEBOOK}", "{milestone}")  # every check of the hidden suite\n'
              "### END HIDDEN TESTS\n")
    return {"cell_type": "code", "id": f"{milestone}-tests", "execution_count": None, "outputs": [],
            "metadata": _nbgrader(f"{milestone}-tests", grade=True, locked=True, points=points), "source": source}


# ---------------------------------------------------------------- the answer cell

def answer_source(stub: str, solution: str) -> str:
    """The solution's code with the stub's docstrings, each body (and each helper) between solution markers.

    nbgrader's release replaces every marked region with ``raise NotImplementedError()``,
    which leaves the stub's signatures and docstrings for the student.
    """
    docstrings = _docstrings(stub)
    stub_values = {ast.unparse(node) for node in ast.parse(stub).body if isinstance(node, ast.Assign)}
    lines = solution.splitlines()
    tree = ast.parse(solution)
    out: list[str] = []
    for node in tree.body:
        if _is_main_block(node) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue  # the demo and the module docstring (the markdown cell has the stub's)
        text = _lines(lines, node)
        if isinstance(node, ast.Import | ast.ImportFrom):
            out += [line for line in text if not SIBLING_IMPORT.match(line)]
        elif isinstance(node, ast.Assign) and ast.unparse(node) in stub_values:
            out += text
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in docstrings:
            out += _blank_before(out) + _function_or_class(node, lines, docstrings, prefix="")
        else:
            out += _blank_before(out) + _marked(text)
    return "\n".join(out).strip() + "\n"


def _function_or_class(node, lines: list[str], docstrings: dict[str, str], prefix: str) -> list[str]:
    """The signature, the stub's docstring, and the reference's body between markers (methods one by one)."""
    name = prefix + node.name
    out = lines[node.lineno - 1 - len(node.decorator_list):node.body[0].lineno - 1]  # decorators, signature
    if docstrings.get(name):
        out.append(textwrap.indent(_quoted(docstrings[name]), " " * (node.col_offset + 4)))
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    if isinstance(node, ast.ClassDef):
        for child in body:
            if isinstance(child, ast.FunctionDef) and f"{name}.{child.name}" in docstrings:
                out += [""] + _function_or_class(child, lines, docstrings, prefix=f"{name}.")
            else:
                out += _marked(_lines(lines, child))
        return out
    return out + _marked(lines[body[0].lineno - 1:body[-1].end_lineno])


def _docstrings(stub: str) -> dict[str, str]:
    """Each function's and class's docstring in the stub, by qualified name ('' when it has none)."""
    found = {}

    def visit(node, prefix: str) -> None:
        for child in node.body:
            if isinstance(child, ast.FunctionDef | ast.ClassDef):
                found[prefix + child.name] = ast.get_docstring(child, clean=True) or ""
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
    visit(ast.parse(stub), "")
    return found


def _quoted(doc: str) -> str:
    return f'"""{doc}"""' if "\n" not in doc else f'"""{doc}\n"""'


def _marked(text: list[str]) -> list[str]:
    indent = re.match(r"\s*", next((t for t in text if t.strip()), "")).group()
    return [f"{indent}### BEGIN SOLUTION", *text, f"{indent}### END SOLUTION"]


def _lines(lines: list[str], node: ast.AST) -> list[str]:
    start = node.lineno - 1 - len(getattr(node, "decorator_list", []))
    return lines[start:node.end_lineno]


def _blank_before(out: list[str]) -> list[str]:
    return ["", ""] if out and out[-1].strip() else []


def _is_main_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
