"""What a call does, as far as comparing goes: nothing (a builtin such as ``len``, an array factory, a method that
only computes, one of the file's functions that does nothing), or give its argument back as it is (a function,
lambda or method that only returns its argument, ``x.contiguous()``), in which case the call is its argument.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

from grader.similarity.passes.syntax import _bound_here, _functions

# Builtins whose result, thrown away, leaves nothing behind.
_NO_EFFECT_CALLS = frozenset(
    "abs all any bin bool callable chr dict dir divmod enumerate filter float format frozenset hash hex id int "
    "isinstance issubclass iter len list map max min oct ord pow range repr reversed round set slice sorted str "
    "sum tuple type vars zip".split()
)

# torch's and numpy's functions that make an array without drawing random numbers (torch.randn draws: it changes
# every random number after it).
_FACTORIES = frozenset(
    "arange array as_tensor asarray empty empty_like eye full full_like linspace ones ones_like tensor zeros "
    "zeros_like".split()
)
_ARRAY_MODULES = frozenset({"torch", "numpy"})
_PURE_METHODS = frozenset(
    "clone contiguous detach dim float item mean numel permute reshape size sum tolist transpose view".split()
)


def _no_effect(node: ast.expr, noops: frozenset[str] = frozenset()) -> bool:
    """Evaluating ``node`` and throwing the result away changes nothing: an attribute or subscript read is taken
    to have no effect, and so is a call of a builtin such as ``len``, of ``math``, of torch's or numpy's functions
    that make an array without drawing random numbers (``torch.zeros``), of a method that only computes
    (``x.clone()``, ``x.sum()``: torch's methods that change their tensor end in ``_``) and of the file's own
    functions in ``noops``, which do nothing; any other call may have one."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        if isinstance(n, ast.Call) and not _pure_call(n, noops):
            return False
    return True


def _pure_call(node: ast.Call, noops: frozenset[str]) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in _NO_EFFECT_CALLS or func.id in noops
    if not isinstance(func, ast.Attribute):
        return False
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if owner == "self" and func.attr in noops:
        return True
    return owner == "math" or (owner in _ARRAY_MODULES and func.attr in _FACTORIES) or func.attr in _PURE_METHODS


def _prints(node: ast.expr) -> bool:
    """``node`` is a call of ``print``: what it prints is no part of what the program computes, whatever it is."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _noops(tree: ast.Module) -> frozenset[str]:
    """The names of the file's functions and methods that do nothing but maybe compute a value: every definition
    of the name has a body that tidying left empty (it held only ``pass``, a docstring, ``return None``) or that
    only returns something computed without effects (``return x``). A call of one whose value is thrown away does
    nothing."""
    bodies: dict[str, list[bool]] = {}
    for node in _functions(tree):
        only = node.body[0] if len(node.body) == 1 else None
        quiet = not node.body or (isinstance(only, ast.Return) and (only.value is None or _no_effect(only.value)))
        bodies.setdefault(node.name, []).append(quiet)
    return frozenset(name for name, quiet in bodies.items() if all(quiet))


def _identities(tree: ast.Module, keep: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The file's functions that give back their argument as it is, bound nowhere else: (module-level functions,
    and lambdas and ``nn.Identity()`` bound to a name, ``def I(x): return x``, ``I = lambda x: x``; methods,
    ``def I(self, x): return x``). A call of one is its argument: wrapping every name a file reads in such a call
    keeps the program and, left as it was, broke every k-gram of it (a copy of the reference scored 0)."""
    found: dict[str, int] = {}  # name -> how many times an identity binds it (as _bound_here counts)
    methods: dict[str, list[bool]] = {}
    for st in tree.body:
        if isinstance(st, ast.FunctionDef) and _identity(st.args, st.body, 0) and not st.decorator_list:
            found[st.name] = found.get(st.name, 0) + 1
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            value = st.value
            made = value.func if isinstance(value, ast.Call) and not value.args and not value.keywords else None
            if (isinstance(value, ast.Lambda) and _identity(value.args, [ast.Return(value.body)], 0)) or (
                (getattr(made, "attr", None) or getattr(made, "id", None)) == "Identity"  # nn.Identity()
            ):
                found[st.targets[0].id] = found.get(st.targets[0].id, 0) + 1
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                plain = isinstance(fn, ast.FunctionDef) and not fn.decorator_list
                methods.setdefault(fn.name, []).append(plain and _identity(fn.args, fn.body, 1))
    binds = Counter(name for node in ast.walk(tree) for name in _bound_here(node) if name in found)
    names = frozenset(name for name, n in found.items() if binds[name] == n and name not in keep)
    return names, frozenset(name for name, each in methods.items() if all(each) and name not in keep)


def _identity(args: ast.arguments, body: list[ast.stmt], at: int) -> bool:
    """A body of one ``return p`` (after its docstring, if any), ``p`` the ``at``-th positional parameter (0: a
    function's first, 1: a method's after ``self``)."""
    params = args.posonlyargs + args.args
    body = [st for st in body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(params) <= at or len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    value = body[0].value
    return isinstance(value, ast.Name) and value.id == params[at].arg


class _Unwrap(ast.NodeTransformer):
    """Calls that give back their one argument as it is, replaced by it (:func:`_unwrapped`)."""

    def __init__(self, identities: tuple[frozenset[str], frozenset[str]]) -> None:
        self.identities = identities

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        return _unwrapped(node, self.identities)


def _unwrapped(node: ast.Call, identities: tuple[frozenset[str], frozenset[str]]) -> ast.expr:
    """``node``'s argument where ``node`` gives it back as it is (``I(x)``, ``self.I(x)``, ``(lambda t: t)(x)``,
    a call of one of ``_identities``), or its tensor (``x.contiguous()``: the same values, laid out in order);
    else ``node`` itself."""
    func, (functions, methods) = node.func, identities
    if not node.args and not node.keywords:
        return func.value if isinstance(func, ast.Attribute) and func.attr == "contiguous" else node
    if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
        return node
    if isinstance(func, ast.Name):
        return node.args[0] if func.id in functions else node
    if isinstance(func, ast.Lambda):
        return node.args[0] if _identity(func.args, [ast.Return(func.body)], 0) else node
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return node.args[0] if func.attr in methods else node
    return node
