"""``grader.check("m1")`` inside a running notebook (Jupyter, JupyterLab, Colab): grade what the kernel has run.

Nothing is saved by hand. The cells the kernel ran, in the order it ran them (IPython's input history, so
``In[7]`` is the cell shown as ``[7]``), become a notebook in a temporary folder, and ``grade check`` grades
it in a process of its own: the same isolated workers, table and hints as on the command line, with the
kernel's live objects never handed to the grader. A cell that ran twice runs twice, as it did in the kernel;
a cell since deleted from the page still counts, as its definitions are still in the kernel.

The check lines themselves (``grader.check(...)``, ``%grade ...``, imports of the grader) are left out, so
the graded code does not start a grader of its own.

    import grader
    grader.check("m1")          # or: %load_ext grader.in_kernel, then %grade m1
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from grader.errors import UserError

# A line that runs or imports the grader: not the student's code, and never to run inside a worker.
GRADER_LINE = re.compile(r"^\s*(?:import\s+grader\b|from\s+grader\b|grader\s*\.\s*check\s*\()")
# The temporary notebook's cells stand for the history's entries one for one, so its "cell 7 of the
# notebook" would repeat In[7], and name a notebook the student never saw.
PLACE = re.compile(r" \(cell \d+ of the notebook\)")
SECONDS = 600  # the whole grading; `grade check`'s own limits bound each check well inside it


class NotInAKernel(UserError):
    """``check`` was called outside an IPython kernel (a terminal, a script): ``grade check`` is the way there."""


def check(*milestones: str, verbose: bool = False) -> None:
    """Grade the cells this kernel has run on ``milestones`` (default: every one) and print the table."""
    shell = _shell()
    print(grade_history(history(shell), milestones, verbose, _aliases(shell)))


def history(shell: Any) -> list[str]:
    """The raw text of each input the kernel ran, this one included: entry i is In[i] (entry 0 is empty)."""
    return list(shell.history_manager.input_hist_raw)


def grade_history(
    inputs: list[str], milestones: tuple[str, ...] = (), verbose: bool = False, aliases: list[str] | tuple = ()
) -> str:
    """What ``grade check`` prints for ``inputs`` (a kernel's history, In[0] first) graded as a notebook."""
    with tempfile.TemporaryDirectory(prefix="gptkit-kernel-") as folder:
        path = Path(folder) / "kernel.ipynb"
        path.write_text(json.dumps(as_notebook(inputs, aliases)))
        command = [sys.executable, "-m", "grader", "check", str(path), *(a for m in milestones for a in ("-m", m))]
        try:
            proc = subprocess.run(command + ["-v"] * verbose, capture_output=True, text=True, timeout=SECONDS)
        except subprocess.TimeoutExpired:
            return f"the grading took more than {SECONDS} s and was stopped"
        text = PLACE.sub("", proc.stdout.replace(str(path), "this kernel's cells").rstrip())
        return text if proc.returncode == 0 else f"{text}\n{proc.stderr.strip()}".strip()


def as_notebook(inputs: list[str], aliases: list[str] | tuple = ()) -> dict:
    """``inputs`` as a notebook: cell i is In[i], with its execution count and without its grader lines."""
    calls = re.compile(rf"^\s*(?:{'|'.join(map(re.escape, aliases))})\s*\(") if aliases else None
    cells: list[dict] = []
    for count, source in enumerate(inputs):
        lines = [
            "" if GRADER_LINE.match(line) or (calls and calls.match(line)) else line for line in source.splitlines()
        ]
        cells.append(
            {
                "cell_type": "code",
                "execution_count": count or None,
                "metadata": {},
                "outputs": [],
                "source": "\n".join(lines) + "\n",
            }
        )
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


def _aliases(shell: Any) -> list[str]:
    """The names under which the kernel holds ``check`` (``from grader import check as c``): their calls are
    check lines too."""
    return [name for name, value in shell.user_ns.items() if value is check and name.isidentifier()]


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # noqa: N806 - IPython's own name
    shell = get_ipython() if get_ipython else None
    if shell is None or not hasattr(shell, "history_manager"):
        raise NotInAKernel("grader.check runs inside a notebook's kernel; in a terminal, run `grade check` instead")
    return shell


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext grader.in_kernel`` adds ``%grade m1 m2 [-v]``."""

    def grade(line: str) -> None:
        words = line.split()
        print(grade_history(history(shell), tuple(w for w in words if w != "-v"), "-v" in words, _aliases(shell)))

    shell.register_magic_function(grade, "line", "grade")
