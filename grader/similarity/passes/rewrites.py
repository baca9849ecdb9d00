"""The local rewrites, bottom up (:class:`_Rewrite`): each statement and expression in one spelling
(``x += y`` is ``x = x + y``, ``a > b`` is ``b < a``, ``not a == b`` is ``a != b``, ``x * 1`` is ``x``, ``2 * 3``
is ``6``, the operands of ``a + b`` in one order, ``if False:`` gone, ...), annotations, asserts and imports
taken out, and each block tidied.
"""

from __future__ import annotations

import ast
import copy
import keyword
import math
import operator
from collections.abc import Callable
from typing import Any, cast

from grader.similarity.passes.calls import _unwrapped
from grader.similarity.passes.syntax import _at, _shape
from grader.similarity.passes.tidy import _tidy

_JUMPS = (ast.Break, ast.Continue)

_SWAPPED = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}  # a > b is b < a
_POSITIVE = {ast.NotEq: ast.Eq, ast.IsNot: ast.Is, ast.NotIn: ast.In}
_NEGATED = {**_POSITIVE, **{positive: negative for negative, positive in _POSITIVE.items()}}  # not a == b: a != b
_SYMMETRIC = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_FOLD: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_RIGHT_IDENTITY: dict[type[ast.operator], int] = {ast.Add: 0, ast.Sub: 0, ast.Mult: 1, ast.Div: 1, ast.Pow: 1}
_LEFT_IDENTITY: dict[type[ast.operator], int] = {ast.Add: 0, ast.Mult: 1}
_FOLD_LIMIT = 1e12  # constants folded only when small: 10 ** 10 ** 10 is never computed
_FOLD_LIMIT_STR = 1000


def _truth(node: ast.expr) -> bool | None:
    """Whether a test made of constants only is true (``False``, ``0``, ``1 > 2``, ``not True``); None if it
    reads anything else."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _truth(node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_truth(v) for v in node.values]
        decisive = isinstance(node.op, ast.Or)  # the value that decides an `or` is a true one, an `and`'s false
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = node.left, node.comparators[0]
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
            try:
                return bool(_COMPARE[type(node.ops[0])](left.value, right.value))
            except TypeError:  # 1 < "a"
                return None
    return None


def _number(node: ast.expr, value: float | None = None) -> bool:
    """``node`` is a number (not a bool), and equal to ``value`` if given."""
    return (
        isinstance(node, ast.Constant) and type(node.value) in (int, float) and (value is None or node.value == value)
    )


def _chain(node: ast.expr, op: type[ast.operator]) -> list[ast.expr]:
    """The operands of ``a op b op c`` (parsed as ``(a op b) op c``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, op):
        return _chain(node.left, op) + _chain(node.right, op)
    return [node]


def _whole(node: ast.expr) -> bool:
    return isinstance(node, ast.Slice) and node.lower is None and node.upper is None and node.step is None


def _static(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(getattr(d, "id", None) == "staticmethod" for d in fn.decorator_list)


def _rename(fn: ast.AST, old: str, new: str) -> None:
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == old:
            n.id = new
        elif isinstance(n, ast.arg) and n.arg == old:
            n.arg = new


class _Rewrite(ast.NodeTransformer):
    """The local rewrites, bottom up: each statement or expression by what it holds, each block tidied."""

    def __init__(
        self,
        noops: frozenset[str] = frozenset(),
        identities: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
    ) -> None:
        self.noops, self.identities = noops, identities

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                setattr(node, field, _tidy(block, self.noops))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Any:
        self.generic_visit(node)
        node.returns = None  # annotations are not run (and a copy can add or drop them)
        if node.body and isinstance(node.body[-1], ast.Return) and node.body[-1].value is None:
            node.body.pop()  # a bare `return` last: falling off the end is the same
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> Any:
        node.annotation = None
        return node

    def visit_Return(self, node: ast.Return) -> Any:
        self.generic_visit(node)
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            node.value = None  # `return None` is `return`
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        self.generic_visit(node)
        if node.value is None:
            return None  # `x: int` alone assigns nothing
        return _at(ast.Assign(targets=[node.target], value=node.value), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        self.generic_visit(node)
        read = copy.deepcopy(node.target)
        read.ctx = ast.Load()
        value = self.visit(_at(ast.BinOp(left=read, op=node.op, right=node.value), node))
        return _at(ast.Assign(targets=[node.target], value=value), node)  # x += y is x = x + y

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        if len(node.targets) != 1:
            return node
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Name) and target.id == value.id:
            return None  # x = x
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            names = [t.id for t in target.elts if isinstance(t, ast.Name)]
            reads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            starred = any(isinstance(e, ast.Starred) for e in value.elts)
            if len(set(names)) == len(target.elts) and not reads & set(names) and not starred:
                # `a, b = x, y` is `a = x` then `b = y` when neither side reads the other (not a swap)
                return [_at(ast.Assign(targets=[t], value=v), node) for t, v in zip(target.elts, value.elts)]
        return node

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> Any:
        return None  # every student imports much the same, and a copy can add, reorder or respell imports freely

    visit_ImportFrom = visit_Import

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        known = _truth(node.test)
        if known is not None:
            return node.body if known else node.orelse  # `if False:` never runs, `if True:` always does
        if not node.body and not node.orelse:
            return _at(ast.Expr(value=node.test), node)  # the test is run for its effects only, if it has any
        if not node.body:  # `if c: pass` / `else: x` is `if not c: x`
            node.test = self.visit(_at(ast.UnaryOp(op=ast.Not(), operand=node.test), node.test))
            node.body, node.orelse = node.orelse, []
        test = node.test
        if node.orelse and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            node.test, node.body, node.orelse = test.operand, node.orelse, node.body  # `if not c: a` / `else: b`
        elif node.orelse and isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _POSITIVE:
            test.ops = [_POSITIVE[type(test.ops[0])]()]  # `if a != b: x` / `else: y` is `if a == b: y` / `else: x`
            node.body, node.orelse = node.orelse, node.body
        return node

    def visit_MatchValue(self, node: ast.MatchValue) -> Any:
        return node  # a pattern's value is spelled as the syntax wants it (`-1 + 2j`, never `2j + -1`)

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> Any:
        return None  # it says where a name lives, not what the program computes

    visit_Nonlocal = visit_Global

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        self.generic_visit(node)
        if isinstance(node.slice, ast.Tuple):  # x[i, :, :] is x[i]: trailing whole slices select everything
            elts = list(node.slice.elts)
            while len(elts) > 1 and _whole(elts[-1]):
                elts.pop()
            node.slice = elts[0] if len(elts) == 1 else _at(ast.Tuple(elts=elts, ctx=ast.Load()), node.slice)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        for fn in node.body:  # a method's first parameter is `self` whatever it is called (copydetect keeps `self`)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _static(fn):
                params = fn.args.posonlyargs + fn.args.args
                if params and params[0].arg != "self":
                    _rename(fn, params[0].arg, "self")
        return self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        known = _truth(node.test)
        return node if known is None else node.body if known else node.orelse

    def visit_While(self, node: ast.While) -> Any:
        self.generic_visit(node)
        known = _truth(node.test)
        if known is False:
            return node.orelse
        body = node.body
        inside = [n for st in body[:-1] for n in ast.walk(st)]
        if known and body and isinstance(body[-1], ast.Break) and not any(isinstance(n, _JUMPS) for n in inside):
            return body[:-1]  # `while True:` whose body ends in its only `break` runs once
        return node

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)
        if isinstance(node.iter, (ast.Tuple, ast.List)) and not node.iter.elts:
            return node.orelse  # a loop over nothing
        once = (
            isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range"
            and len(node.iter.args) == 1
            and _number(node.iter.args[0], 1)
            and not node.iter.keywords
        )
        if once and isinstance(node.target, ast.Name):
            inside = list(ast.walk(ast.Module(body=node.body, type_ignores=[])))
            reads_target = any(isinstance(n, ast.Name) and n.id == node.target.id for n in inside)
            if not reads_target and not any(isinstance(n, (ast.Break, ast.Continue)) for n in inside):
                return node.body + node.orelse  # `for _ in range(1):` runs its body once
        return node

    def visit_With(self, node: ast.With) -> Any:
        self.generic_visit(node)
        nothing = all(
            it.optional_vars is None
            and isinstance(it.context_expr, ast.Call)
            and (getattr(it.context_expr.func, "id", None) or getattr(it.context_expr.func, "attr", None))
            == "nullcontext"
            and not it.context_expr.args
            for it in node.items
        )
        return node.body if nothing else node

    def visit_Try(self, node: ast.Try) -> Any:
        self.generic_visit(node)
        # handlers that only re-raise, or do nothing (on a run that raises nothing, the same as no try): the body
        quiet = all(
            not h.body or (len(h.body) == 1 and isinstance(h.body[0], ast.Raise) and h.body[0].exc is None)
            for h in node.handlers
        )
        return node.body + node.orelse if quiet and not node.finalbody else node

    def visit_Assert(self, node: ast.Assert) -> Any:
        return None  # `python -O` runs the program without its asserts: one that runs correctly passes them all

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        self.generic_visit(node)
        left, right, op = node.left, node.right, type(node.op)
        folded = _fold(op, left, right)
        if folded is not None:
            return _at(folded, node)
        if op in _RIGHT_IDENTITY and _number(right, _RIGHT_IDENTITY[op]):
            return left  # x + 0, x * 1, x / 1, x ** 1
        if op in _LEFT_IDENTITY and _number(left, _LEFT_IDENTITY[op]):
            return right
        if op in (ast.Add, ast.Mult):  # a + b is b + a: the operands of a chain in one order, by shape
            operands = sorted(_chain(node, op), key=_shape)
            out = operands[0]
            for operand in operands[1:]:
                out = _at(ast.BinOp(left=out, op=op(), right=operand), node)
            return out
        return node

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        if len(node.ops) != 1:
            return node
        op, right = type(node.ops[0]), node.comparators[0]
        if op in _SWAPPED:
            return _at(ast.Compare(left=right, ops=[_SWAPPED[op]()], comparators=[node.left]), node)
        if issubclass(op, _SYMMETRIC) and _shape(right) < _shape(node.left):
            return _at(ast.Compare(left=right, ops=[op()], comparators=[node.left]), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        self.generic_visit(node)
        inner = node.operand
        if isinstance(node.op, ast.UAdd):
            return inner
        if (
            isinstance(node.op, (ast.Not, ast.USub))
            and isinstance(inner, ast.UnaryOp)
            and type(inner.op) is type(node.op)
        ):
            return inner.operand  # not not x, - -x
        if isinstance(node.op, ast.Not) and isinstance(inner, ast.Compare) and len(inner.ops) == 1:
            negated = _NEGATED.get(type(inner.ops[0]))
            if negated is not None:  # not a == b is a != b
                return self.visit_Compare(_at(ast.Compare(inner.left, [negated()], inner.comparators), node))
        return node

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if all(k.arg is not None for k in node.keywords):  # keywords in any order are the same call
            node.keywords.sort(key=lambda k: k.arg or "")
        if isinstance(node.func, ast.Name) and node.func.id == "super" and len(node.args) == 2:
            node.args = []  # super(C, self) in a method of C is super()
        unwrapped = _unwrapped(node, self.identities)
        if unwrapped is not node:
            return unwrapped
        name = node.args[1] if len(node.args) == 2 and not node.keywords else None
        if getattr(node.func, "id", None) == "getattr" and isinstance(name, ast.Constant):
            if isinstance(name.value, str) and name.value.isidentifier() and not keyword.iskeyword(name.value):
                # getattr(x, "y") is x.y (not getattr(x, "and"): x.and is no Python)
                return _at(ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load()), node)
        return node


def _fold(op: type[ast.operator], left: ast.expr, right: ast.expr) -> ast.Constant | None:
    """``2 * 3`` is ``6``, for numbers small enough, and ``"-" + "inf"`` is ``"-inf"``; None where folding would
    fail or grow."""
    strings = [n.value for n in (left, right) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if op is ast.Add and len(strings) == 2 and len(strings[0]) + len(strings[1]) <= _FOLD_LIMIT_STR:
        return ast.Constant(value=strings[0] + strings[1])
    if not (isinstance(left, ast.Constant) and isinstance(right, ast.Constant) and op in _FOLD):
        return None
    if not (_number(left) and _number(right)):
        return None
    a, b = cast(float, left.value), cast(float, right.value)  # numbers: see above
    if abs(a) > _FOLD_LIMIT or abs(b) > _FOLD_LIMIT:
        return None
    try:
        value = _FOLD[op](a, b)
    except ZeroDivisionError:
        return None
    return ast.Constant(value=value) if math.isfinite(value) else None
