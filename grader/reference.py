"""The reference solutions, loaded into the grading process only (never into a worker)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"
MODULES = ("m1_attention", "m2_model", "m3_train", "m4_generate")


def load_reference(folder: Path = SOLUTIONS) -> SimpleNamespace:
    """The reference modules as ``ref.m1_attention`` and so on.

    They import each other by plain names (as a submission does), so the folder
    is on ``sys.path`` while they load. The grading process never imports a
    submission, so these names cannot clash with a student's files.
    """
    if not (folder / "m1_attention.py").is_file():
        raise FileNotFoundError(f"the reference solutions are not in {folder}")
    sys.path.insert(0, str(folder))
    try:
        return SimpleNamespace(**{name: importlib.import_module(name) for name in MODULES})
    finally:
        sys.path.remove(str(folder))
