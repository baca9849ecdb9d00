"""The grader's own exceptions: one base, and a branch for each kind of trouble.

Every exception class the grader defines derives from ``GptkitError`` (``tests/unit/test_errors.py``
checks it), in one of three branches:

- ``UserError``: what the person running ``grade`` gave cannot be used (a folder that is not there, a
  malformed contest.toml, a roster's bad line, a file that is not a gradebook). Their doing, shown as a
  one-line message. ``InputError`` exits with status 2 as a usage error does; ``BadUsage`` is shown as
  click's usage error (the command's usage line first).
- ``InternalError``: the grader itself could not run: not the user's fault nor the student's.
- ``Finding``: what a check found about a submission (the student's code raised, the worker crashed, a probe
  saw nothing), raised and caught inside the grading process and turned into a verdict there. Never a
  command's error: one that reaches the command line is a bug in the grader, and keeps its traceback.

The base is not named ``GraderError``: that name was taken, long before this file, by
``grader.sandbox.client.GraderError`` ("the grader itself could not run"), which is now an
``InternalError`` and keeps its name.

Domain modules raise these, never click's exceptions; the command line turns them into click's in one
place (``grader/clierrors.py``), with the message and exit status each kind has always had. Standard
library only: the student release and the contest server import it.
"""

from __future__ import annotations


class GptkitError(Exception):
    """Base of every exception the grader defines. ``exit_code``: what ``grade`` exits with when one reaches
    the command line."""

    exit_code = 1


class UserError(GptkitError):
    """The input given to the grader cannot be used: the message says what to change. Exit status 1."""


class InputError(UserError):
    """A mistake in the input (a coach's contest folder, a paper, a roster): the message, and exit status 2 as
    for a usage error, without the usage line."""

    exit_code = 2


class BadUsage(UserError):
    """The command was not used as it is meant to be (a submission that is not one, an option that needs
    another): shown as click's usage error, the command's usage line first, exit status 2."""

    exit_code = 2


class InternalError(GptkitError):
    """The grader itself failed (not the user's fault, nor the student's): ``grade: the grader itself failed:
    MESSAGE`` on stderr, exit status 1."""


class Finding(GptkitError):
    """What a check found about a submission, carried as an exception inside the grading process and turned
    into a verdict there (``grader/runner.py``, ``grader/results.py``). Deliberately not converted on the
    command line: one that gets there escaped the runner, a bug whose traceback should show."""
