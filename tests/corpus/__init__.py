"""The corpus: realistic single-bug submissions, and correct ones written differently, one module per exercise.

Every module of this package but the tests (``test_*.py``) is an exercise's corpus, found here without being
listed: ``ID.py`` for an exercise ``ID`` of grader/milestones.py (``core.py`` for m1 to m4 and ``lesson``), with a
list ``BUGGY`` and a list ``CORRECT``. They come in the declaration's order of their first milestone.
"""

import importlib
import pkgutil

from grader.milestones import GRADABLE

_ORDER = {m: i for i, m in enumerate(GRADABLE)}


def _first_milestone(module) -> int:
    """Where the module's exercise comes in the declaration: its first buggy variant's milestone."""
    return min((_ORDER[v.milestone] for v in module.BUGGY), default=len(_ORDER))


EXERCISES = tuple(
    sorted(
        (
            importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__)
            if not info.name.startswith("test_")
        ),
        key=_first_milestone,
    )
)
BUGGY = [v for module in EXERCISES for v in module.BUGGY]
CORRECT = [v for module in EXERCISES for v in module.CORRECT]
