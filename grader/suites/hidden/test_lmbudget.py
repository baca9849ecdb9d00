"""lmbudget: the student's ``train_within_budget`` runs in its own worker on the training split, under the budget;
the grader then evaluates the model it returned on splits A and B, which stay in this process.

Verdicts without a score (time limit exceeded, runtime error, no model) raise ``NoValidRun``, a
``NotObserved``: the runner sets the checks aside (``counted=False``), so, as at IOAI, such a run
does not count against a contest's cap. A missing file or an untouched stub fails as in every
milestone (counted, 0 points). Both losses are in the report: each check's ``value`` (bits per
character) and its message (``LOSS_FORMAT``); A carries the points, B is worth 0 here and waits
for a contest's reveal.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pytest

from grader.lmbudget.corpus import load_splits, windows
from grader.lmbudget.task import LOSS_FORMAT, NoValidRun, Task, bits_per_char, load_task
from grader.sandbox.client import Remote, StudentError, WorkerCrash
from grader.sandbox.common.agreement import ErrorKind, Request
from grader.sandbox.session import ImportFailure, MilestoneView, MissingName
from grader.suites import checks

TASK = load_task()
EVAL_SECONDS = 60.0  # the evaluation's own limit, after training


@dataclass
class Run:
    task: Task
    verdict: str = ""  # why there is no score ("time limit exceeded: ...", ...); "" for a valid run
    stub: str = ""  # the file or name is missing, or train_within_budget raised NotImplementedError: a counted 0
    cpu: float = 0.0  # CPU seconds train_within_budget used
    wall: float = 0.0
    losses: dict[str, float] | None = None


def _train(view: MilestoneView, task: Task, text: str, vocab: list[str], run: Run, ends: float) -> Remote | None:
    """Run train in the worker under the budget; None (and run's verdict set) when there is no model."""
    try:
        worker = view.worker()  # imports lmbudget.py (its own limit: the call's)
    except (ImportFailure, MissingName) as e:
        if "there is no lmbudget.py" in str(e):  # nothing submitted: 0 points, counted
            run.stub = str(e)
        else:  # the file does not import (a syntax error, an exception): a run that failed
            run.verdict = f"runtime error: {e}"
        return None
    except WorkerCrash as e:
        run.verdict = f"runtime error: {e}"
        return None
    cpu_before, started = worker.cpu, time.monotonic()
    wall_limit = task.budget_wall_seconds + task.margin_seconds
    if ends - started < wall_limit + 10:
        run.verdict = (
            f"not run: the submission's time limit leaves {max(0.0, ends - started):.0f} s, less than the budget's "
            f"{wall_limit:g} s and the evaluation"
        )
        return None
    view.start_test(wall_limit)
    try:
        header = {"op": Request.CALL, "module": view.module, "name": "train_within_budget", "keep": True, "grad": True}
        model = worker.request(
            header, (text, vocab, float(task.budget_cpu_seconds)), {"context": task.context}, timeout=wall_limit
        )
    except StudentError as e:
        if e.type == ErrorKind.NOT_IMPLEMENTED:
            run.stub = str(e)
        elif e.type == ErrorKind.MISSING_NAME:
            run.stub = f"lmbudget.py defines no train_within_budget: {e.message}"
        else:
            run.verdict = f"runtime error: {e}"
        return None
    except WorkerCrash as e:
        run.wall = time.monotonic() - started
        if worker.hung:
            run.verdict = (
                f"time limit exceeded: train_within_budget returned no model within {wall_limit:g} s of wall-clock "
                "time "
                f"(budget {task.budget_wall_seconds:g} s + a margin of {task.margin_seconds:g} s)"
            )
        else:
            run.verdict = f"runtime error: {e}"
        return None
    run.wall, run.cpu = time.monotonic() - started, worker.cpu - cpu_before
    if run.cpu > task.budget_cpu_seconds + task.margin_seconds:
        run.verdict = (
            f"time limit exceeded: train_within_budget used {run.cpu:.1f} CPU seconds, over the budget of "
            f"{task.budget_cpu_seconds:g} (+ a margin of {task.margin_seconds:g}); measure time.process_time()"
        )
        return None
    if not isinstance(model, Remote):
        run.verdict = f"no model: train_within_budget returned {checks.describe(model)}"
        return None
    try:
        model.describe()  # a module has parameters and buffers to list
        view.start_test(EVAL_SECONDS)
        return model.call("eval", keep=True)
    except StudentError:
        run.verdict = f"no model: train_within_budget returned a {model.short_type}, not a torch.nn.Module"
        return None


@pytest.fixture(scope="module")
def run(grading_context) -> Run:
    """One training run under the budget, then the evaluation of its model on A and B."""
    task, context = TASK, grading_context
    splits = load_splits(task.corpus, task.block_chars)
    result = Run(task)
    if task.budget_cpu_seconds + task.margin_seconds > context.limits.cpu_seconds:
        raise ValueError(f"the budget is over the worker's CPU limit of {context.limits.cpu_seconds} s")
    # The milestone's view: the worker it shares with the milestones that trust no file (a shared worker that
    # has used a tenth of its CPU limit is replaced first, session.py); the CPU budget counts from here.
    view = context.view("lmbudget")
    view.start_test(max(0.1, min(context.limits.call_seconds, context.ends - time.monotonic())))
    try:
        model = _train(view, task, splits.train, list(splits.vocab), result, context.ends)
        if model is not None:
            result.losses = {}
            for name, text in (("A", splits.a), ("B", splits.b)):
                ids = windows(splits.encode(text), task.eval_windows, task.context + 1)
                try:
                    result.losses[name] = bits_per_char(lambda x: model(x, grad=False), ids, len(splits.vocab))
                except ValueError as e:
                    result.verdict, result.losses = f"no model: {e}", None
                    break
                except (StudentError, WorkerCrash) as e:
                    what = (
                        "time limit exceeded"
                        if isinstance(e, WorkerCrash) and e.limit == "time"  # the limit it hit, not its wording
                        else "runtime error"
                    )
                    result.verdict, result.losses = f"{what}: evaluating the model on split {name}: {e}", None
                    break
    finally:
        if result.verdict:  # a run that went wrong leaves no worker behind for the next milestone
            view.shared.close()
    return result


def _scored(run: Run, split: str, request: pytest.FixtureRequest) -> None:
    if run.stub:
        checks.fail(run.stub)
    if run.verdict or run.losses is None:
        raise NoValidRun(run.verdict or "no model")
    loss = run.losses[split]
    task = run.task
    fraction = task.fraction(loss)
    note = "" if math.isfinite(loss) else " (not finite)"
    if split == "A":
        worth = (
            f"points {fraction * task.points:.2f} of {task.points:g} between the baseline {task.baseline:.4f} "
            f"and the best {task.best:.4f}"
        )
    else:  # B is worth 0 here (a contest's final ranking): no claim of points, only A's scale for comparison
        worth = f"no points here (on A's scale it would be worth {fraction * task.points:.2f} of {task.points:g})"
    message = (
        LOSS_FORMAT.format(split=split, loss=loss) + f"{note}; {worth}; "
        f"train used {run.cpu:.1f} of {task.budget_cpu_seconds:g} CPU seconds"
    )
    if split == "B" and not task.show_b:  # the final ranking's split: measured, kept in the report, not printed
        message = "loss on split B: measured for the final ranking, not shown here (the task's show_b = false)"
    # Read by the runner's Collector: the share of the check's points won, the measure, the message.
    request.node.user_properties.extend(
        [("fraction", fraction if split == "A" else 1.0), ("value", loss), ("message", message)]
    )


@pytest.mark.points(TASK.points)
def test_loss_on_split_a(run, request):
    """loss on split A: bits per character, points between the baseline and the best"""
    _scored(run, "A", request)


@pytest.mark.points(0)
def test_loss_on_split_b(run, request):
    """loss on split B: bits per character, for the final ranking (no points here)"""
    _scored(run, "B", request)
