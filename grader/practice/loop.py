"""The practice session's terminal loop: the student's commands until the time is up or they hand in."""

from __future__ import annotations

from collections.abc import Callable

from grader.practice.session import Session, clock_text
from grader.practice.stdin import Commands

HELP = "Enter or g: grade your work now   s: status   q: hand in (your saved work is graded) and end   h: this help"


def run_session(session: Session, echo: Callable[..., None], commands: Commands) -> None:
    """The terminal loop: commands until the time is up, ``q``, Ctrl-C or the end of input; then hands in."""
    reason = "time"
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
            if command == "q":
                reason = "quit"
                break
            answer(session, echo, command)
    except KeyboardInterrupt:
        reason = "interrupted"
        echo("")
    if reason == "time" or session.clock() >= session.end:
        echo(f"the time is up ({session.minutes:g} minutes)")
        reason = "time"
    hand_in(session, echo)
    session.finish(reason)


def answer(session: Session, echo: Callable[..., None], command: str) -> None:
    """Do what a command other than ``q`` asks: grade (Enter or ``g``), the status, the help; or say it is unknown."""
    if command in ("", "g"):
        echo("grading...")
        attempt = session.attempt()
        echo("\n".join(session.attempt_lines(attempt)))
    elif command == "s":
        echo("\n".join(session.status()))
    elif command in ("h", "?", "help"):
        echo(HELP)
    else:
        echo(f"unknown command {command!r}; {HELP}")


def hand_in(session: Session, echo: Callable[..., None]) -> None:
    """Grade the saved work once more as the session ends, as a contest grades a final submission: counted,
    unless it is the very work the last counted attempt graded. Ctrl-C skips it."""
    if session.ended is not None:
        return
    same = session.unchanged_since()
    if same is not None:
        echo(f"your saved work is what attempt {same.number} graded: nothing new to grade")
        return
    echo("grading your saved work as you hand it in (Ctrl-C to skip)...")
    try:
        attempt = session.attempt(final=True)
    except KeyboardInterrupt:
        echo("\nskipped: your saved work was not graded at the end")
        return
    echo("\n".join(session.attempt_lines(attempt)))
