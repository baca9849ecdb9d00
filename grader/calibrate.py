"""Recompute the lmbudget task's baseline and best: ``python -m grader.calibrate``.

Grades, through the real grader (sandbox, budget, splits), the shipped baseline (``grader/lmbudget/baseline.py``), the
reference recipe (``solutions/lmbudget.py``, ``--runs`` times: ``best`` is the worst of its runs plus
``--slack``, an allowance for run-to-run noise, so the reference itself scores full points on a busy
machine) and nanoGPT's CPU recipe (4 layers, 128 wide, block 64, batch 12:
the reference's code with ``RECIPE = "nanogpt-cpu"``), all under the task's budget; prints each one's loss
on A and B and its points under the new calibration, with the CPU's capability and the load average.
``--write`` records the new baseline and best in the task file; ``--budget`` changes the CPU budget
(the wall-clock floor becomes twice it; the limit is ``wall_factor`` times it) for this run, in a copy of the task
file. The reference takes a step count fixed by the budget, seeded, on one thread: its runs agree to the last
digit shown on a quiet or a busy machine (``python benchmarks/lmbudget.py --spread 10`` measures it).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from grader.lmbudget.task import ENV_VAR, TASK_FILE, Task, load_task, write_task
from grader.reference import SOLUTIONS

BASELINE = Path(__file__).resolve().parent / "lmbudget" / "baseline.py"
Losses = tuple[float | None, float | None, str]  # (loss on A, loss on B, why there is none)


def submissions(root: Path, runs: int) -> dict[str, Path]:
    """The recipes as submission folders (one ``lmbudget.py`` each), by name."""
    reference = (SOLUTIONS / "lmbudget.py").read_text()
    sources = {"baseline": BASELINE.read_text()}
    sources.update({f"reference #{i + 1}": reference for i in range(runs)})
    sources["nanogpt-cpu"] = reference + '\nRECIPE = "nanogpt-cpu"\n'
    folders = {}
    for i, (name, text) in enumerate(sources.items()):
        folder = root / f"sub{i}"
        folder.mkdir()
        (folder / "lmbudget.py").write_text(text)
        folders[name] = folder
    return folders


def losses(report_json: dict) -> Losses:
    """(loss on A, loss on B, why there is none) from a report's lmbudget checks."""
    (milestone,) = [m for m in report_json["milestones"] if m["id"] == "lmbudget"]
    a, b = milestone["checks"]
    return a.get("value"), b.get("value"), "" if a["passed"] else a["message"]


def main(argv: list[str] | None = None) -> int:
    """The command: grade the recipes, print their losses and points under the new calibration; with ``--write``,
    record it. 0, or 1 where the calibration failed or was not written."""
    args = _arguments(argv)

    # Imported once the arguments are checked: torch, and the runner (pytest), take seconds to load.
    import torch

    path = args.task or Path(os.environ.get(ENV_VAR) or TASK_FILE)
    task = load_task(path)
    if args.budget is not None:
        task = dataclasses.replace(task, budget_cpu_seconds=args.budget, budget_wall_seconds=2 * args.budget)
    capability = torch.backends.cpu.get_cpu_capability()
    print(
        f"lmbudget calibration: corpus {task.corpus}, budget {task.budget_cpu_seconds:g} CPU s "
        f"({task.train_wall_seconds:g} s wall limit), seed {task.seed}, {task.threads} thread; "
        f"CPU capability {capability}, "
        f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"Python {platform.python_version()}, torch {torch.__version__}",
        flush=True,
    )
    results = grade_recipes(task, args.runs)
    new = calibrated(task, results, args.slack, args.budget, capability)
    if new is None:
        print("calibration failed: the baseline or the reference has no loss", file=sys.stderr)
        return 1
    for line in table_lines(new, results):
        print(line)
    return _record(new, path) if args.write else 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked: --write with --budget only for a task file other than the shipped one."""
    parser = argparse.ArgumentParser(prog="python -m grader.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--task", type=Path, default=None, help=f"the task file (default: {ENV_VAR} or {TASK_FILE})")
    parser.add_argument("--budget", type=float, default=None, help="CPU seconds (default: the task file's)")
    parser.add_argument("--runs", type=int, default=2, help="runs of the reference recipe (default 2)")
    parser.add_argument(
        "--slack", type=float, default=0.05, help="bits/char added to the reference's worst loss (default 0.05)"
    )
    parser.add_argument("--write", action="store_true", help="record the new baseline and best in the task file")
    args = parser.parse_args(argv)
    if args.write and args.budget is not None and (args.task or os.environ.get(ENV_VAR)) is None:
        parser.error(f"--write with --budget would change the shipped task's budget: edit {TASK_FILE} instead")
    return args


def grade_recipes(task: Task, runs: int) -> dict[str, Losses]:
    """Each recipe's losses (see :func:`submissions`), graded through the real grader under ``task``, written to a
    task file of the run's own (``ENV_VAR`` names it while they are graded, then is as it was); each one printed as
    it is graded."""
    from grader.grading import Grader, Request
    from grader.sandbox.client import Limits

    results: dict[str, Losses] = {}
    limits = Limits(cpu_seconds=max(Limits().cpu_seconds, int(task.budget_cpu_seconds + task.margin_seconds) + 60))
    with tempfile.TemporaryDirectory(prefix="lmbudget-calibrate-") as tmp, Grader(limits) as grader:
        run_task = Path(tmp) / "task.toml"
        write_task(task, run_task)
        saved = os.environ.get(ENV_VAR)
        os.environ[ENV_VAR] = str(run_task)
        try:
            for name, folder in submissions(Path(tmp), runs).items():
                results[name] = losses(grader.grade(Request(folder, ("lmbudget",))).to_json())
                a, b, why = results[name]
                print(f"  {name}: " + (f"A {a:.4f}, B {b:.4f} bits/char" if a is not None else why), flush=True)
        finally:
            if saved is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = saved
    return results


def calibrated(
    task: Task, results: dict[str, Losses], slack: float, budget: float | None, capability: str
) -> Task | None:
    """``task`` with the new baseline and best (the reference's worst loss on A plus ``slack``), and how they were
    measured; None where the baseline or a run of the reference has no loss."""
    baseline = results["baseline"][0]
    reference = [r[0] for n, r in results.items() if n.startswith("reference")]
    if baseline is None or any(r is None for r in reference):
        return None
    best = max(r for r in reference if r is not None) + slack
    return dataclasses.replace(
        task,
        baseline=round(baseline, 4),
        best=round(best, 4),
        cpu_capability=capability,
        python=platform.python_version(),
        date=datetime.date.today().isoformat(),
        command="python -m grader.calibrate --write"
        + (f" --budget {budget:g}" if budget is not None else "")
        + (f" --slack {slack:g}" if slack != 0.05 else ""),
    )


def table_lines(new: Task, results: dict[str, Losses]) -> Iterator[str]:
    """The new calibration, then each recipe's losses and its points under it."""
    yield f"\nbaseline {new.baseline:.4f}, best {new.best:.4f} bits/char (split A); points out of {new.points:g}:"
    yield f"  {'recipe':<14} {'loss A':>8} {'loss B':>8} {'points A':>9} {'points B':>9}"
    for name, (a, b, why) in results.items():
        if a is None or b is None:
            yield f"  {name:<14} {why}"
        else:
            yield f"  {name:<14} {a:8.4f} {b:8.4f} {new.score(a):9.2f} {new.score(b):9.2f}"


def _record(new: Task, path: Path) -> int:
    """``--write``: the new calibration into the task file at ``path`` (the shipped one keeps its comments)."""
    if new.baseline <= new.best:
        print("not written: the reference does not beat the baseline under this budget", file=sys.stderr)
        return 1
    if path == TASK_FILE:
        _update(path, new)
    else:
        write_task(new, path)
    print(f"written to {path}")
    return 0


def _update(path: Path, task: Task) -> None:
    """Replace the ``[calibration]`` table of the (commented) task file, keeping the rest as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "task.toml"
        write_task(task, copy)
        table = copy.read_text().split("[calibration]")[1]
    path.write_text(path.read_text().split("[calibration]")[0] + "[calibration]" + table)


if __name__ == "__main__":
    sys.exit(main())
