"""The class-sized commands: `grade batch`, `grade export`, `grade report`."""

from __future__ import annotations

import json
import os
import shlex
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.batch.exports import csv_text, gradescope_json
from grader.batch.gradebook import EMPTY, SOURCE_PREFIX, Gradebook
from grader.batch.regrades import answer_lines, printable
from grader.batch.summary import (
    broken_line,
    class_causes,
    class_lines,
    counts_line,
    failure_counts,
    failure_rates,
    mean_line,
    milestone_means,
    names,
    points,
    stubs,
    untouched_line,
    untrusted_line,
)
from grader.batch.term import (
    CONTEST_TIME,
    ROSTER,
    ClassRows,
    late_penalty,
    load_policy,
    missing_line,
    penalised,
    strangers_line,
    with_roster,
)
from grader.clierrors import GraderCommand
from grader.deadlines import Lateness, unmatched_warning
from grader.files import write_atomically
from grader.fingerprint import grader_fingerprint
from grader.milestones import GRADABLE, METRIC_TASKS, MILESTONES
from grader.options import (
    OutputPath,
    dask_client,
    gradescope_options,
    limit_options,
    limits,
    milestone_option,
    roster_option,
    scheduler_option,
    submission_timeout_option,
)
from grader.results import CLAIM_COUNTED
from grader.roster import Identity, read_identities
from grader.sandbox.common.agreement import NOT_IMPLEMENTED_MESSAGE

if TYPE_CHECKING:  # loaded by the commands that use them: `grade` starts without them
    from distributed import Client

    from grader.batch.discover import FoundSubmission
    from grader.batch.run import Outcome
    from grader.sandbox.client import Limits

__all__ = ["batch", "export", "report", "failure_rates", "CONTEST_TIME"]


def late_policy_options(command):
    """--late-policy FILE and --times-from-mtime, shared by export and report."""
    command = click.option(
        "--times-from-mtime",
        is_flag=True,
        help="Where nbgrader's timestamp.txt gives no time, take the modification time of a student's zip or "
        "notebook lying in the batch folder, as your copy has it (never the dates of the files in a student's "
        "folder or inside a zip: unzipping the student's own archive keeps the dates they chose). Only if you "
        "know your copy is dated when it arrived.",
    )(command)
    return click.option(
        "--late-policy",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A TOML file of due dates, extensions and the penalty (docs/instructors.md, 'Due dates and late "
        "penalties'). A submission whose time is unknown gets no penalty, and is said to.",
    )(command)


@click.command(cls=GraderCommand)  # the grader's errors shown as click's (grader/clierrors.py)
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@milestone_option
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=os.cpu_count() or 1,
    show_default="the cores",
    help="Submissions graded at once.",
)
@click.option(
    "--db",
    type=OutputPath(dir_okay=False, path_type=Path),
    help="The SQLite gradebook. Default: SUBMISSIONS/grades.sqlite.",
)
@click.option("--regrade", is_flag=True, help="Grade again even what the gradebook already holds.")
@click.option(
    "--allow-public-held-out",
    is_flag=True,
    help="Grade a metric task (-m lmbudget) even though its held-out text is one students have or a worker can "
    "read (the default corpus is): a model that carries the text scores full marks, so the summary, `grade "
    "report` and `grade export` then say that its scores prove nothing. Without it, such a task is refused.",
)
@limit_options
@submission_timeout_option()
@scheduler_option
@roster_option("SUBMISSIONS/roster.csv")
def batch(
    submissions: Path,
    milestones: list[str],
    workers: int,
    db: Path | None,
    regrade: bool,
    timeout: float,
    submission_timeout: float | None,
    memory_mb: int,
    scheduler: str | None,
    allow_public_held_out: bool = False,
    roster: Path | None = None,
) -> None:
    """Grade every submission under SUBMISSIONS into a gradebook; run again to resume.

    SUBMISSIONS holds per-student folders, notebooks or zip files, or nbgrader's
    submitted/STUDENT/ASSIGNMENT/ layout. Each graded submission is committed at once;
    a rerun skips those whose files and milestones are unchanged and that this very
    grading code graded (suites, checks, sandbox, reference): a changed suite regrades all.
    Graded on some milestones (-m), a student keeps the others' results from the same
    files and grader. A student's folder with nothing to grade is recorded as such.
    A metric task whose held-out text students have is refused (--allow-public-held-out).
    With a roster (--roster, or SUBMISSIONS/roster.csv), each student on it with no submission
    is listed with 0 points, and each submission not on it is named.
    """
    # Imported here, to keep `grade` quick to start: finding submissions (zipfile); rich and the pool in grade_batch.
    from grader.batch.discover import discover, own_stamps

    db = db or submissions / "grades.sqlite"
    found = discover(submissions, skip=(db,), empty=True)
    if not found:
        raise click.UsageError(f"no submissions found in {submissions}")
    _held_out(milestones, allow_public_held_out)
    identities, roster = class_roster(roster, submissions)  # a mistake in it stops here, before any grading
    chosen = limits(timeout, memory_mb, submission_timeout)
    book = _open(db, create=True)  # before the cluster: a wrong --db stops here, with nothing to close
    client = dask_client(scheduler) if scheduler else None
    outcome = grade_batch(found, book, db, milestones, chosen, workers, regrade, client)
    try:
        students = {f.student for f in found}
        everyone = book.rows()
        rows = [r for r in everyone if r["student"] in students]
        checks = [c for c in book.checks() if c["student"] in students]
    finally:
        book.close()
    gone = sorted(r["student"] for r in everyone if r["student"] not in students)
    # a student in the gradebook whose submission is gone is the note's (kept), not one who never handed in
    view = with_roster(rows, identities and [i for i in identities if i.id not in {g.split("/")[0] for g in gone}])
    for line in batch_lines(submissions, milestones, db, outcome, view.rows, checks, gone):
        click.echo(line, err=True)
    for line in roster_lines(view, roster):
        click.echo(line, err=True)
    for line in time_notes(submissions, own_stamps(submissions, found)):
        click.echo(f"note: {line}", err=True)


def _held_out(milestones: list[str], allowed: bool) -> None:
    """Refuse to grade a metric task whose held-out text is not secret (the rule a contest applies:
    grader/lmbudget/task.py), unless ``allowed``: then say at once that its scores will prove nothing."""
    if not any(m in METRIC_TASKS for m in milestones):
        return
    from grader.lmbudget.task import held_out_refusal  # lmbudget loads torch: only for a metric task

    why = held_out_refusal(milestones)
    if why is None:
        return
    if not allowed:
        raise click.UsageError(
            f"{why}. To grade it anyway, for practice, pass --allow-public-held-out: every summary, report and "
            "export will then say that its scores prove nothing."
        )
    click.echo(f"warning: {why}. Graded anyway (--allow-public-held-out): its scores prove nothing.", err=True)


def time_notes(submissions: Path, own: list[str]) -> Iterator[str]:
    """What `grade batch` says of where submission times will come from, where a class's folder may mislead:
    timestamp.txt files of the students' own (never read), and nbgrader's submitted/ folder given itself."""
    if own:
        whose = "1 student's own folder holds" if len(own) == 1 else f"{len(own)} students' own folders hold"
        yield (
            f"{whose} a timestamp.txt ({names(own)}): never read for a submission's time, which only nbgrader's, "
            "in the assignment's folder of its submitted/ layout, gives"
        )
    if submissions.name == "submitted" and not (submissions / "submitted").is_dir():
        yield (
            f"{submissions} is read as a folder of student folders, so nbgrader's timestamp.txt files in it give no "
            f"time: for them, give the course folder that holds it (grade batch {shlex.quote(str(submissions.parent))})"
        )


def grade_batch(
    found: list[FoundSubmission],
    book: Gradebook,
    db: Path,
    milestones: list[str],
    chosen: Limits,
    workers: int,
    regrade: bool,
    client: Client | None,
) -> Outcome:
    """Grade ``found`` into ``book`` (the gradebook at ``db``) under a progress bar on stderr, on ``client``'s
    cluster if any (closed at the end). Ctrl-C says what this run saved and exits with 130."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from grader.batch.run import grade_all

    columns = (
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
    )
    saved = 0
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("grading", total=len(found), rate="")
        gradable = len([f for f in found if f.problem is None])

        def planned(todo: int, skipped: int) -> None:
            if skipped:  # a resumed batch: the bar counts what is left
                bar.console.print(f"{skipped} of {gradable} already in {db.name} (unchanged): grading the other {todo}")
            bar.update(task, total=todo)

        def advance(_found, _result) -> None:
            nonlocal saved
            saved += 1
            bar.advance(task)
            done = bar.tasks[task]
            bar.update(task, rate=f"{60 * done.completed / max(done.elapsed or 0, 1e-9):.1f}/min")

        try:
            return grade_all(
                found,
                book,
                milestones,
                chosen,
                workers,
                regrade,
                progress=advance,
                executor=client.get_executor() if client else None,
                planned=planned,
            )
        except KeyboardInterrupt:
            bar.stop()
            in_book = len({f.student for f in found if f.problem is None} & {r["student"] for r in book.rows()})
            click.echo(
                f"\ninterrupted: {saved} result{'s' * (saved != 1)} saved by this run ({in_book} of "
                f"{gradable} submissions in {db}); run the same command again to resume: what is saved "
                "is not graded again",
                err=True,
            )
            raise SystemExit(130) from None
        finally:
            if client:
                client.close()


def batch_lines(
    submissions: Path,
    milestones: list[str],
    db: Path,
    outcome: Outcome,
    rows: list[dict],
    checks: list[dict],
    gone: list[str],
) -> Iterator[str]:
    """What `grade batch` says once it is done (on stderr): the counts, the class's summary, and notes on the
    students whose grades now cover only ``milestones`` and on those in the gradebook no longer submitted."""
    yield f"{outcome.graded} graded, {outcome.skipped} already in {db} (unchanged)"
    if warning := untrusted_line(checks):
        yield warning
    lines = class_lines(rows, checks)
    if outcome.empty:
        lines.insert(1, _empty_line(outcome.empty))
    yield from lines
    if outcome.narrowed:
        yield f"note: {_narrowed_note(submissions, milestones, outcome.narrowed)}"
    if gone:
        yield f"note: {_gone_note(submissions, gone)}"


def _empty_line(empty: list) -> str:
    """The students' folders that held nothing to grade, each with why (recorded with 0 points)."""
    reasons = "; ".join(f"{f.student}: {f.problem}" for f in empty[:10]) + (
        f"; and {len(empty) - 10} more" if len(empty) > 10 else ""
    )
    return (
        f"{len(empty)} student{'s' * (len(empty) != 1)} with nothing to grade, recorded with 0 points "
        f"(status {EMPTY!r}): {reasons}"
    )


def _narrowed_note(submissions: Path, milestones: list[str], narrowed: dict[str, str]) -> str:
    """How many students' grades now cover only the regraded milestones, and why."""
    n, why = len(narrowed), Counter(narrowed.values())
    whose = "student's grade now covers" if n == 1 else "students' grades now cover"
    causes = [f"{why['files']} changed their files" if why["files"] else "", "the grader changed" * bool(why["grader"])]
    return (
        f"{n} {whose} only {', '.join(milestones)} "
        f"({names(sorted(narrowed))}): {' and '.join(c for c in causes if c)} since the other milestones were "
        f"graded, so those results were not carried over; run `grade batch {shlex.quote(str(submissions))}` "
        "without -m to grade everything again"
    )


def _gone_note(submissions: Path, gone: list[str]) -> str:
    """The students in the gradebook whose submission is no longer in SUBMISSIONS: kept, and said so."""
    n = len(gone)
    return (
        f"{n} student{'s' * (n != 1)} in the gradebook {'have' if n != 1 else 'has'} no submission in "
        f"{submissions} any more: kept ({names(gone)}); `grade export` and `grade report` still list "
        f"{'their rows' if n != 1 else 'its row'}"
    )


@click.command(cls=GraderCommand)  # the grader's errors shown as click's (grader/clierrors.py)
@click.argument("db", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--csv",
    "csv_out",
    type=OutputPath(dir_okay=False, path_type=Path),
    help="One row per submission: student, score, max_score, status, then each milestone's score.",
)
@click.option(
    "--gradescope",
    "gradescope_dir",
    type=OutputPath(file_okay=False, path_type=Path),
    help="A folder with STUDENT/results.json in Gradescope's schema for each submission, its tests laid out and "
    "shown as --tests and --visibility say (as the autograder zip's, grade gradescope).",
)
@gradescope_options
@late_policy_options
@roster_option("roster.csv beside the gradebook")
def export(
    db: Path,
    csv_out: Path | None,
    gradescope_dir: Path | None,
    late_policy: Path | None = None,
    times_from_mtime: bool = False,
    roster: Path | None = None,
    visibility: str = "after_published",
    tests: str = "milestone",
) -> None:
    """Export a batch gradebook (grade batch's SQLite file) as CSV and/or per-student Gradescope results.

    With --late-policy, each submission's time (nbgrader's timestamp.txt; the files' modification time only with
    --times-from-mtime) is judged against its due date: the CSV gains its time, due date, penalty, score after it
    and a note, and each results.json the score after the penalty. An unknown time gets no penalty, said so.
    With a roster (--roster, or roster.csv beside the gradebook), each student on it with no submission gets a
    row (and a results.json) with 0 points and "no submission", and the CSV their email and name."""
    if not csv_out and not gradescope_dir:
        raise click.UsageError("say what to write: --csv FILE and/or --gradescope FOLDER")
    rows, checks = _load(db)
    identities, roster = class_roster(roster, db.parent)
    view = with_roster(rows, identities)
    lateness = _lateness(view.rows, late_policy, times_from_mtime, identities=identities)
    if warning := untrusted_line(checks):
        click.echo(warning, err=True)
    if older := _older(rows):
        click.echo(f"note: {_older_note(db, rows, older)}", err=True)
    for line in roster_lines(view, roster):
        click.echo(line, err=True)
    if csv_out:
        write_atomically(csv_out, csv_text(view.rows, checks, lateness, identities))
        click.echo(f"wrote {csv_out} ({len(view.rows)} {_students(view)})", err=True)
    if gradescope_dir:
        for row in view.rows:
            judged = lateness.get(row["student"]) if lateness is not None else None
            results = gradescope_json(row, checks, judged, visibility=visibility, layout=tests)
            write_atomically(gradescope_dir / row["student"] / "results.json", json.dumps(results, indent=2))
        click.echo(
            f"wrote {len(view.rows)} results.json files under {gradescope_dir} (a test per {tests}, hidden checks "
            f"{visibility})",
            err=True,
        )


def _students(view: ClassRows) -> str:
    """How the rows written are counted: submissions, and the roster's students with none."""
    if not view.missing:
        return f"submission{'s' * (len(view.rows) != 1)}"
    return f"rows: {len(view.rows) - len(view.missing)} submissions and {len(view.missing)} with no submission"


def class_roster(option: Path | None, folder: Path) -> tuple[list[Identity] | None, Path | None]:
    """The roster the command reads: ``option`` (--roster), else ``folder``/roster.csv where there is one, else
    none; its identities and its path. A mistake in it is a RosterError naming the line."""
    path = option if option is not None else folder / ROSTER
    if option is None and not path.is_file():
        return None, None
    return list(read_identities(path)), path


def roster_lines(view: ClassRows, roster: Path | None) -> Iterator[str]:
    """What a command says of the roster: the students on it with no submission, and, loudly, the submissions
    not on it (kept and listed, never dropped)."""
    if roster is None:
        return
    if view.missing:
        yield missing_line(view.missing)
    if view.strangers:
        yield strangers_line(view.strangers, roster)


@click.command(cls=GraderCommand)  # the grader's errors shown as click's (grader/clierrors.py)
@click.argument("db", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--png",
    "png_dir",
    type=OutputPath(file_okay=False, path_type=Path),
    help="Also write charts into this folder: milestone-heatmap.png (students x milestones), "
    "failure-causes.png (failures by likely cause), score-distribution.png and "
    "check-failure-rates.png.",
)
@click.option(
    "--top",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="How many of the most failed checks and likely causes to list.",
)
@late_policy_options
@roster_option("roster.csv beside the gradebook")
def report(
    db: Path,
    png_dir: Path | None,
    top: int,
    late_policy: Path | None = None,
    times_from_mtime: bool = False,
    roster: Path | None = None,
) -> None:
    """Summarise a batch gradebook: per-milestone means, the most failed checks and their likely causes.

    Each student's latest grading is reported (the gradebook keeps every attempt). Untouched stubs
    (every check says it is not implemented) and the exercises a student left untouched are counted apart,
    out of the failure rates and causes; each student's milestone counts once among the causes, under the
    cause its first failing check names. With --late-policy, the late submissions and their penalties, and
    those whose time is unknown (no penalty), are listed, and the mean and the score chart are after the
    penalties. With a roster (--roster, or roster.csv beside the gradebook), each student on it with no
    submission is listed with 0 points, in the charts too, and each submission not on it is named."""
    rows, checks = _load(db)
    identities, roster = class_roster(roster, db.parent)
    view = with_roster(rows, identities)
    lateness = _lateness(view.rows, late_policy, times_from_mtime, identities=identities)
    scored = penalised(view.rows, lateness)
    for line in report_lines(db, scored, checks, top, late=lateness is not None):
        click.echo(line)
    for line in roster_lines(view, roster):
        click.echo(line)
    if lateness is not None:
        for line in late_lines(view.rows, lateness):
            click.echo(line)
    for line in regrade_lines(db):
        click.echo(line)
    if png_dir:
        from grader.batch.charts import draw  # matplotlib's helpers: `grade` starts without them

        for path in draw(scored, checks, png_dir, late=lateness is not None):
            click.echo(f"wrote {path}", err=True)


def report_lines(db: Path, rows: list[dict], checks: list[dict], top: int, *, late: bool = False) -> Iterator[str]:
    """`grade report`'s text for the gradebook ``db``'s ``rows`` and ``checks``, line by line as it is worked out
    (``top``: how many of the most failed checks and likely causes; ``late``: the rows' scores are after a late
    policy's penalties, and the mean says so)."""
    yield counts_line(rows, checks=checks)
    if warning := untrusted_line(checks):
        yield warning
    if older := _older(rows):
        yield _older_note(db, rows, older)
    yield from _set_apart_lines(checks, top)
    if mean := mean_line(rows):
        yield f"{mean}, after late penalties (the milestones' means below are before them)" if late else mean
    for m, share in milestone_means(checks).items():
        yield f"  {m:<9} {100 * share:5.1f}%  {GRADABLE[m].title}"
    yield from _failure_lines(rows, checks, top)


def _set_apart_lines(checks: list[dict], top: int) -> Iterator[str]:
    """The checks that are not the students' plain results: the grader's errors (the first ``top`` listed), those
    set aside, and those that claimed a grader fault the reference does not have."""
    if broken := [c for c in checks if c["internal_error"]]:
        first = f" (the first {top})" if len(broken) > top else ""
        yield (
            f"{len(broken)} check{'s' * (len(broken) != 1)} could not be graded (grader errors, not the "
            f"students'), left out of the shares and failure rates below{first}:"
        )
        for c in broken[:top]:
            first_line = (c["message"].strip().splitlines() or [""])[0]
            yield f"  {c['student']}  {c['milestone']}: {c['name']}: {first_line[:160]}"
    if aside := [c for c in checks if not c["internal_error"] and not c["counted"]]:
        yield (
            f"{len(aside)} check{'s' * (len(aside) != 1)} not counted (set aside: neither won nor lost), "
            "left out of the shares and failure rates below"
        )
    if claimed := Counter(c["student"] for c in checks if c["message"].startswith(CLAIM_COUNTED)):
        who = ", ".join(f"{s} ({n})" for s, n in sorted(claimed.items())[:top])
        yield (
            f"{sum(claimed.values())} check{'s' * (sum(claimed.values()) != 1)} reported a grader fault that the "
            f"reference does not have, counted as failed (see docs/sandbox.md): {who}"
        )


def _failure_lines(rows: list[dict], checks: list[dict], top: int) -> Iterator[str]:
    """The untouched stubs and exercises (counted apart), then the ``top`` most failed checks and likely causes."""
    stub = stubs(checks)
    if stub:
        yield (
            f'{len(stub)} untouched stub{"s" * (len(stub) != 1)} (every check "{NOT_IMPLEMENTED_MESSAGE}"), '
            f"left out of the failure rates: {', '.join(sorted(stub))}"
        )
    if left := untouched_line(checks):
        yield left
    if crashed := broken_line(checks):
        yield crashed
    counted = [c for c in checks if c["student"] not in stub]
    counts = failure_counts(counted)
    graded = [r for r in rows if r["status"] == "graded"]
    considered = len([r for r in graded if r["student"] not in stub])
    yield (
        f"most often failed checks (students failing it, of the {considered} graded those who worked on the "
        "milestone and did not hang or crash there):"
    )
    for (milestone, name), n, of in counts[:top]:
        yield f"  {100 * n / of:5.1f}%  {f'{n} of {of}':>9}  {milestone}: {name}"
    if causes := class_causes(checks):
        yield f"most common likely causes (students of the {considered} graded, each counted once per cause):"
        for milestones, cause, n in causes[:top]:
            yield f"  {n:4d}  {', '.join(milestones)}: {cause}"


def regrade_lines(db: Path) -> Iterator[str]:
    """The regrade requests answered (grade regrades answer), each with its old and new scores."""
    book = _open(db, create=False)
    try:
        answers = book.answers()
    finally:
        book.close()
    if answers:
        yield f"regrade requests: {len(answers)} answered"
        yield from answer_lines(answers)


def late_lines(rows: list[dict], lateness: dict[str, Lateness]) -> Iterator[str]:
    """The late policy's verdicts: where the times came from, each late submission with its penalty and score
    after it, then the submissions whose time is unknown (no penalty applied), grouped by why."""
    late = [(r, lateness[r["student"]]) for r in rows if r["student"] in lateness and lateness[r["student"]].percent]
    unknown = [r["student"] for r in rows if r["student"] in lateness and lateness[r["student"]].submitted is None]
    yield f"late policy: {len(late)} of {len(rows)} submission{'s' * (len(rows) != 1)} penalised"
    sources = Counter(judged.source for judged in lateness.values() if judged.submitted is not None)
    if sources:
        yield "  times from: " + "; ".join(f"{source} ({n})" for source, n in sources.most_common())
    for row, judged in late:
        yield (
            f"  {row['student']}: {points(row['score'])} -> {points(judged.apply(row['score'] or 0))} ({judged.note})"
        )
    if unknown:
        yield f"  submission time unknown, no penalty applied: {names(unknown)}"
        why: dict[str, list[str]] = {}
        for student in unknown:
            why.setdefault(lateness[student].source.removeprefix("unknown: ") or "no time", []).append(student)
        for reason, who in why.items():
            yield f"    {names(who)}: {printable(reason)}"


def _lateness(
    rows: list[dict],
    policy_file: Path | None,
    use_mtime: bool,
    *,
    identities: list[Identity] | None = None,
) -> dict[str, Lateness] | None:
    """Each row's judgement under the late policy in ``policy_file`` (None without one), by ``late_penalty``
    (grader/batch/term.py), the one judgement every command applies. With ``identities`` (the roster), an
    extension may name a student by id, email or name, and one that names no one is a PolicyError; without, an
    extension that names no student in ``rows`` is warned of, by its key."""
    if policy_file is None:
        if use_mtime:
            raise click.UsageError("--times-from-mtime needs --late-policy FILE")
        return None
    policy, unmatched = load_policy(policy_file, identities, [r["student"] for r in rows])
    if unmatched:
        click.echo(unmatched_warning(unmatched), err=True)
    return {row["student"]: late_penalty(row, policy, use_mtime=use_mtime) for row in rows}


def _older(rows: list[dict]) -> list[dict]:
    """The rows that grading code other than this one graded (or that predate fingerprints)."""
    current = grader_fingerprint()
    return [r for r in rows if r["grader_hash"] != current]


def _older_note(db: Path, rows: list[dict], older: list[dict]) -> str:
    """How many rows an older grader graded, and the command that regrades them."""
    if all(r["source"].startswith(SOURCE_PREFIX) for r in rows):  # a contest's view (grade contest export)
        return (
            f"{len(older)} of {len(rows)} students' counted submissions were graded by another grader than this "
            "one: regrade their tasks from the contest's coach page, then export again"
        )
    default = db.name == "grades.sqlite"  # grade batch's default: SUBMISSIONS/grades.sqlite
    command = ["grade", "batch", shlex.quote(str(db.parent)) if default else f"SUBMISSIONS --db {shlex.quote(str(db))}"]
    chosen = {r["milestones"] for r in rows}
    if len(chosen) == 1 and (ids := json.loads(chosen.pop())) != list(MILESTONES):
        command += [f"-m {m}" for m in ids]  # the same milestones, else everything is graded anew
    return (
        f"{len(older)} of {len(rows)} submission{'s' * (len(rows) != 1)} "
        f"{'was' if len(older) == 1 else 'were'} graded by an older grader: "
        f"run `{' '.join(command)}` again to regrade {'it' if len(older) == 1 else 'them'}"
    )


def _open(db: Path, create: bool) -> Gradebook:
    """The gradebook at ``db``, or a usage error where the file is something else (nbgrader's gradebook.db, not
    a database at all): nothing is written to it. ``create``: a missing or empty file becomes a new gradebook,
    its folder made as write_atomically makes the exports' (SQLite would not, and fail with a traceback)."""
    if create:
        db.parent.mkdir(parents=True, exist_ok=True)
    return Gradebook(db, create=create)  # NotAGradebook is a BadUsage: shown as click's usage error


def _load(db: Path) -> tuple[list[dict], list[dict]]:
    book = _open(db, create=False)
    try:
        return book.rows(), book.checks()
    finally:
        book.close()
