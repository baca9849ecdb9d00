"""``grade contest``: prepare a contest folder (``init``), give each student a secret token (``tokens``) and
check the contest file (``check``). The server that runs the contest will read the same folder.

Every mistake a coach can make here (a missing folder, a bad roster, a typo in contest.toml) is a message and
exit status 2, never a traceback: the coach is not expected to read Python.
"""

from __future__ import annotations

import csv
import errno
import functools
import getpass
import io
import logging
import os
import secrets
import socket
import sys
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import IO, Any

import click

from grader import templates
from grader.batch.commands import export, report
from grader.batch.gradebook import Gradebook
from grader.clierrors import GraderGroup
from grader.contest.config import Board, Contest, load
from grader.contest.feedback import guarded_tasks
from grader.contest.grading import LANES, METRIC, METRIC_NICE, QUICK, Remote, default_workers
from grader.contest.layout import (
    ADMIN_TOKEN,
    COACHES,
    CONTEST_FILE,
    ROSTER,
    SERVE_LOCK,
    TOKENS,
    read_coaches,
    read_tokens,
)
from grader.contest.metric import is_metric
from grader.contest.policy import contest_end
from grader.contest.supervise import process_age
from grader.contest.web.tokens import ADMIN, ROLES, read_roles
from grader.errors import InputError
from grader.files import atomic_path, write_atomically
from grader.milestones import GRADABLE
from grader.options import (
    CONTEST_SUBMISSION_SECONDS,
    dask_client,
    limit_options,
    limits,
    scheduler_option,
    submission_timeout_option,
)
from grader.roster import read_roster
from grader.sandbox.client import Limits, sweep_scratch

log = logging.getLogger("grader.contest")
SERVICE = "contest.service"  # the systemd unit `init` writes in the contest folder
SERVICE_TEMPLATE = "contest-service.tmpl"  # grader/templates/: packaged with the other *.tmpl


class ContestCommandError(InputError):
    """A mistake in the coach's input: the message, and exit status 2 as for a usage error (``InputError``)."""


def _folder(path: Path) -> Path:
    if not path.is_dir():
        raise ContestCommandError(f"there is no folder {path}: run `grade contest init {path}` to make one")
    return path


def _secret(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, from the first byte (the temp file is 0600 and is
    kept so), replacing any file there at once."""
    with atomic_path(path) as tmp:
        tmp.chmod(0o600)
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    os.chmod(path, 0o600)


def _ignore_secrets(folder: Path) -> None:
    """A .gitignore in ``folder`` naming its secrets (grader/templates/contest-gitignore.tmpl): a coach who keeps the
    contest folder in git must not commit the tokens or the students' code by accident. Lines a .gitignore
    already there lacks are added to it; nothing in it is removed."""
    path = folder / ".gitignore"
    wanted = [
        line for line in templates.text("contest-gitignore.tmpl").splitlines() if line and not line.startswith("#")
    ]
    had = path.read_text(encoding="utf-8") if path.exists() else ""
    missing = [line for line in wanted if line not in had.splitlines()]
    if not had:
        path.write_text(templates.text("contest-gitignore.tmpl"), encoding="utf-8")
    elif missing:
        path.write_text(had.rstrip("\n") + "\n# the contest's secrets (grade contest)\n" + "\n".join(missing) + "\n")


@click.group(cls=GraderGroup)  # the grader's errors shown as click's (grader/clierrors.py)
def contest() -> None:
    """Prepare a timed practice contest: its folder, its students' tokens, its rules."""


@contest.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def init(folder: Path) -> None:
    """Write an example contest.toml and roster.csv in FOLDER (made if missing), to edit."""
    targets = [folder / CONTEST_FILE, folder / ROSTER]
    existing = [p for p in targets if p.exists()]
    if existing:
        raise ContestCommandError(
            f"{', '.join(str(p) for p in existing)} already exist(s): not overwritten (edit it, or remove it first)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    example = templates.text("contest.toml").replace("@TASK_IDS@", ", ".join(GRADABLE))  # every task, one source
    targets[0].write_text(example, encoding="utf-8")
    targets[1].write_text(templates.text("contest-roster.csv.tmpl"), encoding="utf-8")
    _ignore_secrets(folder)
    unit = _write_unit(folder)
    click.echo(
        f"wrote {targets[0]} and {targets[1]}: edit them, then run `grade contest check {folder}` "
        f"and `grade contest tokens {folder}`"
        + (f" ({unit} runs the server under systemd: see its first lines)" if unit else "")
    )


def _write_unit(folder: Path) -> Path | None:
    """FOLDER/contest.service, a systemd unit that serves the contest and restarts it (the alternative to
    `serve --supervise`), with this folder, this Python and this user filled in; None where one is there already
    (the coach's edits are kept)."""
    path = folder / SERVICE
    if path.exists():
        return None
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): systemd takes the number too
        user = str(os.getuid())
    unit = templates.render(SERVICE_TEMPLATE, folder=folder.resolve(), python=sys.executable, user=user)
    path.write_text(unit, encoding="utf-8")
    return path


@contest.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--rotate", is_flag=True, help="Replace the existing tokens: every old one stops working.")
def tokens(folder: Path, rotate: bool = False) -> None:
    """Give each student in FOLDER/roster.csv a secret token (FOLDER/tokens.csv) and the coach one
    (FOLDER/admin.token), both readable by you only."""
    _folder(folder)
    students = _roster(folder, _rules(folder) if (folder / CONTEST_FILE).exists() else None)
    existing = [p for p in (folder / TOKENS, folder / ADMIN_TOKEN) if p.exists()]
    if existing and not rotate:
        raise ContestCommandError(
            f"{', '.join(str(p) for p in existing)} already exist(s): the students may hold these tokens. "
            "Use --rotate to replace them all"
        )
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", "token"])
    for student in students:
        writer.writerow([student, secrets.token_urlsafe(24)])
    _ignore_secrets(folder)  # before the secrets exist
    _secret(folder / TOKENS, out.getvalue())
    _secret(folder / ADMIN_TOKEN, secrets.token_urlsafe(32) + "\n")
    click.echo(
        f"wrote {len(students)} student tokens to {folder / TOKENS} and the coach's token to {folder / ADMIN_TOKEN}"
        + (" (the old ones no longer work)" if existing else "")
        + ": give each student only their own line, and keep admin.token to yourself"
    )


@contest.command("coach")
@click.argument("folder", type=click.Path(path_type=Path))
@click.argument("name")
@click.option("--remove", is_flag=True, help="Take NAME's account away: their token stops working.")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default=None,
    help="What the account may do: admin (everything, as admin.token; the default), jury (answer questions and "
    "regrade requests, announce) or read-only (read the coach's pages and exports). Given for an existing "
    "account, changes its role and keeps its token.",
)
def coach_account(folder: Path, name: str, remove: bool = False, role: str | None = None) -> None:
    """Give a member of the jury NAME a coach account of their own (FOLDER/coaches.csv, readable by you only) and
    print its token once: each coach's actions are recorded under their name (the coach page's audit list)."""
    _folder(folder)
    name = _coach_name(folder, name)
    accounts = {who: token for token, who in read_coaches(folder).items()}
    known = read_roles(folder)  # a row without a role, written before roles: admin, as it was
    roles = {who: known.get(token, ADMIN) for who, token in accounts.items()}
    changed = False
    if remove:
        if accounts.pop(name, None) is None:
            raise ContestCommandError(f"{name!r} has no coach account in {folder / COACHES}")
    elif name in accounts and role is None:
        raise ContestCommandError(
            f"{name!r} has a coach account already: --remove it first to give a new token, or give --role to "
            "change what it may do"
        )
    elif name in accounts:
        changed = True
    else:
        accounts[name] = secrets.token_urlsafe(32)
    if not remove:
        roles[name] = role or roles.get(name, ADMIN)  # a new account with no --role: admin, as before roles
    _write_coaches(folder, accounts, roles)
    if remove:
        click.echo(f"{name}'s coach account removed: a running server refuses its token from now on")
    elif changed:
        click.echo(f"{name}'s coach account is {roles[name]} now (the same token; a running server applies it now)")
    else:
        click.echo(
            f"{name}'s coach token, {roles[name]} (give it to them alone; a running server lets it in now): "
            f"{accounts[name]}"
        )


def _coach_name(folder: Path, name: str) -> str:
    """``name`` stripped, refused if it is no coach's name or is a student's or the admin token's."""
    name = name.strip()
    if not name or not all(c.isalnum() or c in "._-" for c in name) or len(name) > 40:
        raise ContestCommandError(f"{name!r}: a coach's name is letters, digits, '.', '_' or '-', at most 40")
    students = set(read_tokens(folder)[0].values())
    if name == "coach" or name in students:
        raise ContestCommandError(f"{name!r} is {'a student' if name in students else 'the admin token'}: pick another")
    return name


def _write_coaches(folder: Path, accounts: dict[str, str], roles: dict[str, str]) -> None:
    """FOLDER/coaches.csv: each named coach's token and role, readable by the admin only and kept out of git."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["coach", "token", "role"])
    for who, token in accounts.items():
        writer.writerow([who, token, roles.get(who, ADMIN)])
    _ignore_secrets(folder)
    ignore = folder / ".gitignore"
    if COACHES not in ignore.read_text(encoding="utf-8").splitlines():
        ignore.write_text(ignore.read_text(encoding="utf-8").rstrip("\n") + f"\n{COACHES}\n", encoding="utf-8")
    _secret(folder / COACHES, out.getvalue())


@contest.command()
@click.argument("folder", type=click.Path(path_type=Path))
def check(folder: Path) -> None:
    """Check FOLDER/contest.toml (and the roster, if there is one) and summarise the rules."""
    _folder(folder)
    rules = _rules(folder)
    students: tuple[str, ...] = ()
    if (folder / ROSTER).exists():
        students = _roster(folder, rules)
        unknown = [name for name in rules.extra_time if name not in students]
        if unknown:
            raise ContestCommandError(
                f"{CONTEST_FILE}: extra_time names students who are not in {ROSTER}: {', '.join(unknown)}"
            )
    secret = held_out_refusal(rules)
    if secret:
        raise ContestCommandError(secret)
    click.echo(summary(rules, students, tokens=(folder / TOKENS).exists()))
    for warning in warnings(rules):
        click.echo(f"warning: {warning}", err=True)


def _rules(folder: Path) -> Contest:
    """FOLDER/contest.toml's rules; a mistake in it is the coach's (``ContestFileError``, an ``InputError``)."""
    return load(folder / CONTEST_FILE)


def _roster(folder: Path, rules: Contest | None) -> tuple[str, ...]:
    """FOLDER/roster.csv's names, a mistake in it as the coach's message; on a paper (``rules.paper``) two names
    that would draw the same numbers are a mistake too (``RosterError``, an ``InputError``: the coach's)."""
    return read_roster(folder / ROSTER, paper=rules is not None and rules.paper is not None)


def held_out_refusal(rules: Contest) -> str | None:
    """Why a metric task of ``rules`` cannot run as a contest here: its held-out text is one students have, or one
    a worker can read; None when neither is. The rule is lmbudget's (grader/lmbudget/task.py), the one that
    ``grade batch`` and the bundles apply too."""
    metric = [t.id for t in rules.tasks if is_metric(t.id)]
    if not metric:
        return None
    from grader.lmbudget.task import held_out_refusal as refusal  # lmbudget loads torch: only for a metric task

    return refusal(metric)


def warnings(rules: Contest) -> list[str]:
    """What in ``rules`` is allowed but likely not meant, one line each, for `check` to warn about."""
    found = []
    if rules.paper and (locked := _locked_parts(rules)):
        # the lesson's key opens to a search of the release's locks; it answers a paper's student where the question
        # is asked alike of everyone (grader/paper/commands.py release_answers)
        found.append(
            f"the student release holds {', '.join(locked)}'s answers locked, and a search opens a lock in seconds: "
            f"{', '.join(q for qs in locked.values() for q in qs)} are asked alike of every student, so the "
            "release answers them; hand this class a release built with `grade release --no-answer-locks`"
        )
    if rules.paper and rules.feedback_after.shows.checks and not rules.feedback_during.shows.checks:
        if contest_end(rules) is None:
            # a paper's checks wait for every window to end (feedback.held_back), and these windows never all do
            found.append(
                f"[feedback] after = \"{rules.feedback_after.value}\" shows a paper's checks once every student's "
                "window has ended, and personal windows without window.hard_end never all end: set window.hard_end, "
                "or the checks are never shown (scores and verdicts are)"
            )
    if rules.scoreboard is not Board.HIDDEN and not rules.feedback_during.shows.scores:
        # the board shows each task's points during the window: the very numbers this feedback keeps back
        found.append(
            f'the scoreboard ("{rules.scoreboard.value}") shows each task\'s exact points during the window, which '
            f'feedback during = "{rules.feedback_during.value}" hides: set [scoreboard] mode = "hidden", '
            'or [feedback] during = "score"'
        )
    return found


def _minutes(span_seconds: float) -> str:
    return f"{span_seconds / 60:g} min"


def summary(rules: Contest, students: tuple[str, ...], tokens: bool) -> str:
    """The contest's rules in a few lines, for the coach to read back."""
    lines = [f"{rules.title}"]
    if rules.paper:
        lines.append(f"paper: {rules.paper.title} ({rules.paper.id}); each student gets their own numbers")
    lines.append("tasks:")
    for task in rules.tasks:
        scoring = f"best of {task.select} selected" if task.select else task.scoring.value
        n = task.max_submissions
        cap = f"at most {n}" if n else "unlimited"
        gap = f", {task.min_interval.total_seconds():g} s apart" if task.min_interval else ""
        part = rules.paper.part(task.id) if rules.paper else None
        imposed = f"; rules: {', '.join(part.rules)}" if part and part.rules else ""
        lines.append(
            f"  {task.id}: {task.points:g} points, {scoring}; {cap} graded submission{'s' * (n != 1)}{gap}{imposed}"
        )
    lines.append(f"  total: {sum(t.points for t in rules.tasks):g} points")
    window = rules.window
    length = _minutes(window.duration.total_seconds())
    if window.personal:
        hard = f", never past {window.hard_end.isoformat()}" if window.hard_end else ""
        lines.append(f"window: personal, {length} from each student's first login{hard}")
    else:
        assert window.start is not None
        lines.append(f"window: {window.start.isoformat()} for {length}")
    if rules.extra_time:
        lines.append(f"extra time: {len(rules.extra_time)} student(s), up to {_minutes(max_extra(rules))}")
    lines.append(f"feedback: {rules.feedback_during.value} during the window, {rules.feedback_after.value} after")
    # on a paper, what one student is shown can be handed to another still sitting it: checks wait for every window
    until = "every student's window on the paper ends" if rules.paper else "a student's window ends"
    if rules.feedback_during.shows.checks and (guarded := guarded_tasks(rules)):
        lines.append(
            f"  {', '.join(guarded)}: the score only until {until}, no checks: graded with the grader's own "
            "solution of another task, which a check's message could carry out"
        )
    if rules.paper and rules.feedback_after.shows.checks and not rules.feedback_during.shows.checks:
        lines.append(f"  the after-feedback's checks are shown once {until}")
    board = rules.scoreboard.value
    if rules.scoreboard is Board.FROZEN:
        board += f" for the last {_minutes(rules.freeze.total_seconds())}"
    end = contest_end(rules)
    lines.append(f"scoreboard: {board}" + (f"; the contest ends for everyone at {end.isoformat()}" if end else ""))
    if students:
        lines.append(
            f"roster: {len(students)} students; tokens: {'written' if tokens else 'not yet (grade contest tokens)'}"
        )
    else:
        lines.append("roster: none yet (roster.csv)")
    return "\n".join(lines)


def max_extra(rules: Contest) -> float:
    return max(span.total_seconds() for span in rules.extra_time.values())


def console_log() -> None:
    """The grading's lines on the server's console, beside uvicorn's: one per recorded grading (who, task, score or
    verdict: ``grading.grading_line``), each pool replaced, and the start's timestamps ("start: ..."). A coach reads
    there that each upload was graded once."""
    if not any(getattr(h, "gptkit_console", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        handler.gptkit_console = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    log.setLevel(logging.INFO)


@contest.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    show_default="one per core, as many as the memory holds at --memory-mb each",
    help="Submissions graded at once (of the quick tasks: every task but a metric one). The metric lane runs at a "
    "lower weight (--metric-nice), so the quick tasks may take every core; never more by default than the "
    "machine's memory holds with every grading at its limit.",
)
@click.option(
    "--metric-workers",
    type=click.IntRange(0, 256),
    default=None,
    show_default="half of --workers, at least 1",
    help="A metric task's submissions (lmbudget's training runs) graded at once, by processes of their own, so "
    "that a quick task's upload never waits behind them; 0: they share --workers. With --scheduler: the "
    "cluster's threads they may hold (by default half, never all; with --scheduler-lanes metric, all by default).",
)
@click.option(
    "--metric-nice",
    type=click.IntRange(0, 19),
    default=METRIC_NICE,
    show_default=True,
    help="Niceness added to the metric lane's processes, so that a training run takes what the quick tasks leave "
    "of the cores rather than an equal share (its score counts CPU seconds, so this never changes it). At the "
    "default a run keeps a quarter of a core beside two busy processes, within the wall limit of "
    "lmbudget's task file (6 times its CPU budget); a task file with a tighter wall factor needs a lower value.",
)
@limit_options
@submission_timeout_option(CONTEST_SUBMISSION_SECONDS)
@scheduler_option
@click.option(
    "--scheduler-lanes",
    type=click.Choice(["all", *LANES]),
    default="all",
    show_default=True,
    help="With --scheduler: the lanes the cluster grades. metric: only the metric tasks' training runs go to "
    "the cluster (all its threads), the quick tasks stay on --workers processes of this machine; quick: the "
    "other way round. The coach page's health panel shows where each lane grades.",
)
@click.option(
    "--supervise",
    is_flag=True,
    help="Run the server under a small supervisor that starts it again when it dies (with a growing pause, each "
    "restart in the event log), keeping the port open meanwhile so that requests wait instead of failing; "
    "Ctrl-C or SIGTERM stops both.",
)
@click.option("--listen-fd", type=int, default=None, hidden=True, help="The supervisor's listening socket.")
@click.pass_context
def serve(
    ctx: click.Context,
    folder: Path,
    host: str,
    port: int,
    workers: int | None,
    metric_workers: int | None,
    metric_nice: int,
    timeout: float,
    memory_mb: int,
    submission_timeout: float,
    scheduler: str | None,
    scheduler_lanes: str = "all",
    supervise: bool = False,
    listen_fd: int | None = None,
) -> None:
    """Run the contest in FOLDER: students log in with their token, upload, see their feedback and the
    scoreboard; the coach's page is /coach. Uploads are kept in FOLDER/uploads and the records in
    FOLDER/contest.sqlite: stop and start the server at will, nothing accepted is lost."""
    _with_tokens(folder)
    if supervise:
        ctx.exit(_supervised(ctx, folder, host, port))
    workers = workers or default_workers(memory_mb << 20)
    console_log()  # first: the start's timestamps below go to the console too
    rules = _rules(folder)
    secret = held_out_refusal(rules)  # as `check`: a metric task's held-out text students have
    if secret:
        raise ContestCommandError(secret)
    remote_lanes = cluster_lanes(scheduler, scheduler_lanes, metric_workers, rules)
    if scheduler and not remote_lanes:
        click.echo(
            f"warning: the contest has no metric task, so --scheduler-lanes {scheduler_lanes} leaves the cluster "
            f"nothing to grade: every task is graded by --workers processes here, and {scheduler} is not used",
            err=True,
        )
        scheduler = None
    lock = _lock(folder)  # before anything is opened: a second server must not grade the same uploads
    sweep_scratch()  # what earlier servers' grading processes, killed, left in the temporary folder
    _fork_server_now(scheduler, remote_lanes)
    listening: socket.socket | None = None
    client = None
    try:
        uvicorn, create_app = _server_modules()
        log.info("start: imports after %.2f s", process_age())
        listening = _listen(host, port, listen_fd)  # bound before "serving" is printed: a busy port is one line
        client = dask_client(scheduler) if scheduler else None
        chosen = limits(timeout, memory_mb, submission_timeout)
        # pure=False: a regrade of the same upload must run again, not return Dask's remembered result
        executor = client.get_executor(pure=False) if client else None
        # as many at once as the cluster grades at once: the queue, not Dask, chooses whose turn it is
        slots = max(1, sum(client.nthreads().values())) if client else None
        if executor is not None and slots is not None:
            warm_cluster(executor, slots, chosen)
        remote = Remote(remote_lanes, f"the Dask cluster at {scheduler}", dask_threads(client)) if client else None
        app = create_app(  # a mistake in contest.toml or the roster is the coach's: an InputError
            folder,
            workers=workers,
            limits=chosen,
            executor=executor,
            slots=slots,
            metric_workers=metric_workers,
            metric_nice=metric_nice,
            remote=remote,
        )
        log.info("start: app built after %.2f s", process_age())
        graders = graded_by(workers, scheduler, remote_lanes)
        click.echo(f"serving {folder} on http://{host}:{port}/ with {graders}; Ctrl-C stops it")
        try:
            uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info")).run(sockets=[listening])
        except KeyboardInterrupt:  # as uvicorn.run: Ctrl-C is how a coach stops it
            pass
    finally:
        if listening is not None:
            listening.close()
        if client is not None:
            client.close()
        if lock is not None:
            lock.close()


def _server_modules() -> tuple[Any, Callable[..., Any]]:
    """uvicorn and the app's factory (FastAPI and the routes: most of a start's imports), or the coach's message."""
    try:
        import uvicorn

        from grader.contest.web.app import create_app
    except ImportError as e:
        raise ContestCommandError(
            f"the contest server needs {e.name}: pip install 'gptkit' with its dependencies"
        ) from None
    return uvicorn, create_app


def _fork_server_now(scheduler: str | None, remote_lanes: frozenset[str]) -> None:
    """Start Python's fork server of the grading pools now, before the server's own imports: it loads torch and the
    grader (seconds, and most of the time to the first verdict) while this process imports FastAPI and builds the
    app, rather than after. Not where a cluster grades every lane: then no pool of this machine needs it."""
    if scheduler and remote_lanes >= set(LANES):
        return
    from grader.batch.run import pool_context

    pool_context()  # here, in the main thread: the fork server then ignores the terminal's Ctrl-C (batch/run.py)


def _with_tokens(folder: Path) -> None:
    """Refuse to serve FOLDER before its tokens exist: nobody could log in."""
    _folder(folder)
    if not (folder / TOKENS).exists() or not (folder / ADMIN_TOKEN).exists():
        raise ContestCommandError(f"{folder} has no tokens yet: run `grade contest tokens {folder}` first")


def _supervised(ctx: click.Context, folder: Path, host: str, port: int) -> int:
    """`serve --supervise`: this command, less --supervise, kept running by grader/contest/supervise.py; its exit
    status."""
    from grader.contest.supervise import supervise

    listening = _listen(host, port)  # the supervisor's, for every server it starts: the port never closes
    try:
        return supervise(folder, functools.partial(_served_by, ctx), listening)
    finally:
        listening.close()


def _served_by(ctx: click.Context, fd: int) -> list[str]:
    """The command line of the server a supervisor starts: this `serve` with the same options, less
    ``--supervise``, serving on the supervisor's socket (file descriptor ``fd``)."""
    assert ctx.command.name is not None
    line = [sys.executable, "-m", "grader", "contest", ctx.command.name, str(ctx.params["folder"])]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if not isinstance(param, click.Option) or param.name in ("supervise", "listen_fd") or value is None:
            continue
        if param.is_flag:
            line += [param.opts[0]] if value else []
        else:
            line += [param.opts[0], str(value)]
    return [*line, "--listen-fd", str(fd)]


def _inherited(fd: int) -> socket.socket:
    """The listening socket a supervisor handed this server (``--listen-fd``), or a one-line refusal."""
    try:
        listening = socket.socket(fileno=fd)
    except OSError as e:
        raise ContestCommandError(f"--listen-fd {fd}: not a socket this server can listen on: {e.strerror}") from None
    if listening.type != socket.SOCK_STREAM:
        raise ContestCommandError(f"--listen-fd {fd}: not a listening socket")
    return listening


def cluster_lanes(scheduler: str | None, lanes: str, metric_workers: int | None, rules: Contest) -> frozenset[str]:
    """The lanes ``--scheduler-lanes`` sends to the cluster, or a usage error for a choice that cannot be met.
    In a contest without a metric task the quick lane is its only one: ``metric`` sends nothing (empty), ``quick``
    everything."""
    if lanes == "all":
        return frozenset(LANES)
    if not scheduler:
        raise click.UsageError(f"--scheduler-lanes {lanes} needs --scheduler ADDRESS: the cluster that lane goes to")
    if metric_workers == 0:
        raise click.UsageError(
            f"--scheduler-lanes {lanes} needs two lanes, and --metric-workers 0 makes one of every task: drop one"
        )
    if not any(is_metric(task.id) for task in rules.tasks):
        return frozenset() if lanes == METRIC else frozenset(LANES)
    return frozenset({lanes})


def graded_by(workers: int, scheduler: str | None, lanes: frozenset[str]) -> str:
    """Who grades, as `serve` prints it when it starts."""
    if not scheduler:
        return f"{workers} grading worker(s)"
    if lanes >= set(LANES):
        return f"the Dask cluster at {scheduler}"
    (remote,) = lanes
    local = QUICK if remote == METRIC else METRIC
    return f"the Dask cluster at {scheduler} for the {remote} tasks and local processes for the {local} tasks"


def dask_threads(client: Any) -> Callable[[], int | None]:
    """The cluster's threads alive now, for the coach's health panel: 0 while the client has lost its scheduler
    (it says so at once; asking would wait), and within 2 s or 0: a hung scheduler must not hang the page."""

    def threads() -> int | None:
        if client.status != "running":
            return 0
        try:
            return sum(client.nthreads(callback_timeout=2).values())
        except Exception:  # noqa: BLE001 - any failure to answer is a cluster the coach must look at
            return 0

    return threads


def warm_cluster(executor: Executor, slots: int, chosen: Limits) -> None:
    """Start a fork server in the cluster's workers now, as the server's own pool does (``warm_up``), not on a
    round's first uploads. One task per thread: Dask spreads them over idle workers, and one that lands where
    a server already runs costs nothing. (A burst still waits longer on a local Dask cluster than on the
    server's own pool: benchmarks/contest_load.py --burst and docs/performance.md give the figures.)"""
    from grader.batch.run import warm_up  # the batch's pool machinery: only for a served cluster

    for _ in range(slots):
        executor.submit(warm_up, chosen)


def _lock(folder: Path) -> IO[bytes] | None:
    """Hold FOLDER/serve.lock (an exclusive flock, released when the process ends, even killed), or refuse: two
    servers on one folder would grade the same uploads twice. None where the system has no flock (Windows)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    handle = open(folder / SERVE_LOCK, "ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise ContestCommandError(
            f"another `grade contest serve` is running on {folder} (it holds {folder / SERVE_LOCK}): stop it "
            "first; two servers on one folder would grade the same uploads twice"
        ) from None
    return handle


def _listen(host: str, port: int, inherited: int | None = None) -> socket.socket:
    """A socket bound to HOST:PORT for the server, or a one-line refusal (a busy port, an unknown address). Under
    --supervise, the supervisor's instead (file descriptor ``inherited``), bound once for every server it starts."""
    if inherited is not None:
        return _inherited(inherited)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listening = socket.socket(family, kind, proto)
    except (OSError, UnicodeError) as e:
        raise ContestCommandError(f"cannot listen on {host}:{port}: {e}") from None
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        listening.listen(2048)  # here, not in uvicorn: on Linux a bind can pass where the listen then fails
    except OSError as e:
        listening.close()
        busy = (
            " (another program uses the port: stop it, or choose another with --port)"
            if e.errno == errno.EADDRINUSE
            else ""
        )
        raise ContestCommandError(f"cannot listen on {host}:{port}: {e.strerror}{busy}") from None
    return listening


@contest.command("export")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path), help="Write the results as CSV.")
@click.option(
    "--gradescope",
    "gradescope_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write STUDENT/results.json in Gradescope's schema into this folder.",
)
@click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path), help="Draw the charts here.")
@click.pass_context
def export_results(
    ctx: click.Context, folder: Path, csv_out: Path | None, gradescope_dir: Path | None, png_dir: Path | None
) -> None:
    """Write the session's results as a gradebook, FOLDER/grades.sqlite (each student's counted submission per
    task, in contest points), for `grade export` and `grade report`; with --csv, --gradescope or --png, run them.

    The server need not be stopped: the gradebook is rebuilt from FOLDER/contest.sqlite each time."""
    # Imported here, to keep `grade` quick to start: the export and the store (sqlite).
    from grader.contest.export import results_csv, write_gradebook
    from grader.contest.store import DATABASE, Store

    _folder(folder)
    if not (folder / DATABASE).exists():
        raise ContestCommandError(f"{folder} has no results yet: nothing was submitted ({DATABASE} is missing)")
    rules = _rules(folder)
    roster = _roster(folder, rules) if (folder / ROSTER).exists() else ()
    students = tuple(dict.fromkeys([*roster, *read_tokens(folder)[0].values()]))
    store = Store(folder)
    try:
        db = write_gradebook(folder, rules, store, students)
        click.echo(f"wrote {db} ({len(students)} students)", err=True)
        if csv_out:  # grade export's CSV, with the checks the grader set aside in each student's counted submissions
            book = Gradebook(db)
            try:
                write_atomically(csv_out, results_csv(rules, store, book.rows(), book.checks()))
            finally:
                book.close()
            click.echo(f"wrote {csv_out} ({len(students)} students)", err=True)
    finally:
        store.close()
    if gradescope_dir:
        ctx.invoke(export, db=db, csv_out=None, gradescope_dir=gradescope_dir)
    if png_dir:
        ctx.invoke(report, db=db, png_dir=png_dir, top=10)
    if not (csv_out or gradescope_dir or png_dir):
        click.echo(f"next: grade export {db} --csv results.csv, or grade report {db} --png charts", err=True)


def _locked_parts(rules: Contest) -> dict[str, list[str]]:
    """The paper's parts whose questions a default student release's locks answer for a paper's student too, and
    those questions (a question drawn or shown from a hidden pool per student is not the lesson's, and is left out)."""
    from grader.paper.commands import release_answers  # the banks, read only for a contest on a paper

    assert rules.paper is not None
    return {part.id: found for part in rules.paper.parts if (found := release_answers(part.id))}
