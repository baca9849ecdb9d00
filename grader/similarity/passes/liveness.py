"""Dead code: the names a program can read (:func:`_live`), and the assignments and definitions of the others
taken out (:class:`_DropUnused`).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from typing import Any

from grader.similarity.passes.syntax import _DEFS, _at

# Methods a framework calls without the file naming them (nn.Module's __call__ calls forward): always live.
_HOOKS = frozenset({"forward", "backward", "extra_repr"})

_ATTRIBUTE_BY_NAME = frozenset({"getattr", "hasattr", "setattr", "delattr"})


def _live(tree: ast.Module, keep: frozenset[str]) -> set[str]:
    """The names the program can read: as a name, an attribute (``self.x`` keeps every ``x`` alive) or a string
    given to ``getattr`` and its kin, in code that can run: outside any definition, or inside one whose name is
    itself live (so that dead functions calling each other, or themselves, stay dead); less the reads that only
    feed the name itself (``x = x + 1``). ``keep`` and dunder names are always live."""
    reads: Counter[str] = Counter()
    own: Counter[str] = Counter()
    live = set(keep)
    waiting: dict[str, list[ast.AST]] = {}
    todo: list[ast.AST] = [tree]
    while todo:
        for node in _runs(todo.pop()):  # an assignment comes before the reads in its value
            if isinstance(node, _DEFS):
                if node.name in live or _dunder(node.name) or node.name in _HOOKS:
                    todo.append(node)
                else:
                    waiting.setdefault(node.name, []).append(node)
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                own.update(_reads_of(node.value, node.targets[0]))
            for name in _reads(node):
                reads[name] += 1
                if reads[name] > own[name] and name not in live:
                    live.add(name)
                    todo.extend(waiting.pop(name, []))
    return live


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _runs(root: ast.AST) -> Iterator[ast.AST]:
    """``root``'s nodes; a definition inside it is given but not entered (its body runs only if it is called)."""
    stack = list(ast.iter_child_nodes(root))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _DEFS):
            stack.extend(ast.iter_child_nodes(node))


def _reads(node: ast.AST) -> list[str]:
    """The names ``node`` itself reads (not its children's)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        return [node.attr]
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in _ATTRIBUTE_BY_NAME and len(node.args) > 1:
        name = node.args[1]
        return [name.value] if isinstance(name, ast.Constant) and isinstance(name.value, str) else []
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
        return [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return []


def _reads_of(value: ast.expr, target: ast.expr) -> list[str]:
    """The reads in ``value`` of what ``target`` names, the same kind of read (``x`` for a name, ``.x`` for an
    attribute): ``self.x = x`` reads the name x, which assigning the attribute x does not make its own."""
    if isinstance(target, ast.Name):
        return [n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id == target.id]
    if isinstance(target, ast.Attribute):
        return [n.attr for n in ast.walk(value) if isinstance(n, ast.Attribute) and n.attr == target.attr]
    return []


class _DropUnused(ast.NodeTransformer):
    """Assignments and definitions of names nothing reads are taken out; an assignment's value is kept as
    a statement when it may have an effect (``self.unused = nn.Linear(d, d)`` still builds a layer)."""

    def __init__(self, live: set[str]) -> None:
        self.live = live

    def _used(self, name: str) -> bool:
        return name in self.live or _dunder(name) or name in _HOOKS

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        node.targets = [t for t in node.targets if self._target_used(t)]
        return node if node.targets else _at(ast.Expr(value=node.value), node)

    def _target_used(self, target: ast.expr) -> bool:
        if isinstance(target, ast.Name):
            return self._used(target.id)
        if isinstance(target, ast.Attribute):
            return self._used(target.attr)
        return True  # a tuple, a subscript: kept

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> Any:
        return self.generic_visit(node) if self._used(node.name) else None

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef
