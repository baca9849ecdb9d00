"""grader's packages and modules import one way: no cycle among grader's direct children, none among its
modules, and no private name across packages.

Each direct child of ``grader/`` (a subpackage such as ``contest`` or ``paper``, or a top-level module such as
``runner``) is a node; an import anywhere in a module of one node (at the top or inside a function: a lazy
import is still a dependency) of a name in another node is an edge. The graph must have no cycle, so that
every package can be read, tested and changed on top of the ones below it. And a package does not reach into
another's private names (``from grader.batch.run import _context``): what others use is public there.

Inside the packages too: every module under ``grader/`` is a node (a package's ``__init__`` is one, named as
the package), and an import anywhere in it of another grader module is an edge: ``import pkg.mod`` and
``from pkg.mod import name`` to ``pkg.mod``; ``from pkg import name`` to ``pkg`` (its ``__init__`` runs) and to
``pkg.name`` where that is a submodule. (The packages above an imported module, which Python runs first, are
not counted.) No strongly connected component may have more than one module: two modules that reach each
other cannot be read, tested or loaded one without the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grader

ROOT = Path(grader.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def node_of(module: str) -> str | None:
    """The direct child of grader that ``module`` belongs to (None: grader itself or outside it)."""
    parts = module.split(".")
    if parts[0] != "grader" or len(parts) < 2:
        return None
    return parts[1]


def imports(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """Every import in ``path``: the absolute module imported, the names taken from it, the line."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            if node.module is None:  # ``from . import x``: x may be a module of the package
                for name in names:
                    yield f"{target}.{name}", [], node.lineno
            yield target, names, node.lineno


def modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def graph() -> dict[str, dict[str, list[str]]]:
    """node -> imported node -> where (``path:line``)."""
    edges: dict[str, dict[str, list[str]]] = {}
    for path in modules():
        source = node_of(module_name(path))
        if source is None:
            continue
        edges.setdefault(source, {})
        for target, _, line in imports(path):
            to = node_of(target)
            if to is None or to == source:
                continue
            edges[source].setdefault(to, []).append(f"{path.relative_to(ROOT.parent)}:{line}")
    return edges


def find_cycle(edges: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle (its nodes, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for to in sorted(edges.get(node, {})):
            if state.get(to) == 1:
                return stack[stack.index(to) :] + [to]
            if to not in state:
                found = visit(to)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def known_modules() -> set[str]:
    return {module_name(path) for path in modules()}


def module_graph() -> dict[str, dict[str, list[str]]]:
    """module -> imported grader module -> where (``path:line``); every grader module a key."""
    known = known_modules()
    edges: dict[str, dict[str, list[str]]] = {}
    for path in modules():
        source = module_name(path)
        edges.setdefault(source, {})
        for target, names, line in imports(path):
            # ``from target import names`` runs ``target`` and loads each name that is a submodule of it
            reached = {target} | {f"{target}.{name}" for name in names}
            for to in reached & known - {source}:
                edges[source].setdefault(to, []).append(f"{path.relative_to(ROOT.parent)}:{line}")
    return edges


def components(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one node, each sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [_visit(root, edges, index, low, stack, on_stack)]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    work.append(_visit(child, edges, index, low, stack, on_stack))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = _pop_component(node, stack, on_stack)
                if len(members) > 1:
                    found.append(sorted(members))
    return sorted(found)


def _visit(
    node: str,
    edges: dict[str, dict[str, list[str]]],
    index: dict[str, int],
    low: dict[str, int],
    stack: list[str],
    on_stack: set[str],
) -> tuple[str, Iterator[str]]:
    """Number ``node`` and push it on the stack; its frame of the walk: the node and its children left to visit."""
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    return node, iter(sorted(edges.get(node, {})))


def _pop_component(node: str, stack: list[str], on_stack: set[str]) -> list[str]:
    """The component whose root is ``node``: the stack's nodes down to it, popped."""
    members = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        members.append(member)
        if member == node:
            return members


def test_no_cycle_among_grader_modules() -> None:
    edges = module_graph()
    found = components(edges)
    if found:
        text = []
        for members in found:
            inside = set(members)
            hops = [
                f"    {a} -> {b}: {', '.join(edges[a][b][:2])}"
                for a in members
                for b in sorted(edges[a])
                if b in inside
            ]
            text.append(f"  {len(members)} modules that import one another: {', '.join(members)}\n" + "\n".join(hops))
        raise AssertionError(f"{len(found)} import cycle(s) among grader's modules:\n" + "\n".join(text))


def test_the_module_graph_reads_submodules_and_lazy_imports() -> None:
    """``from pkg import sub`` is an edge to the submodule and to the package, a lazy import one too, and a
    package's ``__init__`` is a node: read from this very tree (grader/contest/web/app.py, .../commands.py)."""
    edges = module_graph()
    from_web = edges["grader.contest.web.app"]  # ``from grader.contest.web import views``
    assert {"grader.contest.web", "grader.contest.web.views", "grader.contest.web.routes.coach"} <= set(from_web)
    assert "grader.contest.store" in edges["grader.contest.commands"]  # imported inside a function


def test_the_checker_sees_a_component() -> None:
    edges: dict[str, dict[str, list[str]]] = {
        "a": {"b": ["x"]},
        "b": {"c": ["y"], "d": ["w"]},
        "c": {"a": ["z"]},
        "d": {"e": ["v"]},
        "e": {"d": ["u"]},
        "f": {"a": ["t"]},
    }
    assert components(edges) == [["a", "b", "c"], ["d", "e"]]
    assert components({"a": {"b": ["x"]}, "b": {}}) == []


def test_no_cycle_between_grader_packages() -> None:
    edges = graph()
    cycle = find_cycle(edges)
    if cycle:
        hops = [f"  {a} -> {b}: {', '.join(edges[a][b][:3])}" for a, b in zip(cycle, cycle[1:])]
        raise AssertionError("a cycle between grader's packages: " + " -> ".join(cycle) + "\n" + "\n".join(hops))


def _private(name: str) -> bool:
    """``_name``, not ``__name__``."""
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_across_packages() -> None:
    found = []
    for path in modules():
        source = node_of(module_name(path))
        for target, names, line in imports(path):
            to = node_of(target)
            if to is None or to == source:
                continue
            private = [n for n in names if _private(n)]
            if private or any(_private(part) for part in target.split(".")[1:]):
                found.append(f"{path.relative_to(ROOT.parent)}:{line}: from {target} import {', '.join(names)}")
    assert not found, "private names imported from another package:\n" + "\n".join(found)


def test_the_checker_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b": ["x"]}, "b": {"c": ["y"]}, "c": {"a": ["z"]}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ["x"]}, "b": {}}) is None
