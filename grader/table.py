"""The terminal rendering of a Report: one row per milestone, then what to fix first."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from grader.milestones import GRADABLE
from grader.paper.sitting import Sitting, paper_of
from grader.results import Report


def render_text(report: Report, verbose: bool = False, color: bool = True, paper: Sitting | None = None) -> str:
    """The table. For a paper's grading (``paper``, or the paper notebook the report is of) the rows are the
    paper's parts in its order, with no Total row: the paper's summary gives the total, in the paper's points."""
    if paper is None:
        paper = paper_of(report)
    milestones = paper.order(report.milestones) if paper else report.milestones
    title = f"Grading {report.submission}" + (
        ": PUBLIC checks only (your instructor's grader runs more)" if report.public else ""
    )
    table = _table(report, milestones, paper is not None)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=110)
    console.print(title, highlight=False, markup=False, style="italic")  # a table title would wrap at its width
    console.print(table)
    _print_checks(console, report, milestones, verbose)
    if note := report.set_aside_note():
        console.print(f"Note: {note}.", style="yellow", highlight=False, markup=False)
    console.print(f"graded in {report.seconds:.1f} s; protections: {', '.join(report.protections)}", style="dim")
    return buffer.getvalue().rstrip()


def _table(report: Report, milestones: list[str], paper: bool) -> Table:
    """One row per milestone (a paper's part), then, for a lesson's grading, the Total."""
    table = Table()
    table.add_column("Part" if paper else "Milestone")
    table.add_column("Grader's points" if paper else "Points", justify="right")
    table.add_column("Checks", justify="right")
    table.add_column("First failing check", overflow="fold")
    for m in milestones:
        table.add_row(*_row(report, m))
    if not paper:  # a paper's total is in its own points, in its summary (Sitting.summary)
        score, max_score = report.score()
        table.add_section()
        table.add_row("[bold]Total[/]", f"[bold]{score:g} / {max_score:g}[/]", "", "")
    return table


def _row(report: Report, m: str) -> tuple[str, str, str, str]:
    """Milestone ``m``'s cells: its title, its points (green, yellow or red), its checks passed and what to fix."""
    checks = [c for c in report.of(m) if c.counted]
    score, max_score = report.score(m)
    failed = [c for c in checks if not c.passed]
    style = "green" if not failed else ("red" if score == 0 else "yellow")
    metric = [c for c in checks if c.value is not None]  # a metric-scored check: its measure is the news
    if failed:
        first = failed[0].name
    elif not checks:
        first = "[yellow]nothing counted[/]: see below"
    elif metric and score < max_score:
        first = metric[0].message.split(";")[0]
    else:
        first = "[green]all passed[/]"
    aside = len(report.of(m)) - len(checks)
    return (
        f"{m}  {GRADABLE[m].title}",
        f"[{style}]{score:g} / {max_score:g}[/]",
        f"{len(checks) - len(failed)}/{len(checks)}" + (f" (+{aside} not counted)" if aside else ""),
        first,
    )


def _print_checks(console: Console, report: Report, milestones: list[str], verbose: bool) -> None:
    """Under the table: each milestone's first failing check (all of them if ``verbose``) and its metrics'
    measures, then the checks set aside."""
    for m in milestones:
        failed = [c for c in report.of(m) if not c.passed and c.counted]
        for c in failed if verbose else failed[:1]:
            console.print(f"[bold]{m}[/] ✗ ", end="")
            console.print(f"{c.name}\n    {c.message}", highlight=False, markup=False)
        for c in report.of(m):  # a metric's measure and points, pass or not: the score it earns
            if c.passed and c.counted and c.value is not None:
                console.print(f"[bold]{m}[/] ● ", end="")
                console.print(f"{c.name}\n    {c.message}", highlight=False, markup=False)
    for c in report.set_aside:  # always shown: the student must not take them for their own failures
        console.print(f"[bold]{c.milestone}[/] [yellow]not counted[/] ", end="")
        console.print(f"{c.name}\n    {c.message}", highlight=False, markup=False)
        if verbose and c.traceback:
            trace = "\n".join(f"      {line}" for line in c.traceback.splitlines())
            console.print(f"    the grader's traceback:\n{trace}", highlight=False, markup=False, style="dim")
