"""A submission's exercise files, as the comparison reads them: a folder's ``mN_name.py`` files, or a notebook's
code cells as one file (``NOTEBOOK``); each bounded in size and read without following a link.
"""

from __future__ import annotations

import ast
from pathlib import Path

from grader import nofollow
from grader.milestones import STUDENT_MODULES
from grader.submission import SubmissionError, notebook_cells

MAX_FILE_BYTES = 1 << 20  # an exercise file far larger than any solution is left out, not read whole

NOTEBOOK = "notebook"


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


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(text)
