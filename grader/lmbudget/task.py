"""The lmbudget task file (``task.toml``), its score, and the grading process's evaluation.

``GPTKIT_LMBUDGET_TASK`` names another task file (the tests' tiny budget, ``calibrate --budget``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from grader.results import NotObserved, Verdict

TASK_FILE = Path(__file__).with_name("task.toml")
ENV_VAR = "GPTKIT_LMBUDGET_TASK"
EVAL_BATCH = 32  # windows per forward call in the worker
# How a loss appears in a check's message (docs/exercises.md): machine-readable, one per split.
LOSS_FORMAT = "loss on split {split}: {loss:.4f} bits/char"


class NoValidRun(NotObserved):
    """Time limit exceeded, runtime error or no model: a verdict that, as at IOAI, does not count
    against a contest's cap. A NotObserved, so the runner sets the check aside (``counted=False``)."""

    def __init__(self, message: str):
        super().__init__(message)
        # the message begins with its verdict ("time limit exceeded: ..."); "no model: ..." is a wrong answer
        self.verdict = next((v for v in Verdict if message.startswith(f"{v.value}:")), Verdict.WRONG_ANSWER)


@dataclass(frozen=True)
class Task:
    corpus: str = "python"
    block_chars: int = 2048
    budget_cpu_seconds: float = 30.0
    budget_wall_seconds: float = 60.0
    margin_seconds: float = 5.0  # on top of both budgets: starting, returning, the clock's granularity
    threads: int = 1
    context: int = 64
    eval_windows: int = 256
    points: float = 10.0
    # Whether `grade check` (and Gradescope, nbgrader) print split B's loss. A contest reads it from the report
    # either way (the check's ``value``) and shows it only once the coach reveals it.
    show_b: bool = True
    baseline: float = 0.0  # bits per character on split A, of baseline.py under this budget
    best: float = 0.0  # the same, of the reference recipe (solutions/lmbudget.py)
    # Where the two were measured (informative): torch.backends.cpu.get_cpu_capability(), the date, ...
    cpu_capability: str = ""
    python: str = ""
    date: str = ""
    command: str = ""

    def fraction(self, loss: float) -> float:
        """clip((baseline - loss) / (baseline - best), 0, 1)."""
        if not math.isfinite(loss) or self.baseline <= self.best:
            return 0.0
        return min(1.0, max(0.0, (self.baseline - loss) / (self.baseline - self.best)))

    def score(self, loss: float) -> float:
        return round(self.fraction(loss) * self.points, 4)


def load_task(path: str | Path | None = None) -> Task:
    """The task file: ``[task]`` and ``[calibration]`` tables, merged (unknown keys refused)."""
    path = Path(path or os.environ.get(ENV_VAR) or TASK_FILE)
    try:
        import tomllib
    except ImportError:  # Python 3.10: tomli (a dependency there)
        import tomli as tomllib  # type: ignore[no-redef]
    data = tomllib.loads(path.read_text())
    merged: dict[str, Any] = {**data.get("task", {}), **data.get("calibration", {})}
    known = {f.name for f in fields(Task)}
    unknown = sorted(set(merged) - known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}")
    task = Task(**merged)
    if task.threads != 1:
        raise ValueError(f"{path}: threads must be 1 (the worker runs with one thread)")
    return task


def write_task(task: Task, path: Path) -> None:
    """``task`` as a task file (for calibrate and the tests)."""
    calib = {"baseline", "best", "cpu_capability", "python", "date", "command"}

    def table(name: str, keep: Callable[[str], bool]) -> str:
        rows = [f"{f.name} = {_toml(getattr(task, f.name))}" for f in fields(Task) if keep(f.name)]
        return f"[{name}]\n" + "\n".join(rows) + "\n"

    path.write_text(table("task", lambda n: n not in calib) + "\n" + table("calibration", lambda n: n in calib))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def bits_per_char(forward: Callable[[torch.Tensor], Any], windows: torch.Tensor, vocab_size: int) -> float:
    """Mean cross-entropy, in bits, of predicting each window's tokens 1.. from those before them.

    ``forward`` runs the model (in the worker) on a (b, T) batch and returns what it returned; the
    logits are checked and the loss computed here. ValueError says what was wrong with the output.
    """
    inputs, targets = windows[:, :-1], windows[:, 1:]
    total, count = 0.0, 0
    for start in range(0, len(inputs), EVAL_BATCH):
        x, y = inputs[start : start + EVAL_BATCH], targets[start : start + EVAL_BATCH]
        logits = forward(x)
        want = (*x.shape, vocab_size)
        if not isinstance(logits, torch.Tensor):
            raise ValueError(f"the model returned {type(logits).__name__}, not a logits tensor of shape {want}")
        if tuple(logits.shape) != want:
            raise ValueError(f"the model's logits have shape {tuple(logits.shape)}, expected {want} (B, T, V)")
        if not logits.is_floating_point():
            raise ValueError(f"the model's logits have dtype {logits.dtype}, expected a floating-point one")
        nats = F.cross_entropy(logits.float().reshape(-1, vocab_size), y.reshape(-1), reduction="sum").item()
        total, count = total + nats, count + y.numel()
    loss = total / count / math.log(2)
    return loss if math.isfinite(loss) else math.inf
