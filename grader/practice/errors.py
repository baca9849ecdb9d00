"""What stops ``grade practice`` with a message, and work that cannot be graded as it is."""

from __future__ import annotations

import click


class PracticeError(click.ClickException):
    """Bad input or a log that cannot be used: a message and exit status 2, never a traceback."""

    exit_code = 2


class Unreadable(Exception):
    """The student's work cannot be graded as it is (a notebook being saved, not a notebook): not the
    grader's failure, and no attempt at the paper either."""
