"""The student release: the stubs, the contract pages, the public checks and a grader that runs them; no reference,
no hidden test.

The grader in the release is this one, minus every file that holds an answer or
a hidden check: the hidden suites and their helpers that recompute known bugs
(which embed correct code), the trusted earlier milestones, and ``solutions/``.
Without the hidden suites the grader runs the public checks, and says so.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from grader import templates
from grader.files import atomic_path

PROJECT = Path(__file__).resolve().parents[2]
# What holds answers, hidden checks or held-out text, dropped whole: the hidden suites and their helpers, the
# trusted earlier milestones, and lmbudget's default corpus (its held-out splits; no public check reads it).
HIDDEN = ("grader/suites/hidden", "grader/sandbox/worker/trusted", "grader/lmbudget/heldout")
# The student-facing contract, named one by one so that nothing else put in docs/ ships by accident. The
# release's README (grader/templates/release-README.md) and these pages link to one another (tests/e2e/test_links.py
# checks every link resolves).
DOCS = ("docs/contract.md", "docs/exercises.md")


def build(out: Path, project: Path = PROJECT) -> list[str]:
    """Write the release to ``out`` (a folder, or a zip if it ends in .zip); returns the files it holds."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "release"
        for top in ("exercises", "grader"):
            shutil.copytree(project / top, stage / top, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        for doc in DOCS:
            (stage / doc).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(project / doc, stage / doc)
        for hidden in HIDDEN:
            if (stage / hidden).is_dir():
                shutil.rmtree(stage / hidden)
            elif (stage / hidden).exists():
                (stage / hidden).unlink()
        # The release's own: the `grade` command and the grader package (stretch/ and its `gptkit` do not ship).
        (stage / "pyproject.toml").write_text(templates.text("release-pyproject.toml"))
        (stage / "README.md").write_text(templates.text("release-README.md"))
        names = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file())
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
