"""How long `grade check solutions` takes (the core milestones, then all) next to `python -c "import torch"`.

Both are timed side by side in one run (interleaved, several rounds, the median
kept) so machine noise hits both alike. Then, in the same run, `grade watch` on a
copy of the reference: the time from saving m1_attention.py to the regrade's
verdict, next to a cold `grade check -m m1`. Run from the repository root:

    python benchmarks/grade_speed.py [--rounds 5] [--saves 5]
"""

from __future__ import annotations

import argparse
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.watch import VERDICT_LINE

ROOT = Path(__file__).resolve().parents[1]
GRADE = [sys.executable, "-m", "grader", "check", str(ROOT / "solutions"), "--format", "json"]
CORE = ["-m", "m1", "-m", "m2", "-m", "m3", "-m", "m4", "-m", "lesson"]
COMMANDS = {
    "import torch": [sys.executable, "-c", "import torch"],
    "grade: m1 (cold)": GRADE + ["-m", "m1"],
    "grade: m1-m4 + lesson": GRADE + CORE,
    "grade: every milestone": GRADE,
}


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - started


def watch_save_to_verdict(saves: int) -> list[float]:
    """`grade watch -m m1` on a copy of the reference: seconds from each save of m1_attention.py to its verdict."""
    with tempfile.TemporaryDirectory(prefix="grade-speed-") as tmp:
        folder = Path(tmp) / "solutions"
        shutil.copytree(ROOT / "solutions", folder)
        target = folder / "m1_attention.py"
        text = target.read_text()
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader", "watch", str(folder), "-m", "m1"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        verdicts: queue.Queue[float] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(VERDICT_LINE):
                    verdicts.put(time.perf_counter())

        threading.Thread(target=read, daemon=True).start()
        try:
            verdicts.get(timeout=300)  # the first, full grading
            times = []
            for i in range(saves):
                time.sleep(1.0)  # idle, as between a student's saves
                saved = time.perf_counter()
                target.write_text(text + f"# save {i}\n")
                times.append(verdicts.get(timeout=120) - saved)
            return times
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per command (default 5)")
    parser.add_argument("--saves", type=int, default=5, help="timed saves under `grade watch` (default 5)")
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
            target = "   (the core's target: at most 2.0x)" if name == "grade: m1-m4 + lesson" else ""
            print(f"ratio, {name:<22} {ratio:6.2f}x{target}")
    saves = watch_save_to_verdict(args.saves)
    median = statistics.median(saves)
    print(f"{'watch: m1, save→verdict':<24} median {median:6.2f} s   (saves: {', '.join(f'{x:.2f}' for x in saves)})")
    cold = medians["grade: m1 (cold)"]
    print(f"ratio, watch to cold m1   {median / cold:6.2f}x   (cold `grade check -m m1`: {cold:.2f} s)")


if __name__ == "__main__":
    main()
