"""One spelling for what the standard library and torch spell several ways: an imported name as its full path,
torch's functions as the tensor's methods (``F.softmax(x, -1)``: ``x.softmax(-1)``), ``x.matmul(y)`` as
``x @ y``, ``x.size(i)`` as ``x.shape[i]``, ``math.sqrt(x)`` as ``x ** 0.5``.
"""

from __future__ import annotations

import ast
from typing import Any

from grader.similarity.passes.syntax import _at, _bound_here

# torch's functions that are also the first argument's method, with the same arguments after it:
# torch.softmax(x, -1) is x.softmax(-1), F.relu(x) is x.relu().
_TENSOR_METHODS = frozenset(
    "argmax argmin chunk cumsum exp flatten gather log log_softmax masked_fill matmul mean multinomial permute "
    "relu reshape sigmoid softmax sort split sqrt squeeze sum tanh topk transpose tril triu unsqueeze".split()
)
_SWAPS = frozenset({"transpose", "swapaxes", "swapdims"})  # x.transpose(1, 2) is x.transpose(2, 1)
_TENSOR_MODULES = frozenset({"torch", "torch.nn.functional"})
# Methods whose first parameter is the dimension: x.softmax(dim=-1) is x.softmax(-1).
_DIM_FIRST = frozenset("argmax argmin cumsum log_softmax mean softmax squeeze sum unsqueeze".split())


def _aliases(tree: ast.Module) -> dict[str, str]:
    """What each imported name stands for (``F``: ``torch.nn.functional``, ``sqrt``: ``math.sqrt``), for the names
    bound by imports only."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names if a.name != "*")
    if not out:
        return out
    bound = {n for node in ast.walk(tree) if not isinstance(node, ast.alias) for n in _bound_here(node)}
    return {name: path for name, path in out.items() if name not in bound}


def _dotted(path: str, at: ast.AST) -> ast.expr:
    first, *rest = path.split(".")
    out: ast.expr = _at(ast.Name(id=first, ctx=ast.Load()), at)
    for attr in rest:
        out = _at(ast.Attribute(value=out, attr=attr, ctx=ast.Load()), at)
    return out


def _path(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The dotted path an expression of imported names stands for (``F.softmax``: torch.nn.functional.softmax)."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _path(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


class _Library(ast.NodeTransformer):
    """One spelling for what the standard library and torch spell several ways: an imported name as its full path
    (``nn.Linear``, ``Linear``: ``torch.nn.Linear``), torch's functions as methods (``torch.softmax(x, dim=-1)``,
    ``F.softmax(x, -1)``: ``x.softmax(-1)``), ``x.matmul(y)`` as ``x @ y``, ``x.size(i)`` as ``x.shape[i]``,
    ``math.sqrt(x)`` as ``x ** 0.5``."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases

    def visit_Name(self, node: ast.Name) -> Any:
        path = self.aliases.get(node.id)
        return _dotted(path, node) if path and isinstance(node.ctx, ast.Load) else node

    def visit_Call(self, node: ast.Call) -> Any:
        path = _path(node.func, self.aliases) or ""
        self.generic_visit(node)
        module, _, name = path.rpartition(".")
        if path == "math.sqrt" and len(node.args) == 1 and not node.keywords:
            return _at(ast.BinOp(left=node.args[0], op=ast.Pow(), right=ast.Constant(value=0.5)), node)
        if module in _TENSOR_MODULES and name in _TENSOR_METHODS and node.args:
            if not isinstance(node.args[0], ast.Starred):
                method = _at(ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load()), node.func)
                node = _at(ast.Call(func=method, args=node.args[1:], keywords=node.keywords), node)
        return _method(node)


def _method(node: ast.Call) -> ast.expr:
    if not isinstance(node.func, ast.Attribute):
        return node
    attr, args, keywords = node.func.attr, node.args, node.keywords
    if attr == "matmul" and len(args) == 1 and not keywords:
        return _at(ast.BinOp(left=node.func.value, op=ast.MatMult(), right=args[0]), node)
    if attr == "size" and len(args) <= 1 and not keywords:
        shape = _at(ast.Attribute(value=node.func.value, attr="shape", ctx=ast.Load()), node)
        return _at(ast.Subscript(value=shape, slice=args[0], ctx=ast.Load()), node) if args else shape
    if attr in _DIM_FIRST and not args and [k.arg for k in keywords] == ["dim"]:
        node.args, node.keywords = [keywords[0].value], []
    dims = [d for d in map(_integer, args) if d is not None]
    if attr in _SWAPS and len(dims) == len(args) == 2 and not keywords and dims[0] > dims[1]:
        node.args = args[::-1]  # transpose(2, 1) is transpose(1, 2)
    return node


def _integer(node: ast.expr) -> int | None:
    """The value of an integer constant, negative ones included (``-1`` is a minus applied to 1)."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    return sign * node.value if isinstance(node, ast.Constant) and type(node.value) is int else None
