"""`grade practice`: the click command, which sets a session up, grades with a ``Grader`` and runs the loop."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from grader import nofollow
from grader.batch.discover import FoundSubmission
from grader.files import write_atomically
from grader.grading import Grader, Request
from grader.options import limits
from grader.paper.config import Paper, PaperFileError, load
from grader.practice.errors import PracticeError, Unreadable
from grader.practice.log import LOG_FOLDER
from grader.practice.loop import HELP, run_session
from grader.practice.session import Session, now
from grader.practice.signals import interrupts
from grader.practice.stdin import Commands
from grader.runner import HIDDEN_AVAILABLE
from grader.submission import MAX_NOTEBOOK_BYTES, SubmissionError
from grader.variants import LESSON, Variant


def notebook_seed(path: Path, paper: Paper) -> tuple[int | None, list[str]]:
    """A paper notebook's seed (metadata ``gptkit.paper.seed``), None for anything else; and notes."""
    if path.suffix != ".ipynb" or not path.is_file():
        return None, []
    try:
        data = nofollow.read_bytes(path, MAX_NOTEBOOK_BYTES)  # a link is not read: grading refuses it
        meta = json.loads(data).get("metadata", {}).get("gptkit", {}).get("paper")
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
    s shows the status, q hands in. When the time is up or you hand in, your saved work is graded once more
    and counted, as a contest grades a final submission. At the end you get the full feedback on your best
    attempt at each part, also written to PATH/.practice/report.md (a notebook's: .practice/NOTEBOOK/ beside
    it). Every attempt goes to the log as it happens: run the same command again to continue a session that
    was killed.
    """
    paper = checked_paper(paper_path, path, minutes)
    folder = session_folder(path)
    log_path = log_path or folder / "log.jsonl"
    seed, notes = notebook_seed(path, paper)

    grader = Grader(limits())  # one warm fork server for the session; a new one after the grader failed
    request = Request(
        path,
        tuple(p.id for p in paper.parts),
        variant=Variant(seed) if seed is not None else LESSON,
        rules={p.id: frozenset(p.rules) for p in paper.parts},
        name=str(path),
    )
    interrupted = [False]  # set by Ctrl-C: ``interrupts``' own flag while the loop runs (read as grading fails)
    grade_now = grade_function(grader, request, lambda: interrupted[0])
    session = open_session(paper, path, log_path, grade_now, minutes, new)
    echo = click.echo
    try:
        if session.ended is not None:
            echo(f"this session was handed in at {session.ended:%H:%M:%S}; give --new to start another")
        else:
            for line in opening_lines(paper, session, seed, notes, log_path):
                echo(line)
            echo(HELP)
            with interrupts() as interrupted:
                run_session(session, echo, Commands(_stdin_fd()))
    finally:
        grader.close()
    report = session.final_report()
    written = write_report(folder / "report.md", report)  # written first: the terminal may be gone (a closed pipe)
    echo("")
    echo(report)
    echo(written)


def checked_paper(paper_path: Path, path: Path, minutes: float | None) -> Paper:
    """The paper at ``paper_path``, once the command's arguments are checked: PracticeError says what is wrong
    (``minutes`` not positive, no paper there, ``path`` a link, missing, or a file that is not a notebook)."""
    if minutes is not None and not minutes > 0:
        raise PracticeError(f"--minutes must be a positive number, not {minutes:g}")
    try:
        paper = load(paper_path)
    except PaperFileError as e:
        raise PracticeError(str(e)) from None
    if nofollow.is_link(path):  # its work is not the student's, nor is its folder theirs to write the log in
        raise PracticeError(nofollow.refused(path.name))
    if not path.exists():
        raise PracticeError(f"there is no {path}: give the folder of your exercise files or your paper notebook")
    if path.is_file() and path.suffix != ".ipynb":
        raise PracticeError(f"{path} is neither a folder nor a notebook (.ipynb)")
    return paper


def session_folder(path: Path) -> Path:
    """Where the session of the work at ``path`` is kept: a folder's in PATH/.practice/; a notebook's in a folder
    of its own there, so that two students' notebooks side by side are two sessions."""
    return path / LOG_FOLDER if path.is_dir() else path.parent / LOG_FOLDER / path.name


def grade_function(grader: Grader, request: Request, interrupted: Callable[[], bool]) -> Callable[[], dict[str, Any]]:
    """The session's grade function: the paper's parts, with its rules and the notebook's numbers (``request``).
    A submission that cannot be read is Unreadable; a failure while ``interrupted()`` is the student's Ctrl-C."""

    def grade_now() -> dict[str, Any]:
        try:
            return grader.grade(request).to_json()
        except SubmissionError as e:
            raise Unreadable(str(e)) from None
        except BaseException:
            if interrupted():  # pytest made Ctrl-C an exit code: it is the student's stop
                raise KeyboardInterrupt from None
            raise

    return grade_now


def open_session(
    paper: Paper,
    path: Path,
    log_path: Path,
    grade_now: Callable[[], dict[str, Any]],
    minutes: float | None,
    new: bool,
) -> Session:
    """The session on the work at ``path``, new or continued from its log; PracticeError if the log cannot be
    written."""
    try:
        work = "" if path.is_dir() else path.name
        digest = FoundSubmission("", path).digest
        return Session(paper, now, grade_now, log_path, minutes=minutes, new=new, work=work, digest_fn=digest)
    except OSError as e:
        raise PracticeError(f"cannot write the log {log_path}: {e.strerror or e}") from None


def opening_lines(paper: Paper, session: Session, seed: int | None, notes: list[str], log_path: Path) -> Iterator[str]:
    """What a running session says as it starts: the paper's parts and points, the clock, the feedback while it
    runs, whose numbers, the log, and the notes."""
    yield f"{paper.title}" + (" (continued)" if session.resumed else "")
    for part in paper.parts:
        rules = f"  rules: {', '.join(part.rules)}" if part.rules else ""
        yield f"  {part.id}: {part.points:g} points{rules}"
    yield f"  total: {paper.total:g} points"
    yield f"started {session.start:%H:%M:%S}, {session.minutes:g} minutes: the time is up at {session.end:%H:%M:%S}"
    yield f"while the time runs you see {paper.feedback.shows.words}; full feedback at the end"
    yield (
        "your numbers: " + ("this notebook's (its seed)" if seed is not None else "the lesson's") + f"; log: {log_path}"
    )
    if not HIDDEN_AVAILABLE:  # the student release: its public checks are a self-check, not the paper's marking
        yield (
            "note: this kit has the public checks only (the student release): your score counts them alone, and "
            "says nothing of the paper's own marking, which the full grader (your coach's) gives"
        )
    for note in [*notes, *session.notes]:
        yield f"note: {note}"


def _stdin_fd() -> int | None:
    """The descriptor the student's commands are read from; None where stdin has none."""
    try:
        return sys.stdin.fileno()
    except (OSError, ValueError):
        return None


def write_report(out: Path, report: str) -> str:
    """Write the session's final ``report`` to ``out``; the line that says where it is, or why it is not."""
    try:
        write_atomically(out, report)
        return f"report written to {out}"
    except OSError as e:
        return f"could not write {out}: {e.strerror or e}"
