"""Grading results and their three renderings: a terminal table, JSON, Gradescope."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum

from grader import __version__
from grader.errors import Finding
from grader.fingerprint import grader_fingerprint
from grader.milestones import GRADABLE

# Gradescope's visibility levels for a test, most shown first.
GRADESCOPE_VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
# How a results.json lays out its tests: one per milestone (its checks' lines in the test's output), or one per check.
GRADESCOPE_LAYOUTS = ("milestone", "check")
# When the scored checks show, as a results.json's output tells the student (nothing to say when visible): the
# autograder's and `grade export --gradescope`'s words.
GRADESCOPE_SHOWN = {
    "after_due_date": "The scored checks are shown to you after the due date",
    "after_published": "The scored checks are shown to you once your instructor publishes the grades",
    "hidden": "The scored checks are not shown to you (your instructor sees them)",
}


class Verdict(str, Enum):
    """A check's outcome as a class, as contest systems name it: what a contest shows under score-only or
    pass/fail feedback, where a check's message would tell what the hidden checks test."""

    OK = "OK"
    WRONG_ANSWER = "wrong answer"
    RUNTIME_ERROR = "runtime error"
    TIME_LIMIT = "time limit exceeded"
    MEMORY_LIMIT = "memory limit exceeded"
    # A file that does not import (a syntax error, a missing module, an exception at module level) or lacks a
    # name the contract requires. A loop, a crash or a limit met while importing is the verdict it would be in a
    # call (time limit, runtime error, memory limit).
    IMPORT_ERROR = "import error"
    NOT_IMPLEMENTED = "not implemented"
    NOT_ANSWERED = "not answered"  # a question still None, as the stub leaves it
    RULE_BROKEN = "rule broken"  # a paper's or an exercise's rule (no loops, no library attention): shown with it
    NOT_COUNTED = "not counted"  # the grader's own error, or nothing it could observe


# How a settled claim's message begins (grader/runner.py): `grade report` lists the students whose code made one.
CLAIM_COUNTED = "this check could not be completed on your code"


class Recheck(str, Enum):
    """What re-running a claimed grader fault on the reference showed (grader/runner.py ``settle_claims``)."""

    NONE = ""  # no claim to settle
    GRADER = "grader"  # the reference fails the same way: the grader's own fault, set aside
    SUBMISSION = "submission"  # the reference completes it: the submission's doing, counted as failed


class Unanswered(Finding, AssertionError):
    """A check's failure for a question still unanswered: its verdict is "not answered", not a wrong answer."""

    verdict = Verdict.NOT_ANSWERED


class RuleBroken(Finding, AssertionError):
    """A check's failure for a broken rule: its verdict is "rule broken", shown with the rule's words."""

    verdict = Verdict.RULE_BROKEN


def rule_broken_message(rule: str, rest: str) -> str:
    """How a broken rule's message begins, with what the rule says ("no library attention"): ``shown_verdict``
    reads the rule back from it."""
    return f"rule broken ({rule}), {rest}"


def shown_verdict(check: dict) -> str | None:
    """A failed check's verdict as a screen shows it: a broken rule with the rule's words, which are the paper's
    and known to the student, so they may show where the message is hidden."""
    verdict = check.get("verdict")
    found = re.match(r"rule broken \((.+?)\), ", str(check.get("message") or ""))
    if verdict == Verdict.RULE_BROKEN.value and found:
        return f"{verdict}: {found.group(1)}"
    return verdict


class NotObserved(Finding):
    """Raised by a check that cannot see, in contract-conforming code, what it looks at: no verdict."""

    verdict = Verdict.NOT_COUNTED


@dataclass
class CheckResult:
    name: str
    milestone: str
    score: float
    max_score: float
    passed: bool
    message: str = ""
    seconds: float = 0.0
    internal_error: bool = False  # the grader's own code failed: not the student's error
    counted: bool = True  # False for an internal error or a check the grader could not observe: no point won or lost
    traceback: str = ""  # where the grader failed, for an internal error (shown with -v)
    value: float | None = None  # a metric-scored check's measure (lmbudget: bits per character); None elsewhere
    case: str = ""  # a parametrized check's case id: its name is f"{base} [{case}]"; "" for a plain check
    verdict: str = Verdict.OK.value  # a Verdict's value: why it failed, as a class
    rechecked: str = Recheck.NONE.value  # a claimed grader fault, settled on the reference: a Recheck's value


@dataclass
class Report:
    submission: str
    checks: list[CheckResult] = field(default_factory=list)
    protections: list[str] = field(default_factory=list)
    seconds: float = 0.0
    public: bool = False  # only the public checks ran (a student release, or --public)
    worker_cpu_seconds: float = 0.0  # the submission's own code, in its workers (0 where not measured)
    workers: int = 0  # worker processes started for it (one per group of milestones, more after crashes)
    variant: int | None = None  # the seed of the student's numbers in a paper's questions; None: the lesson's

    @property
    def milestones(self) -> list[str]:
        return [m for m in GRADABLE if any(c.milestone == m for c in self.checks)]

    def of(self, milestone: str) -> list[CheckResult]:
        return [c for c in self.checks if c.milestone == milestone]

    def score(self, milestone: str | None = None) -> tuple[float, float]:
        """Points won and points at stake, over the counted checks: a check the grader could not run or
        observe is set aside, so it costs the student nothing (and is listed in ``set_aside``)."""
        checks = [c for c in (self.of(milestone) if milestone else self.checks) if c.counted]
        return round(sum(c.score for c in checks), 2), round(sum(c.max_score for c in checks), 2)

    @property
    def internal_errors(self) -> list[CheckResult]:
        return [c for c in self.checks if c.internal_error]

    @property
    def set_aside(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.counted]

    def set_aside_note(self) -> str:
        """One sentence on the checks set aside, or nothing."""
        internal = self.internal_errors
        set_aside = [c for c in self.set_aside if not c.internal_error]
        unseen = [c for c in set_aside if c.verdict == Verdict.NOT_COUNTED.value]
        # a metric task's failed run (time limit, crash, no model) has its verdict and counts for nothing
        runs = [c for c in set_aside if c.verdict != Verdict.NOT_COUNTED.value]
        parts = []
        if internal:
            parts.append(
                f"{len(internal)} check(s) worth {sum(c.max_score for c in internal):g} point(s) failed "
                "inside the grader (not your code's fault): they are not counted; please report them"
            )
        if unseen:
            parts.append(
                f"{len(unseen)} check(s) worth {sum(c.max_score for c in unseen):g} point(s) could not "
                "observe what they check in your code (each says why): they are not counted"
            )
        if runs:
            parts.append(
                f"{len(runs)} check(s) worth {sum(c.max_score for c in runs):g} point(s) have no score: the run "
                "failed (see above), and a failed run counts for nothing, nor against a contest's cap"
            )
        return "; ".join(parts)

    def to_json(self) -> dict:
        score, max_score = self.score()
        return {
            "submission": self.submission,
            "grader_version": __version__,
            "grader_fingerprint": grader_fingerprint(),
            "score": score,
            "max_score": max_score,
            "seconds": round(self.seconds, 2),
            "worker_cpu_seconds": round(self.worker_cpu_seconds, 3),
            "workers": self.workers,
            "checks": "public" if self.public else "all",
            "variant": self.variant,
            "protections": self.protections,
            "set_aside": {
                "checks": len(self.set_aside),
                "points": round(sum(c.max_score for c in self.set_aside), 2),
                "internal_errors": len(self.internal_errors),
                "note": self.set_aside_note(),
                # claimed grader faults, settled on the reference: the grader's (set aside) or the submission's
                "rechecked": {r.value: sum(c.rechecked == r.value for c in self.checks) for r in Recheck if r.value},
            },
            "milestones": [
                {
                    "id": m,
                    "title": GRADABLE[m].title,
                    "score": self.score(m)[0],
                    "max_score": self.score(m)[1],
                    "checks": [asdict(c) for c in self.of(m)],
                }
                for m in self.milestones
            ],
        }

    def to_gradescope(self, visibility: str = "visible", public: Report | None = None, layout: str = "check") -> dict:
        """Gradescope's results.json. ``visibility`` (Gradescope's: visible, after_due_date, after_published,
        hidden) is given to each hidden-suite check; public checks are always visible. ``public``, the public
        checks' report for the same submission, adds them as tests worth 0 points: the total stays the
        hidden suites'. ``layout``: one test per check, or per milestone (see ``gradescope_results``)."""
        _check_visibility(visibility)
        note = self.set_aside_note()
        return gradescope_results(
            self.checks,
            score=self.score()[0],
            seconds=self.seconds + (public.seconds if public else 0.0),
            output=f"Graded by the TinyGPT kit's grader {__version__}." + (f" Note: {note}." if note else ""),
            visibility="visible" if self.public else visibility,
            public=public.checks if public else (),
            layout=layout,
        )

    def render(self, fmt: str) -> str:
        if fmt == "json":
            return json.dumps(self.to_json(), indent=2)
        if fmt == "gradescope":
            return json.dumps(self.to_gradescope(), indent=2)
        raise ValueError(fmt)


def gradescope_results(
    checks: Sequence[CheckResult] = (),
    *,
    output: str,
    score: float = 0,
    seconds: float | None = None,
    visibility: str = "visible",
    public: Sequence[CheckResult] = (),
    layout: str = "check",
) -> dict:
    """Gradescope's results.json, the one place it is built (``grade check --format gradescope``, the
    autograder, ``grade export --gradescope``, and a submission that could not be graded: no check).

    ``checks`` are tests shown at ``visibility``; ``public`` checks follow, always visible and worth 0 points.
    ``output`` is the text above the tests, which students see (stdout they do not). ``layout`` "check": a
    test per check; "milestone": a test per milestone (its title, the points of its counted checks, one line
    per check in its output), the public checks' milestones after, visible and worth 0.
    """
    _check_visibility(visibility)
    if layout not in GRADESCOPE_LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(GRADESCOPE_LAYOUTS)}, not {layout!r}")
    if layout == "milestone":
        tests = [_gradescope_group(group, visibility) for group in _by_milestone(checks)]
        tests += [_gradescope_group(group, "visible", counts=False) for group in _by_milestone(public)]
        for i, test in enumerate(tests):
            test["number"] = str(i + 1)
    else:
        tests = [_gradescope_test(i, c, visibility) for i, c in enumerate(checks)]
        tests += [_gradescope_test(len(tests) + i, c, "visible", counts=False) for i, c in enumerate(public)]
    results: dict = {"score": score}
    if seconds is not None:
        results["execution_time"] = round(seconds, 2)
    results.update(output=output, visibility="visible", stdout_visibility="hidden", tests=tests)
    return results


def _check_visibility(visibility: str) -> None:
    if visibility not in GRADESCOPE_VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(GRADESCOPE_VISIBILITIES)}, not {visibility!r}")


def _gradescope_test(i: int, c: CheckResult, visibility: str = "visible", counts: bool = True) -> dict:
    """One check as a Gradescope test; with ``counts`` False (a public check beside the hidden suites), worth 0."""
    name = f"{c.milestone}: {c.name}"
    if not counts and "(public)" not in name:
        name = f"{c.milestone}: (public) {c.name}"
    test = {
        "name": name,
        "number": str(i + 1),
        "score": c.score if counts else 0.0,
        "max_score": c.max_score if counts else 0.0,
        "status": "passed" if c.passed else "failed",
        "output": "passed" if c.passed else c.message,
        "output_format": "text",
        "visibility": visibility,
        "tags": [c.milestone] + ([] if counts else ["public"]),
    }
    if not c.counted:  # worth nothing either way; Gradescope then shows no pass or fail
        why = "the grader failed here, not your code" if c.internal_error else "the grader could not observe this"
        test.update(name=f"{test['name']} (not counted: {why})", score=0.0, max_score=0.0)
        del test["status"]
    return test


def _by_milestone(checks: Sequence[CheckResult]) -> list[list[CheckResult]]:
    """``checks`` grouped by milestone, in the order the milestones first appear."""
    groups: dict[str, list[CheckResult]] = {}
    for c in checks:
        groups.setdefault(c.milestone, []).append(c)
    return list(groups.values())


def _check_line(c: CheckResult) -> str:
    """A check's line in its milestone's test: its verdict mark, name, points and (if failed) message."""
    if not c.counted:
        why = "the grader failed here, not your code" if c.internal_error else "the grader could not observe this"
        return f"- {c.name} (not counted: {why})" + (f": {c.message}" if c.message else "")
    # to 2 decimals, as every score is shown (a check of 2 points among 11 is worth 0.181818...); the test's own
    # points are the exact sum, so the total still adds up
    points = f" [{round(c.score, 2):g}/{round(c.max_score, 2):g}]" if c.max_score else ""
    return f"{'PASS' if c.passed else 'FAIL'} {c.name}{points}" + ("" if c.passed else f": {c.message}")


def _gradescope_group(checks: list[CheckResult], visibility: str, counts: bool = True) -> dict:
    """One milestone's checks as one Gradescope test: its points are its counted checks' (0 for public checks
    beside the hidden suites), its output one line per check; "passed" when every counted check passed."""
    milestone = checks[0].milestone
    title = GRADABLE[milestone].title if milestone in GRADABLE else milestone
    counted = [c for c in checks if c.counted]
    test: dict = {
        "name": f"{milestone}: {'' if counts else '(public) '}{title}",
        "number": "",
        "score": round(sum(c.score for c in counted), 2) if counts else 0.0,
        "max_score": round(sum(c.max_score for c in counted), 2) if counts else 0.0,
        "status": "passed" if all(c.passed for c in counted) else "failed",
        "output": "\n".join(_check_line(c) for c in checks),
        "output_format": "text",
        "visibility": visibility,
        "tags": [milestone] + ([] if counts else ["public"]),
    }
    if not counted:  # nothing in it counts: Gradescope then shows no pass or fail
        del test["status"]
    return test
