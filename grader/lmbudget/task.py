"""The lmbudget task file (``task.toml``), its score, the verdict of a run that failed, and whether a class may
be graded on its held-out text (``held_out_refusal``: the one rule a contest, ``grade batch`` and the bundles
apply).

``GPTKIT_LMBUDGET_TASK`` names another task file (the tests' tiny budget, ``calibrate --budget``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from grader.lmbudget.corpus import FILE_PREFIX, corpus_files, file_path, public_reason
from grader.milestones import METRIC_TASKS
from grader.sandbox.client import WorkerCrash
from grader.sandbox.visibility import probe_protections, worker_view

TASK_FILE = Path(__file__).with_name("task.toml")
ENV_VAR = "GPTKIT_LMBUDGET_TASK"
# How a loss appears in a check's message (docs/exercises.md): machine-readable, one per split.
LOSS_FORMAT = "loss on split {split}: {loss:.4f} bits/char"


class RunFailed(WorkerCrash):
    """A run with no score: "time limit exceeded" (``limit="time"``), "memory limit exceeded" ("memory") or
    "runtime error" (""). A WorkerCrash, so the runner records it as that verdict, a counted 0: a failed run
    costs a run, in a contest as everywhere (it is no longer set aside, which made failed runs free)."""


@dataclass(frozen=True)
class Task:
    corpus: str = "grader"  # grader/lmbudget/corpus.py: "grader", "file:PATH", "shakespeare" or "python"
    block_chars: int = 2048
    budget_cpu_seconds: float = 30.0
    budget_wall_seconds: float = 60.0  # the wall-clock limit's floor (``train_wall_seconds``)
    # The wall-clock limits are this many times the CPU budgets (at least the floor): an honest run on a busy
    # machine gets a share of a core, not a core, so its wall time is a multiple of its CPU time.
    wall_factor: float = 6.0
    margin_seconds: float = 5.0  # on top of both budgets: starting, returning, the clock's granularity
    threads: int = 1
    seed: int = 0  # torch's generator is seeded with it in the worker just before train_within_budget is called
    context: int = 64
    eval_windows: int = 256  # per split
    probe_windows: int = 512  # causality probes, one per scored window of A and B (grader/lmbudget/evaluate.py)
    eval_cpu_seconds: float = 5.0  # the evaluation's own CPU allowance, after training (its forward calls)
    eval_copies: int = 4  # fresh workers, each with its own copy of the trained model, that share the rows
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

    @property
    def train_wall_seconds(self) -> float:
        """Import and train's wall-clock limit: ``wall_factor`` times the CPU budget, at least
        ``budget_wall_seconds``, and the margin. A sleeping submission ends there; one that got little CPU
        because others had it does not."""
        return max(self.budget_wall_seconds, self.wall_factor * self.budget_cpu_seconds) + self.margin_seconds

    @property
    def eval_wall_seconds(self) -> float:
        """The evaluation's wall-clock limit: ``wall_factor`` times its CPU allowance, and the margin."""
        return self.wall_factor * self.eval_cpu_seconds + self.margin_seconds

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
    corpus = str(merged.get("corpus", Task.corpus))
    if corpus.startswith(FILE_PREFIX):  # a relative file: corpus is the task file's neighbour
        merged["corpus"] = FILE_PREFIX + str(file_path(corpus, path.resolve().parent))
    task = Task(**merged)
    if task.threads != 1:
        raise ValueError(f"{path}: threads must be 1 (the worker runs with one thread)")
    if task.wall_factor < 2:
        raise ValueError(f"{path}: wall_factor must be at least 2 (a busy machine stretches an honest run's wall time)")
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


def held_out_refusal(tasks: Iterable[str]) -> str | None:
    """Why the metric tasks among ``tasks`` (ids) cannot be graded for a class here: their held-out text is one
    students have (``public_reason``: the default corpus, a file in the kit), so a model that carries it scores
    full marks with a lookup, or one a worker can read (decided from a fork server started on this machine:
    grader/sandbox/visibility.py); None when neither is, or there is no metric task. A contest refuses then;
    ``grade batch`` refuses unless told to grade anyway; the Gradescope zip and the nbgrader course refuse."""
    metric = [t for t in tasks if t in METRIC_TASKS]
    if not metric:
        return None
    task = load_task()  # the task file grading reads: GPTKIT_LMBUDGET_TASK, or the shipped one
    fix = (
        f'Write corpus = "file:PATH" into the task file ({os.environ.get(ENV_VAR) or TASK_FILE}; {ENV_VAR} names '
        "another), PATH a UTF-8 text of your own that students have not seen, outside the kit's folder and the "
        "folders the sandbox shows (docs/exercises.md)"
    )
    public = public_reason(task.corpus)
    if public:
        return (
            f"{', '.join(metric)}: students have the held-out text ({public}), so a submission that carries it "
            f"scores full marks with a lookup. {fix}"
        )
    why = worker_view(probe_protections()).readable(corpus_files(task.corpus))
    if why is None:
        return None
    return (
        f"{', '.join(metric)}: a worker can read the held-out text of its corpus ({task.corpus!r}; {why}), so a "
        f"submission could score by reading it. {fix}"
    )
