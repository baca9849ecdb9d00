"""Values put back where they are read: module-level constants (:func:`_propagate_constants`), a function's
temporaries and its chains of assignments to one name (:func:`_inline_temporaries`). Splitting an expression
into temporaries is a copy's cheapest rewrite.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter

from grader.similarity.passes.syntax import _MERGE_LIMIT, _binds, _blocks, _bound_here, _parents, _set, _simple, _size

# A value put in more than one place (a path read twice, a module constant read anywhere) is at most this many
# nodes: a real file's are under 16 (``self.attn.c_attn.weight.shape[-1]``: 14). A chain of 200 paths each one
# step longer than the last, the last read 20,000 times, held 4 million nodes copied and took 3 minutes and 2 GB.
_COPY_LIMIT = 24


def _propagate_constants(tree: ast.Module, keep: frozenset[str]) -> None:
    """Module-level names assigned once, to a constant or a plain path (``DEBUG = False``, ``EPS = 1e-5``,
    ``r = range``), and bound nowhere else, read as what they stand for; their assignment is then unused."""
    values = {
        st.targets[0].id: st.value
        for st in tree.body
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        and st.targets[0].id not in keep
        and _simple(st.value)
        and _size(st.value) <= _COPY_LIMIT
    }
    if not values:
        return
    binds = Counter(name for node in ast.walk(tree) for name in _bound_here(node) if name in values)
    values = {name: value for name, value in values.items() if binds[name] == 1}
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            for i, child in enumerate(value) if isinstance(value, list) else [(None, value)]:
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) and child.id in values:
                    _set((node, field, i), copy.deepcopy(values[child.id]))


def _inline_temporaries(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Temporaries put back where they are read (splitting an expression into temporaries is a copy's cheapest
    rewrite): ``t = expr`` with ``t`` assigned nowhere else in the function and read once after it, or read more
    than once if ``expr`` is a plain path (``n = self.n_heads``, ``T = x.shape[1]``); and a chain ``x = f(y)``,
    ``x = g(x)`` (or ``return g(x)``) that reads ``x`` once becomes ``x = g(f(y))``."""
    for block in _blocks(fn):
        _merge_chains(block)
    reads: dict[str, list[ast.Name]] = {}
    binds: Counter[str] = Counter()
    assigns: list[tuple[str, ast.Assign]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.id, []).append(node)
        else:
            binds.update(_binds(node, fn))
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigns.append((node.targets[0].id, node))
    candidates = [(name, n) for name, n in assigns if binds[name] == 1 and name in reads]
    if not candidates:
        return
    parents = _parents(fn)
    gone: dict[int, tuple[list[ast.stmt], set[int]]] = {}  # each block's inlined assignments, by the block's id
    for name, assign in sorted(candidates, key=lambda c: (c[1].lineno, c[1].col_offset)):
        inlined = _inline(assign, reads[name], parents)
        if inlined is not None:
            gone.setdefault(id(inlined), (inlined, set()))[1].add(id(assign))
    # Taken out of their blocks once, at the end: one at a time, a block of 50,000 temporaries took 50 s.
    for block, ids in gone.values():
        block[:] = [st for st in block if id(st) not in ids]


def _inline(
    assign: ast.Assign, reads: list[ast.Name], parents: dict[int, tuple[ast.AST, str, int | None]]
) -> list[ast.stmt] | None:
    """Put ``assign``'s value where ``reads`` are; the block ``assign`` is to be taken out of, or None where it
    stays (not a temporary, or one that cannot be put back)."""
    end = (assign.end_lineno or 0, assign.end_col_offset or 0)
    if any((read.lineno, read.col_offset) <= end for read in reads):
        return None  # read before it is assigned (a loop's previous turn): not a temporary
    if len(reads) > 1 and not _simple(assign.value):
        return None  # computed once, read twice: putting it in twice would compute it twice
    if len(reads) > 1 and _size(assign.value) > _COPY_LIMIT:
        return None  # a long path read many times: each copy would hold all of it (_COPY_LIMIT)
    places = [where for where in map(parents.get, map(id, reads)) if where is not None]
    block_at = parents.get(id(assign))
    if block_at is None or len(places) < len(reads) or any(_under(p[0], ast.JoinedStr, parents) for p in places):
        return None  # never into an f-string: unparsing an expression there can fail on its quotes
    for n, where in enumerate(places):
        value = assign.value if n == len(places) - 1 else copy.deepcopy(assign.value)
        _set(where, value)
        parents[id(value)] = where
    return getattr(block_at[0], block_at[1])


def _under(node: ast.AST, kind: type[ast.AST], parents: dict[int, tuple[ast.AST, str, int | None]]) -> bool:
    while True:
        if isinstance(node, kind):
            return True
        up = parents.get(id(node))
        if up is None:
            return False
        node = up[0]


def _merge_chains(block: list[ast.stmt]) -> None:
    i = 0
    while i < len(block) - 1:
        if _merge(block[i], block[i + 1]):
            del block[i]
        else:
            i += 1


def _merge(first: ast.stmt, then: ast.stmt) -> bool:
    """Put ``first``'s value (``x = ...``) into ``then`` if ``then`` reads ``x`` once and nothing can read that
    value after it: ``then`` assigns ``x`` again or returns."""
    if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)):
        return False
    name = first.targets[0].id
    target: ast.Assign | ast.Return
    if isinstance(then, ast.Assign) and [getattr(t, "id", None) for t in then.targets] == [name]:
        target = then
    elif isinstance(then, ast.Return):
        target = then
    else:
        return False
    if target.value is None or _size(first.value) + _size(target.value) > _MERGE_LIMIT:
        return False
    holder = ast.Expr(value=target.value)
    if not _put_once(holder, name, first):
        return False
    target.value = holder.value
    return True


def _put_once(holder: ast.Expr, name: str, assign: ast.Assign) -> bool:
    """Put ``assign``'s value where ``holder`` reads ``name``, if it reads it exactly once (and not in an
    f-string)."""
    places = []
    for node in ast.walk(holder):
        if isinstance(node, ast.JoinedStr) and _reads_name(node, name):
            return False
        for field, value in ast.iter_fields(node):
            for i, child in enumerate(value) if isinstance(value, list) else [(None, value)]:
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) and child.id == name:
                    places.append((node, field, i))
    if len(places) != 1:
        return False
    _set(places[0], assign.value)
    return True


def _reads_name(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))
