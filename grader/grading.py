"""Submissions graded: the one way every command grades, and the one place that starts fork servers.

A :class:`Request` says what to grade (a folder of exercise files or a notebook), on which milestones, with
which numbers and rules. A :class:`Grader` grades requests. It owns the warm fork server the workers are forked
from (``grader/sandbox/client.py``), decides how a request's milestones are split between grading processes and
what the server preloads, replaces a server that died before the next grading starts (never during one: a
grading's checks already tell what happened to them), and bounds each grading by ``Limits.submission_seconds``,
counted from the moment it starts.

Every command grades through it: ``grade check`` (one grading, milestones side by side), ``grade watch`` and
``grade practice`` (one warm server for the session), ``grade batch`` and the contest queue (one Grader per
grading process of their pools, :func:`process_grader`, a copy of the batch's shared server where there is
one), the Gradescope script (the hidden checks, then the public ones, on one server), and, through
``grade check`` in a process of their own, the nbgrader hook and the in-notebook check.

What went wrong is told apart:

* :class:`~grader.submission.SubmissionError`: the student's work cannot be graded as it is (a notebook being
  saved, not a notebook): theirs to fix, raised as it is;
* any other exception (a :class:`~grader.sandbox.client.GraderError` above all): the grader's own failure, never
  the student's; :func:`grader_failed` words it as every command prints it. The Grader's server is dropped then,
  and a new one serves the next grading;
* a report with ``internal_errors``: checks that failed inside the grader (:func:`internal_errors_line`).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing.util
import os
import pickle
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from grader.milestones import MILESTONES, preloads, side_by_side
from grader.results import Report
from grader.sandbox.client import ForkServer, GraderError, Limits, ReplyBudget
from grader.submission import SubmissionError, prepared
from grader.variants import LESSON, Variant


@dataclass(frozen=True)
class Request:
    """One grading: ``submission`` (a folder of exercise files or a notebook) on ``milestones``.

    ``variant``: the student's numbers in a paper's questions; ``rules``: a paper's rules by part (grader/paper/);
    ``public``: only the public checks (always, in a student release); ``name``: what the report calls the
    submission (``Report.submission``; None: its path as given).
    """

    submission: Path
    milestones: tuple[str, ...] = tuple(MILESTONES)
    variant: Variant = LESSON
    rules: Mapping[str, frozenset[str]] | None = field(default=None, hash=False)
    public: bool = False
    name: str | None = None


class Grader:
    """Grades :class:`Request` s on warm fork servers it owns; close it (or use it in a ``with``) when done.

    ``limits``: each worker's, and each grading's whole time (``submission_seconds``). ``jobs``: grading processes
    side by side within one request, each on some of its milestones (``grader.milestones.side_by_side``; None:
    one per core, at most two). A request graded side by side gets a server of its own, started for it (a
    server shared by several grading processes takes them all before it serves any); one graded in this process
    uses the warm server, started on the first request and kept. ``many``: many gradings will follow (a watch, a
    batch): the warm server preloads every milestone's modules and spends 0.4 s making its forks cheaper; else it
    preloads what the first request needs. ``shared``: the address of a batch's server (``ForkServer(clients=)``)
    of which this process takes a copy, instead of starting its own, where it still can.
    """

    def __init__(
        self, limits: Limits | None = None, *, jobs: int | None = 1, many: bool = True, shared: str | None = None
    ):
        self.limits = limits or Limits()
        self.jobs, self.many, self.shared = jobs, many, shared
        self._server: ForkServer | None = None
        self.started = 0  # servers started (or copies taken) so far: a replaced one counts again
        self.lost = False  # the warm server died during the latest grading (its checks say what that did to them)

    def grade(self, request: Request, limits: Limits | None = None) -> Report:
        """Grade ``request`` (under ``limits``, default the Grader's) and return its report.

        Raises :class:`~grader.submission.SubmissionError` for work that cannot be graded as it is; any other
        exception is the grader's own failure, after which the next grading gets a fresh server.
        """
        # Imported here: the runner loads torch, which this process loads while the fork server loads it too.
        from grader.runner import grade

        limits = limits or self.limits
        # The submission's time counts from here: preparing it, starting its server and every grading process's
        # work on what its code sends back are its own (runner.grade fails the checks left once it is up).
        ends = time.monotonic() + limits.submission_seconds if limits.submission_seconds else None
        milestones = list(request.milestones)
        groups = side_by_side(milestones, self.jobs)
        rules = dict(request.rules or {})
        options: dict[str, Any] = {"public": request.public, "variant": request.variant, "rules": rules}
        self.lost = False
        try:
            with prepared(request.submission) as folder:
                if len(groups) > 1:
                    self.started += 1
                    with ForkServer(limits, clients=len(groups), preload=preloads(milestones), many=False) as own:
                        # one budget of reply bytes for the submission, however many processes grade it
                        replies = ReplyBudget(processes=len(groups))
                        report = _side_by_side(folder, groups, limits, own, replies, ends=ends, **options)
                else:
                    warm = self._warm(milestones)
                    warm.limits = limits  # read as each worker is spawned: this grading's, not the first one's
                    report = grade(folder, milestones, limits, warm, ends=ends, **options)
        except SubmissionError:
            raise
        except BaseException:
            self.lost = self.server_died
            self.reset()  # perhaps the server is what failed, or was left mid-request: a fresh one next time
            raise
        self.lost = self.server_died
        report.submission = request.name if request.name is not None else str(request.submission)
        return report

    def test_run(self, folder: Path, limits: Limits | None = None) -> dict[str, Any]:
        """A contest's test run of ``folder`` (the student's files and their script) on the warm server, within
        one call's time (``limits.call_seconds``): grader/sandbox/testrun.py. A failure of the grader's own is
        raised, after which the next one gets a fresh server."""
        from grader.sandbox.testrun import run_script

        limits = limits or self.limits
        warm = self._warm(list(MILESTONES))
        warm.limits = limits
        try:
            return run_script(warm, folder, limits.call_seconds)
        except BaseException:
            self.reset()
            raise

    def warm_up(self, milestones: Sequence[str] = tuple(MILESTONES)) -> None:
        """Start the warm server now, not on the first request (a contest's pool, while the room logs in; a
        watch, while this process loads torch itself). Not waited for: its first grading waits for it."""
        self._warm(list(milestones))

    def ready(self) -> None:
        """Wait until the warm server ``warm_up`` started is ready to fork workers (GraderError if it failed)."""
        if self._server is not None:
            self._server.hello()

    @property
    def server_died(self) -> bool:
        """The warm server has died (since its last grading, or during it)."""
        return self._server is not None and not self._server.alive

    def reset(self) -> None:
        """Drop the warm server: the next grading starts a new one."""
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):  # a server that died may fail to close cleanly; it is gone
                server.close()

    def close(self) -> None:
        self.reset()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _warm(self, milestones: list[str]) -> ForkServer:
        if self.server_died:
            self.reset()
        if self._server is None:
            self._server = self._attached() or ForkServer(
                self.limits, preload=None if self.many else preloads(milestones), many=self.many
            )
            self.started += 1
        return self._server

    def _attached(self) -> ForkServer | None:
        """A copy of the batch's shared server (a few CPU seconds cheaper than one's own), once: a replacement
        is this process's own, as the shared server takes clients only before any worker exists."""
        address, self.shared = self.shared, None
        if address is None:
            return None
        try:
            return ForkServer.attach(address, self.limits)
        except OSError:
            return None


# One Grader per process of a pool (``grade batch``'s, the contest queue's): the pool's tasks are plain functions
# (a cluster runs them anywhere), so the Grader that outlives one task lives here, in that process alone.
_process_grader: Grader | None = None


def process_grader(limits: Limits, shared: str | None = None) -> Grader:
    """This pool process's Grader, made on its first use (``shared``: the batch's server to take a copy of)."""
    global _process_grader
    if _process_grader is None:
        gc.freeze()  # what was loaded before (torch, through the pool's preload): this process's collections skip it
        _process_grader = Grader(limits, shared=shared)
        multiprocessing.util.Finalize(None, _process_grader.close, exitpriority=10)  # atexit does not run here
    return _process_grader


def shared_server(limits: Limits, clients: int) -> ForkServer:
    """A server that ``clients`` pool processes each take a copy of (``Grader(shared=server.address)``): a batch
    on one machine starts one, not one per process. It serves once all of them have taken theirs."""
    return ForkServer(limits, clients=clients)


def _side_by_side(
    submission: Path, groups: list[list[str]], limits: Limits, server: ForkServer, replies: ReplyBudget, **options: Any
) -> Report:
    """``runner.grade`` on every milestone of ``groups``, each group in a grading process of its own, side by side.

    A cold ``grade check`` of several milestones used one core for the grader's side of every check while the
    other waited; independent milestones can use both. ``server`` was started with ``clients=len(groups)``: each
    process gets a copy of it (``ForkServer.attach``). The processes are forked from this one once torch is
    loaded, so it loads once; the report is the one ``runner.grade`` gives, checks in the order of the milestones.
    ``replies``: the submission's budget of reply bytes, one slot per process: a reply refused in one ends the
    grading in all of them.
    """
    from grader.runner import grade

    started = time.monotonic()
    import torch  # noqa: F401 - loaded before the fork, so that every grading process has it already

    children: list[tuple[int, int]] = []
    try:
        # the children connect first: the server copies itself once all have
        for index, group in enumerate(groups[1:], 1):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                _grade_in_child(write, submission, group, limits, server, {**options, "replies": replies.slot(index)})
            os.close(write)
            children.append((pid, read))
        with ForkServer.attach(str(server.address), limits) as mine:
            reports = [grade(submission, groups[0], limits, mine, replies=replies.slot(0), **options)]
        while children:
            reports.append(_child_report(*children.pop(0)))
    finally:
        for pid, read in children:  # left only by an error or Ctrl-C here: end them now
            os.close(read)
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    order = {m: i for i, m in enumerate(m for group in groups for m in group)}
    first = reports[0]
    first.checks = sorted((c for r in reports for c in r.checks), key=lambda c: order[c.milestone])
    first.seconds = time.monotonic() - started
    first.worker_cpu_seconds = sum(r.worker_cpu_seconds for r in reports)
    first.workers = sum(r.workers for r in reports)
    return first


def _grade_in_child(
    write: int, submission: Path, group: list[str], limits: Limits, server: ForkServer, options: dict
) -> NoReturn:
    """In a forked grading process: grade ``group``, send the Report (or the error) to the parent, exit."""
    from grader.runner import grade
    from grader.sandbox.worker import jail

    outcome: Report | GraderError
    try:
        jail.die_with_parent()
        with ForkServer.attach(str(server.address), limits) as mine:
            outcome = grade(submission, group, limits, mine, **options)
    except BaseException as e:  # noqa: BLE001 - whatever it is, the parent reports it
        outcome = GraderError(f"grading {', '.join(group)} failed: {type(e).__name__}: {e}")
    try:
        with os.fdopen(write, "wb") as out:
            pickle.dump(outcome, out)  # read by the parent only: this process ran no submission code
    finally:
        os._exit(0)


def _child_report(pid: int, read: int) -> Report:
    """The report a child sent; the child is reaped whatever happens (killed first if this is interrupted)."""
    data = b""
    try:
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
    finally:
        if not data:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not data:
        raise GraderError("a grading process ended without a report")
    outcome = pickle.loads(data)
    if isinstance(outcome, GraderError):
        raise outcome
    return outcome


def grader_failed(error: BaseException) -> str:
    """The grader's own failure, as every command prints it."""
    return f"grade: the grader itself failed: {error}"


def internal_errors_line(report: Report) -> str | None:
    """What a report with checks that failed inside the grader says of them (None: there were none)."""
    if not report.internal_errors:
        return None
    return f"grade: {len(report.internal_errors)} check(s) failed inside the grader"
