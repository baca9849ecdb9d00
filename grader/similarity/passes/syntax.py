"""Small helpers on syntax trees that the normalising passes share: a node's shape and size, where a node sits
and how to replace it, the names a node binds, a tree's blocks and functions.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from typing import Any

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

_BINDERS = frozenset(
    {
        ast.arg,
        ast.Global,
        ast.Nonlocal,
        ast.alias,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.ExceptHandler,
        ast.MatchAs,
        ast.MatchStar,
        ast.MatchMapping,
    }
)

# A chain of assignments is merged into one expression of at most this many nodes: a line of code has tens, and
# 20,000 lines of `x = x * 2` would otherwise become one expression walked again at each step.
_MERGE_LIMIT = 100
# An operand's shape, which orders the operands of a + b, is read from its first nodes only: each operand of a long
# chain is read again at each of its + (definitions, few, are ordered by their whole shape).
_SHAPE_LIMIT = 64


def _shape(node: ast.AST, limit: int | None = _SHAPE_LIMIT) -> str:
    """``node``'s kinds of nodes and its numbers, not its names, breadth first (its first ``limit`` nodes): the
    same for a copy with its names changed, so an order by shape is the same for both."""
    parts = []
    for n in itertools.islice(ast.walk(node), limit):
        parts.append(type(n).__name__)
        if isinstance(n, ast.Constant) and not isinstance(n.value, str):
            parts.append(repr(n.value))
    return " ".join(parts)


def _at(new: ast.AST, old: ast.AST) -> Any:
    return ast.copy_location(new, old)


def _bound_here(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [] if isinstance(node.ctx, ast.Load) else [node.id]
    return list(dict.fromkeys(_binds(node, None)))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions and methods in ``tree``, found through its blocks of statements only (quicker than every
    node: a function's definition is a statement)."""
    for block in _blocks(tree):
        yield from (st for st in block if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _parents(root: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
    """Where each node under ``root`` is (by its id): its parent, the field and the index in it."""
    parents: dict[int, tuple[ast.AST, str, int | None]] = {}
    for node in ast.walk(root):
        for field, value in ast.iter_fields(node):
            for i, child in enumerate(value) if isinstance(value, list) else [(None, value)]:
                if isinstance(child, ast.AST):
                    parents[id(child)] = (node, field, i)
    return parents


def _blocks(root: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every block of statements in ``root``, a statement's own blocks after it is given (and maybe changed)."""
    stack = [root]
    while stack:
        node = stack.pop()
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                yield block
                stack.extend(block)
        stack.extend(getattr(node, "handlers", ()))
        stack.extend(getattr(node, "cases", ()))


def _size(node: ast.AST) -> int:
    """How many nodes ``node`` has, counted up to ``_MERGE_LIMIT`` and no further."""
    n = 0
    for n, _ in enumerate(ast.walk(node), 1):
        if n > _MERGE_LIMIT:
            break
    return n


def _set(where: tuple[ast.AST, str, int | None], value: ast.AST) -> None:
    parent, field, index = where
    if index is None:
        setattr(parent, field, value)
    else:
        getattr(parent, field)[index] = value


def _simple(node: ast.expr) -> bool:
    """A plain path: a name or constant, its attributes and constant subscripts (``self.n``, ``x.shape[-1]``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript):
            index = node.slice.operand if isinstance(node.slice, ast.UnaryOp) else node.slice
            if not isinstance(index, ast.Constant):
                return False
        node = node.value
    return isinstance(node, (ast.Name, ast.Constant))


def _binds(node: ast.AST, fn: ast.AST | None) -> list[str]:
    """The names ``node`` binds; a parameter, a global, an import and the like count twice (never a temporary)."""
    if isinstance(node, ast.Name):  # stored or deleted
        return [node.id]
    if type(node) not in _BINDERS:  # most nodes: said at once (this runs for every node of every function)
        return []
    names: list[str | None] = []
    if isinstance(node, ast.arg):
        names = [node.arg]
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        names = list(node.names)
    elif isinstance(node, ast.alias):
        names = [(node.asname or node.name).partition(".")[0]]
    elif isinstance(node, _DEFS) and node is not fn:
        names = [node.name]
    elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping)):
        names = [getattr(node, "name", None) or getattr(node, "rest", None)]
    return [n for n in names if n] * 2
