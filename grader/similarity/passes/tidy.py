"""A block of statements without what does nothing (``pass``, a docstring, a ``print``, a check that only raises)
and without what follows a ``return``, ``raise``, ``continue`` or ``break``.
"""

from __future__ import annotations

import ast

from grader.similarity.passes.calls import _no_effect, _prints

_ENDS = (ast.Return, ast.Raise, ast.Continue, ast.Break)  # nothing after one of these in a block runs


def _ends(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], _ENDS)


def _tidy(block: list[ast.stmt], noops: frozenset[str] = frozenset()) -> list[ast.stmt]:
    """A block without its statements that do nothing (``pass``, a docstring, a bare constant or name, a builtin's
    call thrown away, a ``print``, ``del`` of plain names, a check that only raises) and without what follows a
    ``return``, ``raise``, ``continue`` or ``break``; the ``else`` of an ``if`` whose body ends so is the code that
    follows it."""
    out: list[ast.stmt] = []
    for st in block:
        if _does_nothing(st, noops):
            continue
        hoisted: list[ast.stmt] = []
        if isinstance(st, ast.If) and st.orelse and _ends(st.body):
            hoisted, st.orelse = st.orelse, []
        if not _guard(st):
            out.append(st)
        out.extend(hoisted)
        if _ends(out):
            break
    return out


def _does_nothing(st: ast.stmt, noops: frozenset[str]) -> bool:
    if isinstance(st, ast.Pass):
        return True
    if isinstance(st, ast.Expr):
        return _no_effect(st.value, noops) or _prints(st.value)
    if isinstance(st, ast.Delete):  # unbinding a name changes nothing a program computes with it
        st.targets = [t for t in st.targets if not isinstance(t, ast.Name)]
        return not st.targets
    return False


def _guard(st: ast.stmt) -> bool:
    """``if c: raise ...`` alone: an assert spelled out, which a program that runs correctly passes (a copy can
    put one after every line, as it can an assert)."""
    return isinstance(st, ast.If) and not st.orelse and len(st.body) == 1 and isinstance(st.body[0], ast.Raise)
