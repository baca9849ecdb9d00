"""Turn what a student hands in (a folder or a notebook) into a folder of exercise files.

A notebook becomes one file per code cell, run in order into one namespace the
way a kernel runs them: a cell that raises does not stop the next one, so a
leftover demo call or a broken cell costs only the names it should have
defined. Where cells carry nbgrader metadata, the grader's own test cells are
left out and a ``grade_id`` that appears twice keeps its last version (a
copied answer cell: a note says so wherever a missing name is reported). Cell
magics and shell lines are dropped; kernel tricks (``get_ipython()``) find no
kernel and fail inside their own cell. The result is graded like a folder,
through the same isolated workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader import nofollow
from grader.errors import BadUsage
from grader.reference import MODULES

# In a notebook every milestone shares one namespace: imports between the exercise files go.
SIBLING_IMPORT = re.compile(rf"^\s*(from\s+({'|'.join(MODULES)})\s+import\b|import\s+({'|'.join(MODULES)})\b)")
# Cell magics whose body is Python (kept); any other cell magic (%%bash, %%html, ...) drops the cell.
PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun")
MAX_NOTEBOOK_BYTES = 20 << 20

# A notebook cell's time budget (seconds of wall-clock time) when notebook_code.py runs every cell at its import;
# the grading side steps through the cells itself and passes its own (grader/sandbox/session.py).
CELL_SECONDS = 5.0
STEPWISE = "notebook_stepwise"  # a module the grader imports first: notebook_code.py then runs no cell at import
CELLS_FILE = "notebook_cells.json"  # the cells' files and labels, in order, for the grading side

RUNNER = """\
\"\"\"The notebook's code cells, run in order into this one namespace, as a kernel would.

Each cell runs under a time budget, as if the kernel were interrupted once it is spent: an exception raised
inside the cell stops it, and the cell costs only the names it had yet to define.\"\"\"
import signal as _signal
import sys as _sys

__notebook__ = {notes!r}  # what went wrong: the notes, then each cell that raised; shown when a name is missing
_CELLS = {cells!r}


class _Interrupted(KeyboardInterrupt):  # as Jupyter's interrupt: `except Exception` in the cell lets it by
    pass


def _interrupt(signum, frame):
    raise _Interrupted


def _run_cell(index, seconds={seconds!r}):
    \"\"\"Run cell ``index`` (from 0), interrupted once ``seconds`` have passed.\"\"\"
    cell, label = _CELLS[index]
    path = f"{{__file__.rsplit('/', 1)[0]}}/{{cell}}.py"
    try:
        _signal.signal(_signal.SIGALRM, _interrupt)
        _signal.setitimer(_signal.ITIMER_REAL, seconds, 0.5)  # again every 0.5 s: a bare `except:` may catch one
        try:
            with open(path) as f:
                exec(compile(f.read(), path, "exec"), globals())
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    except _Interrupted:
        __notebook__.append(
            f"{{label}} was interrupted after {{seconds:.3g}} s, as a kernel interrupt would (an infinite loop, or far "
            "too much work?): the names it had yet to define are missing"
        )
    except SyntaxError as e:  # its message would name the cell's file: the cell's own line instead
        __notebook__.append(f"{{label}} has a SyntaxError at line {{e.lineno}}: {{e.msg}}")
    except SystemExit as e:
        __notebook__.append(f"{{label}} called sys.exit({{e.code!r}}), which in a notebook ends only that cell")
    except BaseException as e:  # noqa: BLE001 - like a kernel, go on with the next cell
        __notebook__.append(f"{{label}} raised {{type(e).__name__}}: {{str(e)[:200]}}")


def _leave_out(cells):
    \"\"\"The grader left these cells out ([index, why] each): it hung past its interrupt, ended the process, or
    the cells before it used up their time.\"\"\"
    for index, why in cells:
        __notebook__.append(f"{{_CELLS[index][1]}} was left out: {{why}}")


if "{stepwise}" not in _sys.modules:  # imported by itself: every cell now (else the grader runs each)
    for _index in range(len(_CELLS)):
        _run_cell(_index)
"""


class SubmissionError(BadUsage):
    """The path cannot be graded at all (not a folder or a readable notebook). Its message names the file, not
    its path: it goes to the student too (``grade export --gradescope``, the Gradescope autograder)."""


@dataclass(frozen=True)
class Cell:
    number: int  # its place among the notebook's cells, from 1
    source: str
    grade_id: str | None
    execution_count: int | None = None  # the [7] Jupyter shows beside it, where it was run

    @property
    def file(self) -> str:
        """The name of its file in the graded folder (``CELL_FILE`` reads it back)."""
        ran = f"_in{self.execution_count}" if self.execution_count is not None else ""
        return re.sub(r"\W", "_", f"cell_{self.number:03d}{ran}" + (f"_{self.grade_id}" if self.grade_id else ""))

    @property
    def label(self) -> str:
        return cell_label(self.number, self.execution_count)


# A place in a cell's file, as a traceback names it: "cell_012_in7_m4_answer.py:22".
CELL_FILE = re.compile(r"\bcell_(?P<number>\d+)(?:_in(?P<ran>\d+))?\w*\.py:(?P<line>\d+)(?P<rest>(?: in [\w<>.]+)?)")


def cell_label(number: int, execution_count: int | None) -> str:
    """A cell as the student finds it: Jupyter's own name for a cell that ran (IPython's tracebacks say
    "Cell In[7]"), and its place from the top (markdown cells counted), which an unrun cell has alone."""
    place = f"cell {number} of the notebook"
    return f"Cell In[{execution_count}] ({place})" if execution_count is not None else place


def in_notebook_terms(where: str) -> str:
    """``where`` (a traceback's "file:line in function") with a cell's file named as the student sees the cell:
    "cell_012_in7_m4_answer.py:22 in generate" is "Cell In[7], line 22 in generate (cell 12 of the notebook)"."""

    def named(m: re.Match) -> str:
        number, line, rest = int(m["number"]), m["line"], m["rest"]
        if m["ran"] is None:
            return f"{cell_label(number, None)}, line {line}{rest}"
        return f"Cell In[{m['ran']}], line {line}{rest} (cell {number} of the notebook)"

    return CELL_FILE.sub(named, where)


@contextlib.contextmanager
def prepared(path: Path) -> Iterator[Path]:
    """A folder holding the submission's exercise files, for the duration of grading.

    ``path`` itself must not be a symbolic link: what it points to is not the student's (grader/nofollow.py);
    links inside a folder are left out of grading, and a folder nested too deep or holding too many entries
    is refused here, as the student's, before any grading starts."""
    if nofollow.is_link(path):
        raise SubmissionError(nofollow.refused(path.name))
    if path.is_dir():
        try:
            for _ in nofollow.walk(path):
                pass
        except nofollow.TreeTooLarge as e:
            raise SubmissionError(str(e)) from None
        # The files that make the grading side run a notebook's cells one by one, under their own budgets and
        # labels: only a folder written here (below) has them; a folder handed in with them is refused.
        if kept := [name for name in (f"{STEPWISE}.py", CELLS_FILE) if os.path.lexists(path / name)]:
            raise SubmissionError(f"{', '.join(kept)}: the grader keeps these names for notebooks; rename the file")
        yield path
        return
    if path.suffix != ".ipynb":
        raise SubmissionError(f"{path.name} is neither a folder nor a notebook (.ipynb)")
    cells, notes = notebook_cells(path)
    folder = Path(tempfile.mkdtemp(prefix="gptkit-nb-"))
    try:
        write_notebook_folder(cells, folder, notes)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_notebook_folder(
    cells: list[Cell], folder: Path, notes: Sequence[str] = (), cell_seconds: float = CELL_SECONDS
) -> None:
    """The cells as files run in order by ``notebook_code.py``; ``notes`` head its list of what went wrong.
    ``cell_seconds``: each cell's time budget when the cells run at the import of ``notebook_code``."""
    names = [(c.file, c.label) for c in cells]
    for cell in cells:
        (folder / f"{cell.file}.py").write_text(cell.source)
    runner = RUNNER.format(cells=names, notes=list(notes), seconds=float(cell_seconds), stepwise=STEPWISE)
    (folder / "notebook_code.py").write_text(runner)
    (folder / f"{STEPWISE}.py").write_text('"""Imported by the grader first: it runs the cells one by one."""\n')
    (folder / CELLS_FILE).write_text(json.dumps(names))
    for module in MODULES:  # every milestone's names come from the notebook's one namespace
        (folder / f"{module}.py").write_text(
            "from notebook_code import *  # noqa: F403\nfrom notebook_code import __notebook__  # noqa: F401\n"
        )


def notebook_cells(path: Path) -> tuple[list[Cell], list[str]]:
    """The student's code cells, cleaned, in notebook order (a duplicated grade_id keeps its last version), and
    notes on what the student should know: each grade_id that more than one cell has (see :func:`copies`)."""
    try:
        try:
            data = nofollow.read_bytes(path, MAX_NOTEBOOK_BYTES)  # never what a link points to
        except nofollow.NotOwnFile as e:
            why = nofollow.refused(path.name) if isinstance(e, nofollow.LinkFound) else e.strerror
            raise SubmissionError(why) from None
        except ValueError as e:
            raise SubmissionError(str(e)) from None
        raw = json.loads(data.decode("utf-8"))["cells"]
        if not isinstance(raw, list):
            raise TypeError("its 'cells' is not a list")
        cells = [(i, c) for i, c in enumerate(raw, 1) if isinstance(c, dict) and c.get("cell_type") == "code"]
        parsed = [
            Cell(i, clean(_text(c["source"])), _grade_id(c), _execution_count(c))
            for i, c in cells
            if not _is_test_cell(c)
        ]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SubmissionError(f"{path.name} is not a readable Jupyter notebook ({type(e).__name__}: {e})") from None
    last = {cell.grade_id: cell.number for cell in parsed if cell.grade_id}
    kept = [c for c in parsed if c.source.strip() and (c.grade_id is None or last[c.grade_id] == c.number)]
    if not any(line.strip() and not line.lstrip().startswith("#") for c in kept for line in c.source.splitlines()):
        raise SubmissionError(f"{path.name} has no code in its code cells")
    return kept, copies(parsed)


def copies(cells: list[Cell]) -> list[str]:
    """A note for each grade_id that several cells have: Jupyter copies a cell's metadata with it, so a student
    who copied an answer cell (to try something, say) may have their answer in a copy that is not graded."""
    numbers: dict[str, list[int]] = {}
    for cell in cells:
        if cell.grade_id:
            numbers.setdefault(cell.grade_id, []).append(cell.number)
    return [
        f"{len(n)} cells have grade_id {grade_id} (cells {', '.join(map(str, n[:-1]))} and {n[-1]}): only the last "
        f"is graded; delete the cop{'ies' if len(n) > 2 else 'y'}"
        for grade_id, n in numbers.items()
        if len(n) > 1
    ]


def clean(source: str) -> str:
    """Blank shell lines, magics and sibling imports; a non-Python cell magic empties the cell.

    Blanked, not dropped: every other line keeps its number, so that "line 22" is the cell's line 22."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        if lines[0].split()[0] not in PYTHON_CELL_MAGICS:
            return ""
        lines = ["", *lines[1:]]
    return (
        "\n".join("" if line.lstrip().startswith(("%", "!")) or SIBLING_IMPORT.match(line) else line for line in lines)
        + "\n"
    )


def _text(source) -> str:
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise TypeError("a cell's source is neither text nor a list of lines")


def _execution_count(cell: dict) -> int | None:
    count = cell.get("execution_count")
    return count if isinstance(count, int) and not isinstance(count, bool) and 0 < count < 10**9 else None


def _nbgrader(cell: dict) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell: dict) -> str | None:
    grade_id = _nbgrader(cell).get("grade_id")
    return grade_id if isinstance(grade_id, str) and grade_id else None


def _is_test_cell(cell: dict) -> bool:
    """nbgrader's autograder-test cells hold the instructor's checks, not the student's code."""
    meta = _nbgrader(cell)
    return bool(meta.get("grade")) and not meta.get("solution")
