"""The ``grade`` command: grade a submission folder or notebook, print or write the results."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from grader import __version__
from grader.batch.commands import batch, export, report
from grader.batch.handback import feedback
from grader.batch.regrades import regrades
from grader.clierrors import GraderGroup
from grader.contest.commands import contest
from grader.contest.submit import submit
from grader.errors import BadUsage
from grader.files import write_atomically
from grader.grading import Grader, Request, internal_errors_line
from grader.milestones import MILESTONES
from grader.options import (
    OutputPath,
    gradescope_options,
    limit_options,
    limits,
    milestone_option,
    roster_option,
    submission_timeout_option,
)
from grader.paper.commands import paper
from grader.practice.command import practice
from grader.variants import Variant
from grader.watch import watch

# Imported where used, to keep `grade` quick to start: grader.paper.sitting, grader.table (rich), the bundles,
# and grader.runner (pytest, then torch).

FORMATS = ("text", "json", "gradescope")


@click.group(cls=GraderGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grade")  # the grader's: both distributions (kit, release) ship it
@click.pass_context
def main(ctx: click.Context) -> None:
    """Grade TinyGPT exercises. With no command, grades ./exercises and prints a table."""
    if ctx.invoked_subcommand is None:
        if not Path("exercises").is_dir():
            raise BadUsage("there is no exercises/ folder here: run `grade check FOLDER` instead")
        ctx.invoke(check, submission=Path("exercises"))


@main.command()
@click.argument("submission", type=click.Path(exists=True, path_type=Path), default=".")
@milestone_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text: a table; json: every check; gradescope: Gradescope's results.json.",
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(dir_okay=False, writable=True, path_type=Path),
    help="Write the results to this file instead of the terminal.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show every failing check, not only the first per milestone.")
@limit_options
@submission_timeout_option()
@click.option(
    "--public", is_flag=True, help="Run only the public checks (what a student release runs; its only choice)."
)
@click.option(
    "--paper",
    "paper_path",
    type=click.Path(exists=True, path_type=Path),
    help="Grade on this paper (paper.toml or its folder): its parts, rules and points. A notebook that "
    "`grade paper render` wrote needs no --paper: it says which paper it is.",
)
@click.option("--student", help="With --paper: grade with this student's numbers (needs the paper's secret).")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 8),
    help="Grading processes side by side, each on some of the milestones  [default: 2 on a machine with two "
    "cores or more, else 1]",
)
def check(
    submission: Path,
    milestones: list[str] | None = None,
    fmt: str = "text",
    output: Path | None = None,
    verbose: bool = False,
    timeout: float | None = None,
    memory_mb: int | None = None,
    submission_timeout: float | None = None,
    public: bool = False,
    paper_path: Path | None = None,
    student: str | None = None,
    jobs: int | None = None,
) -> None:
    """Grade SUBMISSION: a folder of exercise files or a notebook (default: the current folder)."""
    # torch warns when numpy is absent; the grader does not use numpy, so the warning is only noise.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from grader.paper.sitting import SittingError, from_paper, sitting_of

    chosen = limits(timeout, memory_mb, submission_timeout)
    # A paper's notebook (grade paper render): its parts, its student's numbers, its rules. A SittingError is a
    # usage error, shown as one by the group (grader/clierrors.py), as are the submission's and the grader's own.
    if student is not None and paper_path is None:
        raise SittingError("--student goes with --paper: the paper whose numbers to draw")
    sitting = from_paper(paper_path, student) if paper_path else sitting_of(submission)
    asked = click.get_current_context().get_parameter_source("milestones") not in (None, ParameterSource.DEFAULT)
    graded = sitting.milestones(milestones if asked else None) if sitting else milestones or list(MILESTONES)
    options: dict[str, Any] = {
        "public": public,
        "variant": sitting.variant if sitting else Variant(),
        "rules": sitting.rules if sitting else None,
    }
    with Grader(chosen, jobs=jobs, many=False) as grader:
        report = grader.grade(Request(submission, tuple(graded), name=str(submission), **options))
    if fmt == "text":
        from grader.table import render_text

        text = render_text(report, verbose=verbose, color=output is None, paper=sitting)
        if sitting:
            text += "\n\n" + sitting.summary(report, graded)
    elif fmt == "json" and sitting:
        text = json.dumps({**report.to_json(), "paper": sitting.to_json(report, graded)}, indent=2)
    else:
        text = report.render(fmt)
    if output:
        write_atomically(output, text + "\n")
        click.echo(f"results written to {output}", err=True)
    else:
        click.echo(text)
    if faults := internal_errors_line(report):
        click.echo(faults, err=True)
        sys.exit(1)


@main.command()
@click.argument("out", type=OutputPath(dir_okay=False, path_type=Path), default="gradescope-autograder.zip")
@gradescope_options  # shared with grade export --gradescope (grader/options.py)
@click.option(
    "--late-policy",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TOML late policy (docs/instructors.md, 'Due dates and late penalties'), shipped in the zip: the "
    "submission's time and due date come from Gradescope's submission_metadata.json.",
)
@roster_option(
    None,
    "Shipped in the zip with the late policy: Gradescope gives the submitter's email and name, which the roster "
    "maps to their id, so an extension keyed by id, email or name applies; one that names no one is an error.",
)
def gradescope(
    out: Path,
    visibility: str = "after_published",
    tests: str = "milestone",
    late_policy: Path | None = None,
    roster: Path | None = None,
) -> None:
    """Write a Gradescope autograder zip to OUT (setup.sh, run_autograder, the grader and its hidden suites).

    Upload it as the assignment's autograder; students submit their exercise files or one notebook, loose
    or in one folder. The hidden suites carry the points; the public checks are listed too, worth 0.
    """
    from grader.bundles import gradescope as bundle

    try:
        names = bundle.build(out, visibility=visibility, tests=tests, late_policy=late_policy, roster=roster)
    except FileNotFoundError as e:
        raise click.UsageError(str(e)) from None
    if late_policy is not None and roster is None and (keys := bundle.unreachable_keys(late_policy)):
        click.echo(f"warning: {bundle.unreachable_warning(keys)}", err=True)
    click.echo(
        f"wrote {out} ({len(names)} files, hidden checks {visibility}, a test per {tests}); upload it as the "
        "autograder of a Gradescope assignment",
        err=True,
    )


@main.command()
@click.argument("out", type=OutputPath(path_type=Path), default="gptkit-release")
@click.option(
    "--answer-locks/--no-answer-locks",
    default=True,
    show_default=True,
    help="Ship the quiz's, kvmemory's and concepts' answers locked, so the public checks say right or wrong. Leave "
    "them out for a class that will sit a paper on these questions: a search opens any lock in seconds, and the "
    "quiz and Q_TEXT1 are asked alike of every student (a paper's other questions are each student's own).",
)
def release(out: Path, answer_locks: bool) -> None:
    """Write the student release to OUT (a new folder, or a .zip): stubs, public checks, a grader, a README.

    No reference solution and no hidden check goes in; in the release, `grade` runs the public checks.
    """
    from grader.bundles import release as bundle

    try:
        names = bundle.build(out, answer_locks=answer_locks)
    except (FileNotFoundError, FileExistsError) as e:
        raise click.UsageError(str(e)) from None
    click.echo(f"wrote {out} ({len(names)} files): hand it to your students", err=True)


@main.command()
@click.argument("out", type=OutputPath(file_okay=False, path_type=Path), default="nbgrader-course")
def nbgrader(out: Path) -> None:
    """Write an nbgrader course to OUT: nbgrader_config.py and source/lesson/tinygpt.ipynb.

    Then, in OUT and in the kit's environment (nbgrader_config.py imports the kit):
    `nbgrader generate_assignment lesson`, hand out release/lesson/tinygpt.ipynb, collect
    submissions into submitted/STUDENT/lesson/, `nbgrader autograde lesson`, `nbgrader export`.
    """
    from grader.bundles import nbgrader as course
    from grader.runner import HIDDEN_AVAILABLE

    if not HIDDEN_AVAILABLE or not (course.PROJECT / "solutions").is_dir():
        raise click.UsageError("an nbgrader course is built from a checkout of the kit (solutions and hidden suites)")
    try:
        course.refuse_existing(out)  # now, not after grading the reference for a minute (build checks again)
    except FileExistsError as e:
        raise click.UsageError(str(e)) from None
    with Grader(many=False) as grader:  # each milestone's points, and a sanity check
        report = grader.grade(Request(course.PROJECT / "solutions"))
    if report.set_aside or report.score() != (report.score()[1], report.score()[1]):
        raise click.ClickException("the reference does not score full marks; the course would be wrong")
    try:
        notebook = course.build(out, {m: report.score(m)[1] for m in MILESTONES})
    except FileExistsError as e:
        raise click.UsageError(str(e)) from None
    click.echo(f"wrote {notebook}; next, in {out}: nbgrader generate_assignment {course.ASSIGNMENT}", err=True)


@main.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=0.6,
    show_default=True,
    help="Flag a pair whose share of common fingerprints on a file is at least this (0 to 1).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--by-file", is_flag=True, help="One row per pair and file, instead of one per pair.")
@click.option(
    "--stubs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The stubs the students started from (default: this kit's exercises/): their text is never counted.",
)
@roster_option(
    None,
    "Optional: a student on it with no exercise files is named ('no files to compare'), and so is a folder not on "
    "it (compared all the same).",
)
@click.option(
    "--pair",
    nargs=2,
    metavar="A B",
    help="Only students A and B: their scores file by file (with --html, their files side by side).",
)
@click.option(
    "--html",
    type=OutputPath(dir_okay=False, path_type=Path),
    help="With --pair: write a page with both students' files side by side, the code they share marked.",
)
def similarity(
    folder: Path,
    threshold: float,
    fmt: str,
    by_file: bool,
    stubs: Path | None,
    roster: Path | None,
    pair: tuple[str, str] | None,
    html: Path | None,
) -> None:
    """Rank pairs of students in FOLDER (a class, as grade batch reads it) whose exercise files hold the same code
    up to renamed identifiers, reordered functions, comments and dead code: one row per pair, its score across the
    files both wrote, and the files at or above the threshold. The stubs' own text, and code more than half of the
    class wrote the same way (the quiz's answers), count for no one.

    \b
    grade similarity class/                                  # the flagged pairs, most alike first
    grade similarity class/ --pair alice bob --html ab.html  # their files side by side, what they share marked

    Needs copydetect (pip install 'gptkit[similarity]'). A flagged pair is a reason to read both, not a verdict."""
    from grader import similarity as sim
    from grader.roster import read_roster

    if html and not pair:
        raise BadUsage("--html needs --pair A B: the two students whose files to show side by side")
    names = read_roster(roster) if roster else None
    klass = sim.read_class(folder, stubs or sim.STUBS, names)
    if pair:
        missing = [s for s in pair if s not in klass.students]
        if missing or pair[0] == pair[1]:
            raise BadUsage(
                f"--pair needs two students of {folder}: {', '.join(missing) or pair[0] + ' twice'} is not one "
                f"(found: {', '.join(klass.students[:10])}{' ...' * (len(klass.students) > 10)})"
            )
        if html:
            write_atomically(html, sim.pair_view(klass, *pair))
            click.echo(f"wrote {html}", err=True)
        else:
            click.echo(sim.render_pair(klass, *pair))
        return
    click.echo(sim.render(klass, sim.file_pairs(klass), threshold, fmt, by_file))


for command in (batch, export, report, regrades, feedback, contest, submit, paper, practice, watch):
    main.add_command(command)
