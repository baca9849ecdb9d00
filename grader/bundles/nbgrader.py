"""An nbgrader course: ``nbgrader_config.py`` and ``source/lesson/tinygpt.ipynb``, built from the kit.

One notebook for the lesson, a section per milestone, in the lesson's order (a
teacher releases the lesson as it is taught; the exercises build on each other
in one kernel). Each section has:

- a markdown cell: the stub's own explanation and instructions (less the
  command-line ones, which do not apply in a notebook);
- one answer cell: the stub's own code (constants, questions, signatures,
  docstrings), each stubbed body replaced by the reference's between
  ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so ``generate_assignment``
  leaves exactly the stub (see :func:`answer_source`);
- one locked autograder-test cell worth the milestone's points, calling
  :func:`grader.nbgrader_hook.check`, which grades the saved notebook with
  ``grade check`` (the isolated workers, out of the kernel's reach). Under the
  instructor's kit it prints the failing checks and outputs the points won,
  nbgrader's partial credit, so nbgrader's total equals ``grade batch``'s; under
  a student's kit (public checks only) it fails unless all public checks pass.
  The cell is the same in the source and the release (no hidden-test region),
  so ``nbgrader autograde`` logs no "checksum has changed" warning.

nbgrader itself still executes the student's cells in its own kernel, where a
student can tamper with anything; for grades that must hold, run ``grade batch``
on the submitted notebooks.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

from grader import templates
from grader.bundles.gradescope import refuse_public_held_out
from grader.milestones import GRADABLE, MILESTONES
from grader.submission import SIBLING_IMPORT

PROJECT = Path(__file__).resolve().parents[2]
ASSIGNMENT, NOTEBOOK = "lesson", "tinygpt.ipynb"

CHECK_YOURSELF = "**Check yourself:** save the notebook, then run the checks cell under the answer cell."
# The notebook's sections: the lesson's milestones, each graded by its checks cell (``grade check``'s default). A
# metric task's held-out text must be one students have not seen: ``build`` refuses one that is not, as a contest.
SECTIONS: tuple[str, ...] = tuple(MILESTONES)


def refuse_existing(out: Path) -> None:
    """Raise FileExistsError where ``out`` already holds a course, or part of one: its source folder or its
    nbgrader_config.py (an instructor's own settings, such as their course_id, would be lost)."""
    if held := [name for name in ("source", "nbgrader_config.py") if (out / name).exists()]:
        raise FileExistsError(
            f"{out} already holds a course ({' and '.join(held)}): choose a new folder (nothing was overwritten)"
        )


def build(out: Path, points: dict[str, float], project: Path = PROJECT) -> Path:
    """Write the course to ``out``; ``points`` gives each milestone's maximum score. Returns the notebook's path."""
    refuse_existing(out)
    refuse_public_held_out(SECTIONS)
    notebook = out / "source" / ASSIGNMENT / NOTEBOOK
    notebook.parent.mkdir(parents=True)
    (out / "nbgrader_config.py").write_text(templates.text("nbgrader_config.py.tmpl"))
    cells = [markdown(templates.text("nbgrader-intro.md"), "intro")]
    for m in (GRADABLE[i] for i in SECTIONS):
        if len(m.modules) == 1:
            module = m.modules[0]
            stub = (project / "exercises" / f"{module}.py").read_text()
            text = notebook_text(ast.get_docstring(ast.parse(stub)) or "")
            cells.append(markdown(f"## {m.id}: {m.title}\n\n{text}\n\n{CHECK_YOURSELF}", f"{m.id}-intro"))
            cells.append(answer(answer_source(stub, (project / "solutions" / f"{module}.py").read_text()), m.id))
        else:
            cells.append(
                markdown(
                    f"## {m.id}: {m.title}\n\nNothing new to write: your sections above, together.", f"{m.id}-intro"
                )
            )
        cells.append(tests(m.id, points[m.id]))
    notebook.write_text(
        json.dumps(
            {
                "cells": cells,
                "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )
        + "\n"
    )
    return notebook


def notebook_text(doc: str) -> str:
    """A stub's explanation for the notebook: what only applies to the file on disk is dropped or rewritten.

    The "Check yourself from the folder that holds this file" paragraph and its
    commands (``grade check``, ``python m5_scaling.py``) go, as does any other
    paragraph about running the file; the checks cell replaces them.
    """
    doc = re.sub(
        r"This file imports (.+?) from your\s+``m(\d)_\w+\.py``, so\s+``python \w+\.py``\s+needs a working"
        r"\s+milestone (\d)\.",
        r"This section uses \1 from your milestone \2 section above, so running it needs a working "
        r"milestone \3.",
        doc,
        flags=re.S,
    )
    # The worked examples are the files' demos, which the notebook leaves out: say what they give, not print.
    doc = re.sub(r"should\s+print", "gives", doc)
    doc = re.sub(r"the\s+demo\s+below(\s+\([^)]*\))\s+printed", r"sampling 10 tokens\1 gave", doc)
    kept: list[str] = []
    drop_block = False
    for paragraph in re.split(r"\n\s*\n", doc):
        lines = [line for line in paragraph.splitlines() if line.strip()]
        literal = all(line.startswith((" ", "\t")) for line in lines)
        commands = literal and all(line.split()[0] in ("grade", "python") for line in lines)
        if paragraph.startswith("Check yourself from the folder"):
            drop_block = paragraph.rstrip().endswith("::")
            continue
        if literal and (drop_block or commands):
            drop_block = False
            continue
        drop_block = False
        if re.search(r"``python m\d|this file loads|The demo below", paragraph):
            continue
        kept.append(paragraph)
    return "\n\n".join(kept).strip()


# ---------------------------------------------------------------- cells


def _nbgrader(grade_id: str, **flags) -> dict:
    return {
        "nbgrader": {
            "grade": False,
            "grade_id": grade_id,
            "locked": False,
            "schema_version": 3,
            "solution": False,
            "task": False,
            **flags,
        }
    }


def markdown(text: str, grade_id: str) -> dict:
    return {"cell_type": "markdown", "id": grade_id, "metadata": _nbgrader(grade_id, locked=True), "source": text}


def answer(source: str, milestone: str) -> dict:
    return {
        "cell_type": "code",
        "id": f"{milestone}-answer",
        "execution_count": None,
        "outputs": [],
        "metadata": _nbgrader(f"{milestone}-answer", solution=True),
        "source": source,
    }


def tests(milestone: str, points: float) -> dict:
    source = templates.render("nbgrader-tests.py.tmpl", milestone=milestone, points=f"{points:g}", notebook=NOTEBOOK)
    return {
        "cell_type": "code",
        "id": f"{milestone}-tests",
        "execution_count": None,
        "outputs": [],
        "metadata": _nbgrader(f"{milestone}-tests", grade=True, locked=True, points=points),
        "source": source,
    }


# ---------------------------------------------------------------- the answer cell

# Decorators of the reference that the stub leaves to the student's body: kept as a `with` block around it.
CONTEXT_DECORATORS = ("torch.no_grad()", "torch.inference_mode()")


def unanswered(node: ast.stmt) -> str | None:
    """The name of a top-level ``NAME = None`` (a question left for the student), else None."""
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
    ):
        return node.targets[0].id
    return None


def answer_source(stub: str, solution: str) -> str:
    """The stub's own code, each stubbed body replaced by the reference's between solution markers.

    Everything the stub shows stays as it is: comments, constants, signatures,
    docstrings, the quiz's questions. Only each ``raise NotImplementedError(...)``
    that stands for a body becomes ``### BEGIN SOLUTION``, the reference's body,
    ``### END SOLUTION``; the helpers, constants and imports of the reference that
    the stub does not have go inside that region, defined where they are used, so a
    student who fills each visible function with the reference's body has all it
    needs. A module-level value the stub leaves ``None`` (a quiz answer) becomes
    the reference's assignment between markers. Each BEGIN line carries the stub's
    own line (``### BEGIN SOLUTION (release: Q1 = None)``), which
    :mod:`grader.bundles.nbgrader_release` puts back in the release instead of
    nbgrader's bare ``raise NotImplementedError()``.
    """
    stub_tree, ref_tree = ast.parse(stub), ast.parse(solution)
    stub_lines, ref_lines = stub.splitlines(), solution.splitlines()
    ref_defs = _definitions(ref_tree)
    stub_names = _bound_names(stub_tree)
    replace: list[tuple[int, int, list[str]]] = []  # (first line, last line, 1-based inclusive) -> new lines

    def visit(stub_body: list[ast.stmt], ref_body: list[ast.stmt]) -> None:
        refs = {n.name: n for n in ref_body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        for node in stub_body:
            ref = refs.get(getattr(node, "name", ""))
            if isinstance(node, ast.ClassDef) and isinstance(ref, ast.ClassDef):
                visit(node.body, ref.body)
            elif isinstance(node, ast.FunctionDef) and isinstance(ref, ast.FunctionDef) and _is_stubbed(node):
                replace.append(
                    (
                        node.body[-1].lineno,
                        _end(node.body[-1]),
                        _marked(
                            _solution_body(node, ref, ref_lines, ref_defs, stub_names),
                            _one_line(stub_lines, node.body[-1]),
                        ),
                    )
                )

    visit(stub_tree.body, ref_tree.body)
    ref_values = {
        t.id: n for n in ref_tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    for node in stub_tree.body:
        if (name := unanswered(node)) and name in ref_values:  # an answer to give: the quiz
            replace.append(
                (
                    node.lineno,
                    _end(node),
                    _marked(_lines(ref_lines, ref_values[name]), _one_line(stub_lines, node)),
                )
            )
        elif isinstance(node, ast.Import | ast.ImportFrom) and SIBLING_IMPORT.match(stub_lines[node.lineno - 1]):
            first = node.lineno  # the import and the comment lines right above it: the notebook has one namespace
            while first > 1 and stub_lines[first - 2].lstrip().startswith("#"):
                first -= 1
            replace.append((first, _end(node), []))
    out = list(stub_lines)
    for first, last, new in sorted(replace, reverse=True):
        out[first - 1 : last] = new
    start = _end(stub_tree.body[0]) if _has_docstring(stub_tree) else 0  # the markdown cell has the docstring
    end = next((n.lineno - 1 for n in stub_tree.body if _is_main_block(n)), len(stub_lines))
    shift = sum(len(new) - (last - first + 1) for first, last, new in replace if last <= end)
    start_shift = sum(len(new) - (last - first + 1) for first, last, new in replace if last <= start)
    text = "\n".join(out[start + start_shift : end + shift])
    return re.sub(r"\n{3,}(?=\S)", "\n\n\n", text).strip() + "\n"


def _is_stubbed(node: ast.FunctionDef) -> bool:
    last = node.body[-1]
    return (
        isinstance(last, ast.Raise)
        and last.exc is not None
        and "NotImplementedError" in ast.unparse(last.exc).split("(")[0]
    )


def _solution_body(
    stub: ast.FunctionDef,
    ref: ast.FunctionDef,
    ref_lines: list[str],
    ref_defs: dict[str, ast.stmt],
    stub_names: set[str],
) -> list[str]:
    """The lines that replace the stub's ``raise``: the reference's body (less what the stub already has) between
    markers, preceded by the reference-only definitions it uses."""
    indent = " " * stub.body[-1].col_offset
    ref_body = ref.body[1:] if ast.get_docstring(ref) is not None else ref.body
    given = [ast.dump(n) for n in stub.body[:-1] if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if [ast.dump(n) for n in ref_body[: len(given)]] == given:
        ref_body = ref_body[len(given) :]  # e.g. the super().__init__() the stub shows
    body = textwrap.dedent("\n".join(ref_lines[ref_body[0].lineno - 1 : ref_body[-1].end_lineno])).splitlines()
    extra = [
        ast.unparse(d)
        for d in ref.decorator_list
        if ast.unparse(d) not in {ast.unparse(s) for s in stub.decorator_list}
    ]
    for decorator in extra:
        if decorator not in CONTEXT_DECORATORS:
            raise ValueError(f"{ref.name}: the reference's decorator @{decorator} is not in the stub")
        body = [f"with {decorator}:"] + textwrap.indent("\n".join(body), "    ").splitlines()
    helpers: list[str] = []
    for name in _needed(ref, ref_defs, stub_names):
        helpers += textwrap.dedent("\n".join(_lines(ref_lines, ref_defs[name]))).splitlines()
        if isinstance(ref_defs[name], ast.FunctionDef | ast.ClassDef):
            helpers.append("")
    return textwrap.indent("\n".join(helpers + body), indent, lambda line: bool(line.strip())).splitlines()


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """What each module-level name of the reference is bound by (imports, assignments, functions, classes)."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if _is_main_block(node):
            continue
        for name in _names_bound_by(node):
            found[name] = node
    return found


def _bound_names(tree: ast.Module) -> set[str]:
    return {name for node in tree.body if not _is_main_block(node) for name in _names_bound_by(node)}


def _names_bound_by(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return [node.name]
    return []


def _needed(ref: ast.FunctionDef, ref_defs: dict[str, ast.stmt], stub_names: set[str]) -> list[str]:
    """The reference-only module-level names ``ref`` uses, directly or through each other, in the reference's order."""
    found: set[str] = set()
    todo: list[ast.stmt] = [ref]
    while todo:
        node = todo.pop()
        for n in ast.walk(node):
            if (
                isinstance(n, ast.Name)
                and n.id in ref_defs
                and n.id not in stub_names
                and n.id not in found
                and ref_defs[n.id] is not ref
            ):
                found.add(n.id)
                todo.append(ref_defs[n.id])
    order = list(ref_defs.values())
    nodes = list(dict.fromkeys(ref_defs[name] for name in found))  # one statement may bind several names
    return [next(name for name in _names_bound_by(node) if name in found) for node in sorted(nodes, key=order.index)]


def _has_docstring(tree: ast.Module) -> bool:
    return ast.get_docstring(tree) is not None


def _one_line(lines: list[str], node: ast.stmt) -> str:
    """The stub's statement as one line: as written where it is one (a call split over lines, unparsed)."""
    return lines[node.lineno - 1].strip() if node.lineno == node.end_lineno else ast.unparse(node)


def _marked(text: list[str], release: str) -> list[str]:
    """``text`` between solution markers; the BEGIN line names what the release shows instead (the stub's line)."""
    first = next((t for t in text if t.strip()), "")
    indent = first[: len(first) - len(first.lstrip())]
    return [f"{indent}### BEGIN SOLUTION (release: {release})", *text, f"{indent}### END SOLUTION"]


def released(source: str) -> str:
    """What the release shows of an answer cell's ``source``: each solution region replaced by the stub's line its
    BEGIN line names, as :class:`grader.bundles.nbgrader_release.ClearAnswers` does (used where no nbgrader runs:
    a paper's notebook, grader/paper/render.py)."""
    out: list[str] = []
    inside = False
    for line in source.split("\n"):
        if "### BEGIN SOLUTION" in line:
            inside = True
            named = re.search(r"\(release: (.*)\)\s*$", line)
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + (named.group(1) if named else "raise NotImplementedError()"))
        elif "### END SOLUTION" in line:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def _lines(lines: list[str], node: ast.stmt) -> list[str]:
    start = node.lineno - 1 - len(getattr(node, "decorator_list", []))
    return lines[start : _end(node)]


def _end(node: ast.stmt) -> int:
    """The statement's last line (``ast.parse`` always sets it; the type says it may not)."""
    return node.end_lineno or node.lineno


def _is_main_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
