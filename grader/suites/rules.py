"""Rules a part of an exercise may impose, as a contest would ("no Python loops", "no library attention"),
checked two ways and explained.

Why a module of its own: a rule is not a property of the values a function returns (a loop over the
heads gives the right numbers), so the suites' value checks cannot see it. It needs two views that no
single check has: the submitted source, read here in the grading process (``ast``, never run), and
what the code does when it runs, seen in the worker (``MilestoneView.count_ops``: a
``TorchFunctionMode`` counts every torch function a call dispatches and names them). A suite, or a
later "paper" file, attaches rules to any function of a submission with a ``Part``; ``Verdicts``
checks each part once per submission, and every check of that part then fails with the rule's
message, so a broken rule scores 0 for the part.

- ``NoLoops``: no ``for``/``while`` loop or comprehension in the function or the helpers of its file
  that it calls (a loop over a literal tuple or list, ``for t in (q, k, v)``, over zip, enumerate or
  reversed of such, or over range of number literals is a fixed number of steps and allowed: ``fixed``);
  and the number of tensor operations a call dispatches must not grow with one size (the heads, the
  positions) over three or more calls on one code path, which also catches loops the source scan cannot
  name. Only like is compared with like: a correct function may keep a real branch for a special size
  (one K/V group, ``n_rep == 1``), so a suite's calls avoid such sizes, and a count that jumps at one
  step but not at every step is a branch, not a loop.
- ``NoCalls``: none of the named functions (``scaled_dot_product_attention``, ...) is called: not
  named in the source, not seen while the call runs.
- ``NumpyOnly``: no torch at all (a NumPy part): the source neither imports torch nor names what the
  file imported from it, and no torch function is dispatched while the call runs.

The counts come from the worker, which runs the student's code: a submission could forge them, to
its own harm only, and the source scan does not depend on them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.results import RuleBroken, rule_broken_message

from .checks import fail

SLACK = 2  # a step up in size may cost this many more operations without counting as growth


@dataclass(frozen=True)
class Call:
    """One call of a part's function: its arguments, and the sizes they stand for in words."""

    args: tuple[Any, ...]
    sizes: str  # "n_heads = 2, T = 8"


class Growth:
    """Calls that differ in one size only, smallest first, all on one code path: the work must not grow.

    Pick sizes that no correct function treats specially (not one K/V group, not as many groups as heads:
    x-transformers and Llama branch there), since two code paths dispatch different counts with no loop
    in either. Three calls or more tell a loop, whose count grows at every step, from a branch.
    """

    def __init__(self, size: str, *calls: Call):
        if len(calls) < 2:
            raise ValueError("a Growth compares two calls or more")
        self.size = size  # what grows, in words: "the number of heads"
        self.calls = calls


@dataclass(frozen=True)
class Count:
    """What the worker saw during one call: how many tensor operations, and the functions' names."""

    ops: int
    names: frozenset[str]


@dataclass(frozen=True)
class Source:
    """A function as submitted: the file, its lines, and the nodes of it and of the helpers it calls."""

    file: str
    lines: list[str]
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef]
    aliases: Mapping[str, str]  # a name imported under another one: alias -> the imported name

    def nodes(self) -> Iterator[ast.AST]:
        for function in self.functions:
            yield from ast.walk(function)

    def line(self, node: ast.AST) -> str:
        lineno = getattr(node, "lineno", 0)
        text = self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""
        return f"line {lineno} of {self.file} ({text[:80]!r})"


class Rule:
    """One rule: what it says, how it is broken in the source and at run time (None: not broken), and how
    to follow it (said after a broken one)."""

    says = ""
    name = ""  # what a paper calls it (grader/paper/config.py RULES): a paper may switch it off for a part

    def __init__(self, advice: str = ""):
        self.advice = advice

    def in_source(self, source: Source) -> str | None:
        return None

    def at_run_time(self, function: str, counts: list[tuple[Growth, list[Count]]]) -> str | None:
        return None


class NoLoops(Rule):
    """No Python loop over a size: the source holds none, and the work does not grow with the sizes."""

    says = "no Python loops over heads or positions"
    name = "no-loops"

    def in_source(self, source: Source) -> str | None:
        for node in source.nodes():
            if isinstance(node, ast.While):
                return f"has a while loop at {source.line(node)}"
            if isinstance(node, ast.For | ast.AsyncFor) and not fixed(node.iter):
                return f"has a for loop at {source.line(node)}"
            if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
                if not all(fixed(g.iter) for g in node.generators):
                    return f"has a comprehension (a loop) at {source.line(node)}"
        return None

    def at_run_time(self, function: str, counts: list[tuple[Growth, list[Count]]]) -> str | None:
        for growth, seen in counts:
            if grows(seen):
                listing = "; ".join(f"{c.ops} for {call.sizes}" for call, c in zip(growth.calls, seen))
                # The count is what was seen, not a loop: say what it usually means, and leave the rest open.
                return (
                    f"{function} dispatched more tensor operations at each larger size ({listing}): the count "
                    f"grows with {growth.size}, which usually means that some Python code runs once per head "
                    "or per position (a loop, a comprehension, map or recursion)"
                )
        return None


def grows(seen: list[Count]) -> bool:
    """The count rises by more than ``SLACK`` at every step: a loop's mark. A branch taken at some sizes and
    not at others moves the count at one step only (the calls are meant to share one path; this is the
    guard where a size still picks another)."""
    return all(later.ops - earlier.ops > SLACK for earlier, later in zip(seen, seen[1:]))


# The library attention an exercise that is the attention itself must not call (by plain name).
LIBRARY_ATTENTION = ("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward")


class NoCalls(Rule):
    """None of ``banned`` (plain names: ``scaled_dot_product_attention``) is called, in the source or at run time."""

    def __init__(self, *banned: str, name: str, says: str = "", advice: str = ""):
        super().__init__(advice)
        self.name = name
        self.banned = banned
        self.says = says or "without " + " or ".join(banned)

    def in_source(self, source: Source) -> str | None:
        for node in source.nodes():
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            name = source.aliases.get(name, name) if name else None
            if name in self.banned:
                # not "name(": the grader's own earlier milestones may call it so, and reports withhold their code
                return f"uses {name} at line {getattr(node, 'lineno', '?')} of {source.file}"
        return None

    def at_run_time(self, function: str, counts: list[tuple[Growth, list[Count]]]) -> str | None:
        seen = frozenset().union(*(c.names for _, calls in counts for c in calls))
        called = [name for name in self.banned if name in seen]
        if called:
            return f"{function} called {called[0]} while it ran"
        return None


# The library a NumPy-only part must not touch: the top-level package, whatever a file imports it as.
TORCH = "torch"


class NumpyOnly(Rule):
    """No torch in the function: the source neither imports it nor names anything the file imported from it, and
    no torch function is dispatched while it runs. (A torch tensor returned is the suite's to see: the counts
    miss ``torch.from_numpy``, which dispatches nothing.)"""

    says = "NumPy only, no torch"
    name = "numpy-only"

    def in_source(self, source: Source) -> str | None:
        bound = torch_names("\n".join(source.lines))
        for node in source.nodes():
            if isinstance(node, ast.Import | ast.ImportFrom) and imports_torch(node):
                return f"imports torch at {source.line(node)}"
            if isinstance(node, ast.Name) and node.id in bound:
                return f"uses {node.id} (from torch) at {source.line(node)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and is_torch(node.value):
                return f"names the module {node.value!r} at {source.line(node)}"
        return None

    def at_run_time(self, function: str, counts: list[tuple[Growth, list[Count]]]) -> str | None:
        seen = sorted(frozenset().union(*(c.names for _, calls in counts for c in calls)))
        if any(c.ops for _, calls in counts for c in calls):
            named = f" ({', '.join(seen[:3])}{', ...' if len(seen) > 3 else ''})" if seen else ""
            return f"{function} called torch functions{named} while it ran"
        return None


def is_torch(module: str) -> bool:
    return module == TORCH or module.startswith(TORCH + ".")


def imports_torch(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and is_torch(node.module or "")
    return any(is_torch(a.name) for a in node.names)


def torch_names(text: str) -> frozenset[str]:
    """The names a file binds to torch or to something of it (``import torch as th``: th; ``from torch import
    nn``: nn; ``import torch.nn.functional as F``: F); none where the file does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and imports_torch(node):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return frozenset(names)


# Builtins whose result is as long as their arguments: zip((w_q, w_k), (n_heads, n_groups)) steps as often as
# its literal tuples, so a loop over it is fixed too.
SAME_LENGTH = ("zip", "enumerate", "reversed")


def fixed(iterable: ast.expr) -> bool:
    """A loop over it takes a fixed number of steps: a literal tuple, list or set without ``*``, ``range`` of
    number literals, or zip, enumerate or reversed of such iterables."""
    if isinstance(iterable, ast.Tuple | ast.List | ast.Set):
        return not any(isinstance(e, ast.Starred) for e in iterable.elts)
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.args):
        return False
    if iterable.func.id == "range":
        return all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in iterable.args)
    return iterable.func.id in SAME_LENGTH and all(fixed(a) for a in iterable.args)


@dataclass(frozen=True)
class Part:
    """A function of a submission under rules, with the calls that show how its work grows."""

    function: str
    rules: tuple[Rule, ...]
    growths: tuple[Growth, ...]


def read_source(folder: Path, module: str, function: str) -> Source | None:
    """``function`` as submitted, with the functions of its file that it calls (by name, transitively).

    Looked for in ``module``'s file first; a notebook's files only import its cells, so then in every other
    file of the folder, the last definition winning (the cells run in order). None where it is not found
    (the checks that call it say so) or its file does not parse (its import fails).
    """
    files = [folder / f"{module}.py"] + sorted(p for p in folder.glob("*.py") if p.name != f"{module}.py")
    for path in files:
        try:
            text = path.read_text(errors="replace")
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        if function not in defined:
            continue
        aliases = {
            a.asname: a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom | ast.Import)
            for a in n.names
            if a.asname
        }
        reached, todo = [], [defined[function]]
        while todo:
            node = todo.pop()
            if node in reached:
                continue
            reached.append(node)
            todo += [
                defined[c.func.id]
                for c in ast.walk(node)
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in defined
            ]
        return Source(path.name, text.splitlines(), reached, aliases)
    return None


def counted(reply: Any) -> Count:
    """The worker's count, checked: a plain count and a list of names."""
    if not (
        isinstance(reply, dict)
        and type(reply.get("ops")) is int
        and reply["ops"] >= 0
        and isinstance(reply.get("names"), list)
        and all(isinstance(n, str) for n in reply["names"])
    ):
        fail("the grader could not count the tensor operations of your code: its worker sent back a malformed count")
    return Count(reply["ops"], frozenset(reply["names"]))


@dataclass
class Verdicts:
    """The rules' verdicts for one submission: each part's found once, by the first check that needs it."""

    folder: Path
    active: frozenset[str] | None = None  # the rules (by name) in force: a paper's for the part; None: all
    broken: dict[str, str | None] = field(default_factory=dict)  # function -> why it breaks a rule (None: it does not)

    def require(self, view: Any, part: Part) -> None:
        """Fail (the check, and so every check of the part) if ``part`` breaks one of its rules.

        ``view`` is the milestone's ``MilestoneView``; a call that raises raises here, as in any check.
        """
        if part.function not in self.broken:
            self.broken[part.function] = self._judge(view, part)
        why = self.broken[part.function]
        if why is not None:
            raise RuleBroken(why)

    def _judge(self, view: Any, part: Part) -> str | None:
        in_force = [rule for rule in part.rules if self.active is None or rule.name in self.active]
        if not in_force:
            return None
        source = read_source(self.folder, view.module, part.function)
        for rule in in_force:
            found = rule.in_source(source) if source is not None else None
            if found:
                return self._message(part, rule, f"{part.function} {found}")
        counts = [
            (growth, [counted(view.count_ops(part.function, *call.args)) for call in growth.calls])
            for growth in part.growths
        ]
        for rule in in_force:
            found = rule.at_run_time(part.function, counts)
            if found:
                return self._message(part, rule, found)
        return None

    @staticmethod
    def _message(part: Part, rule: Rule, found: str) -> str:
        # "every check of it fails", which is what the report's table shows, in a release's 0-point checks too
        return rule_broken_message(rule.says, f"so every check of {part.function} fails: {found}") + (
            f". {rule.advice}" if rule.advice else ""
        )
