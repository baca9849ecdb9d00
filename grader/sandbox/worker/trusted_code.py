"""The grader's own earlier milestones, run in a worker from the code an import request carries.

A later milestone is graded on the grader's ``m1`` to ``m3`` (``trusted/``), whose text students must not
read (docs/sandbox.md, "The grader's own earlier milestones stay secret"). So the code is taken out of the
request before any student code runs, compiled without a file, loader or spec, and not kept once compiled.
In a notebook the trusted definitions also replace the student's in the shared namespace.
"""

from __future__ import annotations

import sys
import types


def take_trusted(req: dict) -> dict:
    """The trusted modules' code, taken out of the request (and so out of the serve loop's hands too)
    before any student code runs: nothing the student's code could walk to (gc, frames) still holds it."""
    trusted = req.pop("trusted", None) or {}
    return trusted if isinstance(trusted, dict) else {}


def load_trusted(name: str, code: str) -> types.ModuleType:
    """One of the grader's own earlier milestones (its code only: no comments nor docstrings), run from a
    code object: no file, loader or spec to read it back from, no ``linecache`` entry, and no copy of the
    text kept once compiled. What remains is the code objects themselves, as any module has."""
    module = sys.modules[name] = types.ModuleType(name)
    compiled = compile(code, f"<the grader's {name}>", "exec", dont_inherit=True)
    del code
    exec(compiled, module.__dict__)
    return module


LOADED: list[types.ModuleType] = []  # every trusted module loaded in this worker, for override_notebook


def override_notebook(trusted: list[types.ModuleType]) -> None:
    """In a notebook every milestone shares one namespace (``notebook_code``, see grader/submission.py),
    so the student's GPTBlock would find the student's own CausalSelfAttention there: put the grader's
    trusted definitions in its place, as a folder submission gets them through its imports. Every import
    does it again, with the trusted modules of earlier imports too: the grading side runs a notebook's cells
    one request at a time (grader/sandbox/session.py), after the import that brought the trusted code."""
    LOADED.extend(trusted)
    notebook = sys.modules.get("notebook_code")
    if notebook is None:
        return
    for module in LOADED:
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) == module.__name__:
                setattr(notebook, name, value)
