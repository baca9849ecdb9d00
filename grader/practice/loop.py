"""The practice session's terminal loop: the student's commands until the time is up or they hand in."""

from __future__ import annotations

from collections.abc import Callable

from grader.practice.session import Session, clock_text
from grader.practice.stdin import Commands

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
