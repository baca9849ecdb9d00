"""`grade practice`: a timed practice session on a paper for one student alone, without a server.

The student sits the paper against the clock in their terminal: Enter (or ``g``) grades their work on the
paper's parts (with the parts' rules and the student's numbers), and shows what the paper's ``feedback``
policy allows while the time runs, filtered by the contest's own filter (grader/contest/feedback.py): the
paper is a one-student contest with a personal window. At the end (the time is up, ``q``, Ctrl-C or the end of
the input) the session is handed in and the report shows full feedback for the best attempt at each part.

Every attempt is one line of a JSON-lines log, appended, flushed and synced before anything is shown: a killed
process loses nothing, and the same command run again continues the same session (its clock never stops)
unless ``--new`` starts another. A session that was handed in stays over: a rerun shows its report again.

The core, :class:`Session`, takes a clock and a grade function, so that it is tested without a terminal, a
sandbox or a sleep; the click command is a thin loop over it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from grader.contest.config import Contest, Feedback, Task, Window
from grader.contest.feedback import filter_report, guarded_tasks
from grader.contest.policy import task_points
from grader.contest.submit import feedback_lines
from grader.paper.config import Paper, PaperFileError, load

Clock = Callable[[], datetime]
GradeFn = Callable[[], dict[str, Any]]  # grades the student's work now: the grader's report (Report.to_json())

LOG_FOLDER = ".practice"
POLICY_WORDS = {
    Feedback.FULL: "every check: its name and, for a failed one, its message",
    Feedback.SCORE: "each part's score",
    Feedback.PASSFAIL: "whether each part has full marks, not its score",
    Feedback.NONE: "only that your attempt was graded",
}


class PracticeError(click.ClickException):
    """Bad input or a log that cannot be used: a message and exit status 2, never a traceback."""

    exit_code = 2


class Unreadable(Exception):
    """The student's work cannot be graded as it is (a notebook being saved, not a notebook): not the
    grader's failure, and no attempt at the paper either."""


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
    """A filtered view (``filter_report``'s) as lines to print: the contest's rendering (``grade submit``'s)."""
    if view.get("feedback") == Feedback.NONE.value:
        return ["  graded (this paper shows no feedback while the time runs)"]
    return feedback_lines({"id": 0, "task": "", "status": "", "feedback": view})[1:]


def clock_text(seconds: float) -> str:
    """``seconds`` as m:ss, or h:mm:ss from an hour."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


@dataclass
class Attempt:
    number: int
    time: datetime
    elapsed: float  # seconds since the session started
    counted: bool
    why: str = ""  # not counted: "late", "ended", "grader" or "unreadable"
    error: str = ""  # the grader's failure, or why the work could not be read
    scores: dict[str, float] = field(default_factory=dict)  # part -> points (counted or late attempts)
    report: dict[str, Any] | None = None  # the grader's full report

    def record(self) -> dict[str, Any]:
        return {
            "kind": "attempt",
            "number": self.number,
            "time": self.time.isoformat(),
            "elapsed": round(self.elapsed, 3),
            "counted": self.counted,
            "why": self.why,
            "error": self.error,
            "scores": self.scores,
            "report": self.report,
        }

    @classmethod
    def of(cls, record: dict[str, Any]) -> Attempt:
        return cls(
            number=int(record["number"]),
            time=datetime.fromisoformat(record["time"]),
            elapsed=float(record["elapsed"]),
            counted=bool(record["counted"]),
            why=str(record.get("why", "")),
            error=str(record.get("error", "")),
            scores={str(k): float(v) for k, v in (record.get("scores") or {}).items()},
            report=record.get("report"),
        )


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line, flushed and synced to disk before returning: one write, so that a
    killed process leaves whole lines (a torn last line at worst, which reading skips)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's records from its last session's start on; unreadable lines (a torn last line) are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise PracticeError(f"cannot read the log {path}: {e}") from None
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("kind") == "start":
            records = [record]
        elif records:
            records.append(record)
    return records


class Session:
    """One practice session on ``paper``, kept in the log at ``log_path``.

    ``clock`` gives the time (an aware datetime); ``grade_fn`` grades the student's work as it is now and
    returns the grader's report, raising :class:`Unreadable` for work that cannot be read and any other
    exception for the grader's own failure (recorded, never counted). A log that holds a session of this paper
    is continued (its start, its minutes) unless ``new``; ``minutes`` (default: the paper's) is a new
    session's length.
    """

    def __init__(
        self,
        paper: Paper,
        clock: Clock,
        grade_fn: GradeFn,
        log_path: Path,
        minutes: float | None = None,
        new: bool = False,
    ):
        self.paper = paper
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
                {"kind": "start", "start": self.start.isoformat(), "minutes": self.minutes, "paper": paper_key(paper)},
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

    def attempt(self) -> Attempt:
        """Grade the work now and log the attempt. Not counted: after the end (graded all the same, full
        feedback), when the grader itself failed, or when the work could not be read."""
        at = self.clock()
        number = len(self.attempts) + 1
        late = "ended" if self.ended is not None else ("late" if at >= self.end else "")
        elapsed = (at - self.start).total_seconds()
        try:
            report = self.grade_fn()
        except Unreadable as e:
            attempt = Attempt(number, at, elapsed, counted=False, why="unreadable", error=str(e))
        except Exception as e:  # noqa: BLE001 - the grader's own failure: recorded, never the student's
            attempt = Attempt(number, at, elapsed, counted=False, why="grader", error=f"{type(e).__name__}: {e}")
        else:
            attempt = Attempt(
                number, at, elapsed, counted=not late, why=late, scores=self.scores(report), report=report
            )
        append_line(self.log_path, attempt.record())
        self.attempts.append(attempt)
        return attempt

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
                note = self.view(attempt).get("set_aside")
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
        """Time left and, as far as the policy now shows, the best per part so far."""
        policy = self.policy()
        counted, failed = self.counted(), [a for a in self.attempts if a.why in ("grader", "unreadable")]
        lines = [
            self.time_line(),
            f"attempts: {len(counted)} counted" + (f", {len(failed)} not graded" if failed else ""),
        ]
        if policy is Feedback.NONE:
            lines.append("  (this paper shows no scores while the time runs)")
            return lines
        total = 0.0
        for part in self.paper.parts:
            best = self.best(part.id)
            points = best.scores.get(part.id, 0.0) if best else 0.0
            total += points
            solved = self.first_solved(part.id)
            when = f", full marks at {clock_text(solved.elapsed)}" if solved else ""
            if policy is Feedback.PASSFAIL:
                lines.append(f"  {part.id}: {when[2:] if solved else 'not yet full marks'}")
            else:
                lines.append(f"  {part.id}: best {points:g} / {part.points:g}{when}")
        if policy is not Feedback.PASSFAIL:
            lines.append(f"  total: {total:g} / {self.paper.total:g}")
        return lines

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
            if view.get("set_aside"):
                lines.append(f"  note: {view['set_aside']}")
            lines += ["```", ""]
        return "\n".join(lines).rstrip() + "\n"


# -- the command --


def notebook_seed(path: Path, paper: Paper) -> tuple[int | None, list[str]]:
    """A paper notebook's seed (metadata ``gptkit.paper.seed``), None for anything else; and notes."""
    if path.suffix != ".ipynb" or not path.is_file():
        return None, []
    try:
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("gptkit", {}).get("paper")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None, []
    if not isinstance(meta, dict):
        return None, []
    notes = []
    if meta.get("id") not in (None, paper.id):
        notes.append(f"this notebook was rendered for the paper {meta.get('id')!r}, not {paper.id!r}")
    seed = meta.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        return None, notes
    return seed, notes


class Grader:
    """Grades ``path`` on the paper's parts with one warm fork server for the whole session (a new one after
    the grader failed, in case that server is what failed)."""

    def __init__(self, path: Path, paper: Paper, seed: int | None, limits: Any):
        self.path, self.paper, self.limits = path, paper, limits
        self.seed = seed
        self.server: Any = None
        self.interrupted = [False]  # set by Ctrl-C (``interrupts``)

    def __call__(self) -> dict[str, Any]:
        from grader.sandbox.client import ForkServer
        from grader.submission import SubmissionError, prepared
        from grader.variants import LESSON, Variant

        try:
            with prepared(self.path) as folder:
                if self.server is None:
                    self.server = ForkServer(self.limits, many=True)
                from grader.runner import grade

                try:
                    report = grade(
                        folder,
                        [p.id for p in self.paper.parts],
                        self.limits,
                        self.server,
                        variant=Variant(self.seed) if self.seed is not None else LESSON,
                        rules={p.id: frozenset(p.rules) for p in self.paper.parts},
                    )
                except BaseException:
                    self.close()
                    if self.interrupted[0]:  # pytest made Ctrl-C an exit code: it is the student's stop
                        raise KeyboardInterrupt from None
                    raise
        except SubmissionError as e:
            raise Unreadable(str(e)) from None
        report.submission = str(self.path)
        return report.to_json()

    def close(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            try:
                server.close()
            except Exception:  # noqa: BLE001 - a server that already died
                pass


@contextmanager
def interrupts() -> Iterator[list[bool]]:
    """Ctrl-C raises KeyboardInterrupt and is remembered (``[True]``): pytest turns one during grading into an
    exit code, which must end the session, not count as the grader's failure."""
    seen = [False]

    def handler(signum: int, frame: Any) -> None:
        seen[0] = True
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield seen
        return
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


class Commands:
    """The student's commands, a line at a time, from the file descriptor ``fd`` (stdin): read unbuffered, so
    that waiting for the next line with a timeout never misses lines already read into a buffer."""

    def __init__(self, fd: int | None = 0):
        self.fd = fd  # None: no file descriptor (an in-memory stdin): read lines as they come
        self.pending = b""
        self.closed = False

    def next(self, timeout: float) -> str | None:
        """The next line, stripped and lower-cased; None at the end of input; "timeout" when no line came
        within ``timeout`` seconds."""
        try:
            import select
        except ImportError:  # pragma: no cover - no select on stdin (Windows): wait for the line
            fd = None
        else:
            fd = self.fd
        if fd is None:
            line = sys.stdin.readline()
            return line.strip().lower() if line else None
        while b"\n" not in self.pending and not self.closed:
            if timeout <= 0:
                return "timeout"
            started = time.monotonic()
            try:
                ready, _, _ = select.select([fd], [], [], timeout)
            except (OSError, ValueError):  # a stdin select cannot wait on (Windows): wait for the line
                line = sys.stdin.readline()
                return line.strip().lower() if line else None
            timeout -= time.monotonic() - started
            if not ready:
                return "timeout"
            chunk = os.read(fd, 4096)
            self.pending += chunk
            self.closed = not chunk
        if not self.pending:
            return None
        line, _, self.pending = self.pending.partition(b"\n")
        text = line.decode("utf-8", errors="replace")
        if not os.isatty(fd):  # piped: show what was read, as a terminal would
            click.echo(text)
        return text.strip().lower()


HELP = "Enter or g: grade your work now   s: status   q: hand in and end   h: this help"


def run_session(session: Session, echo: Callable[..., None], commands: Commands) -> None:
    """The terminal loop: commands until the time is up, ``q``, Ctrl-C or the end of input; then hands in."""
    reason = "time"
    warned = False  # a hand-in with nothing graded: said once, then a second q hands in
    try:
        while True:
            if session.over:
                break
            echo(f"[{clock_text(session.remaining())} left] > ", nl=False)
            command = commands.next(session.remaining())
            if command == "timeout":
                break
            if command is None:
                reason = "end of input"
                break
            if command in ("", "g"):
                echo("grading...")
                attempt = session.attempt()
                echo("\n".join(session.attempt_lines(attempt)))
            elif command == "s":
                echo("\n".join(session.status()))
            elif command == "q":
                if not session.counted() and not warned:
                    warned = True
                    echo(
                        "nothing is graded yet, so handing in now scores 0: press g (or Enter) to grade your "
                        "files first, or q again to hand in as it is"
                    )
                    continue
                reason = "quit"
                break
            elif command in ("h", "?", "help"):
                echo(HELP)
            else:
                echo(f"unknown command {command!r}; {HELP}")
    except KeyboardInterrupt:
        reason = "interrupted"
        echo("")
    if reason == "time" or session.clock() >= session.end:
        echo(f"the time is up ({session.minutes:g} minutes)")
        reason = "time"
    session.finish(reason)


@click.command()
@click.argument("paper_path", metavar="PAPER", type=click.Path(path_type=Path))
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option(
    "--minutes",
    type=float,
    default=None,
    help="The session's length in minutes (default: the paper's minutes). A resumed session keeps its own.",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The session's log (default: PATH/.practice/log.jsonl). The same log continues the same session.",
)
@click.option("--new", is_flag=True, help="Start a new session, even if the log holds one.")
def practice(paper_path: Path, path: Path, minutes: float | None, log_path: Path | None, new: bool) -> None:
    """Sit PAPER (a paper.toml or its folder) alone, against the clock, on your work in PATH (a folder of
    exercise files or a paper notebook; default: the current folder).

    Press Enter to grade your work: you see what the paper's feedback policy allows while the time runs.
    s shows the status, q hands in. At the end you get the full feedback on your best attempt at each part,
    also written to PATH/.practice/report.md. Every attempt goes to the log as it happens: run the same command
    again to continue a session that was killed.
    """
    if minutes is not None and not minutes > 0:
        raise PracticeError(f"--minutes must be a positive number, not {minutes:g}")
    try:
        paper = load(paper_path)
    except PaperFileError as e:
        raise PracticeError(str(e)) from None
    if not path.exists():
        raise PracticeError(f"there is no {path}: give the folder of your exercise files or your paper notebook")
    if path.is_file() and path.suffix != ".ipynb":
        raise PracticeError(f"{path} is neither a folder nor a notebook (.ipynb)")
    folder = (path if path.is_dir() else path.parent) / LOG_FOLDER
    log_path = log_path or folder / "log.jsonl"
    seed, notes = notebook_seed(path, paper)

    from grader.options import limits

    grader = Grader(path, paper, seed, limits())
    try:
        session = Session(paper, now, grader, log_path, minutes=minutes, new=new)
    except OSError as e:
        raise PracticeError(f"cannot write the log {log_path}: {e.strerror or e}") from None
    echo = click.echo
    try:
        if session.ended is not None:
            echo(f"this session was handed in at {session.ended:%H:%M:%S}; give --new to start another")
        else:
            echo(f"{paper.title}" + (" (continued)" if session.resumed else ""))
            for part in paper.parts:
                rules = f"  rules: {', '.join(part.rules)}" if part.rules else ""
                echo(f"  {part.id}: {part.points:g} points{rules}")
            echo(f"  total: {paper.total:g} points")
            echo(
                f"started {session.start:%H:%M:%S}, {session.minutes:g} minutes: "
                f"the time is up at {session.end:%H:%M:%S}"
            )
            echo(f"while the time runs you see {POLICY_WORDS[paper.feedback]}; full feedback at the end")
            echo(
                "your numbers: "
                + ("this notebook's (its seed)" if seed is not None else "the lesson's")
                + f"; log: {log_path}"
            )
            for note in [*notes, *session.notes]:
                echo(f"note: {note}")
            echo(HELP)
            with interrupts() as interrupted:
                grader.interrupted = interrupted
                try:
                    fd: int | None = sys.stdin.fileno()
                except (OSError, ValueError):
                    fd = None
                run_session(session, echo, Commands(fd))
    finally:
        grader.close()
    report = session.final_report()
    out = folder / "report.md"
    try:  # written first: the terminal may be gone (a closed pipe) by now
        from grader.files import write_atomically

        write_atomically(out, report)
        written = f"report written to {out}"
    except OSError as e:
        written = f"could not write {out}: {e.strerror or e}"
    echo("")
    echo(report)
    echo(written)
