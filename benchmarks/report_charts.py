"""Regenerate the charts of `grade report --png` shown in the docs (docs/charts/), from the test corpus.

    python benchmarks/report_charts.py [--out docs/charts] [--keep CLASS_DIR] [--workers 2]

A small class: the reference, the untouched stubs (exercises/), and a dozen buggy
variants from tests/corpus, each a "student"; graded on m1-m4 with `grade batch`,
then charted with `grade report --png`. Takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# Realistic single bugs across the four core milestones, several sharing a likely cause.
BUGS = (
    "m1-mask-triu",
    "m1-no-scaling",
    "m1-scale-by-d",
    "m1-softmax-over-queries",
    "m1-mask-after-softmax",
    "m2-post-norm",
    "m2-relu",
    "m2-no-final-layernorm",
    "m3-targets-not-shifted",
    "m3-loss-sum",
    "m4-argmax-first-position",
    "m4-no-cropping",
)
# Student-like names, so that the charts read as a class's.
NAMES = ("ada", "ben", "chloe", "dev", "emma", "femi", "gus", "hana", "ivan", "jo", "kai", "lena", "milo", "nora")


def build(folder: Path) -> list[str]:
    """The class's submission folders under ``folder``: the names, in order."""
    from corpus import BUGGY
    from helpers import EXERCISES, SOLUTIONS

    by_name = {v.name: v for v in BUGGY}
    shutil.copytree(SOLUTIONS, folder / NAMES[0], ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXERCISES, folder / NAMES[1], ignore=shutil.ignore_patterns("__pycache__"))
    for name, bug in zip(NAMES[2:], BUGS):
        by_name[bug].build(folder / name)
    return list(NAMES[: 2 + len(BUGS)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "charts")
    parser.add_argument("--keep", type=Path, help="Build the class here and keep it (default: a temp folder).")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "class"
        if not folder.exists():
            build(folder)
        grade = [sys.executable, "-m", "grader"]
        subprocess.run(
            [
                *grade,
                "batch",
                str(folder),
                "--workers",
                str(args.workers),
                "-m",
                "m1",
                "-m",
                "m2",
                "-m",
                "m3",
                "-m",
                "m4",
            ],
            cwd=ROOT,
            check=True,
        )
        subprocess.run([*grade, "report", str(folder / "grades.sqlite"), "--png", str(args.out)], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
