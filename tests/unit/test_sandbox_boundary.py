"""The sandbox's boundary: what the worker runs never imports the ``grader`` package.

The fork server loads ``grader/sandbox/worker/`` and ``grader/sandbox/common/`` by file path, then hides
the grader's files (see ``grader/sandbox/__init__.py``), so an import of ``grader`` there would fail
only inside the sandbox. This test finds one by reading the files.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
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


def worker_side_imports(source: str, location: Path) -> list[str]:
    """What in ``source``, the text of the file at ``location``, is not the one way the worker side imports
    itself: a name of the fork server's old loading (``_gradekit_<name>``) or of its package (``_gradekit``), an
    import fallback (``except ImportError``), or a relative import inside a function (the fork server imports
    every file before the grader's files are hidden; one imported later would not be found)."""
    found = []
    for node in ast.walk(ast.parse(source, str(location))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"line {node.lineno}: {m}" for m in modules if m.split(".")[0].startswith("_gradekit")]
        elif isinstance(node, ast.ExceptHandler) and "ImportError" in ast.unparse(node.type or ast.Name("")):
            found.append(f"line {node.lineno}: except ImportError")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [
                f"line {inner.lineno}: a relative import inside {node.name}()"
                for inner in ast.walk(node)
                if isinstance(inner, ast.ImportFrom) and inner.level
            ]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(SANDBOX).as_posix())
def test_the_worker_side_imports_itself_one_way(path):
    """Relative imports, the same in the grading process (``grader.sandbox.worker``) and in the fork server
    (``_gradekit.worker``): no second name, no fallback."""
    assert worker_side_imports(path.read_text(), path) == [], f"{path.relative_to(REPO)}"


def test_the_check_finds_a_second_way():
    here = SANDBOX / "worker" / "probes.py"
    fallback = "try:\n    from .faults import blame\nexcept ImportError:\n    from _gradekit_faults import blame\n"
    lazy = "def f():\n    from .faults import blame\n"
    for source in (fallback, lazy, "import _gradekit.worker.faults\n"):
        assert worker_side_imports(source, here), f"{source!r} was not caught"
    assert worker_side_imports("from .faults import blame\nfrom ..common.agreement import Reply\n", here) == []


FORK_SERVER_LOADS = """
import importlib, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("fork_server", sys.argv[1])
fork_server = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fork_server)
for name in ("worker.request_handler", "worker.jail", "worker.hugepages", "worker.shared_server", "common.wire"):
    fork_server._load(name)
refused = []
for name in ("grader", "_gradekit.client", "_gradekit.session"):
    try:
        importlib.import_module(name)
    except ImportError:
        refused.append(name)
print(json.dumps({"loaded": sorted(sys.modules), "refused": refused}))
"""


def test_the_fork_server_loads_the_worker_side_as_a_package_without_grader():
    """In the fork server's interpreter (``python -I -S``, the script run by path), the request handler is
    imported with every sibling it needs, as ``_gradekit.worker.*`` and ``_gradekit.common.*``; neither the
    ``grader`` package nor the grading process's files beside ``worker/`` can be imported. (The files that
    need torch, ``protocol`` and ``standin``, are left out: torch is not on this bare interpreter's path.)"""
    script = SANDBOX / "worker" / "fork_server.py"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", FORK_SERVER_LOADS, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    loaded = set(result["loaded"])
    handler = {"faults", "handles", "naming", "op_counter", "student_imports", "trusted_code", "probes"}
    handler |= {"ops_calls", "ops_state", "ops_probes", "request_handler"}
    assert {f"_gradekit.worker.{name}" for name in handler} <= loaded, sorted(loaded)
    assert {"_gradekit.common.agreement", "_gradekit.common.wire", "_gradekit.worker.jail"} <= loaded
    jail = {f"_gradekit.worker.{p.stem}" for p in (SANDBOX / "worker").glob("jail*.py")}  # every protection's file
    assert len(jail) > 1 and jail <= loaded, sorted(jail - loaded)
    assert not [name for name in loaded if name == "grader" or name.startswith("grader.")]
    assert result["refused"] == ["grader", "_gradekit.client", "_gradekit.session"]
