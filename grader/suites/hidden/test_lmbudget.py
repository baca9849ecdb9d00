"""lmbudget: the student's ``train_within_budget`` runs in a fresh worker of its own on the training split, under the
budget; the grader then evaluates the model it returned on splits A and B, which stay in this process.

* CPU: the sandbox's measure of the worker's whole process tree (``WorkerConnection.cpu``: children, killed
  and orphaned ones included), never a figure the worker gives. The budget covers everything from the
  worker's start to train's return (importing lmbudget.py included); the evaluation has an allowance of its
  own (``eval_cpu_seconds``), counted from then until the worker is reaped.
* Wall-clock: ``task.train_wall_seconds``, ``wall_factor`` times the CPU budget (at least ``budget_wall_seconds``),
  and the evaluation's ``wall_factor`` times its allowance: a busy machine gives an honest run a share of a core,
  so only a run that sleeps or waits meets them; a run that spins is ended once the sandbox counts
  it over the budget and the margin (``_CpuWatch``). Threads (one, the fork server's) and torch's seed
  (``task.seed``, set just before train is called) are fixed: identical code takes identical steps.
* The evaluation (``grader/lmbudget/evaluate.py``): A's and B's windows and causality probes shuffled into the
  same calls; a model that reads later inputs is "not causal".
* Verdicts: a run with no score (time limit exceeded, memory limit exceeded, runtime error, no model, not
  causal) is a counted 0, like a wrong answer in any milestone: it costs a contest run. Whatever goes wrong
  while the model sees held-out text is told in fixed words: no exception message, place, position or
  measure from the evaluation reaches a report.

Both losses are in the report: each check's ``value`` (bits per character) and its message (``LOSS_FORMAT``); A
carries the points, B is worth 0 here and waits for a contest's reveal.
"""

from __future__ import annotations

import functools
import math
import socket
import threading
import time
from dataclasses import dataclass

import pytest
import torch

from grader.errors import Finding
from grader.lmbudget.corpus import corpus_files, load_splits, public_reason
from grader.lmbudget.evaluate import PROBE_TOLERANCE, BadOutput, NotCausal, deal, evaluate, new_seed, plan
from grader.lmbudget.task import LOSS_FORMAT, RunFailed, Task, load_task
from grader.milestones import GRADABLE
from grader.sandbox.client import Remote, StudentError, WorkerConnection, WorkerCrash
from grader.sandbox.common.agreement import ErrorKind, Request
from grader.sandbox.session import ImportFailure, MilestoneView, SharedWorker
from grader.sandbox.visibility import worker_view
from grader.suites import checks

TASK = load_task()
# The evaluation's messages, fixed: a model that has seen held-out text chooses nothing in them.
EVAL_ERROR = "runtime error while evaluating your model"
EVAL_MEMORY = "memory limit exceeded while evaluating your model"
WATCH_SECONDS = 0.5  # how often the training worker's CPU is read while train runs
MAX_SAVED_BYTES = 256 << 20  # a model trained in the budget is far smaller (the reference's: under 1 MB)
# The model is evaluated as copies restored in fresh workers: it must survive torch.save and torch.load.
EVAL_SAVE = (
    "runtime error while copying your model for the evaluation: the model train_within_budget returns must "
    f"survive torch.save and torch.load, and be under {MAX_SAVED_BYTES >> 20} MB once saved (define its classes at "
    "the top level of lmbudget.py; no lambdas, open files or generators in its attributes)"
)
NOT_CAUSAL = (
    "not causal: on the grader's probes (held-out windows whose later inputs it replaced) your model's predictions "
    f"at earlier positions changed (its log-probabilities, by more than {PROBE_TOLERANCE:g} nats; a constant added "
    "to the logits changes none). A model must predict each character from those before it only: is every "
    "attention masked (tril), and does nothing in forward read idx[:, t + 1:] for position t?"
)


@dataclass
class Run:
    task: Task
    stub: str = ""  # the file is missing, or train_within_budget is: a counted 0, as in every milestone
    failure: str = ""  # why there is no score, starting with its verdict ("time limit exceeded: ...")
    limit: str | None = None  # the failure's limit for its verdict ("time", "memory", ""); None: a wrong answer
    cpu: float = 0.0  # CPU seconds from the worker's start to train's return
    losses: dict[str, float] | None = None
    warning: str = ""  # the worker can read the held-out text: said in every message

    def fail(self, message: str, limit: str | None) -> None:
        self.failure, self.limit = message, limit


def _eval_seconds(task: Task) -> float:
    """How long the evaluation may take on the clock (the task file's, ``Task.eval_wall_seconds``)."""
    return task.eval_wall_seconds


def _import(view: MilestoneView, run: Run) -> WorkerConnection | None:
    """A fresh worker with lmbudget.py imported; None (and run's stub or failure set) when it does not import."""
    try:
        return view.worker()
    except ImportFailure as e:
        if "there is no lmbudget.py" in str(e):
            run.stub = str(e)
        elif view.shared.worker is not None and view.shared.worker.hung:
            run.fail(f"time limit exceeded: importing lmbudget.py did not end ({e})", "time")
        else:
            run.fail(f"runtime error: {e}", "")
    except WorkerCrash as e:
        run.fail(f"runtime error: {e}", "")
    return None


def _train(view: MilestoneView, worker: WorkerConnection, task: Task, run: Run, seconds: float) -> Remote | None:
    """Run train in the worker under the budget; None (and run's stub or failure set) when there is no model."""
    splits = load_splits(task.corpus, task.block_chars)
    watch = _CpuWatch(worker, task.budget_cpu_seconds + task.margin_seconds)
    try:
        # Seeded (torch's generator, task.seed) just before the call, with the fork server's one thread: identical
        # code draws identical batches and initial weights on every run, whatever else the machine is doing.
        header = {
            "op": Request.CALL,
            "module": view.module,
            "name": "train_within_budget",
            "keep": True,
            "grad": True,
            "seed": task.seed,
        }
        args = (splits.train, list(splits.vocab), float(task.budget_cpu_seconds))
        with watch:
            model = worker.request(header, args, {"context": task.context}, timeout=seconds)
    except StudentError as e:
        if e.type == ErrorKind.NOT_IMPLEMENTED:
            run.stub = str(e)
        elif e.type == ErrorKind.MISSING_NAME:
            run.stub = f"lmbudget.py defines no train_within_budget: {e.message}"
        else:
            run.fail(f"runtime error: {e}", "memory" if e.type == ErrorKind.MEMORY_ERROR else "")
        return None
    except WorkerCrash as e:
        if watch.over:
            _over_budget(task, worker, run)
            return None
        if worker.hung:
            run.fail(
                f"time limit exceeded: train_within_budget returned no model within {seconds:.0f} s of wall-clock time "
                f"(the wall-clock limit: {task.wall_factor:g} times the CPU budget of {task.budget_cpu_seconds:g} s, "
                f"at least {task.budget_wall_seconds:g} s, + a margin of {task.margin_seconds:g} s: room for a busy "
                "machine, not for a run that sleeps or waits)",
                "time",
            )
        else:
            run.fail(f"runtime error: {e}", e.limit)
        return None
    run.cpu = worker.cpu  # the sandbox's count, from the worker's start: import, train, every child
    if watch.over or run.cpu > task.budget_cpu_seconds + task.margin_seconds:
        _over_budget(task, worker, run)
        return None
    if not isinstance(model, Remote):
        run.fail(f"no model: train_within_budget returned {checks.describe(model)}", None)
        return None
    try:
        model.describe()  # a module has parameters and buffers to list
        return model.call("eval", keep=True)
    except StudentError:
        run.fail(f"no model: train_within_budget returned a {model.short_type}, not a torch.nn.Module", None)
        return None


def _over_budget(task: Task, worker: WorkerConnection, run: Run) -> None:
    run.cpu = worker.cpu
    run.fail(
        f"time limit exceeded: importing lmbudget.py and train_within_budget used {run.cpu:.1f} CPU seconds "
        f"(the worker's whole process tree, as the sandbox counts it), over the budget of "
        f"{task.budget_cpu_seconds:g} (+ a margin of {task.margin_seconds:g})",
        "time",
    )


class _CpuWatch:
    """While train runs, the sandbox's count of the worker's CPU (its whole process tree, measured by the fork
    server) every ``WATCH_SECONDS``: past ``limit``, the worker's socket is shut, so the run ends there ("time
    limit exceeded") and not at the wall-clock limit, which is a multiple of the budget. The worker
    says nothing here; the count is the fork server's."""

    def __init__(self, worker: WorkerConnection, limit: float):
        self.worker, self.limit, self.over = worker, limit, False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lmbudget-cpu-watch", daemon=True)

    def __enter__(self) -> _CpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()  # before anything else speaks to the fork server: the watch is its only other user

    def _watch(self) -> None:
        while not self._done.wait(WATCH_SECONDS):
            try:
                over = self.worker.server.cpu_of(self.worker.pid) > self.limit
            except Exception:  # noqa: BLE001 - the worker or the server is gone: the request says why
                return
            if over:
                self.over = True
                try:
                    self.worker.sock.shutdown(socket.SHUT_RDWR)  # the request in progress ends: EOF
                except OSError:
                    pass
                return


class _OverAllowance(Finding):
    """The evaluation spent its CPU allowance (checked between calls): the run fails on time."""


def _copies(view: MilestoneView, model: Remote, task: Task) -> list[Remote]:
    """The trained model, saved in its worker, restored in ``eval_copies`` fresh workers of its own: nothing one
    copy remembers of the rows it saw reaches another (a probe and its window are never in the same one)."""
    saved = model.save()
    view.shared.close()  # the trained worker, and anything it left running, ends here: its CPU count is final
    if not (isinstance(saved, torch.Tensor) and saved.dtype == torch.uint8 and saved.dim() == 1):
        raise StudentError("TypeError", "the worker sent back no saved model", [])  # the worker's doing
    if saved.numel() > MAX_SAVED_BYTES:
        raise StudentError("ValueError", f"the model is over {MAX_SAVED_BYTES >> 20} MB once saved", [])
    copies = []
    for _ in range(task.eval_copies):
        worker = view.shared.server.spawn(view.shared.submission)
        worker.deadline = view.deadline
        copies.append(worker.restore(saved).call("eval", keep=True))
    return copies


def _evaluate(view: MilestoneView, worker: WorkerConnection, model: Remote, task: Task, run: Run) -> None:
    """Score the model on A and B with the probes among them; run's losses, or its failure in fixed words."""
    splits = load_splits(task.corpus, task.block_chars)
    seed = new_seed()
    rows = plan(splits, task.eval_windows, task.probe_windows, task.context, seed)
    trained = worker.cpu
    copies: list[Remote] = []
    over = (
        f"time limit exceeded: evaluating your model took more than the evaluation's allowance of "
        f"{task.eval_cpu_seconds:g} CPU seconds (or {_eval_seconds(task):g} s of wall-clock time); work done "
        "in forward, or by a process your code started, counts there"
    )

    def spent() -> float:  # saving the model, and every copy's worker from its start: import, restore, forward
        return worker.cpu - trained + sum(copy.worker.cpu for copy in copies)

    def allowance() -> None:  # between calls: stop as soon as the allowance is spent
        if spent() > task.eval_cpu_seconds:
            raise _OverAllowance

    view.start_test(_eval_seconds(task))
    try:
        copies = _copies(view, model, task)
        forwards = [functools.partial(copy.__call__, grad=False) for copy in copies]
        hands = deal(rows, len(copies), seed)
        losses = evaluate(forwards, rows, len(splits.vocab), hands, allowance)
    except (BadOutput, NotCausal, _OverAllowance, WorkerCrash, StudentError) as e:
        return run.fail(*_eval_failure(e, over, copied=bool(copies)))
    finally:
        view.shared.close()  # reaped: its CPU count is final, children included
        for copy in copies:
            copy.worker.close()
    if spent() > task.eval_cpu_seconds:
        return run.fail(over, "time")
    run.losses = losses


def _eval_failure(e: Exception, over: str, copied: bool) -> tuple[str, str | None]:
    """The evaluation's failure ``e`` (one of those ``_evaluate`` catches) as run's (message, limit), in fixed words:
    ``over`` for its time, nothing the model chose (``copied``: the model's copies were restored before it)."""
    if isinstance(e, BadOutput):
        return f"no model: {e}", None
    if isinstance(e, NotCausal):
        return NOT_CAUSAL, None
    if isinstance(e, _OverAllowance):
        return over, "time"
    if isinstance(e, WorkerCrash):
        if e.limit == "time":
            return over, "time"
        return EVAL_MEMORY if e.limit == "memory" else EVAL_ERROR, e.limit
    if isinstance(e, StudentError) and e.type == ErrorKind.MEMORY_ERROR:
        return EVAL_MEMORY, ""
    return EVAL_SAVE if not copied else EVAL_ERROR, ""


@pytest.fixture(scope="module")
def run(grading_context) -> Run:
    """One training run under the budget in a worker of its own, then the evaluation of its model."""
    task, context = TASK, grading_context
    result = Run(task)
    if task.budget_cpu_seconds + task.margin_seconds + task.eval_cpu_seconds > context.limits.cpu_seconds:
        raise ValueError(f"the budget and the evaluation pass the worker's CPU limit of {context.limits.cpu_seconds} s")
    why = worker_view(context.server.protections).readable(corpus_files(task.corpus))
    public = public_reason(task.corpus)
    if why:
        result.warning = (
            f"warning: a worker can read this task's held-out text ({why}): the score proves nothing; "
            "use a corpus the sandbox hides (docs/exercises.md)"
        )
    elif public:  # the default corpus: fine for practice, and a contest refuses it
        result.warning = (
            f"warning: students have this task's held-out text ({public}): a model that carries it scores full "
            'marks, so the score proves nothing; for one that does, set corpus = "file:PATH" in the task file, '
            "a text of your own that students have not seen (docs/exercises.md)"
        )
    wall_limit = task.train_wall_seconds  # a multiple of the CPU budget: only a run that waits or sleeps meets it
    left = context.ends - time.monotonic()
    if left < wall_limit + _eval_seconds(task):
        checks.not_observed(
            f"not run: the submission's time limit leaves {max(0.0, left):.0f} s, less than the budget's "
            f"{wall_limit:g} s and the evaluation's {_eval_seconds(task):g} s"
        )
    milestone = GRADABLE["lmbudget"]
    # A worker of its own, started here: the budget counts from its first instant (the import included).
    shared = SharedWorker(context.server, context.submission, milestone.trusted, context.notebook)
    view = MilestoneView(shared, milestone.modules)
    started = time.monotonic()
    view.start_test(wall_limit)
    try:
        worker = _import(view, result)
        if worker is not None:
            model = _train(view, worker, task, result, wall_limit - (time.monotonic() - started))
            if model is not None:
                _evaluate(view, worker, model, task, result)
    finally:
        view.shared.close()
    return result


def _scored(run: Run, split: str, request: pytest.FixtureRequest) -> None:
    warning = f"; {run.warning}" if run.warning else ""
    if run.stub:
        checks.fail(run.stub + warning)
    if run.failure or run.losses is None:
        message = (run.failure or "no model") + warning
        if run.limit is None:
            checks.fail(message)  # a wrong answer: no model, not causal
        raise RunFailed(message, limit=run.limit)  # its verdict: time or memory limit exceeded, runtime error
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
        f"import and train used {run.cpu:.1f} of {task.budget_cpu_seconds:g} CPU seconds" + warning
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
