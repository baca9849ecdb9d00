"""Feedback pages handed back after a batch: `grade feedback GRADEBOOK OUT` writes each student a page, HTML and
Markdown (``OUT/STUDENT/feedback.html`` and ``feedback.md``), and the instructor an index (``OUT/index.html``).

A page shows each milestone's points, its checks (passed or failed, points, the first failing case's message),
the total, the late penalty and the total after it, and the answers to the student's regrade requests. The
checks' details follow the visibility the instructor chose, in Gradescope's levels (``grade gradescope
--visibility``, after_published by default): held back, a page still shows each milestone's points and the total,
since handing back a page is handing back the grade.

Messages quote the student's own code (an exception's text), so everything a page prints is escaped: the HTML by
Jinja's autoescaping, the Markdown by fencing messages and escaping the rest (a Markdown viewer renders raw HTML).
The late penalty is the one `grade export` applies: this module calls its code, and never works one out itself.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.batch.commands import _lateness, _load, _open, class_roster, late_policy_options, roster_lines
from grader.batch.exports import student_output
from grader.batch.gradebook import EMPTY, NO_SUBMISSION
from grader.batch.regrades import ACCEPTED
from grader.batch.summary import UNTRUSTED, check_name, points, untrusted_line, untrusted_scores
from grader.batch.term import student_of, with_roster
from grader.clierrors import GraderCommand
from grader.deadlines import Lateness
from grader.errors import BadUsage, InternalError
from grader.files import write_atomically
from grader.milestones import GRADABLE
from grader.options import OutputPath, roster_option
from grader.results import GRADESCOPE_VISIBILITIES
from grader.roster import unsafe

if TYPE_CHECKING:  # loaded by the command that renders: `grade` starts without Jinja
    from jinja2 import Environment

__all__ = ["feedback", "build_pages", "write_pages", "folder_name", "details_shown"]

INDEX = "index.html"
# A message as long as this is cut: a student's exception text may be megabytes, and a page stays readable.
MESSAGE_CHARS = 2000
# What a student is told when the checks' details are held back, by visibility (nothing to say when shown).
HELD_BACK = {
    "after_due_date": "The checks' details are shown after the due date.",
    "after_published": "The checks' details are shown once your instructor publishes the grades.",
    "hidden": "The checks' details are not shown to students.",
}


@dataclass
class CheckLine:
    """One check on a page: a parametrized check's cases as one line (its points summed, its first failing case's
    message), so that eleven cases of one mistake read as one."""

    name: str
    score: float = 0.0
    max_score: float = 0.0
    cases: int = 0
    failed: int = 0
    message: str = ""  # the first failing case's message (cut at MESSAGE_CHARS)
    not_counted: str = ""  # why it counts for nothing (the grader failed, or could not observe it)

    @property
    def passed(self) -> bool:
        return self.failed == 0


@dataclass
class MilestoneBlock:
    id: str
    title: str
    score: float
    max_score: float
    checks: list[CheckLine]


@dataclass
class Page:
    """What one student's page says."""

    student: str
    folder: str
    status: str  # "graded", "error", EMPTY or NO_SUBMISSION
    problem: str = ""  # why nothing was graded, as the student reads it
    milestones: list[MilestoneBlock] = field(default_factory=list)
    score: float | None = None
    max_score: float | None = None
    late: Lateness | None = None
    penalised: float | None = None  # the score after the late penalty, as `grade export` gives it
    answers: list[dict] = field(default_factory=list)
    shown: bool = True  # the checks' details (names, results, messages)
    held_back: str = ""  # what the student is told when they are not shown
    warnings: list[str] = field(default_factory=list)
    on_roster: bool = True

    @property
    def of(self) -> str:
        """ " of 9" after a score; nothing where the maximum is unknown (a submission that could not be graded)."""
        return "" if self.max_score is None else f" of {_pts(self.max_score)}"


def details_shown(visibility: str, published: bool, due: datetime | None, now: datetime) -> bool:
    """Whether a page shows the checks' details at ``visibility`` (Gradescope's levels): visible always; after the
    due date once ``due`` (the student's own, extensions included) has passed, never without one; after published
    once the instructor says so (``published``); hidden never."""
    if visibility == "visible":
        return True
    if visibility == "after_due_date":
        return due is not None and now >= due
    if visibility == "after_published":
        return published
    return False


def folder_name(student: str, taken: set[str]) -> str:
    """A folder name for ``student`` under OUT, not in ``taken`` (which it joins): the name itself where it can be
    one folder (grader/roster.py ``unsafe``); else the name with its separators, control characters and leading
    dots replaced (nbgrader's ``alice/hw1``: ``alice-hw1``) and, where that is taken, a digest of the name added."""
    name = student
    if unsafe(student) is not None or not student.strip():
        name = re.sub(r"[/\\]", "-", student)
        name = "".join("_" if unicodedata.category(c) == "Cc" else c for c in name)
        name = re.sub(r"^\.+", lambda m: "_" * len(m.group()), name).strip() or "_"
    if name.lower() in taken:  # case apart: two folders that differ in case are one on macOS and Windows
        name = f"{name}-{hashlib.sha256(student.encode()).hexdigest()[:8]}"
    taken.add(name.lower())
    return name


def _cut(message: str) -> str:
    return message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS] + " [... cut]"


def check_lines(checks: Iterable[dict]) -> list[CheckLine]:
    """A milestone's checks as lines, a parametrized check's cases together, in the order they ran."""
    lines: dict[str, CheckLine] = {}
    for c in checks:
        name = check_name(c["name"], c.get("case_id"))
        line = lines.setdefault(name, CheckLine(name))
        line.cases += 1
        if not c["counted"]:
            line.not_counted = (
                "the grader failed here, not your code" if c["internal_error"] else "the grader could not observe this"
            )
            continue
        line.score += c["score"]
        line.max_score += c["max_score"]
        if not c["passed"]:
            line.failed += 1
            if not line.message:
                line.message = _cut(str(c["message"]).strip())
    return list(lines.values())


def milestone_blocks(checks: list[dict]) -> list[MilestoneBlock]:
    """The student's milestones in the lesson's order, each with its counted checks' points."""
    order = {m: i for i, m in enumerate(GRADABLE)}
    ids = sorted({c["milestone"] for c in checks}, key=lambda m: order.get(m, len(order)))
    blocks = []
    for m in ids:
        mine = [c for c in checks if c["milestone"] == m]
        counted = [c for c in mine if c["counted"]]
        blocks.append(
            MilestoneBlock(
                id=m,
                title=GRADABLE[m].title if m in GRADABLE else m,
                score=points(sum(c["score"] for c in counted)) or 0.0,
                max_score=points(sum(c["max_score"] for c in counted)) or 0.0,
                checks=check_lines(mine),
            )
        )
    return blocks


def build_pages(
    rows: list[dict],
    checks: list[dict],
    answers: list[dict],
    lateness: dict[str, Lateness] | None,
    visibility: str,
    published: bool = False,
    strangers: Iterable[str] = (),
    now: datetime | None = None,
) -> list[Page]:
    """Every student's page: ``rows`` as `grade export` reads them (the gradebook's, and a NO_SUBMISSION row for
    each student on the roster it does not hold), each with its ``checks``, its regrade ``answers`` and its
    judgement in ``lateness``; ``strangers``: the students not on the roster, which the index marks."""
    now = now or datetime.now(timezone.utc)
    taken = {INDEX.lower()}
    untrusted = untrusted_scores(checks)
    outsiders = set(strangers)
    pages = []
    for row in rows:
        student = row["student"]
        mine = [c for c in checks if c["student"] == student]
        late = lateness.get(student) if lateness is not None else None
        shown = details_shown(visibility, published, late.due if late else None, now)
        page = Page(
            student=student,
            folder=folder_name(student, taken),
            status=row["status"],
            problem=student_output(row["error"]) if row["status"] not in ("graded", NO_SUBMISSION) else "",
            milestones=milestone_blocks(mine),
            score=points(row["score"] or 0),
            max_score=points(row["max_score"]),
            late=late,
            penalised=late.apply(row["score"] or 0) if late is not None else None,
            answers=[a for a in answers if a["student"] == student],
            shown=shown,
            held_back="" if shown else HELD_BACK[visibility],
            warnings=[f"{m}: {UNTRUSTED}" for m, who in untrusted.items() if student in who],
            on_roster=student_of(student) not in outsiders,
        )
        pages.append(page)
    return pages


# ---------------------------------------------------------------- rendering


def _fenced(text: str) -> str:
    """``text`` as a Markdown code block, its fence longer than any run of backticks in it: nothing in it is
    read as Markdown or HTML."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


# What Markdown reads inside a line (emphasis, code, links, raw HTML and entities, tables, GFM's strikethrough);
# the values are always inline, after other text, so what only matters at a line's start (#, -, 1.) is left.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def _md(text: object) -> str:
    """``text`` on one line of Markdown, read as plain text: its punctuation escaped, its line breaks spaces."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def _pts(value: float | None) -> str:
    return "" if value is None else f"{round(float(value), 2):g}"


def templates() -> Environment:
    """The feedback templates (grader/templates/feedback/): the HTML autoescaped, the Markdown not (its filters
    escape it)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("grader.templates", "feedback"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,  # a name misspelt in a template fails, rather than printing nothing
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(fenced=_fenced, md=_md, pts=_pts)
    env.globals.update(ACCEPTED=ACCEPTED, EMPTY=EMPTY, NO_SUBMISSION=NO_SUBMISSION)
    return env


def write_pages(pages: list[Page], out: Path, visibility: str, published: bool) -> None:
    """Each page as OUT/FOLDER/feedback.html and feedback.md, and the instructor's OUT/index.html."""
    env = templates()
    html, md = env.get_template("student.html"), env.get_template("student.md")
    for page in pages:
        folder = out / page.folder
        if folder.resolve().parent != out.resolve():  # folder_name's promise, kept where it matters
            raise InternalError(f"refusing to write {page.student!r}'s page outside {out}")
        write_atomically(folder / "feedback.html", html.render(page=page))
        write_atomically(folder / "feedback.md", md.render(page=page))
    index = env.get_template("index.html").render(pages=pages, visibility=visibility, published=published)
    write_atomically(out / INDEX, index)


# ---------------------------------------------------------------- the command


@click.command("feedback", cls=GraderCommand)  # the grader's errors shown as click's (grader/clierrors.py)
@click.argument("db", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("out", type=OutputPath(file_okay=False, path_type=Path))
@click.option(
    "--visibility",
    type=click.Choice(GRADESCOPE_VISIBILITIES),
    default="after_published",
    show_default=True,
    help="When the pages show the checks' details (names, results, messages), in the Gradescope zip's levels: "
    "visible, always; after_due_date, once the student's due date (--late-policy, extensions included) has "
    "passed; after_published, once you pass --published; hidden, never. Each milestone's points and the total "
    "are always shown.",
)
@click.option("--published", is_flag=True, help="You have published the grades: after_published details show.")
@late_policy_options
@roster_option(
    "roster.csv beside the gradebook",
    "A student on it with nothing in the gradebook gets a page saying so; a late policy's extension may name a "
    "student by id, email or name, as in grade export.",
)
def feedback(
    db: Path,
    out: Path,
    visibility: str = "after_published",
    published: bool = False,
    roster: Path | None = None,
    late_policy: Path | None = None,
    times_from_mtime: bool = False,
) -> None:
    """Write each student's feedback page from a batch gradebook: OUT/STUDENT/feedback.html and feedback.md, and
    OUT/index.html for you.

    A page holds each milestone's checks (passed or failed, points, the message of a failed one), the
    total, with --late-policy the penalty and the total after it (as `grade export` applies them), and the
    answers to the student's regrade requests. Run it again after a regrade or once you publish."""
    if visibility == "after_due_date" and late_policy is None:
        raise BadUsage("--visibility after_due_date needs --late-policy FILE: the due dates")
    rows, checks = _load(db)
    # The class as `grade export` reads it: the same roster, rows and late penalties (grader/batch/commands.py).
    identities, roster_path = class_roster(roster, db.parent)
    view = with_roster(rows, identities)
    lateness = _lateness(view.rows, late_policy, times_from_mtime, identities=identities)
    book = _open(db, create=False)
    try:
        answers = book.answers()
    finally:
        book.close()
    if warning := untrusted_line(checks):
        click.echo(warning, err=True)
    for line in roster_lines(view, roster_path):
        click.echo(line, err=True)
    pages = build_pages(view.rows, checks, answers, lateness, visibility, published, view.strangers)
    write_pages(pages, out, visibility, published)
    missing = sum(p.status == NO_SUBMISSION for p in pages)
    held = sum(not p.shown for p in pages if p.status != NO_SUBMISSION)
    click.echo(
        f"wrote {len(pages)} feedback page{'s' * (len(pages) != 1)} under {out} (index: {out / INDEX})"
        + (f"; {missing} on the roster with no submission" if missing else "")
        + (f"; checks' details held back on {held} ({visibility})" if held else ""),
        err=True,
    )
