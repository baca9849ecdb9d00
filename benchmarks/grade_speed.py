"""How long `grade check solutions` takes (the core milestones, then all) next to `python -c "import torch"`.

Both are timed side by side in one run (interleaved, several rounds, the median
kept) so machine noise hits both alike. Run from the repository root:

    python benchmarks/grade_speed.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRADE = [sys.executable, "-m", "grader", "check", str(ROOT / "solutions"), "--format", "json"]
CORE = ["-m", "m1", "-m", "m2", "-m", "m3", "-m", "m4", "-m", "lesson"]
COMMANDS = {
    "import torch": [sys.executable, "-c", "import torch"],
    "grade: m1-m4 + lesson": GRADE + CORE,
    "grade: every milestone": GRADE,
}


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per command (default 5)")
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache once, untimed
        wall(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(wall(command))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:<24} median {medians[name]:6.2f} s   (runs: {', '.join(f'{x:.2f}' for x in t)})")
    for name in COMMANDS:
        if name.startswith("grade"):
            ratio = medians[name] / medians["import torch"]
            print(f"ratio, {name:<22} {ratio:6.2f}x   (the core's target: at most 2.0x for m1-m4 + lesson)")


if __name__ == "__main__":
    main()
