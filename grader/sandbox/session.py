"""One milestone's view of a submission (``MilestoneView``): a worker with that milestone's file imported.

Milestones that see the submission the same way (the same earlier files replaced by
the grader's trusted ones, usually none) share one worker: a fresh sandbox per
milestone costs more CPU than most milestones' checks. A crash or a time-out costs
the current test only: the next use starts a fresh worker, and a hang counts against
the milestone whose test hung. An import that fails is remembered, so every test of
the milestone reports the same clear message without retrying.

A notebook's cells are run by this side one request each (``NotebookRun``), as a kernel runs them: each
within its own time budget, so that a cell that hangs or ends its process costs that cell's names only.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import nofollow
from grader.errors import Finding
from grader.submission import CELL_SECONDS, CELLS_FILE, STEPWISE

from .client import (
    ForkServer,
    Remote,
    ReplyBudget,
    ReplyTooLarge,
    StudentError,
    WorkerConnection,
    WorkerCrash,
    grading_ended,
)
from .common.agreement import ErrorKind, Request
from .secrecy import TRUSTED, trusted_source, worker_text

__all__ = [
    "TRUSTED",
    "ImportFailure",
    "MilestoneView",
    "MissingName",
    "NotebookRun",
    "SharedWorker",
    "trusted_source",
]

MAX_HANGS = 2  # after this many time-outs, a milestone's remaining checks fail at once
# A shared worker that has used this share of its CPU limit is replaced before the next milestone,
# so each milestone starts with (nearly) the whole limit, as with a worker of its own.
RETIRE_AT_CPU_SHARE = 0.1
# A notebook cell that hangs past its interrupt (it caught it) is ended with its worker this much later, or a
# tenth of the time all the cells get together (``--timeout`` sets it), where that is less.
CELL_GRACE_SECONDS = 2.0
MIN_CELL_SECONDS = 1.0  # a cell that would get less (the run's time nearly spent) is not run
# Cells left out (each hung past its interrupt or ended its process) before the notebook counts as unrunnable:
# each one costs a fresh worker and a run of the cells before it.
MAX_LEFT_OUT = 3
MAX_CELLS_FILE_BYTES = 1 << 20
MAX_LABEL = 200  # characters of a cell's file name or label: "Cell In[12] (cell 40 of the notebook)"
TIME_UP = "this submission used up its time limit (--submission-timeout) while its notebook's cells ran"
# How ImportFailure's messages begin (``MilestoneView._explain_import``): a submission whose every check says
# one of these could not be run at all (grader/batch/summary.py counts it so).
IMPORT_FAILED = ("there is no ", "the submission's files could not be imported", "importing the submission's files")


@dataclass
class NotebookRun:
    """What running a notebook's cells has taught this submission's grading, shared by its workers: the cells
    left out, each with why (by index from 0), and the failure that ended every attempt, if one did.

    A cell is left out on what this side saw (the request that ran it got no answer, or its worker died), never
    on the worker's word; a cell interrupted by the runner is not left out: it runs again in each fresh worker,
    so every milestone sees the names it defined before its interrupt, as in the kernel."""

    cell_seconds: float = CELL_SECONDS  # each cell's budget, after which the runner interrupts it
    left_out: dict[int, str] = field(default_factory=dict)
    failure: WorkerCrash | None = None
    cells: list[tuple[str, str]] | None = None  # (file, label) of each cell; None: not a notebook
    ends: float = float("inf")  # the submission's time limit (time.monotonic): no run of the cells goes past it

    def read_cells(self, submission: Path) -> list[tuple[str, str]]:
        """The cells' files and labels that grader/submission.py wrote (bounded: a folder may carry its own)."""
        if self.cells is None:
            self.cells = []
            path = submission / CELLS_FILE
            if (submission / "notebook_code.py").is_file() and path.is_file():
                try:  # a folder handed in may carry a file of this name, or a link by it: read neither past 1 MB
                    raw = json.loads(nofollow.read_bytes(path, MAX_CELLS_FILE_BYTES))
                    # written by grader/submission.py: short names and labels (a check's message quotes labels)
                    self.cells = [(str(f)[:MAX_LABEL], str(label)[:MAX_LABEL]) for f, label in raw]
                except (OSError, ValueError, TypeError, UnicodeDecodeError):
                    self.cells = []
        return self.cells


class SharedWorker:
    """The worker of the milestones that trust the same earlier files, started on first use."""

    def __init__(self, server: ForkServer, submission: Path, trusted: tuple[str, ...], notebook: NotebookRun):
        """``notebook``: the grading's one NotebookRun (its cells left out, the submission's time limit), shared
        by all its workers."""
        self.server, self.submission, self.trusted = server, submission, trusted
        self.notebook = notebook
        self.worker: WorkerConnection | None = None
        self.imported: set[MilestoneView] = set()  # the views whose modules this worker has imported
        self.user: MilestoneView | None = None  # the view whose test used it last: a hang counts against it

    def for_view(self, view: MilestoneView) -> tuple[WorkerConnection | None, bool]:
        """The live worker (a fresh one if it died or has used up much of its CPU), and whether
        ``view``'s modules still need importing in it."""
        worker = self.worker
        if worker is not None and not worker.alive:
            if worker.hung and self.user is not None:
                self.user.hangs += 1
            worker = None
        elif (
            worker is not None
            and self.user is not view
            and worker.cpu > RETIRE_AT_CPU_SHARE * self.server.limits.cpu_seconds
        ):
            worker.close()
            worker = None
        if worker is None:
            self.imported.clear()
        self.worker, self.user = worker, view
        return worker, view not in self.imported

    def start(self, view: MilestoneView) -> WorkerConnection:
        """Start a worker if there is none (the trusted files go with its first import, their code alone:
        see secrecy.py; a notebook's cells then run, see ``run_cells``), then import ``view``'s modules in it."""
        trusted = {}
        if self.worker is None:
            trusted = {
                name: worker_text(source) for name in self.trusted if (source := trusted_source(name)) is not None
            }
            if self.notebook.read_cells(self.submission):
                self.run_cells(view, trusted)
                trusted = {}  # the trusted code went with the notebook's first import
            else:
                self.worker = self.server.spawn(self.submission)
        assert self.worker is not None
        self.worker.deadline = view.deadline
        self.worker.request({"op": Request.IMPORT, "modules": list(view.modules), "trusted": trusted})
        self.imported.add(view)
        return self.worker

    def run_cells(self, view: MilestoneView, trusted: dict[str, str]) -> None:
        """Run the notebook's cells in a fresh worker, one request each, as a kernel runs them. Each cell has
        ``cell_seconds`` before the runner interrupts it (its names are lost, the next cell runs); one that
        goes on past that, or ends its process, is left out and the cells run again in a fresh worker without
        it, up to ``MAX_LEFT_OUT`` cells. All the cells of one run together get the limits' call_seconds, as a
        folder's import does. The time spent here is not the current test's: its deadline moves on by as much.
        """
        run, started = self.notebook, time.monotonic()
        try:
            while run.failure is None:
                if time.monotonic() >= run.ends:
                    raise WorkerCrash(f"not run: {TIME_UP}", limit="time")
                self.worker = self.server.spawn(self.submission)
                try:
                    if self._run_cells_once(trusted):
                        return
                except BaseException:  # no worker whose cells did not all run is kept
                    self.close()
                    raise
                self.worker = None
            raise WorkerCrash(str(run.failure), limit=run.failure.limit)
        finally:
            if view.deadline is not None:  # moved on, but never past the submission's own limit
                view.deadline = max(view.deadline, min(view.deadline + time.monotonic() - started, run.ends))

    def _run_cells_once(self, trusted: dict[str, str]) -> bool:
        """One run of the cells in ``self.worker``: False if a cell was left out (the worker is gone: run again).
        Cells that find the run's time spent are not run, as if the student had stopped there."""
        run, worker = self.notebook, self.worker
        assert worker is not None and run.cells is not None
        together = self.server.limits.call_seconds
        # Each cell's budget and grace, shrunk with a short --timeout so that a few cells still fit in it.
        budget, grace = min(run.cell_seconds, together / 4), min(CELL_GRACE_SECONDS, together / 10)
        worker.deadline = min(time.monotonic() + together, run.ends)
        worker.request({"op": Request.IMPORT, "modules": [STEPWISE, "notebook_code"], "trusted": trusted})
        for index in range(len(run.cells)):
            if index in run.left_out:
                worker.request(_call("_leave_out"), ([[index, run.left_out[index]]],))
                continue
            seconds = min(budget, worker.deadline - time.monotonic() - grace)
            if seconds < min(MIN_CELL_SECONDS, budget / 4):
                spent = (
                    f"not run: {TIME_UP}"
                    if time.monotonic() + together > run.ends and worker.deadline == run.ends
                    else f"not run: the cells before it used up the {together:g} s that all the cells get together"
                )
                rest = [[i, run.left_out.get(i, spent)] for i in range(index, len(run.cells))]
                worker.deadline = time.monotonic() + CELL_GRACE_SECONDS
                worker.request(_call("_leave_out"), (rest,))
                return True
            try:
                worker.request(_call("_run_cell"), (index, seconds), timeout=seconds + grace)
            except WorkerCrash as e:
                replies: ReplyBudget | None = getattr(worker, "replies", None)
                if replies is not None and replies.ended is not None:
                    raise  # a reply refused ended the submission's grading (client.ReplyBudget): no cell's doing
                run.left_out[index] = (
                    f"it went on running {seconds + grace:.3g} s, past the interrupt at {seconds:.3g} s "
                    "(does it catch KeyboardInterrupt?)"
                    if e.limit == "time"
                    else f"running it, {_as_cell(str(e))}"
                )
                if len(run.left_out) > MAX_LEFT_OUT:
                    cells = "; ".join(f"{run.cells[i][1]}: {why}" for i, why in sorted(run.left_out.items()))
                    run.failure = WorkerCrash(f"the notebook's cells could not be run ({cells})", limit=e.limit)
                return False
        return True

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


class MilestoneView:
    """One milestone's view of the submission, what its suite's fixture (``m1``, ``m2``, ...) gives a check:
    calls into the milestone's files, run in the worker it shares with milestones that trust the same files."""

    def __init__(self, shared: SharedWorker, modules: tuple[str, ...]):
        self.shared, self.modules = shared, modules
        self.module = modules[0]
        self._import_failure: ImportFailure | None = None
        self.deadline: float | None = None
        self.hangs = 0

    def start_test(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        if self.shared.worker is not None:
            self.shared.worker.deadline = self.deadline

    def worker(self) -> WorkerConnection:
        # Before anything else, so that no worker is started: a refused reply ended the grading (client.ReplyBudget;
        # a stand-in server of the tests may have no budget).
        replies: ReplyBudget | None = getattr(self.shared.server, "replies", None)
        if replies is not None and (why := replies.ended) is not None:
            raise ReplyTooLarge(grading_ended(why))
        if self._import_failure is not None:  # a fresh exception each time: no growing traceback
            raise ImportFailure(str(self._import_failure), ended_by=self._import_failure.ended_by)
        worker, needs_import = self.shared.for_view(self)
        if self.hangs >= MAX_HANGS:
            raise WorkerCrash(f"not run: your code already hung {self.hangs} times in this milestone", limit="time")
        if worker is not None:
            worker.deadline = self.deadline
        if needs_import:
            try:
                worker = self.shared.start(self)
            except (StudentError, WorkerCrash) as e:
                self._import_failure = ImportFailure(self._explain_import(e), ended_by=ImportFailure.cause(e))
                raise self._import_failure from None
        assert worker is not None  # a fresh worker always needs the import
        return worker

    def _explain_import(self, e: Exception) -> str:
        if isinstance(e, StudentError) and e.type == ErrorKind.MODULE_NOT_FOUND:
            missing = next((m for m in self.modules if f"'{m}'" in e.message), None)
            if missing:
                file = f"{missing}.py"  # a link is left out of the worker's copy (copy_submission): say so
                linked = f": {file} {nofollow.LINK}" if nofollow.is_link(self.shared.submission / file) else ""
                return f"there is no {file} in the submission{linked}"
        if isinstance(e, StudentError) and e.type == ErrorKind.IMPORT_ERROR:
            found = re.search(r"cannot import name '(\w+)' from '(\w+)'", e.message)
            if found and found[2] in self.shared.trusted:
                return (
                    f"the submission's files could not be imported: {e}. While this milestone is graded, "
                    f"{found[2]} is the grader's own (so that a bug in yours costs points in its own milestone "
                    f"only), and it defines the contract's names alone: define {found[1]} in this milestone's file"
                )
        if isinstance(e, StudentError):
            return f"the submission's files could not be imported: {e}"
        return f"importing the submission's files failed: {e}"

    def call(
        self,
        name: str,
        *args: Any,
        seed: int | None = None,
        grad: bool = True,
        keep: bool = False,
        module: str | None = None,
        meta: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Call ``name`` from a milestone module with plain data; returns plain data or a Remote.

        With ``meta``, tensors created during the call live on PyTorch's data-less meta device.
        """
        header = {
            "op": Request.CALL,
            "module": module or self.module,
            "name": name,
            "seed": seed,
            "grad": grad,
            "keep": keep,
            "meta": meta,
        }
        return self._request(header, args, kwargs)

    def _request(self, header: dict, args: tuple, kwargs: dict) -> Any:
        """Send a request to the worker; a name the submission does not define is a MissingName."""
        try:
            return self.worker().request(header, args, kwargs)
        except StudentError as e:
            if e.type == ErrorKind.MISSING_NAME:
                raise MissingName(e.message) from None
            raise

    def new(
        self, cls: str, *args: Any, seed: int | None = None, module: str | None = None, meta: bool = False
    ) -> Remote:
        """Construct ``cls(*args)`` in the worker (after ``manual_seed(seed)`` if given)."""
        return self.call(cls, *args, seed=seed, keep=True, module=module, meta=meta)

    def count_ops(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the milestone's function ``name`` (without gradients), counting the tensor operations it
        dispatches: the worker's ``{"ops": int, "names": [str, ...]}``, unchecked (see grader/suites/rules.py)."""
        header = {"op": Request.COUNT_OPS, "module": self.module, "name": name}
        return self._request(header, args, kwargs)

    def function(self, name: str) -> Remote:
        """A handle on the milestone's function ``name`` (for probes such as ``input_grad``)."""
        try:
            handle = self.worker().request({"op": Request.VALUE, "module": self.module, "name": name, "keep": True})
        except StudentError as e:
            if e.type == ErrorKind.MISSING_NAME:
                raise MissingName(e.message) from None
            raise
        if not isinstance(handle, Remote):
            raise TypeError(f"the worker's handle on {name} is a {type(handle).__name__}")
        return handle

    def value(self, name: str) -> Any:
        """A module-level value of the milestone's file, as plain data."""
        try:
            return self.worker().request({"op": Request.VALUE, "module": self.module, "name": name})
        except StudentError as e:
            if e.type == ErrorKind.MISSING_NAME:
                raise MissingName(e.message) from None
            raise

    def standin(self, vocab_size: int, d: int, max_T: int, seed: int, tied: bool = False) -> Remote:
        """The grader's trusted stand-in language model, built inside the worker."""
        return self.worker().request(
            {
                "op": Request.STANDIN,
                "vocab_size": vocab_size,
                "d": d,
                "max_T": max_T,
                "seed": seed,
                "tied": tied,
                "keep": True,
            }
        )


def _call(name: str) -> dict:
    """A call of the notebook runner's ``name`` (grader/submission.py's RUNNER)."""
    return {"op": Request.CALL, "module": "notebook_code", "name": name, "seed": None, "grad": True, "keep": False}


def _as_cell(crash: str) -> str:
    """A worker's end (client.py's words) as a cell's: "the worker was killed" is "the cell's process was"."""
    return crash.replace("the worker process", "its process").replace("the worker", "its process")


class ImportFailure(Finding):
    """The milestone's file is missing or cannot be imported. ``ended_by``: what stopped the import where it
    was no error of the import itself: a limit ("time", "memory"), or "crash" (the worker died: os._exit, a
    signal; or the code raised SystemExit or KeyboardInterrupt); "" for an error (a syntax error, a missing
    module or name, an exception at module level)."""

    def __init__(self, message: str, ended_by: str = ""):
        super().__init__(message)
        self.ended_by = ended_by

    @staticmethod
    def cause(e: Exception) -> str:
        if isinstance(e, WorkerCrash):
            return e.limit or "crash"
        return "crash" if isinstance(e, StudentError) and e.type in ErrorKind.ENDS_THE_GRADER else ""


class MissingName(Finding):
    """The milestone's file lacks a name the contract requires."""
