"""What a student may see of a grading report, under the contest's feedback policy.

The filtered view is built up from nothing, field by field, never by deleting from the report: a field the
grader adds later then stays hidden until someone decides it may be shown. Under ``score``, ``passfail`` and
``none`` no check name or message leaves this module, since those would tell the student what the hidden checks
test. Scores are in the contest's points for each task (``policy.task_points``), a check's too (``scaled``):
a task's checks add up to its score, never to the grader's own points for its milestone.

A task whose milestone runs with the grader's own solution of another task in its worker (``m2`` with the
grader's ``m1`` while ``m1`` is a task too) gets at most ``score`` while the student's window is open. The
redactor (grader/sandbox/secrecy.py) withholds that solution's text from messages, but no filter can find it
once a student's code has encoded it (base64, numbers in a tensor): check messages are the channel, so they wait
for the end of the window, when the other task can no longer be submitted.

In a contest on a paper the check messages (``full``) carry each question's working and the grader's own
solutions: a student whose window has ended while others still sit the same paper (extra time, a late start, a
personal window) gets the after-policy's scores but not its checks until every window has ended
(``held_back``), and a guarded task stays guarded until then too. Where no common end exists (personal windows
with no hard end) someone may always start later, so the checks wait for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.contest.config import Contest
from grader.contest.metric import split_check
from grader.contest.policy import Phase, WindowState, clock_text, task_points
from grader.feedback import Feedback
from grader.milestones import GRADABLE
from grader.results import Verdict, shown_verdict

# The fields of a check a student sees under ``full``. Not the traceback: it is the grader's own failure, and
# it quotes the hidden suite's source; the coach sees it in the full report.
CHECK_FIELDS = ("name", "score", "max_score", "passed", "message", "counted")


def scaled(entry: dict[str, Any], scale: float, digits: int | None = None) -> dict[str, Any]:
    """A milestone's or a check's result with its score and max_score in contest points: ``scale`` is the task's
    points over the grader's points at stake for its milestone; ``digits``: rounded to that many."""

    def points(value: Any) -> float:
        value = float(value or 0) * scale
        return value if digits is None else round(value, digits)

    return {**entry, "score": points(entry.get("score")), "max_score": points(entry.get("max_score"))}


def others_sit(contest: Contest, state: WindowState) -> bool:
    """Whether, in a contest on a paper, another student may still be sitting it while this one's window is in
    ``state``: what this student is shown then can be handed on to them."""
    return contest.paper is not None and not state.all_ended


def held_back(contest: Contest, state: WindowState) -> bool:
    """Whether the after-policy's checks wait for every window's end: this student's window has ended, others may
    still sit the paper, and the checks are more than the window itself showed (a student who saw every check
    while sitting is shown nothing new by them after)."""
    return (
        state.phase is Phase.ENDED
        and others_sit(contest, state)
        and contest.feedback_after.shows.checks
        and not contest.feedback_during.shows.checks
    )


def policy_at(contest: Contest, state: WindowState) -> Feedback:
    """The feedback policy for a student whose window is in ``state``: the after-policy once it has ended; its
    scores without its checks (``score``) while they are ``held_back``."""
    if state.phase is not Phase.ENDED:
        return contest.feedback_during
    return Feedback.SCORE if held_back(contest, state) else contest.feedback_after


def held_note(state: WindowState) -> str:
    """Why a student whose window has ended sees no check yet, and until when."""
    if state.all_end is None:
        return (
            "its checks are not shown: other students may still start this paper (personal windows with no hard "
            "end), and the checks carry the questions' working"
        )
    return (
        "its checks are shown when every student's window on this paper has ended, at "
        f"{clock_text(state.all_end)}: others may still be sitting it"
    )


def guarded_tasks(contest: Contest) -> dict[str, tuple[str, ...]]:
    """The tasks graded with the grader's own solution of other tasks: task -> those tasks."""
    owner = {module: task.id for task in contest.tasks for module in GRADABLE[task.id].modules}
    guarded = {}
    for task in contest.tasks:
        others = {owner[m] for m in GRADABLE[task.id].trusted if owner.get(m, task.id) != task.id}
        if others:
            guarded[task.id] = tuple(sorted(others))
    return guarded


def visible_report(
    contest: Contest, report: dict[str, Any], state: WindowState, sealed: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """What the student may see of ``report`` (the grader's JSON, ``Report.to_json()``) with their window in
    ``state``. Milestones that are not tasks of the contest are left out; ``sealed``: the metric tasks whose
    split B the coach has not revealed (grader/contest/metric.py), whose B check nobody sees yet."""
    # a guarded task's checks could carry another task's solution to a student who may still submit that task
    waiting = state.phase is not Phase.ENDED or others_sit(contest, state)
    guarded = guarded_tasks(contest) if waiting else {}
    view = filter_report(contest, report, policy_at(contest, state), guarded, sealed)
    if held_back(contest, state):
        for task in view.get("tasks", []):
            task.setdefault("note", held_note(state))
    return view


def task_verdict(checks: list[dict[str, Any]]) -> str | None:
    """A task's verdict, as a contest system gives one: that of its first check the student's code failed
    (a wrong answer, a runtime error, a time limit...), or OK. Checks the grader set aside are skipped. None for
    a report graded before checks had verdicts: no verdict shown rather than a wrong one."""
    for check in checks:
        if check.get("passed") or check.get("internal_error") or check.get("verdict") == Verdict.NOT_COUNTED.value:
            continue
        return shown_verdict(check)
    return Verdict.OK.value


class View(dict):
    """A filtered view of a report: the JSON a student's screen gets (a plain dict to ``json``), which also renders
    itself (``shown``) for the contest page's template."""

    @property
    def shown(self) -> Shown:
        return render(self)


def filter_report(
    contest: Contest,
    report: dict[str, Any],
    policy: Feedback,
    guarded: dict[str, tuple[str, ...]] | None = None,
    sealed: frozenset[str] = frozenset(),
) -> View:
    """``report`` as seen under ``policy``, by what it shows (``policy.shows``): full = every check; score = each
    task's score; passfail = each task passed (full marks) or not; none = only that it was received. Each task
    shown has its verdict (a class such as "runtime error": it tells nothing of what a check tests). A task in
    ``guarded`` gets at most its score."""
    shows = policy.shows
    view = View({"feedback": policy.value, "received": True})
    if not shows.tasks:
        return view
    tasks = []
    for milestone in report.get("milestones", []):
        task = contest.task(milestone.get("id"))
        if task is None:
            continue
        score = task_points(task, float(milestone.get("score", 0)), float(milestone.get("max_score", 0)))
        shown = [c for c in milestone.get("checks", []) if not (task.id in sealed and split_check(c) == "B")]
        entry: dict[str, Any] = {"id": task.id, "title": milestone.get("title", "")}
        if (verdict := task_verdict(shown)) is not None:
            entry["verdict"] = verdict
        if shows.passed:
            entry["passed"] = score >= task.points
        if shows.scores:
            entry["score"] = score
            entry["max_score"] = task.points
        if shows.checks and task.id in (guarded or {}):
            others = " and ".join((guarded or {})[task.id])
            when = "every window on the paper has ended" if contest.paper else "your window ends"
            entry["note"] = (
                f"its checks are shown when {when}: {task.id} is graded with the grader's own "
                f"solution of {others}, a task of this contest, which a check's message could carry out"
            )
        elif shows.checks:
            stake = float(milestone.get("max_score", 0))
            scale = task.points / stake if stake > 0 else 0.0  # the grader's points -> the task's, as its score
            entry["checks"] = [scaled({key: check.get(key) for key in CHECK_FIELDS}, scale, 4) for check in shown]
        tasks.append(entry)
    view["tasks"] = tasks
    if shows.checks:
        view["set_aside"] = report.get("set_aside", {}).get("note", "")
    return view


# -- the one renderer: every screen shows a filtered view through it, and none looks at the policy --


@dataclass(frozen=True)
class CheckRow:
    name: str
    passed: bool
    message: str


@dataclass(frozen=True)
class TaskRow:
    """A task of a filtered view, as every screen shows it."""

    id: str
    result: str = ""  # "7.98 / 30" (a score), "passed" or "not yet full marks"; "": the view shows neither
    scored: bool = False  # ``result`` is a score, in points
    score: float = 0.0  # with ``scored``
    tone: str = ""  # "ok" or "bad": a pass or a fail; "" for a score or nothing
    verdict: str = ""
    note: str = ""
    checks: tuple[CheckRow, ...] = ()

    @property
    def passed_checks(self) -> int:
        return sum(c.passed for c in self.checks)


@dataclass(frozen=True)
class Shown:
    """A filtered view as rows to show."""

    withheld: bool  # nothing shown but that the submission was graded (``received``)
    tasks: tuple[TaskRow, ...] = ()
    set_aside: str = ""  # the grader's note on checks it set aside


def render(view: dict[str, Any]) -> Shown:
    """A filtered view (``filter_report``'s, or the server's JSON of one; ``{}``: none) as rows, from what it
    holds: the terminal (``render_lines``), the contest page (grader/templates/contest/me.html) and
    ``grade practice`` all show these."""
    rows = []
    for task in view.get("tasks", []):
        result, scored, tone = "", False, ""
        if "score" in task:
            result, scored = f"{task['score']:g} / {task['max_score']:g}", True
        elif "passed" in task:
            result = "passed" if task["passed"] else "not yet full marks"
            tone = "ok" if task["passed"] else "bad"
        checks = tuple(
            CheckRow(str(c.get("name")), bool(c.get("passed")), str(c.get("message") or ""))
            for c in task.get("checks") or []
        )
        rows.append(
            TaskRow(
                id=task["id"],
                result=result,
                scored=scored,
                score=float(task.get("score", 0.0)),
                tone=tone,
                verdict=task.get("verdict") or "",
                note=task.get("note") or "",
                checks=checks,
            )
        )
    withheld = bool(view.get("received")) and "tasks" not in view
    return Shown(withheld=withheld, tasks=tuple(rows), set_aside=view.get("set_aside") or "")


def render_lines(view: dict[str, Any], withheld: str) -> list[str]:
    """A filtered view as lines to print (``grade submit``, ``grade practice``); ``withheld``: the line when the
    view shows nothing but that the submission was graded."""
    shown = render(view)
    lines = [f"  {withheld}"] if shown.withheld else []
    for task in shown.tasks:
        if task.result:
            verdict = f" ({task.verdict})" if task.verdict else ""
            lines.append(f"  {task.id}: {task.result}{' points' if task.scored else ''}{verdict}")
        elif task.verdict:
            lines.append(f"  {task.id}: {task.verdict}")
        if task.note:
            lines.append(f"    ({task.note})")
        if task.checks:  # the failures in full; the passes only counted, or 50 "ok" lines would bury them
            lines.append(f"    {task.passed_checks} of {len(task.checks)} checks passed")
        for check in task.checks:
            if not check.passed:
                message = f": {check.message}" if check.message else ""
                lines.append(f"    FAIL {check.name}{message}")
    return lines
