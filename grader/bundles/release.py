"""The student release: the stubs, the contract pages, the public checks and a grader that runs them; no reference,
no hidden test.

The grader in the release is this one, minus every file that holds an answer or
a hidden check: the hidden suites and their helpers that recompute known bugs
(which embed correct code), the trusted earlier milestones, and ``solutions/``.
Without the hidden suites the grader runs the public checks, and says so.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
HIDDEN = ("grader/suites/test_*.py", "grader/suites/diagnose.py", "grader/suites/sampling_math.py",
          "grader/sandbox/trusted_*.py")
# The student-facing contract, named one by one so that nothing else put in docs/ ships by accident. The
# README below and these pages link to one another (tests/test_links.py checks every link resolves).
DOCS = ("docs/contract.md", "docs/exercises.md")

STUDENT_README = """\
# TinyGPT exercises

Build a GPT from scratch, one file at a time: causal self-attention
(`m1_attention.py`), the TinyGPT model (`m2_model.py`), training
(`m3_train.py`), greedy generation (`m4_generate.py`), then parameter counts
and Chinchilla, weight tying, a KV cache, sampling, padded batches and a short
quiz. Each file in `exercises/` explains what to write. The names the grader
relies on are fixed in [`docs/contract.md`](docs/contract.md) (the four core
milestones and the `grade` command) and
[`docs/exercises.md`](docs/exercises.md) (the later exercises).

## Set up

```bash
python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e . && grade
```

On an ordinary Linux machine, `pip install torch==2.13.0` downloads the
CUDA build (several GB you do not need here). For the CPU build, run this
instead of it (macOS and Windows wheels are CPU builds already):

```bash
pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
```

## Check your work

```bash
grade                              # grade ./exercises, print a table
grade check exercises -m m1        # one milestone
grade check my_notebook.ipynb      # a notebook works too
```

These are the **public checks only**: the lesson's own numbers and basic
shapes. Your instructor's grader runs many more (hidden) checks on the same
names, so passing here is a good sign, not a guarantee. Each file also runs on
its own (`python m2_model.py`) and prints the lesson's numbers.
"""


def build(out: Path, project: Path = PROJECT) -> list[str]:
    """Write the release to ``out`` (a folder, or a zip if it ends in .zip); returns the files it holds."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "release"
        for top in ("exercises", "grader"):
            shutil.copytree(project / top, stage / top, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        for doc in DOCS:
            (stage / doc).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(project / doc, stage / doc)
        for pattern in HIDDEN:
            for path in stage.glob(pattern):
                path.unlink()
        shutil.copy(project / "pyproject.toml", stage / "pyproject.toml")
        (stage / "README.md").write_text(STUDENT_README)
        names = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file())
        if out.suffix == ".zip":
            _zip(stage, names, out)
        else:
            if out.exists():
                raise FileExistsError(f"{out} already exists: choose a new folder (nothing was overwritten)")
            shutil.copytree(stage, out)
    return names


def _zip(stage: Path, names: list[str], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            zf.write(stage / name, name)
    os.replace(tmp, out)
