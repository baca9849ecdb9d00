"""Regrade requests in a batch: a student asks by leaving ``regrade.txt`` in their folder (nbgrader's
layout: in the assignment's folder, beside timestamp.txt), its first line the milestone, the rest the reason.
``grade regrades list`` shows the open ones with the student's current score; ``grade regrades answer`` declines
one, or grades the student again (the batch's own grading) and keeps the old and new scores; both are kept in the
gradebook with the answer, and ``grade report`` lists them.

A request file is the student's, read as the grader reads every file of theirs (grader/nofollow.py): the
student's folder and the file opened without following a link, a regular file only, at most ``MOST_BYTES``. A
request that cannot be read so is refused with its reason, never followed. A request is open until the
gradebook holds an answer to that very text (student, milestone, reason): a new reason is a new request.
"""

from __future__ import annotations

import errno
import getpass
import json
import os
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader import nofollow
from grader.batch.discover import REQUEST_FILE
from grader.batch.gradebook import Gradebook
from grader.clierrors import GraderGroup
from grader.deadlines import NBGRADER, NBGRADER_SUBMITTED
from grader.errors import BadUsage
from grader.milestones import GRADABLE
from grader.options import limit_options, limits, submission_timeout_option

if TYPE_CHECKING:  # loaded where used: `grade` starts without them (finding submissions reads zip files)
    from grader.batch.discover import FoundSubmission
    from grader.sandbox.client import Limits

MOST_BYTES = 4096  # a milestone's line and a reason of a few paragraphs
ACCEPTED, DECLINED = "accepted", "declined"


@dataclass(frozen=True)
class Filed:
    """A student's request file: its milestone and reason, or (``problem``) why it is refused."""

    student: str
    milestone: str = ""
    reason: str = ""
    problem: str | None = None


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters (an escape sequence that would rewrite the
    instructor's screen) shown as ``\\x1b``, lines and tabs kept."""
    return "".join(c if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf") else repr(c)[1:-1] for c in text)


def folder_of(root: Path, found: FoundSubmission) -> Path | None:
    """Where the student's request file may be, in whichever layout ``discover`` read ``root`` (its ``time_from``
    says): nbgrader's, the assignment's folder, beside timestamp.txt; a plain batch, the student's folder, or a
    folder on the way down to their submission (``submission_in``'s one folder inside it: nbgrader's submitted/
    given itself, where the assignment's folder is inside the student's), the first that holds one. None for a
    notebook or a zip file lying in ``root`` itself, which has no folder of its own."""
    if nofollow.is_link(found.path):
        return None  # refused as it was found: never looked into
    if found.time_from is not None and found.time_from.startswith(NBGRADER):
        top = Path(found.time_from[len(NBGRADER) :])
        return top if top.is_dir() and not nofollow.is_link(top) else None
    if (root / NBGRADER_SUBMITTED).is_dir():  # nbgrader's layout, a student with no assignment's folder
        return found.path if found.path.is_dir() else None
    try:
        parts = found.path.relative_to(root).parts
    except ValueError:
        return None
    top = root / parts[0]
    if not top.is_dir() or nofollow.is_link(top):
        return None
    # the folders from the student's down to the one their submission is in (links were never descended)
    below = [root.joinpath(*parts[:i]) for i in range(1, len(parts) + (1 if found.path.is_dir() else 0))]
    return next((f for f in below if os.path.lexists(f / REQUEST_FILE)), top)


def read_request(student: str, folder: Path) -> Filed | None:
    """The request in ``folder`` (None: no request file). The folder is opened without following a link, the
    file in it too, and read up to MOST_BYTES: a link, a FIFO, a larger file or one that is not text is refused."""
    shown = f"{student}: {REQUEST_FILE}"
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link since it was found
            return Filed(student, problem=f"{student}/ {nofollow.LINK}: refused")
        return Filed(student, problem=f"{student}/ cannot be read ({e.strerror}): refused")
    try:
        with nofollow.open_file(REQUEST_FILE, dir_fd=fd) as f:
            data = f.read(MOST_BYTES + 1)
    except FileNotFoundError:
        return None
    except nofollow.NotOwnFile as e:  # a link (never followed), a FIFO, a device
        return Filed(student, problem=f"{student}: {e}: refused")
    except OSError as e:  # no permission, a read error: a line, not a traceback
        return Filed(student, problem=f"{shown} cannot be read ({e.strerror}): refused")
    finally:
        os.close(fd)
    if len(data) > MOST_BYTES:
        return Filed(student, problem=f"{shown} is larger than {MOST_BYTES} bytes: refused")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Filed(student, problem=f"{shown} is not UTF-8 text: refused")
    return parse(student, text)


def parse(student: str, text: str) -> Filed:
    """A request file's text: the milestone on the first line, the reason below it."""
    first, _, rest = text.strip().partition("\n")
    milestone, reason = first.strip(), rest.strip()
    if milestone not in GRADABLE:
        ids = ", ".join(list(GRADABLE)[:6])
        wanted = f"{student}: {REQUEST_FILE}'s first line must be a milestone ({ids} ...)"
        return Filed(student, problem=f"{wanted}, not {printable(milestone[:40])!r}")
    if not reason:
        return Filed(student, problem=f"{student}: {REQUEST_FILE} gives no reason below its milestone")
    return Filed(student, milestone, reason)


def filed(root: Path, db: Path) -> list[Filed]:
    """Every request file under the class folder ``root`` (the gradebook ``db`` is not a student's), by student."""
    from grader.batch.discover import discover

    found = []
    for submission in discover(root, skip=(db,), empty=True):
        folder = folder_of(root, submission)
        request = read_request(submission.student, folder) if folder else None
        if request is not None:
            found.append(request)
    return found


def is_answered(request: Filed, answers: list[dict]) -> bool:
    """The gradebook holds an answer to this very request (its student, milestone and reason)."""
    return any(
        (a["student"], a["milestone"], a["reason"]) == (request.student, request.milestone, request.reason)
        for a in answers
    )


def score_line(book: Gradebook, student: str, milestone: str) -> str:
    """The student's current score on ``milestone`` and in all, as the lists print it."""
    row = book.latest(student)
    if row is None:
        return "not in the gradebook"
    on = book.milestone_score(row["attempt"], milestone)
    mine = "not graded" if on is None else f"{on[0]:g} of {on[1]:g}"
    return f"{mine} (in all {row['score'] or 0:g} of {row['max_score'] or 0:g})"


def list_lines(root: Path, book: Gradebook, requests: list[Filed], everything: bool) -> Iterator[str]:
    """What ``grade regrades list`` prints: the open requests, those refused, and (``everything``) the answers."""
    answers = book.answers()
    open_ = [r for r in requests if r.problem is None and not is_answered(r, answers)]
    yield f"{len(open_)} open regrade request{'s' * (len(open_) != 1)} in {root}"
    for r in open_:
        yield f"  {r.student}  {r.milestone}  now {score_line(book, r.student, r.milestone)}"
        yield from (f"      {line}" for line in printable(r.reason).splitlines())
    if refused := [r for r in requests if r.problem]:
        yield f"{len(refused)} request file{'s' * (len(refused) != 1)} refused (the student may fix it):"
        yield from (f"  {printable(r.problem or '')}" for r in refused)
    if everything and answers:
        yield f"{len(answers)} answered:"
        yield from answer_lines(answers)
    if open_:
        yield f"answer one: grade regrades answer {root} STUDENT --regrade|--decline --message TEXT"


def answer_lines(answers: list[dict]) -> Iterator[str]:
    """Each answered request on a line: who, which milestone, what was done and by whom, old and new scores."""
    for a in answers:
        old = "" if a["old_score"] is None else f"{a['old_score']:g}"
        change = f": {old} -> {a['new_score']:g} of {a['new_max_score']:g}" if a["new_score"] is not None else ""
        what = "regraded" if a["status"] == ACCEPTED else "declined"
        yield f"  {a['student']}  {a['milestone']}  {what} by {a['answered_by']}{change}: {printable(a['answer'])}"


def open_request(root: Path, db: Path, student: str) -> tuple[Filed, FoundSubmission]:
    """The student's request file and submission; BadUsage where there is no open request to answer."""
    from grader.batch.discover import discover

    found = next((f for f in discover(root, skip=(db,), empty=True) if f.student == student), None)
    if found is None:
        raise BadUsage(f"{student!r} is not a student of {root}")
    folder = folder_of(root, found)
    request = read_request(student, folder) if folder else None
    if request is None:
        raise BadUsage(f"{student} has no {REQUEST_FILE} in their folder: no request to answer")
    if request.problem:
        raise BadUsage(printable(request.problem))
    return request, found


def answer(
    root: Path, book: Gradebook, db: Path, student: str, regrade: bool, message: str, by: str, limits: Limits
) -> dict:
    """Answer ``student``'s open request with ``message``: ``regrade`` grades them again on the milestones of
    their latest grading (the batch's grade_all), else declines. Kept in the gradebook; returns the answer."""
    request, found = open_request(root, db, student)
    if is_answered(request, book.answers()):
        raise BadUsage(f"{student}'s request on {request.milestone} is answered already: see grade regrades list --all")
    before = book.latest(student)
    if before is None:
        raise BadUsage(f"{student} is not in {db}: grade the class first (grade batch {root})")
    old = book.milestone_score(before["attempt"], request.milestone)
    done = {
        "student": student,
        "milestone": request.milestone,
        "reason": request.reason,
        "status": ACCEPTED if regrade else DECLINED,
        "answer": message,
        "answered_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "answered_by": by,
        "old_attempt": before["attempt"],
        "old_graded_at": before["graded_at"],
        "old_score": old and old[0],
        "old_max_score": old and old[1],
    }
    if regrade:
        graded = json.loads(before["milestones"])
        if request.milestone not in graded:
            raise BadUsage(
                f"{student}'s latest grading covers {', '.join(graded)}, not {request.milestone}: nothing to grade "
                f"again; --decline it, or grade the class on {request.milestone} first (grade batch -m)"
            )
        if found.problem:
            raise BadUsage(f"{student}'s folder holds nothing to grade ({found.problem}): nothing to grade again")
        from grader.batch.run import grade_all  # the pool and torch: only for a regrade

        done["files_changed"] = found.digest() != before["hash"]
        grade_all([found], book, graded, limits, workers=1, regrade=True)
        after = book.latest(student)
        assert after is not None
        new = book.milestone_score(after["attempt"], request.milestone)
        done.update(new_attempt=after["attempt"], new_score=new and new[0], new_max_score=new and new[1])
    done["id"] = book.record_answer(done)
    return done


def who_answers() -> str:
    """The instructor answering: their login name, else "instructor"."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "instructor"


def answered_line(done: dict) -> str:
    """What ``grade regrades answer`` says it did."""
    if done["status"] == DECLINED:
        return f"declined {done['student']}'s request on {done['milestone']}; the answer is kept in the gradebook"
    old = "not graded" if done["old_score"] is None else f"{done['old_score']:g}"
    new = "not graded" if done["new_score"] is None else f"{done['new_score']:g} of {done['new_max_score']:g}"
    line = f"regraded {done['student']} on {done['milestone']}: {old} -> {new}; kept in the gradebook with the answer"
    if done.get("files_changed"):  # the regrade graded the files as they are now, not as they were graded
        line += (
            f"\nnote: {done['student']}'s files changed since their grading of {done['old_graded_at']}: "
            "the regrade graded them as they are now"
        )
    return line


def gradebook_for(root: Path, db: Path | None) -> tuple[Path, Gradebook]:
    """The class's gradebook (default ROOT/grades.sqlite): it must exist, as `grade batch` wrote it."""
    path = db or root / "grades.sqlite"
    return path, Gradebook(path, create=False)


# ---------------------------------------------------------------- the commands


@click.group(cls=GraderGroup)  # the grader's errors shown as click's (grader/clierrors.py)
def regrades() -> None:
    """Students' regrade requests in a batch: each a regrade.txt in the student's folder (nbgrader's layout: in
    the assignment's folder), its first line the milestone (m3), the rest the reason."""


db_option = click.option(
    "--db",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The SQLite gradebook. Default: SUBMISSIONS/grades.sqlite.",
)


@regrades.command("list")
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@db_option
@click.option("--all", "everything", is_flag=True, help="Also list the answered requests, with old and new scores.")
def list_command(submissions: Path, db: Path | None, everything: bool) -> None:
    """List the open regrade requests in SUBMISSIONS (student, milestone, current score, reason), and the request
    files refused (a link, too large, no milestone)."""
    path, book = gradebook_for(submissions, db)
    try:
        for line in list_lines(submissions, book, filed(submissions, path), everything):
            click.echo(line)
    finally:
        book.close()


@regrades.command("answer")
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("student")
@click.option("--regrade/--decline", default=None, help="Grade the student again, or decline the request.")
@click.option("--message", required=True, help="The answer, kept with the request (the student's to read).")
@click.option("--by", "by", help="Who answers (default: your login name).")
@db_option
@limit_options
@submission_timeout_option()
def answer_command(
    submissions: Path,
    student: str,
    regrade: bool | None,
    message: str,
    by: str | None,
    db: Path | None,
    timeout: float,
    memory_mb: int,
    submission_timeout: float | None,
) -> None:
    """Answer STUDENT's open regrade request in SUBMISSIONS: --regrade grades them again on the milestones of
    their latest grading and keeps the old and new scores; --decline keeps the grade. The answer goes in the
    gradebook either way (grade regrades list --all, grade report)."""
    if regrade is None:
        raise BadUsage("say how to answer: --regrade (grade again) or --decline")
    if not message.strip():
        raise BadUsage("--message is empty: say why, for the student")
    path, book = gradebook_for(submissions, db)
    try:
        chosen = limits(timeout, memory_mb, submission_timeout)
        if regrade:  # the grading takes a while: say what is happening
            click.echo(f"grading {student} again ...", err=True)
        done = answer(submissions, book, path, student, regrade, message.strip(), by or who_answers(), chosen)
    finally:
        book.close()
    click.echo(answered_line(done))
