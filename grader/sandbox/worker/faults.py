"""Whose fault an exception in a worker is, and how it goes back on the wire.

An exception is the student's unless the grader's own code raised it: probes wrap their own logic in
``blame("grader")`` and every use of the student's objects in ``blame("student")``, and ``grader_fault``
reads those marks (a per-request registry, ``BLAME``, that the dispatch loop clears). The errors the
grader's checks find in what the student handed it (``StudentFault``, ``MissingName``) are the student's.

All of this runs next to the student's code, so it is a claim (docs/sandbox.md, "The threat model"): a
submission can rewrite it, and the grading process re-checks anything marked as the grader's fault.
"""

from __future__ import annotations

import contextlib
import os
import traceback
import types

from ..common.agreement import ErrorKind


class StudentFault(TypeError):
    """What the student's code handed a probe is unusable: their doing, found by the grader's checks."""


class MissingName(LookupError):
    """The contract's name is not defined in the student's file."""


def missing(module: types.ModuleType, name: str) -> MissingName:
    """A contract name is absent; for a notebook, say which cells raised (they may have held it)."""
    failed = module.__dict__.get("__notebook__")
    if isinstance(failed, list):
        raised = f"; what went wrong while the notebook ran: {'; '.join(map(str, failed[:3]))}" if failed else ""
        return MissingName(f"the notebook defines no {name}{raised}")
    return MissingName(f"{module.__name__}.py defines no {name}")


def _student_file(filename: str) -> bool:
    return os.path.isfile(filename) and os.path.dirname(os.path.abspath(filename)) == os.getcwd()


BLAME: dict[int, tuple[BaseException, str]] = {}  # this request's exceptions, by whose code raised them


@contextlib.contextmanager
def blame(whose: str):
    """Mark who is at fault for an exception raised inside: the innermost block decides. Probes wrap their
    own logic in ``blame("grader")`` and every use of the student's objects in ``blame("student")``;
    anything unmarked is the student's, as are the checks a probe makes of what it was handed."""
    try:
        yield
    except BaseException as e:
        BLAME.setdefault(id(e), (e, whose))
        raise


def grader_fault(e: BaseException) -> bool:
    """Whether ``e`` came from the grader's own code: marked so, not a StudentFault, no frame the student's."""
    marked = BLAME.get(id(e))
    if marked is None or marked[0] is not e or marked[1] != "grader" or isinstance(e, StudentFault):
        return False
    return not any(_student_file(f.filename) for f in traceback.extract_tb(e.__traceback__))


def student_traceback(e: BaseException) -> str:
    """``e``'s traceback as Python prints it, with the frames of the student's files only (a test run's output:
    the worker's own frames are no help to them)."""
    shown = traceback.TracebackException.from_exception(e, capture_locals=False)
    shown.stack = traceback.StackSummary.from_list([f for f in shown.stack if _student_file(f.filename)])
    return "".join(shown.format(chain=False))


def grader_trace(e: BaseException) -> str:
    """Where the grader's code failed: file, line and function of each frame (no source text)."""
    frames = traceback.extract_tb(e.__traceback__)
    return "\n".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames[-12:])


def describe(e: BaseException) -> dict:
    """A student's exception as plain data: type, message, and where in their files."""
    try:
        message = str(e)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "<the exception's message could not be printed>"
    where = []
    for frame in traceback.extract_tb(e.__traceback__):
        if _student_file(frame.filename):
            where.append(f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}")
    if isinstance(e, SyntaxError) and e.filename:
        where.append(f"{os.path.basename(e.filename)}:{e.lineno}")
    if isinstance(e, StudentFault):
        kind = ErrorKind.TYPE_ERROR
    elif isinstance(e, MissingName):
        kind = ErrorKind.MISSING_NAME
    else:
        kind = type(e).__name__
    return {"type": kind, "message": message, "where": where[-3:]}
