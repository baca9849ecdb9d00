"""How long `grade similarity` takes on a generated class, and whether it finds the one copy in it.

    python benchmarks/similarity_speed.py [--n 25 100] [--seed 0]

Each class is written by tests/similarity_class.py: every student fills the stubs with code of their own (about
50 KB each, 14 files) and answers the quiz, mostly right; s17 hands in a disguised copy of s03's files. Timed, in
this process: reading the class (normalising and fingerprinting every file: nearly all of it), scoring every pair
on every file and ranking them. Each line gives the seconds (wall and CPU) and the pairs flagged.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from grader import similarity as sim

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[25, 100], help="class sizes (default: 25 100)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from similarity_class import make_class  # type: ignore[import-not-found]  # the tests' generator

    for n in args.n:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "class"
            make_class(root, n, seed=args.seed, copy=(3, 17) if n >= 17 else None)
            size = sum(f.stat().st_size for f in root.rglob("*.py"))
            wall, cpu = time.perf_counter(), time.process_time()
            klass = sim.read_class(root)
            rows = sim.pair_scores(sim.file_pairs(klass), sim.THRESHOLD)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        flagged = ", ".join(f"{r.a}/{r.b} {r.score:.0%}" for r in rows[:3]) or "none"
        print(f"{n:4d} students, {size / 1e6:.1f} MB: {wall:5.1f} s ({cpu:.1f} s CPU); flagged: {flagged}")


if __name__ == "__main__":
    main()
