"""`grade similarity FOLDER`: pairs of students whose exercise files hold the same code, up to renamed
identifiers, reordered functions, changed comments and code that does nothing.

Each student's exercise file (a folder's ``mN_name.py``; a notebook's code cells, as one file) is first normalised
on its syntax tree (:func:`normalise`): what does not change the program goes (docstrings, annotations, dead
statements, unused names and definitions, imports, code after a ``return``, ``if False:`` blocks, ``try`` blocks
that only re-raise, ...), temporaries are put back where they are used, a call that gives its argument back as it
is (``I(x)`` of ``def I(x): return x``, ``x.contiguous()``) is that argument, a few spellings of the same thing become
one (``x += y`` is ``x = x + y``, ``a > b`` is ``b < a``, ``F.softmax(x, -1)`` is ``x.softmax(-1)``, ...), and
definitions are put in one order. A file that does not parse is compared as it is. The result is tokenized by copydetect
(https://github.com/blingenf/copydetect): every name becomes ``V``, ``F`` or ``O``, strings ``S``, comments and
spacing go; its k-grams are hashed and winnowed into fingerprints (Schleimer, Wilkerson and Aiken's winnowing,
copydetect's). The stub's own fingerprints (``exercises/``: its signatures and skeleton, which every student
starts from, normalised the same way) are taken out first, so that only what a student wrote counts, and so is
what more than half of the students who wrote a file wrote the same way (:func:`read_class`: the quiz's answers).
A pair's score on a file is the share of the smaller side's fingerprints that the other also has; across files,
their fingerprints in common over the smaller sides', summed (:func:`pair_scores`). :func:`pair_view` shows a
pair's files side by side.
"""

from __future__ import annotations

import ast
import bisect
import copy
import hashlib
import itertools
import json
import keyword
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from grader import nofollow
from grader.batch.discover import discover
from grader.errors import BadUsage
from grader.milestones import STUDENT_MODULES
from grader.submission import SubmissionError, notebook_cells

MAX_FILE_BYTES = 1 << 20  # an exercise file far larger than any solution is left out, not read whole

STUBS = Path(__file__).resolve().parents[1] / "exercises"
K = 25  # characters of normalised code per k-gram (copydetect's default)
WINDOW = 4  # winnowing window (copydetect's default)
THRESHOLD = 0.6  # a pair at or above this share on a file is flagged
MIN_FINGERPRINTS = 8  # a file with fewer of its own (a stub barely touched) is compared with no one
NOTEBOOK = "notebook"
# Each round of normalising can expose more to take out (a name read only by a line just taken out); real files
# settle in two or three, and a file built to need more stops here, normalised that far.
MAX_ROUNDS = 8


class MissingLibrary(BadUsage):
    """copydetect is not installed: `pip install 'gptkit[similarity]'`."""


@dataclass(frozen=True)
class Pair:
    file: str
    a: str
    b: str
    score: float  # the share of the smaller side's fingerprints the other has too, 0..1
    shared: int  # fingerprints in common
    smaller: int  # the smaller side's fingerprints (what a pair's score across files weighs this file by)


def _utils():
    try:
        from copydetect import utils  # type: ignore[import-untyped]  # it ships no type hints
    except ImportError:
        raise MissingLibrary(
            "grade similarity needs copydetect: pip install 'gptkit[similarity]' (or pip install copydetect)"
        ) from None
    return utils


def fingerprints(code: str, boilerplate: frozenset[int] | set[int] = frozenset()) -> set[int]:
    """The winnowed fingerprints of Python ``code``, normalised by copydetect, less ``boilerplate``'s.

    The k-grams are hashed with BLAKE2 rather than Python's ``hash`` (copydetect's), which changes from one
    process to the next: the same class gives the same scores every time."""
    return set(_located(code)) - set(boilerplate)


def _located(code: str) -> dict[int, frozenset[str]]:
    """``code``'s winnowed fingerprints, each with the lines of ``code`` (stripped) that its k-grams cover."""
    utils = _utils()
    filtered, starts, ends = _filtered_spans(code)
    hashes = _hashes(filtered)
    if not len(hashes):
        return {}
    selected, at = utils.winnow(hashes, WINDOW, remove_duplicates=False)
    newlines = [m.start() for m in re.finditer("\n", code)]
    lines = [line.strip() for line in code.split("\n")]
    covers: dict[int, set[str]] = {}
    for h, i in zip(selected.tolist(), at.tolist()):
        first, last = bisect.bisect_left(newlines, starts[i]), bisect.bisect_left(newlines, ends[i + K - 1] - 1)
        covers.setdefault(h, set()).update(lines[first : last + 1])
    return {h: frozenset(c) for h, c in covers.items()}


def _hashes(filtered: str) -> Any:
    """The hash of each k-gram of copydetect's ``filtered`` text, in order (a numpy array)."""
    import numpy as np  # copydetect's own dependency

    grams = (filtered[i : i + K].encode() for i in range(len(filtered) - K + 1))
    return np.array([int.from_bytes(hashlib.blake2b(g, digest_size=7).digest(), "big") for g in grams], dtype=np.int64)


# --- Normalising: what does not change the program goes before the text is compared ---------------------------
#
# The rewrites below keep what a program computes (a few drop what it prints or checks); they are not run,
# only compared, so "keeps the program" is read loosely where that costs nothing: an attribute read or a subscript
# is taken to have no effect, and a temporary is put back where it is read even if code in between could change
# what it would compute. Each makes two copies that differ by it the same text, and two independent files no
# closer than the code they really share.

_NAME, _MAIN = ast.dump(ast.Name(id="__name__", ctx=ast.Load())), ast.dump(ast.Constant(value="__main__"))
_LITERAL = re.compile(r"``(.+?)``")  # an inline literal in a stub's docstring (reStructuredText)
_BULLET = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")  # a list item's "- " or "2. "
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_JUMPS = (ast.Break, ast.Continue)
_ENDS = (ast.Return, ast.Raise, ast.Continue, ast.Break)  # nothing after one of these in a block runs
# Builtins whose result, thrown away, leaves nothing behind.
_NO_EFFECT_CALLS = frozenset(
    "abs all any bin bool callable chr dict dir divmod enumerate filter float format frozenset hash hex id int "
    "isinstance issubclass iter len list map max min oct ord pow range repr reversed round set slice sorted str "
    "sum tuple type vars zip".split()
)
# Methods a framework calls without the file naming them (nn.Module's __call__ calls forward): always live.
_HOOKS = frozenset({"forward", "backward", "extra_repr"})
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
_ATTRIBUTE_BY_NAME = frozenset({"getattr", "hasattr", "setattr", "delattr"})
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
# A chain of assignments is merged into one expression of at most this many nodes: a line of code has tens, and
# 20,000 lines of `x = x * 2` would otherwise become one expression walked again at each step.
_MERGE_LIMIT = 100
# An operand's shape, which orders the operands of a + b, is read from its first nodes only: each operand of a long
# chain is read again at each of its + (definitions, few, are ordered by their whole shape).
_SHAPE_LIMIT = 64
# A value put in more than one place (a path read twice, a module constant read anywhere) is at most this many
# nodes: a real file's are under 16 (``self.attn.c_attn.weight.shape[-1]``: 14). A chain of 200 paths each one
# step longer than the last, the last read 20,000 times, held 4 million nodes copied and took 3 minutes and 2 GB.
_COPY_LIMIT = 24
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


def _shape(node: ast.AST, limit: int | None = _SHAPE_LIMIT) -> str:
    """``node``'s kinds of nodes and its numbers, not its names, breadth first (its first ``limit`` nodes): the
    same for a copy with its names changed, so an order by shape is the same for both."""
    parts = []
    for n in itertools.islice(ast.walk(node), limit):
        parts.append(type(n).__name__)
        if isinstance(n, ast.Constant) and not isinstance(n.value, str):
            parts.append(repr(n.value))
    return " ".join(parts)


def _ordered(body: list[ast.stmt], order: dict[str, int]) -> list[ast.stmt]:
    """``body`` in one order: its statements as they were, then its definitions, the stub's in the stub's order
    and the others by shape. Definitions at module or class level run nothing when defined, so their order changes
    nothing; a copy's reordered functions become the same text."""
    defs = [s for s in body if isinstance(s, _DEFS)]
    defs.sort(key=lambda d: (order.get(d.name, len(order)), _shape(d, None)))
    rest = [s for s in body if not isinstance(s, _DEFS)]
    return rest + defs


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


def _ends(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], _ENDS)


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


def _at(new: ast.AST, old: ast.AST) -> Any:
    return ast.copy_location(new, old)


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


def _bound_here(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [] if isinstance(node.ctx, ast.Load) else [node.id]
    return list(dict.fromkeys(_binds(node, None)))


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


def _size(node: ast.AST) -> int:
    """How many nodes ``node`` has, counted up to ``_MERGE_LIMIT`` and no further."""
    n = 0
    for n, _ in enumerate(ast.walk(node), 1):
        if n > _MERGE_LIMIT:
            break
    return n


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


def student_files(path: Path) -> dict[str, str]:
    """A submission's exercise files by name: a folder's ``mN_name.py``, or a notebook's code cells as one."""
    if path.is_dir():
        files = {}
        for m in STUDENT_MODULES:
            try:  # a submission's file: read without following a link, and bounded (a huge one is not code)
                data = nofollow.read_bytes(path / f"{m}.py", MAX_FILE_BYTES)
            except (OSError, ValueError):
                continue
            files[f"{m}.py"] = data.decode("utf-8", errors="replace")
        return files
    if path.suffix == ".ipynb":
        try:
            cells, _ = notebook_cells(path)
        except SubmissionError:
            return {}
        # Bounded as a file is: a notebook may hold 20 MB, whose code took 2 minutes and 5 GB to normalise.
        if sum(len(c.source.encode()) for c in cells) > MAX_FILE_BYTES:
            return {}
        # A cell that does not parse runs nothing (the grader, like a kernel, goes on with the next): left out, so
        # that a junk cell cannot keep the rest of the notebook from being normalised.
        return {NOTEBOOK: "\n\n".join(c.source for c in cells if _parses(c.source))}
    return {}  # a zip: not unpacked here


@dataclass(frozen=True)
class Stub:
    """What every student starts from in one file: the names it defines (never taken out as unused, and put
    first, in its order) and its fingerprints, normalised as a student's are (they count for no one)."""

    names: tuple[str, ...] = ()
    prints: frozenset[int] = frozenset()


def file_fingerprints(code: str, stub: Stub = Stub()) -> set[int]:
    """A student's file's own fingerprints: normalised with its stub's names kept, less the stub's. With no stub
    for the file, its own top-level names are kept (nothing says which of them the grader calls)."""
    return fingerprints(normalise(code, stub.names or defined_names(code)), stub.prints)


def read_stubs(stubs: Path) -> dict[str, Stub]:
    """Each stub file's names and fingerprints (and, for a notebook, all of them together): those of its text and
    those of the code its docstrings spell out (:func:`dictated`), both normalised as a student's file is."""
    out = {}
    for m in STUDENT_MODULES:
        if (stubs / f"{m}.py").is_file():
            code = (stubs / f"{m}.py").read_text()
            names = defined_names(code)
            prints = fingerprints(normalise(code, names))
            spelled = dictated(code)
            if spelled is not None:  # its assignments kept: they are what a student is told to write
                prints |= fingerprints(normalise(spelled, names + _assigned(spelled)))
            out[f"{m}.py"] = Stub(names, frozenset(prints))
    out[NOTEBOOK] = Stub(
        tuple(dict.fromkeys(n for stub in out.values() for n in stub.names)),
        frozenset().union(*(stub.prints for stub in out.values())),
    )
    return out


def dictated(code: str) -> str | None:
    """The stub ``code`` with each function's body replaced by the code its docstring spells out, line by line
    (``self.qkv = nn.Linear(d, 3 * d)``, ``x = x + attn(ln1(x))``): what every student is told to write is no
    more theirs than the stub's signatures are. None if ``code`` does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                node.body = [st for snippet in _snippets(doc) for st in ast.parse(snippet).body] or [ast.Pass()]
    return ast.unparse(tree)


def _snippets(doc: str) -> list[str]:
    """The code in a docstring: each line that parses as Python (less a list's bullet or a sentence's period),
    else the ````literals```` in it that do."""
    out = []
    for line in doc.splitlines():
        text = _BULLET.sub("", line).strip()
        whole = next((t for t in (text, text.rstrip(".")) if _parses(t)), None)
        out.extend([whole] if whole else [s for s in _LITERAL.findall(line) if _parses(s)])
    return out


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(text)


def _assigned(code: str) -> tuple[str, ...]:
    """Every name and attribute ``code`` assigns."""
    tree = ast.parse(code)
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    names += [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]
    return tuple(dict.fromkeys(names))


# --- The class: what each student wrote, and what most of them wrote the same way -----------------------------

# A fingerprint more than half of the students who wrote a file hold (and at least three of them: a pair alone is
# never "the class", however small it is) is the class's, not the pair's: the quiz's answers, the line everyone
# opens a function with. It counts for no one, as the stub's text does not.
COMMON_SHARE = 0.5
COMMON_MIN = 3
SHOWN_FILES = 4  # the files a pair's line in the table names before "and N more"


@dataclass(frozen=True)
class Written:
    """One student's file: as handed in, as compared (:func:`normalise`) and its own fingerprints (the stub's
    taken out)."""

    code: str
    normalised: str
    prints: frozenset[int]
    covers: dict[int, frozenset[str]]  # each fingerprint's lines of the normalised text (stripped)
    lines: frozenset[str]  # the normalised text's lines (stripped)


@dataclass
class Class:
    """A class read for comparing: each file's texts by student, and the fingerprints most of the class holds."""

    students: list[str]  # every student found, sorted
    files: dict[str, dict[str, Written]]  # file name -> student -> their file
    own: dict[str, dict[str, frozenset[int]]]  # file name -> student -> fingerprints less the class's common code
    common: dict[str, frozenset[int]]  # file name -> the fingerprints taken out as the class's common code
    no_files: list[str]  # found (or on the roster) with no exercise file to compare
    not_on_roster: list[str]  # found, but not on the roster given


@dataclass(frozen=True)
class PairScore:
    """Two students across every file both wrote: ``score`` is their fingerprints in common over the smaller
    side's, summed over those files (so a file counts as much as the code it holds), the class's common code and
    the stubs' text left out."""

    a: str
    b: str
    score: float
    shared: int
    files: tuple[Pair, ...]  # the files behind it (at or above the threshold), highest first


def read_class(folder: Path, stubs: Path = STUBS, roster: Iterable[str] | None = None) -> Class:
    """Every student's exercise files in ``folder`` (a class, as `grade batch` reads it), normalised and
    fingerprinted; ``roster``: the names expected, to say who has no files and which folders are on no roster."""
    boiler = read_stubs(stubs)
    done: dict[tuple[str, str], Written] = {}  # the same text (an untouched stub, a shared file) is read once
    files: dict[str, dict[str, Written]] = {}
    students, empty = [], []
    for f in discover(folder, empty=True):
        students.append(f.student)
        texts = student_files(f.path) if f.problem is None else {}
        if not texts:
            empty.append(f.student)
        for name, code in texts.items():
            if (name, code) not in done:
                stub = boiler.get(name, Stub())
                normalised = normalise(code, stub.names or defined_names(code))
                covers = {h: c for h, c in _located(normalised).items() if h not in stub.prints}
                lines = frozenset(line.strip() for line in normalised.splitlines())
                done[name, code] = Written(code, normalised, frozenset(covers), covers, lines)
            files.setdefault(name, {})[f.student] = done[name, code]
    not_on_roster: list[str] = []
    if roster is not None:
        expected = set(roster)
        # nbgrader's layout names a submission "student/assignment": the student is the first part
        found = {s.partition("/")[0] for s in students if s not in empty}
        empty = sorted(set(empty) | (expected - found))
        not_on_roster = sorted(s for s in students if s.partition("/")[0] not in expected)
    own, common = {}, {}
    for name, by_student in files.items():
        own[name] = _discounted(by_student)
        common[name] = frozenset().union(*(w.prints - own[name][s] for s, w in by_student.items()))
    return Class(sorted(students), files, own, common, empty, not_on_roster)


def _discounted(by_student: dict[str, Written]) -> dict[str, frozenset[int]]:
    """Each student's fingerprints of one file less the class's common code: a fingerprint held by more than
    ``COMMON_SHARE`` of the students who wrote this file (at least ``MIN_FINGERPRINTS`` of their own: an untouched
    stub wrote nothing) and by at least ``COMMON_MIN``, or one whose lines are each held by that many. The second
    catches what the first misses: two students who both answered the quiz right share ``Q3 = 'above'`` and
    ``Q4 = 'before'``, each line most of the class's, but a k-gram spans several answers, and fewer than half of
    the class got every one of them right."""
    writers = [w for w in by_student.values() if len(w.prints) >= MIN_FINGERPRINTS]
    need = max(COMMON_MIN, math.floor(len(writers) * COMMON_SHARE) + 1)
    counts = Counter(h for w in writers for h in w.prints)
    prints = {h for h, n in counts.items() if n >= need}
    lines = {line for line, n in Counter(line for w in writers for line in w.lines).items() if n >= need}
    return {
        s: frozenset(h for h in w.prints if h not in prints and not w.covers[h] <= lines) for s, w in by_student.items()
    }


def file_pairs(klass: Class, only: tuple[str, str] | None = None) -> list[Pair]:
    """Every pair's score on every file both wrote (at least ``MIN_FINGERPRINTS`` of their own each, the class's
    common ones left out), highest first; ``only``: that pair's."""
    pairs = []
    for name, by_student in klass.own.items():
        own = {
            s: prints for s, prints in by_student.items() if (not only or s in only) and len(prints) >= MIN_FINGERPRINTS
        }
        for a, b in itertools.combinations(sorted(own), 2):
            shared = len(own[a] & own[b])
            smaller = min(len(own[a]), len(own[b]))
            pairs.append(Pair(name, a, b, round(shared / smaller, 3), shared, smaller))
    return sorted(pairs, key=lambda p: (-p.score, p.file, p.a, p.b))


def pair_scores(pairs: list[Pair], threshold: float) -> list[PairScore]:
    """One row per pair with a file at or above ``threshold`` (the files behind it), ranked by the pair's score
    across every file both wrote; a pair's score cannot reach the threshold without one of its files reaching it."""
    by_pair: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        by_pair.setdefault((p.a, p.b), []).append(p)
    rows = []
    for (a, b), files in by_pair.items():
        flagged = tuple(p for p in files if p.score >= threshold)
        if flagged:
            shared, smaller = sum(p.shared for p in files), sum(p.smaller for p in files)
            rows.append(PairScore(a, b, round(shared / smaller, 3), shared, flagged))
    return sorted(rows, key=lambda r: (-r.score, -r.shared, r.a, r.b))


def compare(folder: Path, stubs: Path = STUBS, threshold: float = THRESHOLD) -> tuple[list[Pair], int]:
    """The pairs of students at or above ``threshold`` on some file, highest first, and how many students were
    compared (file by file: :func:`read_class`, :func:`file_pairs` and :func:`pair_scores` give the whole)."""
    klass = read_class(folder, stubs)
    return [p for p in file_pairs(klass) if p.score >= threshold], len(klass.students)


def render(klass: Class, pairs: list[Pair], threshold: float, fmt: str = "table", by_file: bool = False) -> str:
    """The flagged pairs as a table or JSON: one row per pair (its score across files, the files behind it), or
    with ``by_file`` one row per pair and file."""
    flagged = [p for p in pairs if p.score >= threshold]
    rows = pair_scores(pairs, threshold)
    common = {name: len(prints) for name, prints in sorted(klass.common.items()) if prints}
    if fmt == "json":
        listed: list[dict[str, Any]] = (
            [asdict(p) for p in flagged]
            if by_file
            else [{**asdict(r), "files": [_file_json(p) for p in r.files]} for r in rows]
        )
        return json.dumps(
            {
                "students": len(klass.students),
                "threshold": threshold,
                "pairs": listed,
                "common_fingerprints": common,
                "no_files": klass.no_files,
                "not_on_roster": klass.not_on_roster,
            },
            indent=2,
        )
    lines = _file_table(flagged) if by_file else _pair_table(rows)
    n = len(flagged) if by_file else len(rows)
    what = "pair and file" if by_file else "pair"
    if not n:
        lines.append(
            f"no pair of the {len(klass.students)} students at or above {threshold:.0%} similarity on any file"
        )
    else:
        lines.append(
            f"{n} {what}{'s' * (n != 1)} of the {len(klass.students)} students at or above {threshold:.0%}: the same "
            "code up to names, order and comments; read them before concluding anything"
        )
    if not by_file and rows:
        lines.append(
            "score: their code in common over every file both wrote, each file weighed by how much code it holds"
        )
    if common:
        lines.append(
            f"not counted: the stubs' text, and code more than half of the class wrote the same way "
            f"({sum(common.values())} fingerprints in {len(common)} file{'s' * (len(common) != 1)})"
        )
    if klass.no_files:
        lines.append(f"no files to compare: {', '.join(klass.no_files)}")
    if klass.not_on_roster:
        lines.append(f"not on the roster (compared all the same): {', '.join(klass.not_on_roster)}")
    return "\n".join(lines)


def _file_json(p: Pair) -> dict[str, Any]:
    return {"file": p.file, "score": p.score, "shared": p.shared}


def _file_table(pairs: list[Pair]) -> list[str]:
    if not pairs:
        return []
    width = max(len(p.file) for p in pairs)
    return [
        f"{'score':>6}  {'file':<{width}}  pair",
        *(f"{p.score:6.0%}  {p.file:<{width}}  {p.a} / {p.b}" for p in pairs),
    ]


def _pair_table(rows: list[PairScore]) -> list[str]:
    if not rows:
        return []
    names = [f"{r.a} / {r.b}" for r in rows]
    width = max(len(n) for n in names)
    lines = [f"{'score':>6}  {'pair':<{width}}  files at or above the threshold"]
    for name, r in zip(names, rows):
        shown = ", ".join(f"{p.file} {p.score:.0%}" for p in r.files[:SHOWN_FILES])
        more = len(r.files) - SHOWN_FILES
        lines.append(f"{r.score:6.0%}  {name:<{width}}  {shown}{f' and {more} more' if more > 0 else ''}")
    return lines


def render_pair(klass: Class, a: str, b: str) -> str:
    """One pair's scores, file by file, as text."""
    pairs = file_pairs(klass, (a, b))
    lines = [f"{a} / {b}: {_overall(pairs)} across {len(pairs)} file{'s' * (len(pairs) != 1)} both wrote"]
    width = max((len(p.file) for p in pairs), default=0)
    lines += [f"{p.score:6.0%}  {p.file:<{width}}  {p.shared} of {p.smaller} fingerprints in common" for p in pairs]
    compared = {p.file for p in pairs}
    rest = sorted(n for n, by in klass.files.items() if n not in compared and (a in by or b in by))
    if rest:
        lines.append(f"not compared (one of them wrote little or none of it): {', '.join(rest)}")
    return "\n".join(lines)


def _overall(pairs: list[Pair]) -> str:
    smaller = sum(p.smaller for p in pairs)
    return f"{sum(p.shared for p in pairs) / smaller:.0%}" if smaller else "nothing to compare"


# --- One pair side by side ------------------------------------------------------------------------------------

_PLAIN, _COMMON, _MATCH = 0, 1, 2  # how a character of a file is marked in a pair's view


def pair_view(klass: Class, a: str, b: str) -> str:
    """A page (HTML) with ``a``'s and ``b``'s files side by side, as compared (normalised), the code they have in
    common marked, and the code most of the class wrote the same way marked apart; the files as handed in below
    each. Every text the students wrote is escaped by the template (jinja2's autoescape)."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    scores = {p.file: p for p in file_pairs(klass, (a, b))}
    sections = []
    for name in sorted(klass.files, key=lambda n: (-(scores[n].score if n in scores else -1), n)):
        by = klass.files[name]
        if a not in by and b not in by:
            continue
        left, right = by.get(a), by.get(b)
        own = klass.own[name]
        both = (left.prints & right.prints) if left and right else frozenset()
        counted = own[a] & own[b] if left and right else frozenset()
        sides = [_side(w, counted, both - counted) if w else None for w in (left, right)]
        sections.append({"file": name, "pair": scores.get(name), "sides": sides})
    env = Environment(loader=PackageLoader("grader.templates", "similarity"), autoescape=select_autoescape(["html"]))
    return env.get_template("pair.html").render(
        a=a, b=b, overall=_overall(list(scores.values())), compared=len(scores), sections=sections
    )


def _side(written: Written, match: frozenset[int], common: frozenset[int]) -> dict[str, Any]:
    return {"segments": _marked(written.normalised, match, common), "code": written.code}


def _marked(code: str, match: frozenset[int], common: frozenset[int]) -> list[tuple[str, str]]:
    """``code`` in runs of ``("", text)``, ``("common", text)`` and ``("match", text)``: the characters each
    k-gram whose fingerprint is in ``match`` (or ``common``) covers."""
    filtered, starts, ends = _filtered_spans(code)
    # Each k-gram marks a range of characters: +1 where it starts, -1 where it ends, summed along the text (a
    # character by character loop was 25 steps for each, seconds on a large file).
    edges = {_MATCH: [0] * (len(code) + 1), _COMMON: [0] * (len(code) + 1)}
    for i, h in enumerate(_hashes(filtered).tolist()):
        kind = _MATCH if h in match else _COMMON if h in common else _PLAIN
        if kind:
            edges[kind][starts[i]] += 1
            edges[kind][ends[i + K - 1]] -= 1
    inside = {kind: list(itertools.accumulate(e)) for kind, e in edges.items()}
    label = [_MATCH if inside[_MATCH][c] else _COMMON if inside[_COMMON][c] else _PLAIN for c in range(len(code))]
    runs: list[tuple[str, str]] = []
    names = {_PLAIN: "", _COMMON: "common", _MATCH: "match"}
    for kind, chars in itertools.groupby(zip(label, code), key=operator.itemgetter(0)):
        runs.append((names[kind], "".join(c for _, c in chars)))
    return runs


def _filtered_spans(code: str) -> tuple[str, list[int], list[int]]:
    """copydetect's filtered text of ``code`` (as its ``filter_code`` makes it: every name ``V``, ``F`` or ``O``,
    strings ``S``, comments and spacing gone) and where in ``code`` each of its characters starts and ends: the
    same walk over the same tokens, keeping their places."""
    from pygments import lexers, token  # type: ignore[import-untyped]  # copydetect's own dependency, untyped

    lexer = lexers.get_lexer_by_name("python", stripnl=False, ensurenl=False)  # places in `code` as it is
    variable = {token.Name, token.Name.Variable, token.Name.Attribute}
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for at, kind, text in lexer.get_tokens_unprocessed(code):
        letter = None
        if kind in variable:
            letter = "V"
        elif kind in token.Name.Function:
            letter = "F"
        elif kind in token.Name.Class:
            letter = "O"
        elif kind in (token.Comment.Preproc, token.Comment.Hashbang):
            letter = "P"
        elif kind in token.Text or kind in token.Comment:
            continue
        elif kind in token.Literal.String:
            letter = '"' if text in ("'", '"') else "S"
        if letter is not None:
            out.append(letter)
            starts.append(at)
            ends.append(at + len(text))
        else:
            out.extend(text)
            starts.extend(range(at, at + len(text)))
            ends.extend(range(at + 1, at + len(text) + 1))
    return "".join(out), starts, ends
