"""What a student may see of a grading report, under the contest's feedback policy.

The filtered view is built up from nothing, field by field, never by deleting from the report: a field the
grader adds later then stays hidden until someone decides it may be shown. Under ``score``, ``passfail`` and
``none`` no check name or message leaves this module, since those would tell the student what the hidden checks
test. Scores are in the contest's points for each task (``policy.task_points``).
"""

from __future__ import annotations

from typing import Any

from grader.contest.config import Contest, Feedback
from grader.contest.policy import Phase, WindowState, task_points

# The fields of a check a student sees under ``full``. Not the traceback: it is the grader's own failure, and
# it quotes the hidden suite's source; the coach sees it in the full report.
CHECK_FIELDS = ("name", "score", "max_score", "passed", "message", "counted")


def policy_at(contest: Contest, state: WindowState) -> Feedback:
    """The feedback policy for a student whose window is in ``state``: the after-policy once it has ended."""
    return contest.feedback_after if state.phase is Phase.ENDED else contest.feedback_during


def visible_report(contest: Contest, report: dict[str, Any], state: WindowState) -> dict[str, Any]:
    """What the student may see of ``report`` (the grader's JSON, ``Report.to_json()``) with their window in
    ``state``. Milestones that are not tasks of the contest are left out."""
    return filter_report(contest, report, policy_at(contest, state))


def filter_report(contest: Contest, report: dict[str, Any], policy: Feedback) -> dict[str, Any]:
    """``report`` as seen under ``policy``: full = every check; score = each task's score; passfail = each task
    passed (full marks) or not; none = only that it was received."""
    view: dict[str, Any] = {"feedback": policy.value, "received": True}
    if policy is Feedback.NONE:
        return view
    tasks = []
    for milestone in report.get("milestones", []):
        task = contest.task(milestone.get("id"))
        if task is None:
            continue
        score = task_points(task, float(milestone.get("score", 0)), float(milestone.get("max_score", 0)))
        entry: dict[str, Any] = {"id": task.id, "title": milestone.get("title", "")}
        if policy is Feedback.PASSFAIL:
            entry["passed"] = score >= task.points
        else:
            entry["score"] = score
            entry["max_score"] = task.points
        if policy is Feedback.FULL:
            entry["checks"] = [{key: check.get(key) for key in CHECK_FIELDS} for check in milestone.get("checks", [])]
        tasks.append(entry)
    view["tasks"] = tasks
    if policy is Feedback.FULL:
        view["set_aside"] = report.get("set_aside", {}).get("note", "")
    return view
