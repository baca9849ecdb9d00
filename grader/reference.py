"""The reference solutions, loaded into the grading process only (never into a worker)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from grader.milestones import STUDENT_MODULES as MODULES

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"


class Reference:
    """The reference modules as ``ref.m1_attention`` and so on, each imported on first use.

    They import each other by plain names (as a submission does), so the folder
    is on ``sys.path`` while one loads. The grading process never imports a
    submission, so these names cannot clash with a student's files.
    """

    def __init__(self, folder: Path = SOLUTIONS):
        if not (folder / "m1_attention.py").is_file():
            raise FileNotFoundError(f"the reference solutions are not in {folder}")
        self._folder = folder

    def __getattr__(self, name: str) -> ModuleType:
        if name not in MODULES:
            raise AttributeError(name)
        sys.path.insert(0, str(self._folder))
        try:
            module = importlib.import_module(name)
        finally:
            sys.path.remove(str(self._folder))
        setattr(self, name, module)
        return module


def load_reference(folder: Path = SOLUTIONS) -> Reference:
    return Reference(folder)
