"""Adding an exercise by the recipe of docs/contributing.md ("Adding an exercise") takes the files it names, no more.

In a copy of the project, a toy exercise (``toy``, ``m13_toy.py``: double a tensor) is added step by step: the stub,
the reference, the declaration, a hidden suite with one check, the public checks, the corpus and the docs. Then
``grade check`` grades it (the reference full marks, the stub 0), its table and the release list it, the corpus
grades its bug and its correct variant, and tests/unit/test_milestones.py (the declaration against the tree and
the docs' tables) passes in the copy. The files changed are exactly those the recipe lists, as many as it says.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, checks_in_one_process

pytestmark = pytest.mark.slow  # grades a submission four times and builds a release

ID, MODULE, POINTS, TITLE = "toy", "m13_toy", 2, "Toy: double a tensor"
# What the copy holds: the kit, its docs, and the tests the recipe's checks run.
COPIED = ("grader", "exercises", "solutions", "docs", "tests", "README.md", "CHANGELOG.md", "pyproject.toml")

STUB = '''"""Toy: double a tensor.

Write ``double(x)``: a tensor of the same shape, every element twice ``x``'s.
"""

import torch


def double(x: torch.Tensor) -> torch.Tensor:
    """``x`` times two."""
    raise NotImplementedError("double: return x times two")


if __name__ == "__main__":
    print(double(torch.tensor([1.0, 2.0])))
'''
REFERENCE = STUB.replace('raise NotImplementedError("double: return x times two")', "return 2 * x")
HIDDEN_SUITE = '''"""Milestone toy: double."""

import pytest
import torch

from grader.suites import checks


@pytest.mark.points(2)
def test_double_matches_the_reference(toy, ref):
    """double of a 2 x 3 tensor matches the reference"""
    x = torch.arange(6.0).reshape(2, 3)
    got = checks.tensor(toy.call("double", x), "double(x)", (2, 3))
    checks.equal(got.tolist(), ref.m13_toy.double(x).tolist(), "the doubled tensor")
'''
PUBLIC_SUITE = '''"""Public checks for `toy`."""

import torch

from grader.suites import checks


def test_public_double(toy):
    """(public) double([1, 2]) is [2, 4]"""
    got = checks.tensor(toy.call("double", torch.tensor([1.0, 2.0])), "double([1, 2])", (2,))
    checks.equal(got.tolist(), [2.0, 4.0], "the doubled tensor")
'''
CORPUS = """from helpers import bug, ok

BUGGY = [bug("toy-triples", "toy", "the doubled tensor", "m13_toy.py", ("return 2 * x", "return 3 * x"))]
CORRECT = [ok("toy-adds", {"m13_toy.py": [("return 2 * x", "return x + x")]})]
"""
SECTION = f"""## `{ID}`: `{MODULE}.py` (a toy: double a tensor)

`double(x)` returns `2 * x`, of the same shape.

"""


def insert(path: Path, anchor: str, text: str, after: bool = False) -> None:
    """``text`` put before (or after) the first line of ``path`` that starts with ``anchor``."""
    lines = path.read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.startswith(anchor)) + after
    path.write_text("".join(lines[:i]) + text + "".join(lines[i:]))


def add_toy_exercise(root: Path) -> None:
    """The recipe's steps, in order."""
    (root / "exercises" / f"{MODULE}.py").write_text(STUB)  # 1. the stub
    (root / "solutions" / f"{MODULE}.py").write_text(REFERENCE)  # 2. the reference
    insert(  # 3. the declaration: in lesson order, last before the metric tasks
        root / "grader" / "milestones.py",
        "    # grader/lmbudget/",
        f'    Milestone("{ID}", "{TITLE}", ("{MODULE}",), {POINTS}),\n',
    )
    (root / "grader" / "suites" / "hidden" / f"test_{ID}.py").write_text(HIDDEN_SUITE)  # 4. the hidden suite
    (root / "grader" / "suites" / "public" / f"test_{ID}.py").write_text(PUBLIC_SUITE)  # 5. the public checks
    (root / "tests" / "corpus" / f"{ID}.py").write_text(CORPUS)  # 6. the corpus
    exercises = root / "docs" / "exercises.md"  # 7. the docs
    insert(exercises, "## `lmbudget`", SECTION)
    insert(exercises, "| `lmbudget` |", f"| `{ID}` | 1 (1) | {POINTS} |\n")
    text = exercises.read_text()
    (total,) = re.findall(r"(\d+) points in all", text)
    exercises.write_text(text.replace(f"{total} points in all", f"{int(total) + POINTS} points in all"))
    insert(root / "README.md", "| `problems` |", f"| `{ID}` | `{MODULE}.py` | `double` | `2 * x` |\n", after=True)
    insert(root / "CHANGELOG.md", "### Added", f"- The `{ID}` exercise (`{MODULE}.py`).\n", after=True)


def digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def recipe_files() -> tuple[int, set[str]]:
    """The number of files docs/contributing.md says adding an exercise touches, and the ones it names there."""
    text = (REPO / "docs" / "contributing.md").read_text()
    section = text.split("## Adding an exercise")[1].split("\n## ")[0]
    paragraph = " ".join(section[section.index("Adding an exercise touches") :].split("\n\n")[0].split())
    sentence = re.match(r"Adding an exercise touches (\d+) files: (.*?`)\.\s", paragraph)
    assert sentence, paragraph
    named = {p.replace("mN_name", MODULE).replace("ID", ID) for p in re.findall(r"`([\w/.]+)`", sentence[2])}
    return int(sentence[1]), named


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the project with the toy exercise added; the environment that runs the copy's own grader."""
    root = tmp_path_factory.mktemp("new-exercise") / "gptkit"
    for top in COPIED:
        if (REPO / top).is_dir():
            shutil.copytree(REPO / top, root / top, ignore=shutil.ignore_patterns("__pycache__", ".*", "*.egg-info"))
        else:
            shutil.copy(REPO / top, root / top)
    before = digests(root)
    add_toy_exercise(root)
    after = digests(root)
    (root / "touched.json").write_text(json.dumps(sorted(k for k in after if before.get(k) != after[k])))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")]),
        "GPTKIT_CACHE": str(root.parent / "cache"),
    }
    return root, env


def run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


def grade_check(root: Path, env: dict[str, str], *args: str, cwd: Path | None = None) -> dict:
    proc = run(cwd or root, env, "-m", "grader", "check", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_recipe_touches_the_files_it_names_and_no_other(project):
    root, _ = project
    count, named = recipe_files()
    touched = set(json.loads((root / "touched.json").read_text()))
    assert touched == named, f"touched but not in the recipe: {touched - named}; named, untouched: {named - touched}"
    assert len(touched) == count


def test_the_copy_runs_its_own_grader(project):
    root, env = project
    proc = run(root, env, "-c", "import grader, corpus; print(grader.__file__, corpus.__file__)")
    assert proc.returncode == 0 and proc.stdout.split() == [
        str(root / "grader" / "__init__.py"),
        str(root / "tests" / "corpus" / "__init__.py"),
    ], proc.stdout + proc.stderr


def test_grade_check_gives_the_reference_full_marks_and_the_stub_zero(project):
    root, env = project
    done, stub, text = checks_in_one_process(
        root,
        ["solutions", "-m", ID, "--format", "json"],
        ["exercises", "-m", ID, "--format", "json"],
        ["solutions", "-m", ID],
        env=env,
    )
    assert done.returncode == 0 and stub.returncode == 0, done.stderr + stub.stderr
    done, stub = json.loads(done.stdout), json.loads(stub.stdout)
    assert [(m["id"], m["score"], m["max_score"]) for m in done["milestones"]] == [(ID, POINTS, POINTS)], done
    assert stub["score"] == 0 and stub["max_score"] == POINTS, stub
    assert all(c["message"].startswith("not implemented yet") for m in stub["milestones"] for c in m["checks"]), stub
    table = text.stdout
    assert f"{ID}  {TITLE}" in table and f"{POINTS} / {POINTS}" in table, table


def test_the_release_ships_its_stub_and_public_checks_and_grades_them(project):
    root, env = project
    release = root.parent / "release"
    proc = run(root, env, "-m", "grader", "release", str(release))
    assert proc.returncode == 0, proc.stderr
    assert (release / "exercises" / f"{MODULE}.py").is_file()
    assert (release / "grader" / "suites" / "public" / f"test_{ID}.py").is_file()
    assert not (release / "grader" / "suites" / "hidden").exists()
    renv = {**env, "PYTHONPATH": str(release)}
    public = grade_check(release, renv, "exercises", "-m", ID, cwd=release)
    assert public["checks"] == "public" and [m["id"] for m in public["milestones"]] == [ID], public
    assert public["score"] == 0, public


def test_the_declaration_agrees_with_the_tree_and_the_docs(project):
    """tests/unit/test_milestones.py in the copy: points, files, fixtures, corpus, the docs' tables."""
    root, env = project
    proc = run(root, env, "-m", "pytest", "tests/unit/test_milestones.py", "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_the_corpus_grades_its_bug_and_its_correct_variant(project):
    root, env = project
    proc = run(root, env, "-m", "pytest", "tests/corpus/test_corpus.py", "-k", ID, "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout, proc.stdout[-3000:]  # its isolation, its bug, its correct variant
