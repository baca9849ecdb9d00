"""``grade submit``: upload to a contest server, wait for the grade, print what the contest lets you see.

Standard library only (urllib), so that the student release needs nothing more. The token comes from
``--token`` or, better (it stays out of the shell history and the process list), ``$GPTKIT_CONTEST_TOKEN``.
"""

from __future__ import annotations

import http.client
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

from grader.clierrors import GraderCommand
from grader.contest.feedback import render_lines
from grader.contest.uploads import MAX_UPLOAD_BYTES, too_big
from grader.errors import BadUsage, InputError
from grader.milestones import GRADABLE

POLL_SECONDS = 2.0
SEND_ATTEMPTS = 3  # an upload whose answer is lost is sent again, with its key, up to this many times in all
RESEND_SECONDS = 2.0


class SubmitError(InputError):
    """What stops an upload (a missing file, a refusal, no answer): the message, and exit status 2."""


def _files(path: Path, task: str) -> list[Path]:
    """What to upload for ``task`` from ``path``: a file as it is; from a folder, the task's exercise files."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise SubmitError(f"there is no {path}")
    names = [f"{module}.py" for module in GRADABLE[task].modules]
    found = [path / name for name in names if (path / name).is_file()]
    if not found:
        notebooks = sorted(path.glob("*.ipynb"))
        if len(notebooks) == 1:
            return notebooks
        raise SubmitError(f"{path} holds none of {', '.join(names)} (and not exactly one notebook)")
    return found


def multipart(files: list[Path], script: Path | None = None) -> tuple[bytes, str]:
    """``files`` as a multipart/form-data body and its content type: the upload `grade submit` sends (and the
    contest benchmark, benchmarks/contest_load.py); ``script``: a test run's, as the ``script`` field's file."""
    boundary = "gptkit" + secrets.token_hex(16)
    body = b""
    for field, f in [("files", f) for f in files] + ([("script", script)] if script else []):
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{f.name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + f.read_bytes()
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


class Unanswered(SubmitError):
    """The request may have reached the server, but no answer came back (the connection broke, or timed out)."""


def _call(
    server: str, token: str, path: str, data: bytes | None = None, kind: str | None = None, key: str | None = None
) -> Any:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if kind:
        headers["Content-Type"] = kind
    if key:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(server.rstrip("/") + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        try:
            detail = json.loads(e.read().decode("utf-8")).get("detail", e.reason)
        except (ValueError, AttributeError):
            detail = e.reason
        raise SubmitError(f"the server refused ({e.code}): {detail}") from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, ConnectionRefusedError):  # nothing was sent
            raise SubmitError(f"cannot reach {server}: {e.reason}") from None
        raise Unanswered(f"no answer from {server}: {e.reason}") from None
    except (OSError, http.client.HTTPException) as e:  # the answer broke off while it was read
        raise Unanswered(f"no answer from {server}: {e}") from None


def send_upload(server: str, token: str, task: str, body: bytes, kind: str) -> dict[str, Any]:
    """The upload, sent with a key of its own, and sent again with the same key while no answer comes back: the
    server takes a resend of a stored upload as that one (counted once), so a lost answer never costs a
    submission."""
    key = secrets.token_hex(16)
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            return dict(_call(server, token, f"/submit/{task}", body, kind, key=key))
        except Unanswered as e:
            if attempt == SEND_ATTEMPTS:
                raise SubmitError(
                    f"{e}; sent {SEND_ATTEMPTS} times with the same key, so it counts at most once: look on the "
                    "contest page whether it arrived"
                ) from None
            click.echo(f"{e}: sending it again (the same upload: it counts once)", err=True)
            time.sleep(RESEND_SECONDS * attempt)
    raise AssertionError("unreachable")


def feedback_lines(entry: dict[str, Any]) -> list[str]:
    """A submission's visible feedback (the server's JSON) as lines to print."""
    lines = [f"submission {entry['id']} to {entry['task']}: {entry['status']}"]
    if entry.get("message"):
        lines.append(f"  {entry['message']}")
    return lines + render_lines(entry.get("feedback") or {}, "received (this contest shows no feedback yet)")


def request_regrade(server: str, token: str, sid: int | None, reason: str | None) -> str:
    """Ask for a regrade of submission ``sid`` for ``reason``; what to tell the student."""
    if sid is None or not (reason or "").strip():
        raise BadUsage("a regrade request needs both --regrade SUBMISSION_ID and --reason TEXT")
    body = urllib.parse.urlencode({"reason": reason}).encode()
    done = _call(server, token, f"/request-regrade/{sid}", body, "application/x-www-form-urlencoded")
    return f"regrade request {done['id']} for submission {sid} sent: the coach's answer will be on your contest page"


@click.command(cls=GraderCommand)  # the grader's errors shown as click's (grader/clierrors.py)
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--server", required=True, metavar="URL", help="The contest server, e.g. http://10.0.0.5:8000")
@click.option(
    "--token",
    envvar="GPTKIT_CONTEST_TOKEN",
    show_envvar=True,
    help="Your contest token; needed, here or (better: it stays out of your shell history) in $GPTKIT_CONTEST_TOKEN.",
)
@click.option("-m", "--task", type=click.Choice(list(GRADABLE)), help="The task to submit to (needed to submit).")
@click.option("--no-wait", is_flag=True, help="Upload and exit, without waiting for the grade.")
@click.option(
    "--test-run",
    "script",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Not a submission: run your files on this script of yours in the contest's sandbox and print what it "
    "printed (never scored; exit status 1 unless it ran to its end).",
)
@click.option("--wait-seconds", type=click.FloatRange(1), default=1800, show_default=True, hidden=True)
@click.option(
    "--regrade",
    type=click.IntRange(1),
    metavar="SUBMISSION_ID",
    help="Upload nothing: ask the coach to grade your graded submission SUBMISSION_ID again, for --reason. The "
    "coach's answer, and your old and new points, appear on your contest page.",
)
@click.option("--reason", help="With --regrade: why it should be graded again (at most 1000 characters).")
def submit(
    path: Path,
    server: str,
    token: str | None,
    task: str | None,
    no_wait: bool,
    script: Path | None,
    wait_seconds: float,
    regrade: int | None = None,
    reason: str | None = None,
) -> None:
    """Submit PATH (a folder: the task's exercise files in it; or a .py, .ipynb or .zip file) to a contest
    server, wait for the grade and print the feedback the contest shows. With --regrade ID --reason TEXT, ask
    for a regrade of your submission ID instead."""
    if not token:
        raise BadUsage("give your contest token: --token TOKEN, or set GPTKIT_CONTEST_TOKEN")
    if regrade is not None or reason is not None:
        click.echo(request_regrade(server, token, regrade, reason))
        return
    if task is None:
        raise BadUsage("say which task to submit to: -m TASK (or --regrade SUBMISSION_ID to ask for a regrade)")
    upload(path, server, token, task, no_wait, script, wait_seconds)


def upload(
    path: Path, server: str, token: str, task: str, no_wait: bool, script: Path | None, wait_seconds: float
) -> None:
    """Upload ``path``'s files for ``task`` (with ``script``: as a test run), then (unless ``no_wait``) wait
    for the grade and print its feedback."""
    files = _files(path, task)
    body, kind = _body(files, script)
    me = _call(server, token, "/api/me")  # opens a personal window, as logging in on the web page does
    if me.get("phase") != "open":
        raise SubmitError(me.get("closed") or f"your contest window is {me.get('phase')}: submissions are closed")
    if script is not None:
        send_test_run(server, token, task, body, kind, wait_seconds)
        return
    accepted = send_upload(server, token, task, body, kind)
    click.echo(f"uploaded {', '.join(f.name for f in files)}: submission {accepted['id']}, queued", err=True)
    if no_wait:
        return
    deadline = time.monotonic() + wait_seconds
    while True:
        entry = _call(server, token, f"/api/submissions/{accepted['id']}")
        if entry["status"] != "queued":
            break
        if time.monotonic() > deadline:
            raise SubmitError(f"not graded after {wait_seconds:g} s: look later on the contest page")
        time.sleep(POLL_SECONDS)
    click.echo("\n".join(feedback_lines(entry)))


def _body(files: list[Path], script: Path | None) -> tuple[bytes, str]:
    """The upload's body and content type, once the refusals the client can foresee are ruled out."""
    for f in files:
        if f.stat().st_size == 0:
            raise SubmitError(f"{f.name} is empty: save your work in it first (nothing was uploaded)")
    body, kind = multipart(files, script)
    if len(body) > MAX_UPLOAD_BYTES:  # the server would refuse it (413), and may cut the connection mid-upload
        raise SubmitError(f"{', '.join(f.name for f in files)}: {too_big(len(body))}, the contest's limit")
    return body, kind


def send_test_run(server: str, token: str, task: str, body: bytes, kind: str, wait_seconds: float) -> None:
    """Send a test run (never scored), wait for it and print its output, then its verdict; exit status 1 unless
    it ran to its end."""
    accepted = _call(server, token, f"/test-run/{task}", body, kind)
    click.echo(f"test run {accepted['id']} on {task} (not scored), queued", err=True)
    deadline = time.monotonic() + wait_seconds
    while (run := _call(server, token, accepted["url"]))["status"] == "queued":
        if time.monotonic() > deadline:
            raise SubmitError(f"not run after {wait_seconds:g} s: look later on the contest page")
        time.sleep(POLL_SECONDS)
    click.echo(run["output"], nl=False)
    for line in (run.get("message"), run.get("error")):
        if line:
            click.echo(line, err=True)
    click.echo(f"test run {run['id']}: {run['verdict']} in {run['seconds'] or 0:.1f} s", err=True)
    if run["verdict"] != "ok":
        raise click.exceptions.Exit(1)
