"""How long a cold `grade check solutions` takes next to `python -c "import torch"`, then `grade watch`.

Cold: a new process each time, as a student's `grade` is. The commands run interleaved in one run (several
rounds, the median kept) so machine noise hits all alike: `-m m1`; the core milestones; every milestone (two
grading processes side by side where there are two cores), the same with `-j 1` (one process), and with an
empty disk cache (grader/cache.py: every reference answer computed, as on the very first run). Then
`grade watch` on a copy of the reference: the time from saving m1_attention.py to the regrade's verdict,
next to the cold `-m m1`. Two floors run with them: `import torch` followed by one Python meta kernel, or by
one optimiser step, the least a process pays that checks what m1's device checks and the training checks do.
It prints the CPU capability and the load with the figures. From the repository root:

    python benchmarks/grade_speed.py [--rounds 5] [--saves 5]
"""

from __future__ import annotations

import argparse
import os
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
EMPTY_CACHE = "empty cache"  # a fresh GPTKIT_CACHE folder for each run: the reference's answers all computed
# The least any process pays that imports torch and then runs one of PyTorch's Python meta kernels (m1's device
# checks build the mask on the 'meta' device) or one optimiser step (the training checks): either loads
# torch._dynamo and SymPy (torch._check imports symbolic_shapes). A grade of those milestones cannot beat it.
META_KERNEL = "import torch; torch.ones(2, 2, device='meta').tril()"
OPTIMISER_STEP = "import torch; p = torch.ones(1, requires_grad=True); p.sum().backward(); torch.optim.SGD([p]).step()"
COMMANDS = {
    "import torch": [sys.executable, "-c", "import torch"],
    "floor: torch + meta kernel": [sys.executable, "-c", META_KERNEL],
    "floor: torch + optimiser step": [sys.executable, "-c", OPTIMISER_STEP],
    "grade: m1": GRADE + ["-m", "m1"],
    "grade: m1-m4 + lesson": GRADE + CORE,
    "grade: every milestone": GRADE,
    "grade: every, -j 1": GRADE + ["-j", "1"],
    f"grade: every, {EMPTY_CACHE}": GRADE,
}
TARGETS = {"grade: m1": 1.5, "grade: every milestone": 2.0}  # at most this many times `import torch`
FLOORS = {"grade: m1": "floor: torch + meta kernel", "grade: every milestone": "floor: torch + optimiser step"}


def wall(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    return time.perf_counter() - started


def timed(name: str, scratch: Path, run: int) -> float:
    """One cold run of ``name``: a new process; for the empty-cache variant, a new cache folder too."""
    env = None
    if name.endswith(EMPTY_CACHE):
        env = {**os.environ, "GPTKIT_CACHE": str(scratch / f"cache{run}")}
    return wall(COMMANDS[name], env)


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
    import torch

    print(
        f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{len(os.sched_getaffinity(0))} cores; load average {os.getloadavg()[0]:.1f} at start",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="grade-speed-") as tmp:
        for name in COMMANDS:  # warm the file cache and the grader's disk cache once, untimed
            timed(name, Path(tmp), -1)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for run in range(args.rounds):
            for name in COMMANDS:  # interleaved: machine noise hits every command alike
                times[name].append(timed(name, Path(tmp), run))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:<30} median {medians[name]:6.2f} s   (runs: {', '.join(f'{x:.2f}' for x in t)})")

    def ratio(name: str) -> float:
        return medians[name] / medians["import torch"]

    for name in COMMANDS:
        if name.startswith(("grade", "floor")):
            target = ""
            if name in TARGETS:
                floor = FLOORS[name]
                target = f"   (target: at most {TARGETS[name]:.1f}x; {floor}: {ratio(floor):.2f}x)"
            print(f"ratio, {name:<28} {ratio(name):6.2f}x{target}")
    saves = watch_save_to_verdict(args.saves)
    median = statistics.median(saves)
    print(f"{'watch: m1, save→verdict':<30} median {median:6.2f} s   (saves: {', '.join(f'{x:.2f}' for x in saves)})")
    cold = medians["grade: m1"]
    print(f"ratio, watch to cold m1         {median / cold:6.2f}x   (targets: 1.0 s and 0.3x; cold m1 {cold:.2f} s)")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
