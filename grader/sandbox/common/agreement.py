"""What the grading process and the worker must agree on, spelled once: request names, error kinds,
the fields of a reply, and exit codes.

Both sides import it: the grading process as ``grader.sandbox.common.agreement``, the fork server
and its workers by file path (like every file they load, it imports nothing from ``grader``, and
only the standard library). A name used on the wire appears here and nowhere else.
"""

from __future__ import annotations

import os
import signal


class Request:
    """What the grading process asks a worker (``{"op": Request.CALL, ...}``)."""

    IMPORT = "import"  # import the milestone's files (the trusted earlier milestones first)
    CALL = "call"  # call a module's function or class, or a handle (or one of its methods)
    GETATTR = "getattr"  # an attribute of a handle
    VALUE = "value"  # a module-level value of a student's file
    STATE_DICT = "state_dict"
    DESCRIBE = "describe"  # parameter and buffer names and shapes
    LOAD = "load"  # copy a state dict into a module
    INPUT_GRAD = "input_grad"  # (T, T) position-to-position gradient sizes
    GRADS = "grads"  # each parameter's gradient
    COUNT_POSITIONS = "count_positions"  # count the positions fed to a submodule from now on
    STANDIN = "standin"  # build the grader's trusted stand-in model
    COUNT_OPS = "count_ops"  # call a module's function, counting the tensor operations it dispatches (rules.py)
    SAVE = "save"  # a handle's object as torch.save's bytes (a uint8 tensor), for RESTORE in a fresh worker
    RESTORE = "restore"  # torch.load those bytes here: a copy that remembers nothing of another worker's calls
    RUN = "run"  # a contest's test run: the student's own script run as __main__, its output read from its file
    ALL = (
        IMPORT,
        CALL,
        GETATTR,
        VALUE,
        STATE_DICT,
        DESCRIBE,
        LOAD,
        INPUT_GRAD,
        GRADS,
        COUNT_POSITIONS,
        STANDIN,
        COUNT_OPS,
        SAVE,
        RESTORE,
        RUN,
    )


class ServerRequest:
    """What the grading process asks the fork server."""

    SPAWN = "spawn"  # fork a worker (its socket and output file follow as file descriptors)
    REAP = "reap"  # wait for a worker to end, killing it after a grace period
    CPU = "cpu"  # a live worker's CPU seconds so far, its whole process tree, as the kernel counts them


class Reply:
    """The fields of a worker's reply: exactly one of VALUE and ERROR. Like everything a worker sends, a claim:
    its CPU time is never asked of it (the fork server measures it, ``ServerRequest.CPU``)."""

    VALUE = "value"
    ERROR = "error"  # {"type": ErrorKind or the exception's class name, "message", "where", [GRADER_FAULT, TRACE]}
    GRADER_FAULT = "grader"  # in an error: True when the grader's own probe failed, not the student's code
    TRACE = "trace"  # in a grader fault: where the grader's code failed
    UNOBSERVED = "unobserved"  # a probe's whole answer, {UNOBSERVED: why}, when it could not observe anything


class ErrorKind:
    """The ``type`` of an error reply that the grading process treats specially (any other is a class name)."""

    MISSING_NAME = "MissingName"  # the student's file lacks a name the contract requires
    NOT_IMPLEMENTED = "NotImplementedError"  # a stub not filled in yet
    SYSTEM_EXIT = "SystemExit"
    KEYBOARD_INTERRUPT = "KeyboardInterrupt"
    ENDS_THE_GRADER = (SYSTEM_EXIT, KEYBOARD_INTERRUPT)  # a submission trying to end the grader
    MODULE_NOT_FOUND = "ModuleNotFoundError"
    IMPORT_ERROR = "ImportError"
    VALUE_ERROR = "ValueError"
    TYPE_ERROR = "TypeError"  # also what the grader's checks of a student's value report (StudentFault)
    MEMORY_ERROR = "MemoryError"  # the worker's address-space limit, met in the student's code


# How a failure the student caused begins, in every message: ``grade batch`` counts such checks as an
# untouched stub's (grader/batch/summary.py).
NOT_IMPLEMENTED_MESSAGE = "not implemented yet"

# Exit codes: a process killed by a signal passes it up the reaper chain as 128 + the signal's number.
SIGNAL_EXIT_BASE = 128
# A worker's cgroup may hold this much more than its memory limit (RLIMIT_AS caps its own allocations; the cgroup
# the whole tree's, page cache and children included): what one worker may take of the machine, at most.
CGROUP_SLACK_BYTES = 512 << 20
EXIT_NOT_RUN_AS_ROOT = 70  # the worker could not drop root, so it ran nothing
EXIT_NO_PRIVATE_PLACES = 71  # the worker could not get its own /tmp and scratch folder, so it ran nothing


def exit_code_of_signal(sig: int) -> int:
    return SIGNAL_EXIT_BASE + sig


def signal_of_exit_code(code: int) -> int | None:
    """The signal that killed a worker, from its exit code; None if it exited by itself."""
    return code - SIGNAL_EXIT_BASE if code > SIGNAL_EXIT_BASE else None


def exit_code(status: int) -> int:
    """A ``waitpid`` status as an exit code: its own, or 128 + the signal that killed it."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else exit_code_of_signal(-code)


OUTPUT_LIMIT_EXIT = exit_code_of_signal(signal.SIGXFSZ)  # the worker printed more than its output limit
