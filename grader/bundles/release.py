"""The student release: the stubs, the contract pages, the public checks and a grader that runs them; no reference,
no hidden test.

What ships is decided by where a file lives, and the release is built from that list alone (an allow-list, never
a full copy with parts deleted):

* ``exercises/`` and ``grader/``, walked, minus every **never-ships folder**: one that holds a file named
  ``NEVER_SHIPS`` (``MARKER``), left out with everything under it. The hidden suites and their helpers that
  recompute known bugs (which embed correct code), the trusted earlier milestones and lmbudget's default corpus
  (its held-out splits) each live in one. A file added to such a folder stays out with no change here; a new
  secret belongs in one (tests/unit/test_release_layout.py names the folders that must be marked).
* the student-facing contract pages, named one by one (``DOCS``);
* the release's own ``pyproject.toml`` and ``README.md``, from the grader's templates (``OWN``).

``solutions/``, ``tests/``, ``stretch/`` and the rest of ``docs/`` are outside the list. ``__pycache__`` and
dot-files never ship. Without the hidden suites the grader runs the public checks, and says so. A text scan of
the built release for every reference body and hidden check's text (tests/e2e/test_release.py) is the second check.
"""

from __future__ import annotations

import ast
import shutil
import tempfile
import zipfile
from pathlib import Path

from grader import templates
from grader.files import atomic_path

PROJECT = Path(__file__).resolve().parents[2]
MARKER = "NEVER_SHIPS"  # a folder holding a file of this name never ships, nor anything under it
ROOTS = ("exercises", "grader")  # walked: every file ships but those in a never-ships folder
# The student-facing contract, named one by one so that nothing else put in docs/ ships by accident. The
# release's README (grader/templates/release-README.md) and these pages link to one another (tests/e2e/test_links.py
# checks every link resolves).
DOCS = ("docs/contract.md", "docs/exercises.md")
# The practice papers, to sit alone with `grade practice`: each one's paper file and README, never its worked
# solutions (solutions.md) nor a secret.
PAPER_FILES = ("paper.toml", "README.md")
# The release's own files (its name: the template it is written from): the `grade` command and the grader package
# (stretch/ and its `gptkit` do not ship).
OWN = {"pyproject.toml": "release-pyproject.toml", "README.md": "release-README.md"}


def shipped(project: Path = PROJECT) -> list[str]:
    """The project's files that ship (relative paths, sorted): ``ROOTS`` walked, then ``DOCS`` and each practice
    paper's ``PAPER_FILES``; not ``OWN``."""
    names: list[str] = []
    for root in ROOTS:
        names += _walk(project, project / root)
    papers = [
        p.relative_to(project).as_posix()
        for folder in sorted((project / "papers").iterdir() if (project / "papers").is_dir() else [])
        for p in (folder / name for name in PAPER_FILES)
        if p.is_file()
    ]
    return sorted(names + list(DOCS) + papers)


def never_ships(project: Path = PROJECT) -> list[str]:
    """The never-ships folders under ``ROOTS`` (relative paths, sorted): each that holds ``MARKER``."""
    return sorted(
        p.parent.relative_to(project).as_posix()
        for root in ROOTS
        for p in (project / root).rglob(MARKER)
        if p.is_file()
    )


def _walk(project: Path, folder: Path) -> list[str]:
    if (folder / MARKER).exists():
        return []
    names: list[str] = []
    for path in sorted(folder.iterdir()):
        if path.name == "__pycache__" or path.name.startswith("."):
            continue
        if path.is_dir():
            names += _walk(project, path)
        elif path.is_file():
            names.append(path.relative_to(project).as_posix())
    return names


LOCKS = "grader/suites/locked_answers.py"


def build(out: Path, project: Path = PROJECT, answer_locks: bool = True) -> list[str]:
    """Write the release to ``out`` (a folder, or a zip if it ends in .zip); returns the files it holds.

    Without ``answer_locks`` the quiz's, kvmemory's and concepts' locked answers are left out (each question's
    lock withheld): the public checks then say whether each is answered, not whether it is right. For a class that
    will sit a paper on these questions: any lock answers a search, and the quiz and kvmemory's Q_TEXT1 are asked
    alike of every student."""
    files = {name: project / name for name in shipped(project)}
    missing = [name for name in DOCS if not files[name].is_file()]
    if missing:
        raise FileNotFoundError(f"no {', '.join(missing)} in {project}: build from a checkout of the kit")
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "release"
        for name, source in files.items():
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, stage / name)
        for name, template in OWN.items():
            (stage / name).write_text(templates.text(template))
        if not answer_locks:
            (stage / LOCKS).write_text(_withheld_locks(stage / LOCKS))
        names = sorted([*files, *OWN])
        if out.suffix == ".zip":
            _zip(stage, names, out)
        else:
            if out.exists():
                raise FileExistsError(f"{out} already exists: choose a new folder (nothing was overwritten)")
            shutil.copytree(stage, out)
    return names


def _zip(stage: Path, names: list[str], out: Path) -> None:
    with atomic_path(out) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            zf.write(stage / name, name)


def _withheld_locks(path: Path) -> str:
    """The locked answers' module with every answer taken out, from the shipped one's questions."""
    from grader.suites import locked  # a suites module: only where a release is built without answers

    tree = ast.parse(path.read_text())
    (value,) = (n.value for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "LOCKED")
    assert value is not None, f"{path} assigns no LOCKED"
    return locked.module_text(locked.withheld(ast.literal_eval(value)), "`grade release --no-answer-locks`")
