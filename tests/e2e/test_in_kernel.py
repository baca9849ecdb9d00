"""``grader.check`` in a real Jupyter kernel (nbclient): it grades the cells the kernel ran, unsaved, through the
same sandbox and table as ``grade check``, and its own lines are never run as the student's code."""

from __future__ import annotations

import pytest

from grader.in_kernel import NotInAKernel, as_notebook, check
from helpers import SOLUTIONS

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

LEAKY_M1 = (SOLUTIONS / "m1_attention.py").read_text().replace("torch.tril(", "torch.triu(")


def run(*sources: str) -> list[str]:
    """Run the cells in a fresh python3 kernel; the text each printed."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3").execute()
    return ["".join(o.get("text", "") for o in cell.outputs) for cell in notebook.cells]


@pytest.mark.slow
def test_a_leaking_mask_gets_the_leak_hint_in_the_notebook():
    """The student never saved: the kernel's cells are what is graded, and the table names triu."""
    printed = run(LEAKY_M1, 'import grader\ngrader.check("m1")')[1]
    assert "Grading this kernel's cells" in printed, printed
    assert "m1 ✗" in printed and "torch.tril, not triu" in printed, printed


@pytest.mark.slow
def test_the_magic_grades_the_same_and_a_fix_run_later_counts():
    """%grade after the fixed cell ran: the kernel's latest definitions win, as they do in the kernel."""
    fixed = (SOLUTIONS / "m1_attention.py").read_text()
    printed = run(LEAKY_M1, fixed, "%load_ext grader.in_kernel", "%grade m1")[3]
    assert "27 / 27" in printed and "triu" not in printed, printed


def test_the_history_becomes_cells_numbered_as_jupyter_shows_them():
    inputs = ["", "x = 1", "import grader\ngrader.check('m1')\ny = 2", "%grade m1", "c('m2')\nz = 3"]
    cells = as_notebook(inputs, aliases=["c"])["cells"]
    assert [c["execution_count"] for c in cells] == [None, 1, 2, 3, 4]
    assert cells[2]["source"] == "\n\ny = 2\n", "the check's lines are blanked, the student's line kept in place"
    assert cells[4]["source"] == "\nz = 3\n", "a check imported under another name is a check line too"
    assert cells[3]["source"] == "%grade m1\n", "magics are left for the grader's notebook reader to drop"


def test_outside_a_kernel_it_says_what_to_run_instead():
    with pytest.raises(NotInAKernel, match="grade check"):
        check("m1")
