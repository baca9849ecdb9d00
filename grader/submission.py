"""Turn what a student hands in (a folder or a notebook) into a folder of exercise files."""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from grader.reference import MODULES

# In a notebook every milestone shares one namespace: imports between the exercise files go.
SIBLING_IMPORT = re.compile(rf"^\s*(from\s+({'|'.join(MODULES)})\s+import\b|import\s+({'|'.join(MODULES)})\b)")


class SubmissionError(Exception):
    """The path cannot be graded at all (not a folder or a readable notebook)."""


@contextlib.contextmanager
def prepared(path: Path) -> Iterator[Path]:
    """A folder holding the submission's exercise files, for the duration of grading."""
    if path.is_dir():
        yield path
        return
    if path.suffix != ".ipynb":
        raise SubmissionError(f"{path} is neither a folder nor a notebook (.ipynb)")
    source = notebook_source(path)
    folder = Path(tempfile.mkdtemp(prefix="gptkit-nb-"))
    try:
        (folder / "notebook_code.py").write_text(source)
        for name in MODULES:  # every milestone's names come from the notebook's one namespace
            (folder / f"{name}.py").write_text("from notebook_code import *  # noqa: F403\n")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def notebook_source(path: Path) -> str:
    """The notebook's code cells as one Python file; IPython magics and shell lines are dropped."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                for c in cells if c.get("cell_type") == "code"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SubmissionError(f"{path} is not a readable Jupyter notebook ({e})") from None
    lines = [line for cell in code for line in cell.splitlines() + [""]
             if not line.lstrip().startswith(("%", "!")) and not SIBLING_IMPORT.match(line)]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        raise SubmissionError(f"{path} has no code in its code cells")
    return "\n".join(lines)
