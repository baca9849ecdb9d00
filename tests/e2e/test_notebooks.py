"""Notebook submissions: graded through the same isolated workers as folders, cell by cell as a kernel runs them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import attacks as A
from grader.milestones import STUDENT_MODULES
from helpers import CORE, SOLUTIONS, Graded, batch_here, check_here, cli, explain, grade

pytestmark = pytest.mark.slow  # every test here grades whole submissions

CORE_ARGS = [a for m in CORE for a in ("-m", m)]


def code(source: str, grade_id: str | None = None, test: bool = False) -> dict:
    """A code cell; with a grade_id, nbgrader metadata (an answer cell, or a locked autograder test cell)."""
    meta = {}
    if grade_id:
        meta["nbgrader"] = {
            "grade": test,
            "grade_id": grade_id,
            "locked": test,
            "schema_version": 3,
            "solution": not test,
            "task": False,
            **({"points": 1} if test else {}),
        }
    return {
        "cell_type": "code",
        "metadata": meta,
        "source": source.splitlines(keepends=True),
        "outputs": [],
        "execution_count": None,
    }


def write(path: Path, cells: list[dict | str]) -> Path:
    cells = [code(c) if isinstance(c, str) else c for c in cells]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


def reference(module: str) -> str:
    return (SOLUTIONS / f"{module}.py").read_text()


def graded_notebook(tmp_path: Path, cells: list[dict | str], *args: str) -> Graded:
    return grade(write(tmp_path / "submission.ipynb", cells), *args)


def test_reference_notebook_scores_full_marks(tmp_path):
    """One cell per file of the reference, behind magics and shell lines: every milestone full."""
    result = graded_notebook(tmp_path, ["%matplotlib inline\n!echo hi", *map(reference, STUDENT_MODULES)])
    assert result.returncode == 0 and result.report["score"] == result.report["max_score"], explain(result)


def test_nbgrader_cells_reordered_duplicated_and_with_magics(tmp_path):
    """By grade_id: the last version of a duplicated cell counts, order does not matter, the grader's own
    test cells are ignored, Python cell magics are kept and other cell magics dropped."""
    buggy_m1 = reference("m1_attention").replace("torch.tril(", "torch.triu(")
    cells = [
        code(reference("m2_model"), "m2-answer"),  # before the m1 it builds on
        code(buggy_m1, "m1-answer"),  # an early, buggy version ...
        code("assert False, 'an instructor test cell'", "m1-tests", test=True),
        code("%%bash\necho not python", None),
        code("%%time\n" + reference("m1_attention"), "m1-answer"),  # ... replaced by its last version
        code(reference("m3_train"), "m3-answer"),
        code(reference("m4_generate"), "m4-answer"),
    ]
    result = graded_notebook(tmp_path, cells, *CORE_ARGS)
    assert result.returncode == 0 and all(result.full(m) for m in CORE), explain(result)


def test_a_deleted_cell_and_a_cell_that_raises_cost_only_their_names(tmp_path):
    """m4's cell deleted, a demo cell that raises before m2: m4 says what is missing, the rest is full."""
    cells = [
        reference("m1_attention"),
        "print(generate(None, None))  # a demo left behind: NameError",
        reference("m2_model"),
        reference("m3_train"),
    ]
    result = graded_notebook(tmp_path, cells, *CORE_ARGS)
    assert result.returncode == 0, explain(result)
    assert all(result.full(m) for m in ("m1", "m2", "m3")), explain(result)
    messages = result.messages("m4")
    assert messages and all("the notebook defines no generate" in m for m in messages), explain(result)
    assert any("cell 2 of the notebook raised NameError" in m for m in messages), explain(result)


def test_an_error_is_placed_as_jupyter_shows_the_cell(tmp_path):
    """An error in a cell is placed as the student finds it: the cell's [7] (IPython's "Cell In[7]") and its
    own line numbers, which the magics and imports the grader blanks do not shift."""
    broken = reference("m4_generate").replace("def generate(", "def generate_unused(", 1)
    broken += "\n\ndef generate(model, start, max_new=5):\n    raise ValueError('on purpose')\n"
    m4 = {**code("%%time\n!echo hi\nfrom m1_attention import causal_mask\n" + broken), "execution_count": 7}
    line = m4["source"].index("    raise ValueError('on purpose')\n") + 1
    syntax = {**code("x = 1\ndef f(:\n"), "execution_count": 3}
    cells = [*map(reference, ("m1_attention", "m2_model", "m3_train")), syntax, m4]
    result = graded_notebook(tmp_path, cells, "-m", "m4")
    messages = result.messages("m4")
    assert any(f"Cell In[7], line {line} in generate (cell 5 of the notebook)" in m for m in messages), explain(result)
    assert not any("cell_0" in m for m in messages), explain(result)


KERNEL_TRICKS = {
    # Turns every later cell into `pass` in a kernel, so in-kernel tests never run.
    "input-transformer": "get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])",
    # Hides every failing test's traceback in a kernel.
    "showtraceback": "ip = get_ipython()\nip.showtraceback = lambda *a, **k: None\n"
    "ip._showtraceback = ip.showtraceback",
    # Comparison helpers that always pass, as in-kernel tests would use them.
    "assert-helpers": A.MONKEYPATCH_COMPARISONS,
}


@pytest.mark.parametrize("trick", list(KERNEL_TRICKS))
def test_kernel_tricks_earn_nothing(tmp_path, trick):
    """A trick that fools in-kernel grading, then a future-leaking mask: m1 still loses points for the leak."""
    leaky = reference("m1_attention").replace("torch.tril(", "torch.triu(")
    cells = [KERNEL_TRICKS[trick], leaky, reference("m2_model"), reference("m3_train"), reference("m4_generate")]
    result = graded_notebook(tmp_path, cells, *CORE_ARGS)
    assert result.returncode == 0 and not result.full("m1"), explain(result)
    assert any("leaks from the future" in m or "upper-triangular" in m for m in result.messages("m1")), explain(result)
    assert all(result.full(m) for m in ("m2", "m3", "m4")), explain(result)


@pytest.mark.parametrize(
    "text,phrase",
    [
        ("{not json", "not a readable Jupyter notebook"),
        (json.dumps({"cells": "nope"}), "not a readable Jupyter notebook"),
        (json.dumps({"nbformat": 4, "cells": [code("# only a comment")]}), "has no code"),
    ],
)
def test_unusable_notebooks_are_usage_errors(tmp_path, text, phrase):
    path = tmp_path / "bad.ipynb"
    path.write_text(text)
    proc = check_here(str(path))
    assert proc.returncode == 2 and phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_copied_answer_cell_is_named_where_its_names_are_missing(tmp_path):
    """Jupyter copies a cell's nbgrader metadata with it: the student's answer sits in cell 1, a scratch copy
    in cell 2 has the same grade_id, and only the last is graded. m1 then finds no causal_mask: the message must
    say why, not leave the student to guess."""
    cells = [
        code(reference("m1_attention"), "m1-answer"),
        code("print('trying something')", "m1-answer"),  # the copy, its code replaced
    ]
    result = graded_notebook(tmp_path, cells, "-m", "m1")
    assert result.returncode == 0, explain(result)
    messages = result.messages("m1")
    assert messages and all("the notebook defines no " in m for m in messages), explain(result)
    note = "2 cells have grade_id m1-answer (cells 1 and 2): only the last is graded; delete the copy"
    assert all(note in m for m in messages), explain(result)


# Cells that never end or end their own process: in a kernel, an interrupt (or a restart) costs that cell only.
BAD_CELLS = {
    "hangs": "while True:\n    pass\n",
    "os._exit": "import os\nos._exit(0)\n",
    "kills-itself": "import os\nos.kill(os.getpid(), 9)\n",
}
BAD_CELL_SECONDS = 90  # the whole grading of m1 to m4 with one such cell (about 12 s alone on a 2-core machine)


@pytest.mark.parametrize("bad", list(BAD_CELLS))
def test_a_cell_that_hangs_or_ends_its_process_costs_only_that_cell(tmp_path, bad):
    """A demo cell in m3's section that loops for ever, calls os._exit or kills its own process: every milestone
    keeps full marks (each cell runs within its own time budget; one that ends its process is left out and the
    cells run again without it), and the notebook is graded in bounded time, not 20 s for each check."""
    cells = [*map(reference, ("m1_attention", "m2_model", "m3_train")), BAD_CELLS[bad], reference("m4_generate")]
    result = graded_notebook(tmp_path, cells, *CORE_ARGS)
    assert result.returncode == 0 and all(result.full(m) for m in CORE), explain(result)
    assert result.seconds < BAD_CELL_SECONDS, f"{result.seconds:.0f} s"


def test_a_cell_left_out_is_named_with_its_cause(tmp_path):
    """Where a bad cell held a milestone's answer, the milestone's checks name the cell as Jupyter shows it and
    say what stopped it: the interrupt (the names the cell had yet to define are missing), a worker killed by a
    signal, a cell that caught the interrupt and went on; and none blames memory for a SIGKILL it sent itself."""
    swallow = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n"
    cells = [
        reference("m1_attention"),
        "while True:\n    pass\n" + reference("m2_model"),
        {**code(reference("m3_train") + "\nimport os\nos.kill(os.getpid(), 9)\n"), "execution_count": 7},
        swallow + reference("m4_generate"),
    ]
    result = graded_notebook(tmp_path, cells, "-m", "m2", "-m", "m3", "-m", "m4")
    assert result.returncode == 0, explain(result)
    expected = {
        "m2": "cell 2 of the notebook was interrupted after 5 s, as a kernel interrupt would",
        "m3": "Cell In[7] (cell 3 of the notebook) was left out: running it, its process was killed (SIGKILL",
        "m4": "cell 4 of the notebook was left out: it went on running 7 s, past the interrupt at 5 s",
    }
    for m, phrase in expected.items():
        messages = result.messages(m)
        assert messages and all(phrase in msg for msg in messages), explain(result)
        assert not any("most likely for using more memory" in msg for msg in messages), explain(result)
    assert result.seconds < BAD_CELL_SECONDS, f"{result.seconds:.0f} s"


def test_slow_cells_in_every_worker_end_within_the_submission_limit(tmp_path):
    """Four cells of 4 s each (under the per-cell budget, so never left out) run again in every fresh worker:
    18 s a worker, each test's deadline moved on by as much. The whole grading still ends within
    --submission-timeout plus 10 s, the checks past it saying the time is up, not that the student's code hung."""
    slow = "import time\ntime.sleep(4)\n"
    cells = [*map(reference, STUDENT_MODULES[:5]), slow, slow, slow, slow]
    # `grade check`'s own --submission-timeout, through click on the session's warm Grader (helpers.check_here);
    # the seconds are the command's, from its start to its report
    notebook, out = write(tmp_path / "submission.ipynb", cells), tmp_path / "report.json"
    started = time.monotonic()
    proc = check_here(
        str(notebook), *CORE_ARGS, "-m", "scaling", "--submission-timeout", "10", "-o", str(out), "--format", "json"
    )
    seconds = time.monotonic() - started
    result = Graded(proc.returncode, seconds, proc.stderr, json.loads(out.read_text()) if out.exists() else {})
    assert result.returncode == 0, explain(result)
    assert result.seconds < 10 + 10, f"{result.seconds:.0f} s for a 10 s limit\n{explain(result)}"
    messages = [m for milestone in (*CORE, "scaling") for m in result.messages(milestone)]
    assert any("time limit" in m for m in messages), explain(result)


def test_a_notebook_that_cannot_be_run_is_counted_so_in_a_batch(tmp_path):
    """eve's notebook kills its process in more cells than are left out (3): her every check fails on the import,
    and `grade batch` and `grade report` say she could not be run, not that no submission had an error; alice's
    notebook, with one such cell, keeps full marks."""
    kill = "import os\nos.kill(os.getpid(), 9)\n"
    for student, kills in (("alice", 1), ("eve", 4)):
        (tmp_path / "class" / student).mkdir(parents=True)
        write(tmp_path / "class" / student / "work.ipynb", [reference("m1_attention"), *[kill] * kills])
    db = tmp_path / "grades.sqlite"
    proc = batch_here(str(tmp_path / "class"), "-m", "m1", "--workers", "1", "--db", str(db))  # in this process
    counted = "2 submissions: 2 graded (1 of them could not be run at all, every check failing on the import"
    assert proc.returncode == 0 and counted in proc.stderr, proc.stderr
    assert "lowest: eve 0.0% (0/27), alice 100.0% (27/27)" in proc.stderr, proc.stderr
    proc = cli("report", str(db))
    assert "of their files: eve), 0 with errors" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["notebook_cells.json", "notebook_stepwise.py"])
def test_a_folder_cannot_make_itself_a_notebook(tmp_path, name):
    """The files that make the grading side run cells one by one (each under its own budget, its label quoted in
    every check's message) are the grader's: a folder handed in with one is refused, naming it, before any
    grading (with a 1 MB label in notebook_cells.json, every check of every milestone quoted it)."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "m1_attention.py").write_text(reference("m1_attention"))
    (folder / "notebook_code.py").write_text("def _run_cell(index, seconds):\n    pass\n")
    (folder / name).write_text(json.dumps([["cell_001", "x" * (1 << 20)]]) if name.endswith(".json") else "")
    proc = check_here(str(folder), "-m", "m1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"{name}: the grader keeps these names for notebooks" in proc.stderr, proc.stderr[-2000:]
