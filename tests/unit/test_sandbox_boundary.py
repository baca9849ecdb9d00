"""The sandbox's boundary: what the worker runs never imports the ``grader`` package.

The fork server loads ``grader/sandbox/worker/`` and ``grader/sandbox/common/`` by file path, then hides
the grader's files (see ``grader/sandbox/__init__.py``), so an import of ``grader`` there would fail
only inside the sandbox. This test finds one by reading the files.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import REPO

SANDBOX = REPO / "grader" / "sandbox"
WORKER_SIDE = [SANDBOX / "worker", SANDBOX / "common"]
FILES = sorted(p for folder in WORKER_SIDE for p in folder.rglob("*.py"))


WORKER_PACKAGES = tuple(".".join(f.relative_to(REPO).parts) for f in WORKER_SIDE)


def grader_imports(source: str, location: Path) -> list[str]:
    """Each import of the ``grader`` package in ``source``, the text of the file at ``location``: absolute,
    through ``importlib``, or relative and reaching outside the worker side."""
    package = location.relative_to(REPO).parts[:-1]  # ("grader", "sandbox", "worker", ...)
    found = []
    for node in ast.walk(ast.parse(source, str(location))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "grader"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if (node.module or "").split(".")[0] == "grader":
                found.append(node.module)
        elif isinstance(node, ast.ImportFrom):
            target = ".".join([*package[: len(package) - (node.level - 1)], *([node.module] if node.module else [])])
            if not any(target == side or target.startswith(side + ".") for side in WORKER_PACKAGES):
                found.append(f"{'.' * node.level}{node.module or ''} (that is, {target})")
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] == "grader"
        ):
            found.append(str(node.args[0].value))
    return found


def test_the_worker_side_has_files():
    names = {p.relative_to(SANDBOX).as_posix() for p in FILES}
    assert {
        "worker/fork_server.py",
        "worker/request_handler.py",
        "common/agreement.py",
        "common/wire.py",
        "common/protocol.py",
    } <= names, names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(SANDBOX).as_posix())
def test_no_worker_side_file_imports_grader(path):
    assert grader_imports(path.read_text(), path) == [], f"{path.relative_to(REPO)} imports the grader package"


@pytest.mark.parametrize(
    "source",
    [
        "import grader.milestones",
        "from grader.sandbox import client",
        "from ..client import Limits",
        "from ... import runner",
        "importlib.import_module('grader.runner')",
    ],
)
def test_the_check_finds_an_import_of_grader(source):
    """The other direction: each way to import the grader package is caught (a relative import from
    worker/ to ../common/ is not)."""
    here = SANDBOX / "worker" / "request_handler.py"
    assert grader_imports(source, here), f"{source!r} was not caught"
    assert grader_imports("from ..common.agreement import Request", here) == []


def sibling_imports(path: Path) -> set[str]:
    """The worker files ``path`` imports from its own folder (``from .name import ...``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_request_handler_files_load_in_the_order_they_import_one_another():
    """The fork server loads the handler's files by path, each as ``_gradekit_<name>``: a file must come after
    every sibling it imports (it finds them in ``sys.modules``), so the imports point one way, without a cycle,
    and every sibling the handler needs is in the list (the grader's files are hidden once the sandbox is up)."""
    from grader.sandbox.worker.fork_server import HANDLER_FILES

    assert HANDLER_FILES[-1] == "request_handler"
    assert len(set(HANDLER_FILES)) == len(HANDLER_FILES)
    for i, name in enumerate(HANDLER_FILES):
        imported = sibling_imports(SANDBOX / "worker" / f"{name}.py")
        assert imported <= set(HANDLER_FILES[:i]), (
            f"{name}.py imports {imported - set(HANDLER_FILES[:i])} before it is loaded"
        )
