"""One place starts fork servers: grader/grading.py's Grader. Every command grades through it, so a server that
died is replaced, and a grading bounded, in one way (grader/sandbox/ is the server's own side)."""

from __future__ import annotations

import ast
from pathlib import Path

import grader

ROOT = Path(grader.__file__).resolve().parent
OWNER = ROOT / "grading.py"


def starts_a_server(node: ast.AST) -> bool:
    """``ForkServer(...)`` or ``ForkServer.attach(...)``, however ForkServer was imported (a module before it)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "attach":
        f = f.value
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name == "ForkServer"


def servers_started(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree) if starts_a_server(node)]


def test_only_the_grader_starts_fork_servers():
    outside = {
        f"{path.relative_to(ROOT.parent)}:{line}"
        for path in ROOT.rglob("*.py")
        if path != OWNER and ROOT / "sandbox" not in path.parents
        for line in servers_started(path)
    }
    assert not outside, f"fork servers started outside grader/grading.py's Grader: {sorted(outside)}"


def test_the_scan_sees_every_way_of_starting_one():
    """The check above would pass on a scan that finds nothing: it finds each form, and the Grader's own."""
    found = [
        starts_a_server(ast.parse(code).body[0].value)  # type: ignore[attr-defined]
        for code in ("ForkServer(limits)", "client.ForkServer(limits, many=True)", "ForkServer.attach(address)")
    ]
    assert found == [True, True, True]
    assert not starts_a_server(ast.parse("Grader(limits)").body[0].value)  # type: ignore[attr-defined]
    assert len(servers_started(OWNER)) >= 3, "grading.py starts the warm server, a side-by-side one and copies"
