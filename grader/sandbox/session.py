"""One milestone's view of a submission: a worker with that milestone's file imported.

A crash or a time-out costs the current test only: the next use starts a fresh
worker. An import that fails is remembered, so every test of the milestone
reports the same clear message without retrying.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from grader.reference import SOLUTIONS

from .client import Remote, StudentError, Worker, WorkerCrash, Zygote

MAX_HANGS = 2  # after this many time-outs, a milestone's remaining checks fail at once


class Session:
    def __init__(self, zygote: Zygote, submission: Path, modules: tuple[str, ...],
                 trusted: tuple[str, ...] = ()):
        self.zygote, self.submission = zygote, submission
        self.modules, self.trusted = modules, trusted
        self.module = modules[0]
        self._worker: Worker | None = None
        self._import_failure: Exception | None = None
        self.deadline: float | None = None
        self.hangs = 0

    def start_test(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        if self._worker is not None:
            self._worker.deadline = self.deadline

    def worker(self) -> Worker:
        if self._import_failure is not None:  # a fresh exception each time: no growing traceback
            raise ImportFailure(*self._import_failure.args)
        if self._worker is not None and not self._worker.alive:
            self.hangs += self._worker.hung
            self._worker = None
        if self.hangs >= MAX_HANGS:
            raise WorkerCrash(f"not run: your code already hung {self.hangs} times in this milestone")
        if self._worker is None:
            self._worker = self.zygote.spawn(self.submission)
            self._worker.deadline = self.deadline
            try:
                trusted = {name: source for name in self.trusted if (source := trusted_source(name)) is not None}
                self._worker.request({"op": "import", "modules": list(self.modules), "trusted": trusted})
            except (StudentError, WorkerCrash) as e:
                self._import_failure = ImportFailure(self._explain_import(e))
                raise self._import_failure from None
        return self._worker

    def _explain_import(self, e: Exception) -> str:
        if isinstance(e, StudentError) and e.type == "ModuleNotFoundError":
            missing = next((m for m in self.modules if f"'{m}'" in e.message), None)
            if missing:
                return f"there is no {missing}.py in the submission"
        if isinstance(e, StudentError):
            return f"the submission's files could not be imported: {e}"
        return f"importing the submission's files failed: {e}"

    def call(self, name: str, *args: Any, seed: int | None = None, grad: bool = True,
             keep: bool = False, module: str | None = None, meta: bool = False, **kwargs: Any) -> Any:
        """Call ``name`` from a milestone module with plain data; returns plain data or a Remote.

        With ``meta``, tensors created during the call live on PyTorch's data-less meta device.
        """
        header = {"op": "call", "module": module or self.module, "name": name, "seed": seed,
                  "grad": grad, "keep": keep, "meta": meta}
        try:
            return self.worker().request(header, args, kwargs)
        except StudentError as e:
            if e.type == "MissingName":
                raise MissingName(e.message) from None
            raise

    def new(self, cls: str, *args: Any, seed: int | None = None, module: str | None = None,
            meta: bool = False) -> Remote:
        """Construct ``cls(*args)`` in the worker (after ``manual_seed(seed)`` if given)."""
        return self.call(cls, *args, seed=seed, keep=True, module=module, meta=meta)

    def value(self, name: str) -> Any:
        """A module-level value of the milestone's file, as plain data."""
        try:
            return self.worker().request({"op": "value", "module": self.module, "name": name})
        except StudentError as e:
            if e.type == "MissingName":
                raise MissingName(e.message) from None
            raise

    def standin(self, vocab_size: int, d: int, max_T: int, seed: int, tied: bool = False) -> Remote:
        """The grader's trusted stand-in language model, built inside the worker."""
        return self.worker().request({"op": "standin", "vocab_size": vocab_size, "d": d,
                                      "max_T": max_T, "seed": seed, "tied": tied, "keep": True})

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()


def trusted_source(module: str) -> str | None:
    """The grader's own version of an earlier milestone, sent only to the worker that needs it.

    A dedicated ``trusted_*.py`` where one exists (it differs from the reference, so the worker
    never holds the reference's attention); otherwise the reference file itself. None in a
    student release, which has neither: the student's own earlier files are used.
    """
    for path in (Path(__file__).parent / f"trusted_{module}.py", SOLUTIONS / f"{module}.py"):
        if path.is_file():
            return path.read_text()
    return None


class ImportFailure(Exception):
    """The milestone's file is missing or cannot be imported."""


class MissingName(Exception):
    """The milestone's file lacks a name the contract requires."""
