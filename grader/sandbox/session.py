"""One milestone's view of a submission (``MilestoneView``): a worker with that milestone's file imported.

Milestones that see the submission the same way (the same earlier files replaced by
the grader's trusted ones, usually none) share one worker: a fresh sandbox per
milestone costs more CPU than most milestones' checks. A crash or a time-out costs
the current test only: the next use starts a fresh worker, and a hang counts against
the milestone whose test hung. An import that fails is remembered, so every test of
the milestone reports the same clear message without retrying.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from grader import nofollow
from grader.errors import Finding

from .client import ForkServer, Remote, StudentError, WorkerConnection, WorkerCrash
from .common.agreement import ErrorKind, Request
from .secrecy import TRUSTED, trusted_source, worker_text

__all__ = ["TRUSTED", "ImportFailure", "MilestoneView", "MissingName", "SharedWorker", "trusted_source"]

MAX_HANGS = 2  # after this many time-outs, a milestone's remaining checks fail at once
# A shared worker that has used this share of its CPU limit is replaced before the next milestone,
# so each milestone starts with (nearly) the whole limit, as with a worker of its own.
RETIRE_AT_CPU_SHARE = 0.1


class SharedWorker:
    """The worker of the milestones that trust the same earlier files, started on first use."""

    def __init__(self, server: ForkServer, submission: Path, trusted: tuple[str, ...]):
        self.server, self.submission, self.trusted = server, submission, trusted
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
        see secrecy.py), then import ``view``'s modules in it."""
        trusted = {}
        if self.worker is None:
            self.worker = self.server.spawn(self.submission)
            trusted = {
                name: worker_text(source) for name in self.trusted if (source := trusted_source(name)) is not None
            }
        self.worker.deadline = view.deadline
        self.worker.request({"op": Request.IMPORT, "modules": list(view.modules), "trusted": trusted})
        self.imported.add(view)
        return self.worker

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
