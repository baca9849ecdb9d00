"""The lmbudget task's recipes side by side, under the same budget on this machine: the shipped baseline (a
counted bigram), the kit's reference recipe and nanoGPT's CPU recipe (4 layers, 128 wide, block 64, batch 12),
each graded through the real grader, with their losses on splits A and B and their points.

    python benchmarks/lmbudget.py [--budget SECONDS] [--runs N]
    python benchmarks/lmbudget.py --spread N [--burners K] [--budget SECONDS]

Without ``--spread`` it is `python -m grader.calibrate` without `--write`: nothing is recorded (that
command with `--write` re-calibrates the task file on the grading machine).

``--spread N`` grades the reference recipe N times through the real grader while K processes (2 by default)
burn a core each (``python -c "while True: pass"``, started and killed here): each run's loss on A and B, its
points, the CPU seconds the sandbox counted, its wall time and the load average; then the minimum, maximum and
spread of the losses and points, and the precision the spread supports (identical code must score the
same whatever the load). The CPU's capability, the core count and the load average head the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.calibrate import losses, main  # noqa: E402
from grader.lmbudget.task import ENV_VAR, LOSS_FORMAT, TASK_FILE, load_task, write_task  # noqa: E402
from grader.reference import SOLUTIONS  # noqa: E402

BURN = "while True: pass"
USED = re.compile(r"import and train used ([0-9.]+) of")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def decimals(spread: float, shown: int) -> int:
    """The decimals a figure with this spread supports: ``shown`` (the display's) if the spread rounds to 0 there,
    else the last decimal the spread leaves alone (0.012 -> 1)."""
    if spread < 0.5 * 10**-shown:
        return shown
    return max(0, min(shown, -math.ceil(math.log10(spread))))


def spread(runs: int, burners: int, budget: float | None, task_path: Path | None) -> int:
    import torch

    from grader.grading import Grader, Request
    from grader.sandbox.client import Limits

    task = load_task(task_path or os.environ.get(ENV_VAR) or TASK_FILE)
    if budget is not None:
        task = dataclasses.replace(task, budget_cpu_seconds=budget, budget_wall_seconds=2 * budget)
    limits = Limits(cpu_seconds=max(Limits().cpu_seconds, int(task.budget_cpu_seconds + task.margin_seconds) + 60))
    print(
        f"lmbudget spread: the reference recipe {runs} times under load ({burners} busy-loop processes); corpus "
        f"{task.corpus}, budget {task.budget_cpu_seconds:g} CPU s (wall limit {task.train_wall_seconds:g} s), seed "
        f"{task.seed}, {task.threads} thread; CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{os.cpu_count()} cores, load average {load()} before; Python {platform.python_version()}, "
        f"torch {torch.__version__}",
        flush=True,
    )
    rows: list[tuple[float, float, float]] = []
    failed: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the busy loops end with this process (finally)
    procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(burners)]
    saved = os.environ.get(ENV_VAR)
    try:
        with tempfile.TemporaryDirectory(prefix="lmbudget-spread-") as tmp:
            run_task = Path(tmp) / "task.toml"
            write_task(task, run_task)
            os.environ[ENV_VAR] = str(run_task)
            folder = Path(tmp) / "reference"
            folder.mkdir()
            (folder / "lmbudget.py").write_text((SOLUTIONS / "lmbudget.py").read_text())
            print(f"  {'run':>4} {'loss A':>8} {'loss B':>8} {'points':>7} {'CPU s':>6} {'wall s':>7}  load average")
            for i in range(runs):
                started = time.monotonic()
                with Grader(limits, many=False) as grader:  # a server of its own each run, as a lone grading has
                    report = grader.grade(Request(folder, ("lmbudget",))).to_json()
                wall = time.monotonic() - started
                a, b, why = losses(report)
                (milestone,) = [m for m in report["milestones"] if m["id"] == "lmbudget"]
                used = USED.search(milestone["checks"][0].get("message", ""))
                cpu = f"{float(used.group(1)):6.1f}" if used else f"{'-':>6}"
                if a is None or b is None:
                    failed.append(why)
                    print(f"  {i + 1:>4} {why[:70]:<34} {cpu} {wall:7.1f}  {load()}", flush=True)
                    continue
                rows.append((a, b, task.score(a)))
                print(f"  {i + 1:>4} {a:8.4f} {b:8.4f} {task.score(a):7.2f} {cpu} {wall:7.1f}  {load()}", flush=True)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        if saved is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = saved
    print(f"\n{len(rows)} of {runs} runs finished; {len(failed)} failed" + (f": {failed}" if failed else ""))
    if not rows:
        return 1
    shown = int(re.search(r"loss:\.(\d)f", LOSS_FORMAT).group(1))  # type: ignore[union-attr]
    for name, k, unit, digits in (
        ("loss on A", 0, " bits/char", shown),
        ("loss on B", 1, " bits/char", shown),
        ("points on A", 2, "", 2),
    ):
        low, high = min(r[k] for r in rows), max(r[k] for r in rows)
        print(
            f"  {name:<12} min {low:.{digits}f}, max {high:.{digits}f}, spread {high - low:.{digits}f}{unit}: "
            f"supports {decimals(high - low, digits)} decimals (displayed: {digits})"
        )
    agree = len({f"{r[0]:.{shown}f}" for r in rows}) == 1 and not failed
    print(
        f"verdict: {'the runs agree' if agree else 'the runs differ'} on A to the displayed precision "
        f"({shown} decimals); load average {load()} after"
    )
    return 0 if agree else 2


if __name__ == "__main__":
    if "--write" in sys.argv:
        raise SystemExit("the benchmark records nothing: run python -m grader.calibrate --write for that")
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--spread", type=int, default=None)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--budget", type=float, default=None)
    parser.add_argument("--task", type=Path, default=None)
    known, rest = parser.parse_known_args()
    if known.spread is None:
        raise SystemExit(main(sys.argv[1:]))
    if rest:
        raise SystemExit(f"--spread takes --burners, --budget and --task only, not {' '.join(rest)}")
    raise SystemExit(spread(known.spread, known.burners, known.budget, known.task))
