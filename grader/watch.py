"""The ``grade watch`` command: regrade a submission each time its files are saved.

One resident process keeps torch, pytest and a warm fork server loaded; it polls the
submission's files (mtime and size, no extra dependency) and, once a save has settled,
regrades the chosen milestones that read the changed files, through the same workers,
isolation and limits as ``grade check``: every grading forks fresh workers from the
warm server. Each grading reads one copy of the files, taken as it starts; a save
while it runs stops it (a hang need not run out its time) and the newer files are
graded instead. A submission that hangs or crashes its worker gets its verdict and the
watching goes on; a fork server that died is replaced. Ctrl-C closes everything.
"""

from __future__ import annotations

import contextlib
import enum
import re
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NoReturn

import click

from grader import nofollow
from grader.batch.discover import FoundSubmission
from grader.errors import BadUsage
from grader.grading import Grader, Request, grader_failed, internal_errors_line
from grader.milestones import GRADABLE, MILESTONES
from grader.options import limit_options, limits, milestone_option
from grader.results import Report
from grader.sandbox.client import GraderError, Limits, copy_submission
from grader.submission import SubmissionError

POLL_SECONDS = 0.2  # how often the files are looked at
SETTLE_SECONDS = 0.3  # a save is graded once the files have not changed for this long (editors write in steps)
VERDICT_LINE = "watching"  # the line that ends each grading's output (tests and benchmarks wait for it)
IMPORT = re.compile(r"^\s*(?:from\s+(\w+)|import\s+([\w\s,]+))", re.MULTILINE)
IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".tmp")  # editors' backups and swap files: nothing the worker reads

Snapshot = dict[str, tuple[int, int]]  # relative path -> (mtime in ns, size)


class Again(enum.Enum):
    """A grading to do again (``Watcher.attempt``): the files were torn as they were read, or the server lost."""

    AGAIN = "again"


AGAIN = Again.AGAIN


class Stop:
    """Ctrl-C or SIGTERM: stop watching. The signal raises KeyboardInterrupt, which pytest (grading in
    this process) passes on; the flag tells a grading that pytest cut short from the grader's failure."""

    asked = False


class NewerSave:
    """A save while a grading runs: a thread sends ``SIGNAL`` to the main thread, whose handler stops the
    grading the way Ctrl-C would (KeyboardInterrupt, which pytest passes on), but only while ``grading``:
    a signal that arrives once the grading is over is ignored."""

    SIGNAL = signal.SIGUSR1
    grading = False
    seen = False


def _newer_save(signum: int, frame: object) -> None:
    if NewerSave.grading:
        raise KeyboardInterrupt


def snapshot(path: Path) -> Snapshot:
    """The submission's files (those a worker gets: see ``copy_submission``) with their mtimes and sizes."""
    if not path.is_dir():
        try:
            stat = path.stat()
        except OSError:
            return {}
        return {path.name: (stat.st_mtime_ns, stat.st_size)}
    files: Snapshot = {}
    for p in path.rglob("*"):
        rel = p.relative_to(path)
        if "__pycache__" in rel.parts or rel.parts[0].startswith(".") or p.name.endswith(IGNORED_SUFFIXES):
            continue
        try:
            if p.is_symlink() or not p.is_file():
                continue
            stat = p.stat()
        except OSError:  # removed while we looked
            continue
        files[rel.as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return files


def changes(before: Snapshot, after: Snapshot) -> dict[str, str]:
    """What changed between two snapshots: path -> "changed", "added" or "removed"."""
    out = {p: "changed" for p in before.keys() & after.keys() if before[p] != after[p]}
    out.update({p: "added" for p in after.keys() - before.keys()})
    out.update({p: "removed" for p in before.keys() - after.keys()})
    return dict(sorted(out.items()))


def imports_of(folder: Path, module: str) -> set[str]:
    """The names a module's file imports at top level (a regex, so a file with a syntax error still answers)."""
    try:
        text = (folder / f"{module}.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    names = set()
    for found in IMPORT.finditer(text):
        if found[1]:
            names.add(found[1])
        else:
            names.update(n.split()[0] for n in found[2].split(",") if n.strip())
    return names


def dependencies(folder: Path, milestone: str) -> set[str]:
    """The submission's files a milestone reads: its modules, and the submission's files they import
    (transitively), less the files the grader replaces with its own while grading it: those it has a trusted
    copy of, as the grading does (a student release has none, so there m2 to m4 run the student's m1)."""
    from grader.sandbox.secrecy import trusted_source  # reads the grader's files: only when asked

    m = GRADABLE[milestone]
    replaced = {name for name in m.trusted if trusted_source(name) is not None}
    seen: set[str] = set()
    todo = list(m.modules)
    while todo:
        name = todo.pop()
        if name in seen or name in replaced:
            continue
        seen.add(name)
        todo.extend(n for n in imports_of(folder, name) if (folder / f"{n}.py").is_file())
    return {f"{name}.py" for name in seen}


def affected(path: Path, chosen: list[str], changed: Iterable[str]) -> list[str]:
    """The chosen milestones that read any of the changed files (all of them for a notebook, or a data file)."""
    changed = set(changed)
    if not path.is_dir() or any(not c.endswith(".py") or "/" in c for c in changed):
        return list(chosen)
    return [m for m in chosen if dependencies(path, m) & changed]


class Watcher:
    """The resident grader: one warm fork server, replaced if it dies."""

    def __init__(self, submission: Path, chosen: Limits, public: bool, verbose: bool, once: bool = False):
        self.submission, self.limits, self.public, self.verbose = submission, chosen, public, verbose
        self.once = once  # grade once, as `grade check`: a save meanwhile does not stop it
        self.grader = Grader(chosen)
        self.color = sys.stdout.isatty()

    def grade(self, milestones: list[str]) -> Report | None:
        """Grade and print the table (and first failures) as ``grade check`` does; None if nothing was graded."""
        for attempt in range(2):  # a second time only if the fork server died while grading
            if self.grader.server_died:  # the Grader replaces it; the student hears why this grading starts slowly
                click.echo("grade watch: the grading workers' fork server stopped; starting a new one", err=True)
            report = self.attempt(milestones, first=attempt == 0)
            if report is not AGAIN:
                return report
        return None

    def attempt(self, milestones: list[str], first: bool) -> Report | None | Again:
        """One grading of the files as they are now, printed; AGAIN where the ``first`` one must be done again (the
        files were torn as they were read, or the grader lost its server), None where nothing was graded."""
        try:
            report, torn = self.graded(milestones)
            if NewerSave.seen:
                self.superseded()
                return None
            if torn and first:  # a file caught mid-write: its verdict would stay until another save
                click.echo("the files changed while they were read: grading them again")
                return AGAIN
            if Stop.asked:
                raise KeyboardInterrupt
        except SubmissionError as e:  # a notebook that is mid-write or not valid JSON: the student's to fix
            click.echo(f"grade: {e}")
            return None
        except (GraderError, OSError, EOFError) as e:
            return self.failed(e, first)
        if self.grader.lost and first:
            return AGAIN  # its checks were set aside as the grader's failures: grade again on a new server
        self.show(report)
        return report

    def graded(self, milestones: list[str]) -> tuple[Report, bool]:
        """The report on a copy of the files, graded unless a save stops it; and whether the files changed while
        they were read (torn)."""
        with self.copy() as copied, self.stopped_by_a_save():
            request = Request(copied, tuple(milestones), public=self.public, name=str(self.submission))
            report = self.grader.grade(request)
            torn = digest(copied) != digest(self.submission)
        return report, torn

    def failed(self, e: Exception, first: bool) -> None | Again:
        """A grading the grader failed (``e``): Ctrl-C's if asked, a save's if one stopped it, AGAIN where the
        ``first`` one lost its server; else said, and None."""
        if Stop.asked:
            raise KeyboardInterrupt from None
        if NewerSave.seen:  # pytest, stopped by the save, says the suites did not run
            self.superseded()
            return None
        if self.grader.lost and first:
            return AGAIN
        click.echo(grader_failed(e), err=True)  # the Grader starts a fresh server for the next save
        return None

    def show(self, report: Report) -> None:
        """The report's table, as ``grade check`` prints it; a line on stderr for the grader's own faults."""
        from grader.table import render_text  # rich: `grade` starts without it

        click.echo(render_text(report, verbose=self.verbose, color=self.color))
        if faults := internal_errors_line(report):
            click.echo(faults, err=True)

    def superseded(self) -> None:
        click.echo("saved again while grading: stopped; grading the newer files")
        self.grader.reset()  # it was cut short, perhaps mid-request: a fresh server for the next grading

    @contextlib.contextmanager
    def copy(self) -> Iterator[Path]:
        """The files as they are now, in a folder of their own: every worker of one grading reads the same, and
        what was graded can be compared with what is there once it is done."""
        if nofollow.is_link(self.submission):  # made a link since the watch began: what it points to is not graded
            raise SubmissionError(nofollow.refused(self.submission.name))
        with tempfile.TemporaryDirectory(prefix="gptkit-watch-") as tmp:
            copied = Path(tmp) / self.submission.name
            if self.submission.is_dir():
                copy_submission(self.submission, copied)
            else:
                try:
                    with nofollow.open_file(self.submission) as f:
                        copied.write_bytes(f.read())
                except nofollow.NotOwnFile as e:
                    raise SubmissionError(str(e)) from None
            yield copied

    @contextlib.contextmanager
    def stopped_by_a_save(self) -> Iterator[None]:
        """Grading that a save of the files stops (``NewerSave``); a thread looks at the files meanwhile."""
        before, done = snapshot(self.submission), threading.Event()
        main = threading.main_thread().ident
        assert main is not None

        def look() -> None:
            while not done.wait(POLL_SECONDS):
                if snapshot(self.submission) != before:
                    NewerSave.seen = True
                    if NewerSave.grading:
                        signal.pthread_kill(main, NewerSave.SIGNAL)
                    return

        NewerSave.seen = False
        if self.once:
            yield
            return
        looking = threading.Thread(target=look, daemon=True)
        looking.start()
        try:
            NewerSave.grading = True
            yield
        except KeyboardInterrupt:
            if Stop.asked or not NewerSave.seen:
                raise
        finally:
            NewerSave.grading = False
            done.set()
            looking.join()

    def close(self) -> None:
        self.grader.close()


def _stop(signum: int, frame: object) -> None:
    Stop.asked = True
    raise KeyboardInterrupt


def digest(path: Path) -> str:
    """The submission's files, names and bytes, as one digest (the files ``copy_submission`` copies)."""
    try:
        return FoundSubmission("", path).digest()
    except OSError:  # a file removed as it was read: changed, whatever it was
        return ""


def settle(path: Path, seen: Snapshot) -> Snapshot:
    """Wait until the files stop changing (a save in several writes), then return how they are."""
    while True:
        time.sleep(SETTLE_SECONDS)
        now = snapshot(path)
        if now == seen:
            return now
        seen = now


@click.command()
@click.argument("submission", type=click.Path(exists=True, path_type=Path), default=".")
@milestone_option
@click.option("-v", "--verbose", is_flag=True, help="Show every failing check, not only the first per milestone.")
@limit_options
@click.option("--public", is_flag=True, help="Run only the public checks (what a student release runs).")
@click.option("--once", is_flag=True, help="Grade once and exit, as `grade check` (exit code 1 on a grader failure).")
def watch(
    submission: Path,
    milestones: list[str],
    verbose: bool = False,
    timeout: float | None = None,
    memory_mb: int | None = None,
    public: bool = False,
    once: bool = False,
) -> None:
    """Grade SUBMISSION (a folder or a notebook), then regrade it each time you save a file.

    Only the milestones that read the saved files are regraded (all of them, for a notebook).
    Ctrl-C stops watching.
    """
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    check_watchable(submission)
    chosen = list(milestones or MILESTONES)
    watcher = Watcher(submission, limits(timeout, memory_mb), public, verbose, once)
    code = run_watch(watcher, submission, chosen, once)
    if not once:
        click.echo("\ngrade watch: stopped; goodbye")
    sys.exit(code)


def check_watchable(submission: Path) -> None:
    """Refuse what is not watched: a link (SubmissionError), a paper's notebook (a usage error)."""
    if nofollow.is_link(submission):
        raise SubmissionError(nofollow.refused(submission.name))
    if submission.suffix == ".ipynb":
        from grader.paper.sitting import sitting_of  # as the table: not at start-up

        if sitting_of(submission):  # its own SittingError is a usage error too (grader/errors.py)
            raise BadUsage("a paper's notebook is graded with `grade check`, not watched")


def run_watch(watcher: Watcher, submission: Path, chosen: list[str], once: bool) -> int:
    """Grade ``chosen``, then, unless ``once``, regrade on every save until Ctrl-C or SIGTERM; the exit code. The
    signals' handlers are this function's: a second Ctrl-C is ignored while the watcher closes, then the previous
    handlers are back."""
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    previous[NewerSave.SIGNAL] = signal.signal(NewerSave.SIGNAL, _newer_save)
    code = 0
    try:
        what = watched(submission, chosen)
        if not once:
            click.echo(f"grade watch: watching {what} for milestones {', '.join(chosen)}; Ctrl-C to stop")
        seen = snapshot(submission)
        watcher.grader.warm_up()  # torch loads there while this process loads it in grade()
        report = watcher.grade(chosen)
        code = 0 if report is not None and not report.internal_errors else 1
        if not once:
            click.echo(f"{VERDICT_LINE} for changes (Ctrl-C to stop)")
            code = 0  # from now on, only Ctrl-C ends it: a clean exit
            regrade_on_saves(watcher, submission, chosen, seen)
    except KeyboardInterrupt:
        code = 130 if once else 0
    finally:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the cleanup
        watcher.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code


def watched(submission: Path, chosen: list[str]) -> str:
    """What is watched, in words: a folder's files that the ``chosen`` milestones read, or the notebook."""
    if submission.is_dir():
        files = sorted({f for m in chosen for f in dependencies(submission, m)})
        return f"{', '.join(files)} in {submission}"
    return str(submission)


def regrade_on_saves(watcher: Watcher, submission: Path, chosen: list[str], seen: Snapshot) -> NoReturn:
    """Look at the files every POLL_SECONDS (``seen``: how they were last graded); once a save has settled,
    regrade what it changed. Ends only by an exception: Ctrl-C's KeyboardInterrupt."""
    while True:
        time.sleep(POLL_SECONDS)
        now = snapshot(submission)
        if now == seen:
            continue
        now = settle(submission, now)
        changed = changes(seen, now)
        seen = now
        if changed:
            regrade(watcher, submission, chosen, changed)


def regrade(watcher: Watcher, submission: Path, chosen: list[str], changed: dict[str, str]) -> None:
    """Say what was saved, and regrade the ``chosen`` milestones that read it (or say that none does)."""
    stamp = time.strftime("%H:%M:%S")
    listed = ", ".join(f"{p} ({how})" if how != "changed" else p for p, how in changed.items())
    todo = affected(submission, chosen, changed)
    if not todo:
        click.echo(f"\n[{stamp}] {listed} saved: no chosen milestone reads it; nothing to regrade")
        return
    click.echo(f"\n[{stamp}] {listed} saved: regrading {', '.join(todo)}")
    watcher.grade(todo)
    click.echo(f"{VERDICT_LINE} for changes (Ctrl-C to stop)")
