"""One submission graded: the one way every command grades a submission.

``grade check`` (grader/cli.py), the Gradescope autograder (grader/bundles/gradescope.py), ``grade watch``
(grader/watch.py), ``grade practice`` (grader/practice/) and each submission of ``grade batch`` and of a contest
(grader/batch/run.py) all go through :func:`grade_submission`: the submission is prepared (a notebook turned into
exercise files), graded by the runner (grader/runner.py) on a fork server (the caller's warm one, or one started
for this grading alone), and what went wrong is told apart:

* :class:`~grader.submission.SubmissionError`: the student's work cannot be graded as it is (a notebook being
  saved, not a notebook): theirs to fix, raised as it is;
* any other exception (a :class:`~grader.sandbox.client.GraderError` above all): the grader's own failure, never
  the student's; :func:`grader_failed` words it as every command prints it;
* a report with ``internal_errors``: checks that failed inside the grader (:func:`internal_errors_line`).

Each caller then says it in its own place (a terminal, results.json, the practice log, the gradebook).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from grader.results import Report
from grader.sandbox.client import ForkServer, Limits
from grader.submission import prepared
from grader.variants import LESSON, Variant

# A fork server: the caller's warm one, a function that gives it (called once the submission is prepared, so
# that a server that died can be replaced first), or None: one started for this grading alone, closed after.
Server = ForkServer | Callable[[], ForkServer] | None


def grade_submission(
    submission: Path,
    milestones: Sequence[str],
    limits: Limits,
    server: Server = None,
    *,
    public: bool = False,
    variant: Variant = LESSON,
    rules: dict[str, frozenset[str]] | None = None,
    groups: list[list[str]] | None = None,
    preload: tuple[str, ...] | None = None,
    many: bool | None = None,
    name: str | None = None,
) -> Report:
    """Grade ``submission`` (a folder of exercise files or a notebook) on ``milestones`` and return the report.

    ``public``, ``variant`` and ``rules`` are the runner's (``grader.runner.grade``). ``groups``: the milestones
    in groups graded side by side, one grading process each (``grade_side_by_side``); one group or None: in this
    process. ``preload`` and ``many`` are the fork server's when one is started here (it then takes a client
    per group). ``name``: what the report calls the submission (``Report.submission``), left unset if None.

    Raises :class:`~grader.submission.SubmissionError` for work that cannot be graded as it is; any other
    exception is the grader's own failure.
    """
    # Imported here: the runner loads torch, which this process loads while the fork server loads it too.
    from grader.runner import grade, grade_side_by_side

    # The submission's time counts from here: preparing it, starting its server and every grading process's
    # work on what its code sends back are its own (runner.grade fails the checks left once it is up).
    ends = time.monotonic() + limits.submission_seconds if limits.submission_seconds else None
    side_by_side = groups is not None and len(groups) > 1
    clients = len(groups) if groups is not None and side_by_side else 0
    with prepared(submission) as folder, _server(server, limits, preload, many, clients) as warm:
        if groups is not None and side_by_side:
            report = grade_side_by_side(
                folder, groups, limits, warm, public=public, variant=variant, rules=rules, ends=ends
            )
        else:
            report = grade(
                folder, list(milestones), limits, warm, public=public, variant=variant, rules=rules, ends=ends
            )
    if name is not None:
        report.submission = name
    return report


@contextlib.contextmanager
def _server(
    server: Server, limits: Limits, preload: tuple[str, ...] | None, many: bool | None, clients: int
) -> Iterator[ForkServer]:
    if isinstance(server, ForkServer):
        yield server
    elif server is not None:
        yield server()
    else:
        with ForkServer(limits, clients=clients, preload=preload, many=many) as own:
            yield own


def grader_failed(error: BaseException) -> str:
    """The grader's own failure, as every command prints it."""
    return f"grade: the grader itself failed: {error}"


def internal_errors_line(report: Report) -> str | None:
    """What a report with checks that failed inside the grader says of them (None: there were none)."""
    if not report.internal_errors:
        return None
    return f"grade: {len(report.internal_errors)} check(s) failed inside the grader"
