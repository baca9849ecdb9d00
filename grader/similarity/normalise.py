"""A student's file normalised on its syntax tree before it is compared (:func:`normalise`): the passes of
``passes/`` run in rounds until the file settles, then definitions are put in one order.

What goes is what does not change the program (docstrings, annotations, dead statements, unused names and
definitions, imports, code after a ``return``, ``if False:`` blocks, ``try`` blocks that only re-raise, ...);
temporaries are put back where they are used, a call that gives its argument back as it is (``I(x)`` of
``def I(x): return x``, ``x.contiguous()``) is that argument, and a few spellings of the same thing become one
(``x += y`` is ``x = x + y``, ``a > b`` is ``b < a``, ``F.softmax(x, -1)`` is ``x.softmax(-1)``, ...). A file that
does not parse is compared as it is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from grader.similarity.passes.calls import _identities, _noops, _Unwrap
from grader.similarity.passes.inline import _inline_temporaries, _propagate_constants
from grader.similarity.passes.liveness import _DropUnused, _live
from grader.similarity.passes.rewrites import _Rewrite
from grader.similarity.passes.spelling import _aliases, _Library
from grader.similarity.passes.syntax import _DEFS, _functions, _shape

# Each round of normalising can expose more to take out (a name read only by a line just taken out); real files
# settle in two or three, and a file built to need more stops here, normalised that far.
MAX_ROUNDS = 8

_NAME, _MAIN = ast.dump(ast.Name(id="__name__", ctx=ast.Load())), ast.dump(ast.Constant(value="__main__"))


def normalise(code: str, keep: Iterable[str] = ()) -> str:
    """``code`` as Python source with what does not change the program taken out and a few spellings of the
    same thing made one; ``code`` itself if it does not parse.

    ``keep``: the names the file must define (the stub's functions, classes, methods and answers), in the stub's
    order: never taken out as unused (nothing in the file may call them), and their definitions put in that order.
    Other definitions follow, ordered by their shape (not their names, which a copy renames)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python, or nested beyond the parser
        return code
    try:
        return ast.unparse(_normalised(tree, tuple(keep)))
    except Exception:  # nested deeper than the walks go, or a construct they do not know: compared as it is
        return code


def defined_names(code: str) -> tuple[str, ...]:
    """The names ``code`` defines at module or class level, in order: functions, classes, methods, and names
    assigned there (a quiz's answers). Empty if it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    names: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for st in body:
            if isinstance(st, _DEFS):
                names.append(st.name)
                if isinstance(st, ast.ClassDef):
                    visit(st.body)
            elif isinstance(st, (ast.Assign, ast.AnnAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                names.extend(t.id for t in targets if isinstance(t, ast.Name))

    visit(tree.body)
    return tuple(dict.fromkeys(names))


def _normalised(tree: ast.Module, keep: tuple[str, ...]) -> ast.Module:
    kept = frozenset(keep)
    tree = _Unwrap(_identities(tree, kept)).visit(tree)  # first: the main block and the library read the names
    tree.body = [s for s in tree.body if not _main_block(s)]
    tree = _Library(_aliases(tree)).visit(tree)
    before = ast.dump(tree)
    for _ in range(MAX_ROUNDS):
        _propagate_constants(tree, kept)
        tree = _Rewrite(_noops(tree), _identities(tree, kept)).visit(tree)
        tree = _DropUnused(_live(tree, kept)).visit(tree)
        for fn in list(_functions(tree)):
            _inline_temporaries(fn)
        after = ast.dump(tree)
        if after == before:
            break
        before = after
    order = {name: i for i, name in enumerate(keep)}
    tree.body = _ordered(tree.body, order)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            node.body = _ordered(node.body, order)
        if getattr(node, "body", None) == [] and not isinstance(node, ast.Module):
            node.body = [ast.Pass()]  # type: ignore[attr-defined]  # a block left empty: `pass`, to stay Python
    return ast.fix_missing_locations(tree)


def _main_block(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: what runs only when the file is run as a script is never graded (the stubs'
    own is their worked example)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1):
        return False
    sides = {ast.dump(node.test.left), ast.dump(node.test.comparators[0])}
    return isinstance(node.test.ops[0], ast.Eq) and sides == {_NAME, _MAIN}


def _ordered(body: list[ast.stmt], order: dict[str, int]) -> list[ast.stmt]:
    """``body`` in one order: its statements as they were, then its definitions, the stub's in the stub's order
    and the others by shape. Definitions at module or class level run nothing when defined, so their order changes
    nothing; a copy's reordered functions become the same text."""
    defs = [s for s in body if isinstance(s, _DEFS)]
    defs.sort(key=lambda d: (order.get(d.name, len(order)), _shape(d, None)))
    rest = [s for s in body if not isinstance(s, _DEFS)]
    return rest + defs
