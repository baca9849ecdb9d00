"""The lmbudget task's recipes side by side, under the same budget on this machine: the shipped baseline (a
counted bigram), the kit's reference recipe and nanoGPT's CPU recipe (4 layers, 128 wide, block 64, batch 12),
each graded through the real grader, with their losses on splits A and B and their points.

    python benchmarks/lmbudget.py [--budget SECONDS] [--runs N]

It is `python -m grader.calibrate` without `--write`: nothing is recorded (that command with
`--write` re-calibrates the task file on the grading machine).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.calibrate import main  # noqa: E402

if __name__ == "__main__":
    if "--write" in sys.argv:
        raise SystemExit("the benchmark records nothing: run python -m grader.calibrate --write for that")
    raise SystemExit(main(sys.argv[1:]))
