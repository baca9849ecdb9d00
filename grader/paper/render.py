"""A student's notebook for a paper: the title, then each part's statement and cells, with their own numbers.

The cells come from the stubs as the nbgrader course makes them (grader/bundles/nbgrader.py): the stub's
explanation as markdown (``notebook_text``), its code as ``answer_source`` marks it, shown as the release
shows it (``released``). A part's code is split into a code cell and one answer cell per question (a
top-level ``NAME = None`` with its comment), and a question with drawn numbers (grader/suites/bank.py) has
the student's numbers in its comment; a multiple choice has options drawn for the student from a hidden pool, in
their own order, and a question that asks for a line of a listing has a listing drawn for them, numbered from
their own first line (bank.py ``Pooled``, ``Numbered``): the hidden grading marks what they were shown. The notebook's
metadata ``gptkit.paper`` says which paper, student, seed, parts, points and rules it is for: ``grade check`` on
the notebook grades exactly those (grader/paper/sitting.py).
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path
from typing import Any

from grader.bundles.nbgrader import PROJECT, answer, answer_source, markdown, notebook_text, released, unanswered
from grader.errors import InputError
from grader.milestones import GRADABLE, STUDENT_MODULES
from grader.paper.config import RULES, Paper
from grader.suites.bank import Drawn, Reordered, stub_comment, with_statements
from grader.variants import Variant

# The milestones with questions whose numbers are drawn per student, and the (hidden) bank of each.
BANKS = {
    "kvmemory": "grader.suites.hidden.kv_questions",
    "concepts": "grader.suites.hidden.concept_questions",
    "problems": "grader.suites.hidden.problem_questions",
}


class RenderError(InputError):
    """The notebook cannot be made here (no stub, or no bank to draw a student's numbers from)."""


def drawn(milestone: str) -> list[Drawn] | None:
    """The questions of ``milestone`` with drawn numbers ([] for none); None where its bank is not here (the
    student release ships no hidden module)."""
    if milestone not in BANKS:
        return []
    try:
        return list(importlib.import_module(BANKS[milestone]).DRAWN)
    except ImportError:
        return None


def reordered(milestone: str) -> list[Reordered] | None:
    """The fixed questions of ``milestone`` each student sees in their own order or numbering ([] for none); None
    where its bank is not here."""
    if milestone not in BANKS:
        return []
    try:
        return list(getattr(importlib.import_module(BANKS[milestone]), "REORDERED", []))
    except ImportError:
        return None


def metadata(paper: Paper, student: str | None, seed: int | None) -> dict[str, Any]:
    return {
        "id": paper.id,
        "title": paper.title,
        "student": student,
        "seed": seed,
        "parts": [{"id": p.id, "points": p.points, "rules": list(p.rules)} for p in paper.parts],
    }


def build(paper: Paper, student: str | None = None, seed: int | None = None, project: Path = PROJECT) -> dict:
    """The notebook (nbformat 4) of ``student`` (``seed``: their variant), or the lesson's numbers with neither."""
    variant = Variant(seed)
    cells = [markdown(title(paper, student), "paper-title")]
    done: dict[str, int] = {}  # module -> the part that shows it
    for number, part in enumerate(paper.parts, 1):
        milestone = GRADABLE[part.id]
        head = f"## Part {number}: {milestone.title} ({part.points:g} points)\n\nExercise `{part.id}`."
        if part.rules:
            head += "\n\n**Rules for this part:** " + "; ".join(RULES[r][1] for r in part.rules) + "."
        modules = [m for m in STUDENT_MODULES if m in milestone.modules]
        shown = [m for m in modules if m in done]
        if shown:
            head += " It uses your code of " + ", ".join(f"`{m}` (part {done[m]})" for m in shown) + " above."
        new = [m for m in modules if m not in done]
        if not new:
            cells.append(markdown(head + "\n\nNothing new to write: your parts above, together.", f"{part.id}-intro"))
            continue
        questions, orders = drawn(part.id), reordered(part.id)
        if (questions is None or orders is None) and seed is not None:
            raise RenderError(
                f"{part.id}'s question bank is not here (a student release): render students' notebooks from the "
                "kit's checkout"
            )
        comments = {q.id: q.comment(q.params(variant)) for q in questions or []}
        for i, module in enumerate(new):
            done[module] = number
            stub_path = project / "exercises" / f"{module}.py"
            if not stub_path.is_file():
                raise RenderError(f"there is no {stub_path}")
            stub = stub_path.read_text(encoding="utf-8")
            solution_path = project / "solutions" / f"{module}.py"
            solution = solution_path.read_text(encoding="utf-8") if solution_path.is_file() else stub
            text = notebook_text(ast.get_docstring(ast.parse(stub)) or "")
            grade_id = part.id if len(new) == 1 else f"{part.id}-{module}"
            cells.append(markdown(f"{head}\n\n{text}" if i == 0 else f"### `{module}`\n\n{text}", f"{grade_id}-intro"))
            code = released(answer_source(stub, solution))
            # the fixed questions' options and listings as this student sees them, from the stub's own words
            ordered = {r.id: r.comment(c, variant) for r in orders or [] if (c := stub_comment(code, r.id)) is not None}
            code = with_statements(code, {**comments, **ordered})
            for key, source in split(code):
                cells.append(answer(source, grade_id if key is None else f"{grade_id}-{key}"))
    cells.append(markdown(FINISH, "paper-end"))
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "gptkit": {"paper": metadata(paper, student, seed)},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def notebook_name(paper_id: str, student: str | None) -> str:
    """The file name of ``student``'s notebook of the paper (the lesson's without one): what ``grade paper render``
    writes and a contest on the paper hands out, one name for one notebook."""
    name = re.sub(r"[^\w.-]", "_", student.strip()) if student is not None else "lesson"
    return f"{paper_id}-{name}.ipynb"


def write(notebook: dict, path: Path) -> None:
    """Write the notebook, making its folder if missing (``--out papers/alice.ipynb`` before papers/ exists)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")


FINISH = (
    "## When you are done\n\nSave the notebook. To check it yourself: `grade check THIS_NOTEBOOK.ipynb`, which "
    "grades exactly this paper's parts, with your numbers, and gives each part's score in the paper's points."
)


def title(paper: Paper, student: str | None) -> str:
    who = (
        f"Student: `{student}`. Some questions' numbers, and the order of the options, are yours alone: answer "
        "the ones in this notebook, with its letters."
        if student is not None
        else "The lesson's numbers (no student's)."
    )
    rows = [
        f"| {i} | `{p.id}`: {GRADABLE[p.id].title} | {p.points:g} | "
        + ("; ".join(RULES[r][1] for r in p.rules) or "none")
        + " |"
        for i, p in enumerate(paper.parts, 1)
    ]
    return "\n".join(
        [
            f"# {paper.title}",
            "",
            f"**Time: {paper.minutes:g} minutes.** {who}",
            "",
            "| Part | Exercise | Points | Rules |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Total: {paper.total:g} points. Write your code where it says `raise NotImplementedError(...)` and "
            "replace each `None` answer; keep the names as they are.",
        ]
    )


def split(code: str) -> list[tuple[str | None, str]]:
    """``code`` as cells: (None, the code before the first question), then (question name, the question's comment
    and ``NAME = None``) for each top-level ``NAME = None``; a section heading above a question goes with it."""
    lines = code.splitlines()
    starts: list[tuple[int, str]] = []
    for node in ast.parse(code).body:
        if name := unanswered(node):
            first = node.lineno - 1
            while first > 0 and (not lines[first - 1].strip() or lines[first - 1].startswith("#")):
                first -= 1
            starts.append((first, name))
    cuts = [0] + [s for s, _ in starts] + [len(lines)]
    keys: list[str | None] = [None] + [k for _, k in starts]
    cells = []
    for key, a, b in zip(keys, cuts, cuts[1:]):
        text = "\n".join(lines[a:b]).strip()
        if text:
            cells.append((key, text + "\n"))
    return cells
