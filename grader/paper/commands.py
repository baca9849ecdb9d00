"""`grade paper`: a contest-shaped paper's commands (see grader/paper/config.py for the paper file).

- ``grade paper check PAPER``: read the paper file and say what it holds (or what is wrong, with its line);
- ``grade paper render PAPER --student ID``: that student's notebook, with their own numbers, drawn from the
  paper's secret (``PAPER/paper.secret`` unless ``--secret-file``; made, owner-only, the first time). Without
  ``--student``: the lesson's numbers, no seed.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import click

from grader.clierrors import GraderGroup
from grader.errors import InputError
from grader.milestones import GRADABLE
from grader.paper.config import PAPER_FILE, RULES, SECRET_FILE, Paper, load
from grader.roster import RosterError, read_roster
from grader.variants import read_or_make_secret, seed_of, student_key

ROSTER = "roster.csv"  # beside paper.toml, as beside contest.toml: the students --student must be one of


class PaperCommandError(InputError):
    """A mistake in the coach's input: the message, and exit status 2 as for a usage error (``InputError``)."""


def _load(path: Path) -> Paper:
    """The paper at ``path``; a mistake in it is the coach's (``PaperFileError``, an ``InputError``)."""
    return load(path)


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


@click.group(cls=GraderGroup)  # the grader's errors shown as click's (grader/clierrors.py)
def paper() -> None:
    """Contest-shaped papers: check a paper file, render a student's notebook with their own numbers."""


@paper.command()
@click.argument("path", metavar="PAPER", type=click.Path(path_type=Path))
def check(path: Path) -> None:
    """Check PAPER (a folder holding paper.toml, or the file) and summarise it."""
    click.echo(summary(_load(path), _folder(path)))


def summary(sheet: Paper, folder: Path) -> str:
    from grader.paper.render import drawn  # the notebooks' module (and the banks): not at start-up

    lines = [
        sheet.title,
        f"id: {sheet.id}; time: {sheet.minutes:g} min; feedback during practice: {sheet.feedback.value}",
    ]
    lines.append("parts:")
    for part in sheet.parts:
        lines.append(f"  {part.id}: {part.points:g} points ({GRADABLE[part.id].title})")
        for rule in part.rules:
            lines.append(f"    rule {rule}: {RULES[rule][1]}")
        questions = drawn(part.id)
        if questions is None:
            lines.append("    its question bank is not here: the lesson's numbers only")
        elif questions:
            lines.append(f"    numbers drawn per student in {', '.join(q.id for q in questions)}")
        lines += [f"    {line}" for line in asked_per_student(part.id)]
    lines.append(f"  total: {sheet.total:g} points")
    secret = folder / SECRET_FILE
    lines.append(f"secret: {secret}" if secret.exists() else f"secret: none yet ({secret} is made by the first render)")
    return "\n".join(lines)


def asked_per_student(part_id: str) -> list[str]:
    """What of ``part_id``'s fixed questions each student of a paper is asked in their own way, and what the release's
    locked answers (the lesson's) answer there, a line each."""
    from grader.paper.render import reordered  # the banks: not at start-up
    from grader.suites.bank import Numbered, Pooled, Shuffled
    from grader.suites.locked_answers import LOCKED

    lines: list[str] = []
    orders = reordered(part_id) or []
    if shuffled := [r.id for r in orders if isinstance(r, Shuffled)]:
        lines.append(f"options in each student's own order in {', '.join(shuffled)}")
    if pooled := [r.id for r in orders if isinstance(r, Pooled)]:
        lines.append(f"options drawn for each student from a hidden pool, in their own order, in {', '.join(pooled)}")
    if drawn_listing := [r.id for r in orders if isinstance(r, Numbered) and r.pool]:
        lines.append(
            "a listing drawn from a hidden pool and numbered from each student's own first line in "
            + ", ".join(drawn_listing)
        )
    if numbered := [r.id for r in orders if isinstance(r, Numbered) and not r.pool]:
        lines.append(f"a listing numbered from each student's own first line in {', '.join(numbered)}")
    # the release's locked answers (the lesson's) are these questions' answers in a contest too
    if alike := [q for q, lock in LOCKED.get(part_id, {}).items() if not lock.get("per_student")]:
        lines.append(
            f"the same for every student, so the release's locked answers answer them: {', '.join(alike)} (a release "
            "built with `grade release --no-answer-locks` does not)"
        )
    if (pooled or drawn_listing) and part_id in LOCKED:
        lines.append(
            "the release's locked answers are the lesson's, and no student of the paper is shown the lesson's "
            f"options or listing: they answer none of {', '.join(pooled + drawn_listing)}"
        )
    if shuffled and part_id in LOCKED:
        lines.append(
            "a shuffled option keeps its words, so the release's locked answer (the lesson's letter) finds it: "
            "hand the class a release built with `grade release --no-answer-locks`"
        )
    return lines


def release_answers(part_id: str) -> list[str]:
    """The questions of ``part_id`` that a default student release's locks answer for a paper's student too: those
    asked alike of everyone, and those whose options or listing lines are only reordered (a reordered option keeps
    its words, so the lesson's key, hash-searched out of the release, finds it). A question with drawn numbers, or
    with options and a listing drawn from a hidden pool, is another question for each student, which the lesson's
    key does not answer. Where the question bank is not here (a student release), every locked question counts."""
    from grader.paper.render import reordered  # the banks: not at start-up
    from grader.suites.bank import Numbered, Shuffled
    from grader.suites.locked_answers import LOCKED

    locks = LOCKED.get(part_id, {})
    orders = reordered(part_id)
    if orders is None:
        return list(locks)
    words_kept = {r.id for r in orders if isinstance(r, Shuffled) or (isinstance(r, Numbered) and not r.pool)}
    return [q for q, lock in locks.items() if not lock.get("per_student") or q in words_kept]


def on_roster(student: str, roster: Path) -> str:
    """``student`` as the roster spells it: the same id but for letter case and spaces (``student_key``, which
    the seed is drawn from); a name not on it is refused, with the roster's closest names."""
    try:
        names = read_roster(roster, paper=True)  # two names that share a seed are refused there
    except RosterError as e:
        raise PaperCommandError(str(e)) from None

    names = read_roster(roster, paper=True)  # two names that share a seed are refused there (a RosterError)
    by_key = {student_key(name): name for name in names}
    if student_key(student) in by_key:
        return by_key[student_key(student)]
    close = difflib.get_close_matches(student_key(student), list(by_key), n=3, cutoff=0.6)
    hint = (
        "did you mean " + " or ".join(repr(by_key[k]) for k in close) + "?"
        if close
        else f"no name there is close to it ({len(names)} students)"
    )
    raise PaperCommandError(
        f"--student {student!r} is not on the roster {roster}: {hint} A name not on the roster would get numbers "
        "that no contest grades; give --roster for another roster"
    )


@paper.command()
@click.argument("path", metavar="PAPER", type=click.Path(path_type=Path))
@click.option("--student", help="The student's id (as on the roster): their numbers. Without: the lesson's.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The notebook to write (default: PAPERID-STUDENT.ipynb, or PAPERID-lesson.ipynb, here).",
)
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"The paper's secret, from which each student's numbers are drawn (default: PAPER/{SECRET_FILE}; "
    "made, owner-only, when missing).",
)
@click.option(
    "--roster",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"The roster (a CSV with a student column, as a contest's) --student must be on (default: PAPER/{ROSTER} "
    "if there is one; without a roster the name is not checked).",
)
@click.option("--force", is_flag=True, help="Overwrite the notebook if it exists.")
def render(
    path: Path,
    student: str | None,
    out: Path | None,
    secret_file: Path | None,
    roster: Path | None = None,
    force: bool = False,
) -> None:
    """Write the notebook of PAPER for one student: the rules, then each part's statement and cells."""
    from grader.paper.render import build, notebook_name, write  # as in summary: not at start-up

    sheet = _load(path)
    seed = None
    if student is not None:
        student = student.strip()
        if not student or len(student) > 100 or not student.isprintable():
            raise PaperCommandError("--student should be the student's id: printable, 1 to 100 characters")
        roster = roster or (_folder(path) / ROSTER if (_folder(path) / ROSTER).is_file() else None)
        if roster is not None:
            student = on_roster(student, roster)
        else:
            click.echo(
                f"note: no roster ({_folder(path) / ROSTER}, or --roster): {student!r} is not checked against one",
                err=True,
            )
        secret_path = secret_file or _folder(path) / SECRET_FILE
        made = not secret_path.exists()
        try:
            secret = read_or_make_secret(secret_path)
        except OSError as e:
            raise PaperCommandError(f"{secret_path}: cannot read or make the secret: {e.strerror or e}") from None
        if not secret:
            raise PaperCommandError(f"{secret_path} is empty: delete it to make a new secret, before any render")
        if made:
            click.echo(
                f"made a new secret {secret_path} (owner-only): keep it, and out of version control; every "
                "student's numbers come from it",
                err=True,
            )
        seed = seed_of(secret, sheet.id, student)
    out = out or Path(notebook_name(sheet.id, student))
    if out.exists() and not force:
        raise PaperCommandError(f"{out} exists: choose another --out, or --force to overwrite it")
    try:
        notebook = build(sheet, student, seed)
        write(notebook, out)
    except OSError as e:  # a RenderError is the coach's: an InputError, shown as it is
        raise PaperCommandError(f"{out}: cannot write it: {e.strerror or e}") from None
    who = f"student {student}" if student is not None else "the lesson's numbers"
    click.echo(f"wrote {out}: {sheet.title}, {who}, {len(sheet.parts)} parts", err=True)


__all__ = ["PAPER_FILE", "paper"]
