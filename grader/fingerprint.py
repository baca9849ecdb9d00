"""A fingerprint of the grading code: what a gradebook row must match to count as current.

It covers everything that decides a grade: every ``.py`` and ``.ini`` file of the
``grader`` package (hidden suites, public checks, both sides of the sandbox, trusted
modules, runner) and the reference solutions (``solutions/*.py``, which decide the
expected values; absent from a student release). A fix to any of them changes the
fingerprint, so ``grade batch`` regrades what an older grader graded.

``GPTKIT_GRADER_ROOT`` names another folder to fingerprint instead of the project
(one holding ``grader/`` and perhaps ``solutions/``): the tests use it to make a
batch see a changed suite without touching the real files. It changes nothing
that is graded, only what a gradebook row is compared against.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]  # the folder holding grader/ (and solutions/ in a checkout)
ROOT_VARIABLE = "GPTKIT_GRADER_ROOT"
SUFFIXES = (".py", ".ini")


def grading_files(root: Path) -> list[Path]:
    """The files that decide a grade, as paths relative to ``root``, sorted."""
    package = [
        p for p in (root / "grader").rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts and p.is_file()
    ]
    reference = [p for p in (root / "solutions").glob("*.py") if p.is_file()]
    return sorted((p.relative_to(root) for p in package + reference), key=lambda p: p.as_posix())


def fingerprint_of(root: Path) -> str:
    """A short SHA-256 (16 hex digits) over the grading files' relative paths and contents; not cached."""
    digest = hashlib.sha256()
    for relative in grading_files(root):
        data = (root / relative).read_bytes()
        digest.update(f"{relative.as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def grader_fingerprint(root: Path | None = None) -> str:
    """The fingerprint of the grader in use (or of ``root``), computed once per process and folder."""
    if root is None:
        root = Path(os.environ.get(ROOT_VARIABLE) or PROJECT)
    return _cached(root.resolve())


@functools.cache
def _cached(root: Path) -> str:
    return fingerprint_of(root)
