"""The README's layout matches the tree: every folder or file it names exists, and it names every top-level folder
and every package of the grader."""

from __future__ import annotations

import re
import subprocess

import pytest

from helpers import REPO

ENTRY = re.compile(r"^( *)([\w.-]+(?:/|\.py))\s")  # an indented folder/ or file.py, then its description


def layout() -> list[str]:
    """The paths the README's Layout block names, each a folder (ending in /) or a file, from the repository."""
    block = (REPO / "README.md").read_text().split("## Layout")[1].split("```")[1]
    paths, stack = [], []
    for line in block.splitlines():
        entry = ENTRY.match(line)
        if not entry:
            continue  # a description's second line
        depth = len(entry[1]) // 2
        stack[depth:] = [entry[2]]
        paths.append("".join(stack))
    return paths


def test_every_path_the_layout_names_exists():
    paths = layout()
    assert len(paths) > 20, paths
    missing = [p for p in paths if not ((REPO / p).is_dir() if p.endswith("/") else (REPO / p).is_file())]
    assert not missing, f"the README's layout names what the tree lacks: {missing}"


def test_the_layout_names_every_top_level_folder():
    try:
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: which folders are the project's own is git's list")
    folders = {f"{name.split('/')[0]}/" for name in files.splitlines() if "/" in name}
    listed = {p for p in layout() if p.count("/") == 1 and p.endswith("/")}
    assert folders == listed, f"in the tree, not the layout: {folders - listed}; the reverse: {listed - folders}"


def test_the_layout_names_every_package_of_the_grader():
    packages = {f"grader/{p.parent.name}/" for p in (REPO / "grader").glob("*/__init__.py")}
    listed = {p for p in layout() if p.startswith("grader/") and p.count("/") == 2 and p.endswith("/")}
    assert packages == listed, f"in the tree, not the layout: {packages - listed}; the reverse: {listed - packages}"


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (no packages under tests/): two of one name in different
    folders stop the whole run at collection, which running either file alone never shows."""
    names: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    shared = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert not shared, f"test files with one name: {shared}; rename one of each"
