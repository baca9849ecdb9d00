"""The class-sized commands: `grade batch`, `grade export`, `grade report`."""
from __future__ import annotations

import csv
import io
import json
import os
import shlex
from collections import Counter
from pathlib import Path

import click

from grader.milestones import MILESTONES
from grader.options import milestone_ids, write_atomically


@click.command()
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-m", "--milestone", "milestones", multiple=True, callback=milestone_ids, metavar="ID",
              help="Grade only this milestone (repeatable). Default: all.")
@click.option("--workers", type=click.IntRange(1, 256), default=os.cpu_count() or 1, show_default="the cores",
              help="Submissions graded at once.")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path),
              help="The SQLite gradebook. Default: SUBMISSIONS/grades.sqlite.")
@click.option("--regrade", is_flag=True, help="Grade again even what the gradebook already holds.")
@click.option("--timeout", type=click.FloatRange(1, 600), default=40.0, show_default=True,
              help="Seconds each check may take in a submission's code.")
@click.option("--submission-timeout", type=click.FloatRange(1), metavar="SECONDS",
              help="Seconds all of one submission's checks may take together; checks past it fail, "
                   "unrun. Default: no limit beyond --timeout per check.")
@click.option("--memory-mb", type=click.IntRange(256), default=3072, show_default=True,
              help="Memory each submission's code may use, in MiB (per process, and for its whole process "
                   "tree where cgroups are available).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Grade on a Dask cluster (tcp://host:8786) instead of local processes. Its workers need the "
                   "kit installed, the submissions at the same path, and one thread each.")
def batch(submissions: Path, milestones: list[str], workers: int, db: Path | None, regrade: bool,
          timeout: float, submission_timeout: float | None, memory_mb: int, scheduler: str | None) -> None:
    """Grade every submission under SUBMISSIONS into a gradebook; run again to resume.

    SUBMISSIONS holds per-student folders, notebooks or zip files, or nbgrader's
    submitted/STUDENT/ASSIGNMENT/ layout. Each graded submission is committed at once;
    a rerun skips those whose files and milestones are unchanged and that this very
    grading code graded (suites, checks, sandbox, reference): a changed suite regrades all.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from grader.batch.discover import discover
    from grader.batch.gradebook import Gradebook
    from grader.batch.run import grade_all
    from grader.sandbox.client import Limits

    db = db or submissions / "grades.sqlite"
    found = discover(submissions, skip=(db,))
    if not found:
        raise click.UsageError(f"no submissions found in {submissions}")
    limits = Limits(call_seconds=min(20.0, timeout), test_seconds=timeout, memory_bytes=memory_mb << 20,
                    submission_seconds=submission_timeout)
    client = _dask_client(scheduler) if scheduler else None
    book = Gradebook(db)
    columns = (TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
               TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("grading", total=len(found), rate="")

        def advance(_found, _result) -> None:
            bar.advance(task)
            done = bar.tasks[task]
            bar.update(task, rate=f"{60 * done.completed / max(done.elapsed or 0, 1e-9):.1f}/min")
        try:
            graded, skipped = grade_all(found, book, milestones, limits, workers, regrade, progress=advance,
                                        executor=client.get_executor() if client else None)
        finally:
            book.close()
            if client:
                client.close()
    click.echo(f"{graded} graded, {skipped} already in {db} (unchanged)", err=True)


@click.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path),
              help="One row per submission: student, score, max_score, status, then each milestone's score.")
@click.option("--gradescope", "gradescope_dir", type=click.Path(file_okay=False, path_type=Path),
              help="A folder with STUDENT/results.json in Gradescope's schema for each submission.")
def export(db: Path, csv_out: Path | None, gradescope_dir: Path | None) -> None:
    """Export a batch gradebook (grade batch's SQLite file) as CSV and/or per-student Gradescope results."""
    if not csv_out and not gradescope_dir:
        raise click.UsageError("say what to write: --csv FILE and/or --gradescope FOLDER")
    rows, checks = _load(db)
    if older := _older(rows):
        click.echo(f"note: {_older_note(db, rows, older)}", err=True)
    if csv_out:
        ids = [m for m in MILESTONES if any(c["milestone"] == m for c in checks)]
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["student", "score", "max_score", "status", *ids])
        for row in rows:
            mine = [c for c in checks if c["student"] == row["student"]]
            writer.writerow([row["student"], row["score"], row["max_score"], row["status"],
                             *(round(sum(c["score"] for c in mine if c["milestone"] == m), 4) if mine else ""
                               for m in ids)])
        write_atomically(csv_out, buffer.getvalue())
        click.echo(f"wrote {csv_out} ({len(rows)} submissions)", err=True)
    if gradescope_dir:
        for row in rows:
            mine = [c for c in checks if c["student"] == row["student"]]
            results = {"score": row["score"] or 0, "execution_time": row["seconds"] or 0,
                       "output": row["error"] or "", "tests": [
                           {"name": f"{c['milestone']}: {c['name']}", "number": str(i + 1), "score": c["score"],
                            "max_score": c["max_score"], "status": "passed" if c["passed"] else "failed",
                            "output": "passed" if c["passed"] else c["message"], "visibility": "visible",
                            "tags": [c["milestone"]]} for i, c in enumerate(mine)]}
            write_atomically(gradescope_dir / row["student"] / "results.json", json.dumps(results, indent=2))
        click.echo(f"wrote {len(rows)} results.json files under {gradescope_dir}", err=True)


@click.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write score-distribution.png and check-failure-rates.png into this folder.")
@click.option("--top", type=click.IntRange(1, 100), default=10, show_default=True,
              help="How many of the most failed checks to list.")
def report(db: Path, png_dir: Path | None, top: int) -> None:
    """Summarise a batch gradebook: per-milestone means and the most common failing checks."""
    rows, checks = _load(db)
    graded = [r for r in rows if r["status"] == "graded"]
    click.echo(f"{len(rows)} submissions, {len(graded)} graded, {len(rows) - len(graded)} with errors")
    if older := _older(rows):
        click.echo(_older_note(db, rows, older))
    if broken := [c for c in checks if c["internal_error"]]:
        first = f" (the first {top})" if len(broken) > top else ""
        click.echo(f"{len(broken)} check{'s' * (len(broken) != 1)} could not be graded (grader errors, not the "
                   f"students'), left out of the shares and failure rates below{first}:")
        for c in broken[:top]:
            first_line = (c["message"].strip().splitlines() or [""])[0]
            click.echo(f"  {c['student']}  {c['milestone']}: {c['name']}: {first_line[:160]}")
    if graded:
        mean = sum(r["score"] / r["max_score"] for r in graded if r["max_score"]) / len(graded)
        click.echo(f"mean score: {100 * mean:.1f}%")
    for m in MILESTONES:
        per_student = Counter()
        tops = Counter()
        for c in (c for c in checks if c["milestone"] == m and not c["internal_error"]):
            per_student[c["student"]] += c["score"]
            tops[c["student"]] += c["max_score"]
        if tops:
            share = sum(per_student[s] / tops[s] for s in tops if tops[s]) / len(tops)
            click.echo(f"  {m:<9} {100 * share:5.1f}%  {MILESTONES[m].title}")
    rates = failure_rates(checks)
    click.echo(f"most often failed checks (of {len(graded)} graded):")
    for (milestone, name), rate in rates[:top]:
        click.echo(f"  {100 * rate:5.1f}%  {milestone}: {name}")
    if png_dir:
        for path in _charts(graded, rates, png_dir):
            click.echo(f"wrote {path}", err=True)


def failure_rates(checks: list[dict]) -> list[tuple[tuple[str, str], float]]:
    """Each check's share of submissions that failed it (any of its cases), most failed first.

    A case the grader could not grade (internal_error) is not the student's failure: it is left out."""
    seen: dict[tuple[str, str], set[str]] = {}
    failed: dict[tuple[str, str], set[str]] = {}
    for c in checks:
        if c.get("internal_error"):
            continue
        key = (c["milestone"], c["name"].split(" [")[0])  # the parametrized cases of one check together
        seen.setdefault(key, set()).add(c["student"])
        if not c["passed"]:
            failed.setdefault(key, set()).add(c["student"])
    return sorted(((k, len(failed[k]) / len(seen[k])) for k in failed), key=lambda kv: (-kv[1], kv[0]))


def _older(rows: list[dict]) -> list[dict]:
    """The rows that grading code other than this one graded (or that predate fingerprints)."""
    from grader.fingerprint import grader_fingerprint

    current = grader_fingerprint()
    return [r for r in rows if r["grader_hash"] != current]


def _older_note(db: Path, rows: list[dict], older: list[dict]) -> str:
    """How many rows an older grader graded, and the command that regrades them."""
    default = db.name == "grades.sqlite"  # grade batch's default: SUBMISSIONS/grades.sqlite
    command = ["grade", "batch", shlex.quote(str(db.parent)) if default else f"SUBMISSIONS --db {shlex.quote(str(db))}"]
    chosen = {r["milestones"] for r in rows}
    if len(chosen) == 1 and (ids := json.loads(chosen.pop())) != list(MILESTONES):
        command += [f"-m {m}" for m in ids]  # the same milestones, else everything is graded anew
    return (f"{len(older)} of {len(rows)} submission{'s' * (len(rows) != 1)} "
            f"{'was' if len(older) == 1 else 'were'} graded by an older grader: "
            f"run `{' '.join(command)}` again to regrade {'it' if len(older) == 1 else 'them'}")


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise click.UsageError("--scheduler needs Dask: pip install 'gptkit[dask]'") from None
    try:
        return Client(address, timeout=30)
    except OSError as e:
        raise click.UsageError(f"no Dask scheduler answers at {address}: {e}") from None


def _load(db: Path) -> tuple[list[dict], list[dict]]:
    from grader.batch.gradebook import Gradebook

    book = Gradebook(db)
    try:
        return book.rows(), book.checks()
    finally:
        book.close()


def _charts(graded: list[dict], rates, folder: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist([100 * r["score"] / r["max_score"] for r in graded if r["max_score"]], bins=20, range=(0, 100))
    ax.set(xlabel="score (%)", ylabel="submissions", title="Score distribution")
    fig.tight_layout()
    fig.savefig(folder / "score-distribution.png", dpi=120)
    plt.close(fig)
    shown = rates[:20]
    fig, ax = plt.subplots(figsize=(11, 1 + 0.35 * max(len(shown), 1)))
    ax.barh([f"{m}: {n[:60]}" for (m, n), _ in shown][::-1], [100 * r for _, r in shown][::-1])
    ax.set(xlabel="submissions failing it (%)", title="Most often failed checks", xlim=(0, 100))
    fig.tight_layout()
    fig.savefig(folder / "check-failure-rates.png", dpi=120)
    plt.close(fig)
    return [folder / "score-distribution.png", folder / "check-failure-rates.png"]
