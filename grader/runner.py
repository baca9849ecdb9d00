"""Run the hidden suites against one submission and collect a Report.

pytest runs here, in the grading process, with the reference; the submission
runs in workers. Results come from pytest's own reports, never from anything
a worker printed.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader.hints import hint_for
from grader.milestones import GRADABLE
from grader.reference import SOLUTIONS
from grader.results import CLAIM_COUNTED, CheckResult, NotObserved, Recheck, Report, RuleBroken, Unanswered, Verdict
from grader.sandbox.client import (
    GRADING_MEMORY_BYTES,
    MEMORY_PROTECTION,
    ForkServer,
    GraderError,
    Limits,
    ProbeFault,
    ReplyBudget,
    StudentError,
    WorkerCrash,
    grading_memory_limit,
)
from grader.sandbox.common.agreement import ErrorKind
from grader.sandbox.secrecy import redact
from grader.sandbox.session import ImportFailure, MissingName
from grader.variants import LESSON, Variant

SUITES = Path(__file__).with_name("suites")  # the helpers every suite shares, and the suites' pytest.ini
HIDDEN = SUITES / "hidden"  # the hidden suites (absent from a student release)
PUBLIC = SUITES / "public"  # the public checks, the only ones in a student release
HIDDEN_AVAILABLE = (HIDDEN / GRADABLE["m1"].suite).is_file()
# Built-in plugins the suites do not need; some (unraisableexception) cost a gc.collect per test.
UNUSED_PLUGINS = (
    "cacheprovider",
    "unraisableexception",
    "threadexception",
    "faulthandler",
    "warnings",
    "doctest",
    "junitxml",
    "pastebin",
    "legacypath",
    "debugging",
    "logging",
    "capture",
    "terminal",
    "unittest",
    "skipping",
    "tmpdir",
    "monkeypatch",
    "recwarn",
    "setuponly",
    "setupplan",
    "stepwise",
    "subtests",
    "terminalprogress",
)
EXPLAINED = (AssertionError, StudentError, WorkerCrash, ImportFailure, MissingName)
QUIET = (*EXPLAINED, NotObserved)  # no traceback needed: the message says it all


def grade(
    submission: Path,
    milestones: Iterable[str],
    limits: Limits,
    server: ForkServer,
    public: bool = False,
    variant: Variant = LESSON,
    rules: dict[str, frozenset[str]] | None = None,
    only: frozenset[str] | None = None,
    ends: float | None = None,
    replies: ReplyBudget | None = None,
) -> Report:
    """Grade ``submission`` (a folder of exercise files) on the given milestone ids, its workers forked by
    ``server`` (a Grader's: grader/grading.py).

    With ``public`` (always, in a student release), only the public checks run. ``variant``: the student's
    numbers in a paper's questions; ``rules``: a paper's rules by part (grader/paper/). ``only``: run just
    these checks (pytest node ids), as the re-check of a claimed grader fault does (``settle_claims``).
    ``ends``: when the submission's time is up (time.monotonic); None: ``limits.submission_seconds`` from now.
    ``replies``: the bytes the submission's grading may receive from its workers, shared with its other grading
    processes (grader/grading.py); None: a budget of this grading's own. The grading process is under a memory
    limit meanwhile (``grading_memory_limit``).
    """
    with grading_memory_limit() as capped:
        previous, server.replies = server.replies, ReplyBudget() if replies is None else replies
        try:
            report = _grade(submission, milestones, limits, server, public, variant, rules, only, ends)
        finally:
            server.replies = previous
    if capped:
        report.protections = [*report.protections, MEMORY_PROTECTION]
    return report


def _grade(
    submission: Path,
    milestones: Iterable[str],
    limits: Limits,
    server: ForkServer,
    public: bool,
    variant: Variant,
    rules: dict[str, frozenset[str]] | None,
    only: frozenset[str] | None,
    ends: float | None,
) -> Report:
    """``grade``'s work, within its memory limit and with its budget of reply bytes in place."""
    public = public or not HIDDEN_AVAILABLE
    suites = PUBLIC if public else HIDDEN
    milestones = list(milestones)
    started = time.monotonic()
    # Imported here: loading torch takes seconds, which this process spends while the fork server loads it too.
    import torch

    from grader.suites.fixtures import GradingContext, GradingPlugin

    # The reference's tensors are tiny: with one thread, no OpenMP workers spin waiting for a core
    # that another grading process holds (with two threads on two busy cores, 10x slower).
    torch.set_num_threads(1)

    cpu_before, spawned_before = server.worker_cpu, server.spawned
    collector = Collector()
    context = GradingContext(server, submission.resolve(), limits, variant=variant, rules=dict(rules or {}))
    if ends is not None:
        context.ends = ends
    elif limits.submission_seconds:
        context.ends = started + limits.submission_seconds
    context.notebook.ends = context.ends  # a notebook's cells run within it too
    args = [str(suites / GRADABLE[m].suite) for m in milestones] + [
        "-c",
        str(SUITES / "pytest.ini"),
        "--rootdir",
        str(suites),
        "--noconftest",
        "--import-mode=importlib",
        "--assert=plain",
        *(f"-pno:{p}" for p in UNUSED_PLUGINS),
    ]
    log = io.StringIO()
    plugins = [GradingPlugin(context), collector, *([Only(only)] if only is not None else [])]
    try:
        with _clean_pytest_env(), contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            _forget_suites(suites)
            code = pytest.main(args, plugins=plugins)
        if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not collector.results:
            raise GraderError(
                f"the hidden suites did not run (pytest exit code {int(code)}):\n"
                + "\n".join([*collector.errors, log.getvalue()])[-3000:]
            )
        report = Report(str(submission), collector.results, server.protections, public=public)
        context.close()
        report.worker_cpu_seconds = server.worker_cpu - cpu_before  # read once every worker is reaped
        report.workers = server.spawned - spawned_before
        if only is None and not public:
            settle_claims(collector, milestones, limits, server, variant, rules, context.ends)
    finally:
        context.close()
    report.seconds = time.monotonic() - started
    report.variant = variant.seed
    return report


class Only:
    """A pytest plugin that runs only the checks named (node ids) and deselects the rest."""

    def __init__(self, nodeids: frozenset[str]):
        self.nodeids = nodeids

    @pytest.hookimpl(trylast=True)  # after the Collector has counted each check's cases (its points)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        dropped = [i for i in items if i.nodeid not in self.nodeids]
        items[:] = [i for i in items if i.nodeid in self.nodeids]
        config.hook.pytest_deselected(items=dropped)


def is_claim(check: CheckResult) -> bool:
    """A check set aside on evidence the grading side did not produce itself: an error the worker marked as
    the grader's (the submission runs in that process, so it can mark any error so), an exception in the
    grading process over what the worker sent, or a probe the worker says saw nothing. Not a metric task's
    failed run, which has a verdict of its own and no points to shrink (grader/lmbudget/)."""
    return not check.counted and (check.internal_error or check.verdict == Verdict.NOT_COUNTED.value)


def settle_claims(
    collector: Collector,
    milestones: list[str],
    limits: Limits,
    server: ForkServer,
    variant: Variant,
    rules: dict[str, frozenset[str]] | None,
    ends: float | None = None,
) -> None:
    """Decide each claimed grader fault from what the grading side can check: the same checks, run on the
    reference in fresh workers. A check that fails the same way there is the grader's own fault, and stays
    set aside (flagged to the instructor in every report). One that the reference passes, or fails as a
    counted check, was caused by the submission: it is counted, at 0 points, as a runtime error. So a
    milestone's points at stake never shrink because a worker said so. The re-check runs within the submission's
    time (``ends``): one that made the grader work until its time was up has its claims counted against it."""
    claims = {nodeid: check for nodeid, check in collector.by_nodeid.items() if is_claim(check)}
    if not claims:
        return
    gc.collect()  # a claim's reference cycles (a traceback's frames, their tensors) must not count for the reference
    try:
        again = grade(
            SOLUTIONS, milestones, limits, server, variant=variant, rules=rules, only=frozenset(claims), ends=ends
        )
        on_reference = {(c.milestone, c.name): c for c in again.checks}
    except GraderError:  # the reference cannot even be graded: the grader is broken, not the submission
        on_reference = {(c.milestone, c.name): c for c in claims.values()}
    for check in claims.values():
        theirs = on_reference.get((check.milestone, check.name))
        if theirs is not None and is_claim(theirs):
            check.rechecked = Recheck.GRADER.value
            continue
        check.rechecked = Recheck.SUBMISSION.value
        check.counted, check.internal_error, check.passed, check.score = True, False, False, 0.0
        check.verdict = Verdict.RUNTIME_ERROR.value
        check.message = redact(
            f"{CLAIM_COUNTED} (" + check.message.removeprefix("not counted: ") + "). "
            "The same check, run on the reference solution in a fresh sandbox, completes: so it counts as failed. "
            "Your code's process said the grader failed, or sent back something the grader could not use"
        )


def _forget_suites(suites: Path) -> None:
    """Each grading imports its suites afresh. pytest's importlib mode reuses a module already in ``sys.modules``,
    so a suite's module-level state (lmbudget's task file, read from GPTKIT_LMBUDGET_TASK) would otherwise stay
    what the first grading in this process saw. Only the suites' own test files: re-running one costs
    milliseconds, and the helpers they import hold no per-grading state."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and Path(path).name.startswith("test_") and Path(path).parent == suites:
            del sys.modules[name]


@contextlib.contextmanager
def _clean_pytest_env():
    """No third-party plugins and no options from the environment."""
    saved = {k: os.environ.get(k) for k in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ.pop("PYTEST_ADDOPTS", None)
    os.environ.pop("PYTEST_PLUGINS", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def milestone_of(item: pytest.Item) -> str:
    return next(m.id for m in GRADABLE.values() if m.suite == item.path.name)


def check_name(item: pytest.Function) -> str:
    doc = (item.obj.__doc__ or item.originalname).strip().splitlines()[0].rstrip(".")
    callspec = getattr(item, "callspec", None)
    return f"{doc} [{callspec.id}]" if callspec else doc


@dataclass
class Failure:
    message: str
    internal: bool = False  # the grader's own code failed
    counted: bool = True  # False: no verdict (an internal error, or nothing the grader could observe)
    trace: str = ""
    verdict: Verdict = Verdict.NOT_COUNTED


# What torch's allocators say, in a RuntimeError, when the worker's memory limit refuses them.
OUT_OF_MEMORY = ("DefaultCPUAllocator: can't allocate memory", "out of memory")


def verdict_of(error: BaseException) -> Verdict:
    """The class of a student's failure. A check that caught the student's error to explain it (fail() in an
    except block) keeps it as the context of its AssertionError: a crash explained is still a crash."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, WorkerCrash):
            return {"time": Verdict.TIME_LIMIT, "memory": Verdict.MEMORY_LIMIT}.get(seen.limit, Verdict.RUNTIME_ERROR)
        if isinstance(seen, StudentError):
            if seen.type == ErrorKind.NOT_IMPLEMENTED:
                return Verdict.NOT_IMPLEMENTED
            if seen.type == ErrorKind.MEMORY_ERROR or any(m in seen.message for m in OUT_OF_MEMORY):
                return Verdict.MEMORY_LIMIT
            return Verdict.IMPORT_ERROR if seen.type == ErrorKind.MISSING_NAME else Verdict.RUNTIME_ERROR
        if isinstance(seen, ImportFailure):  # a loop or a crash at import is what it would be in a call
            ended = {"time": Verdict.TIME_LIMIT, "memory": Verdict.MEMORY_LIMIT, "crash": Verdict.RUNTIME_ERROR}
            return ended.get(seen.ended_by, Verdict.IMPORT_ERROR)
        if isinstance(seen, MissingName):
            return Verdict.IMPORT_ERROR
        if isinstance(seen, Unanswered | RuleBroken):
            return seen.verdict
        seen = seen.__context__
    return Verdict.WRONG_ANSWER


def failure(excinfo: pytest.ExceptionInfo) -> Failure:
    """Why a check did not pass: the teaching message, or the grader's own failure (set aside, not blamed)."""
    error = excinfo.value
    if isinstance(error, StudentError) and (hint := hint_for(error.message)):
        return Failure(f"{error}; hint: {hint}", verdict=verdict_of(error))
    if isinstance(error, EXPLAINED):
        return Failure(str(error), verdict=verdict_of(error))
    if isinstance(error, pytest.fail.Exception):
        return Failure(error.msg or "", verdict=verdict_of(error))
    if isinstance(error, NotObserved):
        return Failure(f"not counted: {error}", counted=False, verdict=error.verdict)
    if isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and any(m in str(error) for m in OUT_OF_MEMORY)
    ):
        # This process's own limit (grading_memory_limit), met while it checked what the worker sent: a claim,
        # settled on the reference (settle_claims). One it passes within the same limit is the submission's.
        return Failure(
            f"not counted: the grading process ran out of memory (it may grow by {GRADING_MEMORY_BYTES >> 20} MB "
            "while it grades) checking what your code sent back",
            counted=False,
            verdict=Verdict.NOT_COUNTED,
        )
    if isinstance(error, ProbeFault):
        what, trace = f"a probe in the worker ({error})", error.trace
    else:
        what = f"({type(error).__name__}: {error})"
        frames = traceback.extract_tb(excinfo.tb)[-12:]
        trace = "\n".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    return Failure(
        f"the grader itself failed, not your code: {what}. This check is not counted; please report it",
        internal=True,
        counted=False,
        trace=trace,
    )


class Collector:
    """A pytest plugin that turns test reports into CheckResults with points."""

    def __init__(self) -> None:
        self._by_id: dict[str, CheckResult] = {}
        self._cases: Counter[tuple[str, str]] = Counter()
        self.errors: list[str] = []  # why a suite could not be collected (pytest's terminal report is off)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(f"{report.nodeid}: {report.longreprtext}")

    @property
    def results(self) -> list[CheckResult]:
        return list(self._by_id.values())

    @property
    def by_nodeid(self) -> dict[str, CheckResult]:
        return dict(self._by_id)

    def pytest_collection_modifyitems(self, items: list[pytest.Function]) -> None:
        self._cases.update((str(i.path), i.originalname) for i in items)

    @pytest.hookimpl(tryfirst=True, specname="pytest_runtest_makereport")
    def pytest_runtest_makereport_explained(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport | None:
        """A failure that the grader explains needs no traceback: pytest's own report of one
        re-reads and re-parses every frame's source, which costs more than most checks."""
        if call.excinfo is None or not isinstance(call.excinfo.value, (*QUIET, pytest.fail.Exception)):
            return None  # passed, skipped, or the grader's own error: pytest reports it in full
        return pytest.TestReport(
            item.nodeid,
            item.location,
            dict.fromkeys(item.keywords, 1),
            "failed",
            f"{call.excinfo.typename}: {call.excinfo.value}",
            call.when,  # type: ignore[arg-type]
            [],
            call.duration,
            call.start,
            call.stop,
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Function, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if report.when == "teardown" and (
            report.passed or item.nodeid in self._by_id and not self._by_id[item.nodeid].passed
        ):
            return
        if report.when == "call" or report.failed:
            marker = item.get_closest_marker("points")
            points = (marker.args[0] if marker else 1) / self._cases[(str(item.path), item.originalname)]
            why = failure(call.excinfo) if report.failed and call.excinfo else Failure("")
            # A metric-scored check (lmbudget) says, in item.user_properties, the share of its points it won,
            # its measure and its message; every other check wins all or nothing.
            props: dict[str, Any] = dict(item.user_properties) if report.passed else {}
            self._by_id[item.nodeid] = CheckResult(
                name=check_name(item),
                milestone=milestone_of(item),
                score=0.0 if report.failed else points * float(props.get("fraction", 1.0)),
                max_score=points,
                passed=report.passed,
                # the last gate: see grader/sandbox/secrecy.py
                message=redact(why.message or str(props.get("message", ""))),
                value=float(props["value"]) if "value" in props else None,
                case=item.callspec.id if hasattr(item, "callspec") else "",
                verdict=(Verdict.OK if report.passed else why.verdict).value,
                seconds=round(call.duration, 3),
                internal_error=why.internal,
                counted=why.counted,
                traceback=redact(why.trace),
            )
