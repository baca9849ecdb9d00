"""A practice session on a paper: its clock, its attempts, what the student sees of them (the contest's filter and
renderer, grader/contest/feedback.py) and the report at the end."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from grader.contest.config import Contest, Task, Window
from grader.contest.feedback import filter_report, guarded_tasks, render, render_lines
from grader.contest.policy import task_points
from grader.feedback import Feedback
from grader.paper.config import Paper
from grader.practice.errors import PracticeError, Unreadable
from grader.practice.log import Attempt, append_line, read_log

Clock = Callable[[], datetime]
GradeFn = Callable[[], dict[str, Any]]  # grades the student's work now: the grader's report (Report.to_json())
DigestFn = Callable[[], str]  # the saved work's digest now: equal digests, equal work


def now() -> datetime:
    return datetime.now().astimezone()


def as_contest(paper: Paper, minutes: float) -> Contest:
    """The paper as a one-student contest: a task per part with its points, a personal window of ``minutes``,
    the paper's feedback while it runs and full feedback after."""
    return Contest(
        title=paper.title,
        tasks=tuple(Task(id=p.id, points=p.points) for p in paper.parts),
        window=Window(duration=timedelta(minutes=minutes), personal=True),
        feedback_during=paper.feedback,
        feedback_after=Feedback.FULL,
    )


def paper_key(paper: Paper) -> dict[str, Any]:
    """What a log records of its paper, to tell whether a rerun is on the same one."""
    return {
        "id": paper.id,
        "title": paper.title,
        "parts": [{"id": p.id, "points": p.points, "rules": list(p.rules)} for p in paper.parts],
    }


def view_lines(view: dict[str, Any]) -> list[str]:
    """A filtered view (``filter_report``'s) as lines to print: the contest's renderer (``grade submit``'s)."""
    return render_lines(view, "graded (this paper shows no feedback while the time runs)")


def clock_text(seconds: float) -> str:
    """``seconds`` as m:ss, or h:mm:ss from an hour."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Session:
    """One practice session on ``paper``, kept in the log at ``log_path``.

    ``clock`` gives the time (an aware datetime); ``grade_fn`` grades the student's work as it is now and
    returns the grader's report, raising :class:`Unreadable` for work that cannot be read and any other
    exception for the grader's own failure (recorded, never counted). A log that holds a session of this paper
    is continued (its start, its minutes) unless ``new``; ``minutes`` (default: the paper's) is a new
    session's length. ``work`` names what is graded (a notebook's name; "" for a folder): a log of another
    notebook's session is refused. ``digest_fn`` tells whether the saved work changed since an attempt.
    """

    def __init__(
        self,
        paper: Paper,
        clock: Clock,
        grade_fn: GradeFn,
        log_path: Path,
        minutes: float | None = None,
        new: bool = False,
        work: str = "",
        digest_fn: DigestFn | None = None,
    ):
        self.paper = paper
        self.digest_fn = digest_fn
        self.clock = clock
        self.grade_fn = grade_fn
        self.log_path = log_path
        self.attempts: list[Attempt] = []
        self.ended: datetime | None = None  # handed in (q, Ctrl-C, end of input) or the time was up
        self.end_reason = ""
        self.resumed = False
        self.notes: list[str] = []  # what the student should know about a resumed session
        records = [] if new else read_log(log_path)
        if records:
            start = records[0]
            if start.get("paper") != paper_key(paper):
                raise PracticeError(
                    f"the log {log_path} holds a session of another paper (or this paper has changed since): "
                    "give --new to start a new session, or --log for another log"
                )
            if start.get("work", "") != work:
                raise PracticeError(
                    f"the log {log_path} holds the session of {start.get('work') or 'a folder'}, not of "
                    f"{work or 'this folder'}: give --log for a log of its own, or --new"
                )
            try:
                self.start = datetime.fromisoformat(start["start"])
                self.minutes = float(start["minutes"])
                for record in records[1:]:
                    if record.get("kind") == "attempt":
                        self.attempts.append(Attempt.of(record))
                    elif record.get("kind") == "end" and self.ended is None:
                        self.ended = datetime.fromisoformat(record["time"])
                        self.end_reason = str(record.get("reason", ""))
            except (KeyError, TypeError, ValueError) as e:
                raise PracticeError(f"the log {log_path} is damaged ({type(e).__name__}: {e}): give --new") from None
            self.resumed = True
            if minutes is not None and minutes != self.minutes:
                self.notes.append(
                    f"this session keeps its {self.minutes:g} minutes (give --new to start one of {minutes:g})"
                )
        else:
            self.start = clock()
            self.minutes = float(minutes if minutes is not None else paper.minutes)
            append_line(
                log_path,
                {
                    "kind": "start",
                    "start": self.start.isoformat(),
                    "minutes": self.minutes,
                    "paper": paper_key(paper),
                    "work": work,
                },
            )
        self.contest = as_contest(paper, self.minutes)

    # -- the clock --

    @property
    def end(self) -> datetime:
        """When the time is up."""
        return self.start + timedelta(minutes=self.minutes)

    def remaining(self) -> float:
        """Seconds left (0 once the time is up or the session was handed in)."""
        if self.ended is not None:
            return 0.0
        return max(0.0, (self.end - self.clock()).total_seconds())

    @property
    def over(self) -> bool:
        return self.ended is not None or self.clock() >= self.end

    def policy(self) -> Feedback:
        """What the student sees now: the paper's policy while the time runs, full feedback after."""
        return Feedback.FULL if self.over else self.paper.feedback

    def finish(self, reason: str) -> None:
        """Hand the session in (``reason``: "time", "quit", "interrupted", "end of input"); once only."""
        if self.ended is not None:
            return
        self.ended = min(self.clock(), self.end)
        self.end_reason = reason
        append_line(self.log_path, {"kind": "end", "time": self.ended.isoformat(), "reason": reason})

    # -- attempts --

    def attempt(self, final: bool = False) -> Attempt:
        """Grade the work now and log the attempt. Not counted: after the end (graded all the same, full
        feedback), when the grader itself failed, or when the work could not be read.

        ``final``: the grading at hand-in, of the work as saved when the time ran out or the student handed
        in, as a contest grades its final submission: counted, at the end's time at the latest."""
        at = min(self.clock(), self.end) if final else self.clock()
        number = len(self.attempts) + 1
        late = "ended" if self.ended is not None else ("late" if at >= self.end and not final else "")
        elapsed = (at - self.start).total_seconds()
        digest = self.digest_fn() if self.digest_fn else ""
        try:
            report = self.grade_fn()
        except Unreadable as e:
            attempt = Attempt(number, at, elapsed, counted=False, why="unreadable", error=str(e), final=final)
        except Exception as e:  # noqa: BLE001 - the grader's own failure: recorded, never the student's
            why, error = "grader", f"{type(e).__name__}: {e}"
            attempt = Attempt(number, at, elapsed, counted=False, why=why, error=error, final=final)
        else:
            scores = self.scores(report)
            attempt = Attempt(
                number, at, elapsed, not late, late, scores=scores, report=report, digest=digest, final=final
            )
        append_line(self.log_path, attempt.record())
        self.attempts.append(attempt)
        return attempt

    def unchanged_since(self) -> Attempt | None:
        """The last counted attempt, if the saved work is still what it graded (nothing new to grade at
        hand-in); None where it changed, or where that cannot be told."""
        counted = self.counted()
        if not counted or self.digest_fn is None or not counted[-1].digest:
            return None
        return counted[-1] if self.digest_fn() == counted[-1].digest else None

    def scores(self, report: dict[str, Any]) -> dict[str, float]:
        """Each part's points in ``report`` (0 for a part it does not grade)."""
        by_id = {m.get("id"): m for m in report.get("milestones", [])}
        out = {}
        for task in self.contest.tasks:
            m = by_id.get(task.id, {})
            out[task.id] = task_points(task, float(m.get("score", 0)), float(m.get("max_score", 0)))
        return out

    def view(self, attempt: Attempt, policy: Feedback | None = None) -> dict[str, Any]:
        """What the student may see of ``attempt``'s report: the contest's filter, under ``policy`` (default:
        full for an attempt after the end, else the policy now). While the time runs, a part graded with the
        grader's solution of another part gets at most its score, as in a contest."""
        if policy is None:
            policy = Feedback.FULL if attempt.why in ("late", "ended") else self.policy()
        guarded = {} if self.over else guarded_tasks(self.contest)
        view = filter_report(self.contest, attempt.report or {}, policy, guarded)
        if "tasks" in view:  # the report lists them in the lesson's order; the student reads the paper's
            order = {p.id: i for i, p in enumerate(self.paper.parts)}
            view["tasks"] = sorted(view["tasks"], key=lambda t: order.get(t["id"], len(order)))
        return view

    def attempt_lines(self, attempt: Attempt) -> list[str]:
        """What to print after ``attempt``: the visible feedback, whether it counts, the time left."""
        at = f"attempt {attempt.number} at {clock_text(attempt.elapsed)}"
        if attempt.why == "grader":
            lines = [
                f"{at}: the grader itself failed, not your work: {attempt.error}",
                "  this attempt is not counted; try again (and please report it if it happens again)",
            ]
        elif attempt.why == "unreadable":
            lines = [f"{at}: your work cannot be graded as it is: {attempt.error}", "  this attempt is not counted"]
        else:
            lines = [f"{at}: graded", *view_lines(self.view(attempt))]
            if attempt.why:
                lines.append("  the time is up: this attempt is not counted (its feedback is in full)")
            else:
                note = render(self.view(attempt)).set_aside
                if note:
                    lines.append(f"  note: {note}")
        lines.append(self.time_line())
        return lines

    def time_line(self) -> str:
        if self.ended is not None:
            return f"the session ended at {self.ended:%H:%M:%S}"
        left = self.remaining()
        if left <= 0:
            return f"the time is up (it ended at {self.end:%H:%M:%S})"
        return f"time left: {clock_text(left)} (until {self.end:%H:%M:%S})"

    # -- results --

    def counted(self) -> list[Attempt]:
        return [a for a in self.attempts if a.counted]

    def best(self, part: str) -> Attempt | None:
        """The counted attempt with the most points on ``part`` (the earliest of equals); None: none counted."""
        best = None
        for attempt in self.counted():
            if best is None or attempt.scores.get(part, 0.0) > best.scores.get(part, 0.0):
                best = attempt
        return best

    def first_solved(self, part: str) -> Attempt | None:
        """The first counted attempt with full marks on ``part``."""
        found = self.paper.part(part)
        if found is None:
            return None
        return next((a for a in self.counted() if a.scores.get(part, 0.0) >= found.points), None)

    def status(self) -> list[str]:
        """Time left and, as far as the policy now shows, the best per part so far: each part's best attempt
        through the contest's filter and renderer, as an attempt's feedback is shown."""
        counted, failed = self.counted(), [a for a in self.attempts if a.why in ("grader", "unreadable")]
        lines = [
            self.time_line(),
            f"attempts: {len(counted)} counted" + (f", {len(failed)} not graded" if failed else ""),
        ]
        bests = {"milestones": [self.best_result(part.id) for part in self.paper.parts]}
        shown = render(filter_report(self.contest, bests, self.policy()))
        if shown.withheld:
            lines.append("  (this paper shows no scores while the time runs)")
            return lines
        for task in shown.tasks:
            solved = self.first_solved(task.id)
            when = f"full marks at {clock_text(solved.elapsed)}" if solved else ""
            if task.scored:
                lines.append(f"  {task.id}: best {task.result}" + (f", {when}" if when else ""))
            else:  # full marks or not: when, or not yet; neither shown: the verdict of the best attempt
                lines.append(f"  {task.id}: {(when if task.result else '') or task.result or task.verdict}")
        if any(task.scored for task in shown.tasks):
            total = sum(task.score for task in shown.tasks)
            lines.append(f"  total: {total:g} / {self.paper.total:g}")
        return lines

    def best_result(self, part: str) -> dict[str, Any]:
        """The grader's result for ``part`` in its best counted attempt (nothing graded: none of its points)."""
        best = self.best(part)
        found = next(
            (m for m in ((best.report or {}).get("milestones", []) if best else []) if m.get("id") == part), None
        )
        return found or {"id": part, "score": 0.0, "max_score": 0.0, "checks": []}

    def final_report(self) -> str:
        """The report at the end, in Markdown: per part its best attempt in full, its points and when it was
        first solved; the total."""
        how = {
            "time": "the time was up",
            "quit": "handed in",
            "interrupted": "interrupted by Ctrl-C",
            "end of input": "the input ended",
        }.get(self.end_reason, self.end_reason or "not yet ended")
        ended = self.ended or min(self.clock(), self.end)
        lines = [
            f"# Practice: {self.paper.title}",
            "",
            f"- started {self.start:%Y-%m-%d %H:%M:%S}, {self.minutes:g} minutes; "
            f"ended {ended:%H:%M:%S} ({how}), after {clock_text((ended - self.start).total_seconds())}",
            f"- attempts: {len(self.counted())} counted, {len(self.attempts) - len(self.counted())} not counted",
            "",
            "| Part | Points | Best attempt | First solved |",
            "|---|---|---|---|",
        ]
        total = 0.0
        for part in self.paper.parts:
            best, solved = self.best(part.id), self.first_solved(part.id)
            points = best.scores.get(part.id, 0.0) if best else 0.0
            total += points
            lines.append(
                f"| {part.id} | {points:g} / {part.points:g} | {f'attempt {best.number}' if best else 'none'} | "
                + (f"{clock_text(solved.elapsed)} (attempt {solved.number})" if solved else "not solved")
                + " |"
            )
        lines += [f"| **Total** | **{total:g} / {self.paper.total:g}** | | |", ""]
        for part in self.paper.parts:
            best = self.best(part.id)
            solved = self.first_solved(part.id)
            lines.append(f"## {part.id}" + (f" (rules: {', '.join(part.rules)})" if part.rules else ""))
            lines.append("")
            lines.append(
                f"First solved at {clock_text(solved.elapsed)} (attempt {solved.number})." if solved else "Not solved."
            )
            if best is None:
                lines += ["No counted attempt.", ""]
                continue
            view = self.view(best, Feedback.FULL)
            view["tasks"] = [t for t in view.get("tasks", []) if t["id"] == part.id]
            lines += [f"Best attempt: {best.number}, at {clock_text(best.elapsed)}:", "", "```"]
            lines += view_lines(view) or [f"  {part.id}: not graded"]
            if note := render(view).set_aside:
                lines.append(f"  note: {note}")
            lines += ["```", ""]
        return "\n".join(lines).rstrip() + "\n"
