"""What the commands share, declared once: the milestone option, the limit options and their defaults, output paths."""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from grader.milestones import GRADABLE, METRIC_TASKS, MILESTONES
from grader.results import GRADESCOPE_LAYOUTS, GRADESCOPE_VISIBILITIES
from grader.sandbox.client import Limits

F = TypeVar("F", bound=Callable)

# The default limits are Limits()'s (what a grading without options gets: the Gradescope autograder,
# `grade nbgrader`); the options offer them.
DEFAULT = Limits()


class OutputPath(click.Path):
    """``click.Path`` for what a command writes (a file or a folder, made with its parents): a usage error
    where a folder on its way is an existing file (``afile/out``), which mkdir and open would otherwise turn
    into a traceback, after part of the work."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        for parent in Path(os.fsdecode(path)).parents:
            if parent.exists():  # the nearest one that exists decides: what is under it gets made
                if not parent.is_dir():
                    self.fail(f"{parent} is a file, not a folder: {os.fsdecode(path)} cannot be written", param, ctx)
                break
        return path


def milestone_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    for m in value:
        if m not in GRADABLE:
            raise click.BadParameter(f"unknown milestone {m!r}; choose from {', '.join(GRADABLE)}")
    return list(dict.fromkeys(value)) or list(MILESTONES)


# A contest grades one task per upload: a milestone, or a metric task (lmbudget: about 220 s of training and
# evaluation at most). One upload's grading ends there, so no one waits long behind another's.
CONTEST_SUBMISSION_SECONDS = 300.0


def limits(
    timeout: float | None = None, memory_mb: int | None = None, submission_timeout: float | None = None
) -> Limits:
    """The sandbox's Limits for the limit options' values, the default's where None. One call into the code
    may take the default's 20 s, or half the check's time where that is more, but never more than the check's
    time: a hang shows sooner than the whole check's limit, and a longer timeout lets a slow call through.
    ``submission_timeout``: the whole submission's grading (``Limits.submission_seconds``, 600 s by default)."""
    timeout = DEFAULT.test_seconds if timeout is None else timeout
    memory = DEFAULT.memory_bytes if memory_mb is None else memory_mb << 20
    return Limits(
        call_seconds=min(timeout, max(DEFAULT.call_seconds, timeout / 2)),
        test_seconds=timeout,
        memory_bytes=memory,
        submission_seconds=DEFAULT.submission_seconds if submission_timeout is None else submission_timeout,
    )


def milestone_option(f: F) -> F:
    """``-m/--milestone ID`` (repeatable), checked; the command gets the list of ids, all of them by default."""
    return click.option(
        "-m",
        "--milestone",
        "milestones",
        multiple=True,
        callback=milestone_ids,
        metavar="ID",
        help=f"Grade only this milestone (repeatable): {', '.join(MILESTONES)}; or a metric task, graded only "
        f"when named: {', '.join(METRIC_TASKS)}. Default: every milestone.",
    )(f)


def limit_options(f: F) -> F:
    """``--timeout`` and ``--memory-mb``: what the submission's code may take; see :func:`limits`."""
    f = click.option(
        "--memory-mb",
        type=click.IntRange(256),
        default=DEFAULT.memory_bytes >> 20,
        show_default=True,
        help="Memory the submission's code may use, in MiB (per process, and for its whole process "
        "tree where cgroups are available).",
    )(f)
    return click.option(
        "--timeout",
        type=click.FloatRange(1, 600),
        default=DEFAULT.test_seconds,
        show_default=True,
        help="Seconds each check may take in the submission's code before it counts as hung (one call into "
        f"the code: up to {DEFAULT.call_seconds:g} s, or half the timeout above {2 * DEFAULT.call_seconds:g} s).",
    )(f)


def submission_timeout_option(default: float | None = DEFAULT.submission_seconds) -> Callable[[F], F]:
    """``--submission-timeout SECONDS``: the whole submission's grading, the grader's own work on what the
    submission sends back included (``Limits.submission_seconds``)."""
    return click.option(
        "--submission-timeout",
        type=click.FloatRange(1, 86400),
        default=default,
        show_default=True,
        metavar="SECONDS",
        help="Seconds the whole grading of one submission may take, the grader's own work on what its code "
        "returns included; the checks still to run then fail at once, saying the submission's time is up.",
    )


def roster_option(default: str | None, purpose: str | None = None) -> Callable[[F], F]:
    """``--roster PATH``: the class's roster.csv (grader/roster.py: a ``student`` column, optional ``email`` and
    ``name``); ``default``: where the command looks for one without the option, said in its help (None: nowhere);
    ``purpose``: what the command does with it, where not the batch commands' (missing and unknown students)."""
    found = f" Without it, {default} is read where there is one." if default else ""
    purpose = purpose or (
        "A student on it with no submission is listed with 0 points and 'no submission'; a submission not on it "
        "is named; a late policy's extension may name a student by id, email or name, and one that names no one "
        "on it is an error."
    )
    return click.option(
        "--roster",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        metavar="PATH",
        help="The class's roster.csv: a student column (each student's id, their folder's name), optional email "
        f"and name columns. {purpose}{found}",
    )


def gradescope_options(f: F) -> F:
    """``--visibility`` and ``--tests``: how Gradescope results lay out and show the hidden suites' checks, the
    same for the autograder zip (``grade gradescope``) and ``grade export --gradescope``."""
    f = click.option(
        "--tests",
        type=click.Choice(GRADESCOPE_LAYOUTS),
        default="milestone",
        show_default=True,
        help="What results.json lists: milestone, one test per milestone (its points, each check a line of its "
        "output); check, one test per check.",
    )(f)
    return click.option(
        "--visibility",
        type=click.Choice(GRADESCOPE_VISIBILITIES),
        default="after_published",
        show_default=True,
        help="When students see the hidden suites' checks (names, points, messages), in Gradescope's "
        "levels: visible, at once; after_due_date, once the (late) due date has passed; after_published, "
        "once you publish the grades; hidden, never. Gradescope hides a student's total while any "
        "check is hidden. The public checks are always visible and worth 0 points. The default keeps the "
        "hidden checks from students until you have looked at them.",
    )(f)


def scheduler_option(f: F) -> F:
    """``--scheduler ADDRESS``: grade on a Dask cluster (``grade batch``, ``grade contest serve``)."""
    return click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="Grade on a Dask cluster (tcp://host:8786) instead of local processes. Its workers need the kit "
        "installed, the files to grade at the same path, and one thread each.",
    )(f)


def dask_client(address: str):
    """A Dask client of the scheduler at ``address``, or a usage error saying why there is none."""
    try:
        from distributed import Client
    except ImportError:
        raise click.UsageError("--scheduler needs Dask: pip install 'gptkit[dask]'") from None
    _reachable(address)
    if warning := open_scheduler(address):
        click.echo(f"warning: {warning}", err=True)
    try:
        return Client(address, timeout=30)
    except OSError as e:
        raise click.UsageError(f"no Dask scheduler answers at {address}: {e}") from None


def open_scheduler(address: str) -> str | None:
    """Why a scheduler at ``address`` lets strangers in, or None: Dask's plain tcp:// runs whatever any client that
    reaches it sends on the workers that grade (which read the held-out text and write every result), so one on
    another machine's address is open to whoever shares its network, students included. Dask's TLS (tls://,
    with the scheduler's and workers' --tls-* certificates and the client's in Dask's config) is not."""
    parsed = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}")
    if parsed.scheme != "tcp":
        return None
    host = parsed.hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: where it points is not known here
        local = False
    if local:
        return None
    return (
        f"the Dask scheduler at {address} takes plain tcp://: any client that reaches it runs code on the workers "
        "that grade, students on its network included; use tls:// with client certificates (docs/contest/README.md)"
    )


def _reachable(address: str) -> None:
    """A port that refuses the connection is said at once: Dask's client retries a refused one until its 30 s
    timeout. Only for tcp:// addresses; any other scheme is left to Dask."""
    parsed = urllib.parse.urlsplit(address)
    if parsed.scheme != "tcp" or not parsed.hostname or parsed.port is None:
        return
    try:
        socket.create_connection((parsed.hostname, parsed.port), timeout=5).close()
    except OSError as e:
        raise click.UsageError(f"no Dask scheduler answers at {address}: {e}") from None
