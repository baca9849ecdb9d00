"""Importing the student's milestone files, with a placeholder for a broken sibling.

So ``from m2_model import TinyGPT`` at the top of m3_train.py does not zero M3 when m2_model.py has a
syntax error: the placeholder module stands in for m2_model and fails only where it is used, with the
import's error in its message (the student's error, as any other).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
import types


def import_student_module(name: str, student_modules: tuple[str, ...]) -> None:
    """Import a milestone's file; a broken sibling it imports is replaced by a placeholder.

    So ``from m2_model import TinyGPT`` at the top of m3_train.py does not zero M3
    when m2_model.py has a syntax error: the placeholder only fails if it is used.
    """
    for _ in student_modules:
        try:
            importlib.import_module(name)
            return
        except BaseException as e:  # noqa: BLE001
            culprit = _failing_sibling(e, name, student_modules)
            if culprit is None:
                raise
            for mod in student_modules:
                if mod != culprit and sys.modules.get(mod) is None:
                    sys.modules.pop(mod, None)
            sys.modules[culprit] = _placeholder(culprit, e)


def _failing_sibling(e: BaseException, name: str, student_modules: tuple[str, ...]) -> str | None:
    files = [e.filename] if isinstance(e, SyntaxError) and e.filename else []
    files += [f.filename for f in traceback.extract_tb(e.__traceback__)]
    if isinstance(e, ModuleNotFoundError) and e.name in student_modules and e.name != name:
        return e.name
    for path in reversed(files):
        stem = os.path.splitext(os.path.basename(path))[0]
        if os.path.dirname(os.path.abspath(path)) == os.getcwd() and stem in student_modules:
            return stem if stem != name and not isinstance(sys.modules.get(stem), _Placeholder) else None
    return None


class _Placeholder(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        reason = self.__dict__["_reason"]

        def unusable(*_a, **_k):
            raise ImportError(f"{self.__name__}.py could not be imported ({reason}), so {attr} is unusable")

        return unusable


def _placeholder(name: str, e: BaseException) -> types.ModuleType:
    module = _Placeholder(name)
    module.__dict__["_reason"] = f"{type(e).__name__}: {e}"  # read back in __getattr__
    return module
