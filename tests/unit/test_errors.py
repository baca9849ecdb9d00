"""The grader's exceptions: one hierarchy (``grader/errors.py``), and click's only on the command line.

Three rules, read from the code itself:

- every exception class defined under ``grader/`` derives from ``GptkitError`` (but for a short list, each with
  its reason);
- no module outside the command layer mentions a click exception: domain modules raise the domain's errors;
- the one conversion (``grader/clierrors.py``) shows each kind as the command line always has: the same
  message, the same exit status, as the click exception the commands used to raise themselves.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import click
import pytest
from click.testing import CliRunner

from grader.clierrors import GraderCommand, GraderGroup, to_click
from grader.errors import BadUsage, Finding, GptkitError, InputError, InternalError, UserError
from helpers import REPO

GRADER = REPO / "grader"
FILES = sorted(GRADER.rglob("*.py"))

# Exception classes that do not derive from GptkitError, by "module:Class", and why.
NOT_GRADER_ERRORS = {
    # The worker side (grader/sandbox/worker/, grader/sandbox/common/) is loaded by path in the sandbox and must
    # not import the grader package (tests/unit/test_sandbox_boundary.py): its errors cannot derive from it.
    # They model something else anyway: what a worker reports on the wire, next to the student's code.
    "grader.sandbox.common.wire:ProtocolError",  # a malformed message on the wire, either way
    "grader.sandbox.common.wire:TooLarge",  # a message past the size limits, left unread
    "grader.sandbox.worker.faults:StudentFault",  # a TypeError: the student's value is unusable
    "grader.sandbox.worker.faults:MissingName",  # a LookupError: the student's file lacks a contract name
    # What the conversion turns an InternalError into: click's, for click to show, never raised by the domain.
    "grader.clierrors:GraderFailed",
}

# The command layer: the modules that define click commands and options, and the conversion itself.
COMMAND_LAYER = {
    "cli.py",
    "options.py",
    "clierrors.py",
    "batch/commands.py",
    "contest/commands.py",
    "paper/commands.py",
}
CLICK_EXCEPTIONS = {
    name
    for name, obj in vars(click.exceptions).items()
    if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == "click.exceptions"
}


def module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def exception_classes() -> list[tuple[str, type]]:
    """Every exception class defined at the top level of a module under grader/, found in its source and read
    from the imported module: ``("module:Class", cls)``."""
    found = []
    for path in FILES:
        if path.name == "__main__.py":
            continue
        names = [n.name for n in ast.parse(path.read_text(), str(path)).body if isinstance(n, ast.ClassDef)]
        if not names:
            continue
        module = importlib.import_module(module_name(path))
        for name in names:
            cls = getattr(module, name)
            if inspect.isclass(cls) and issubclass(cls, BaseException):
                found.append((f"{module.__name__}:{name}", cls))
    return found


def test_the_walk_finds_the_grader_exceptions():
    """Guard: the walk sees the classes it should (otherwise the test below would prove nothing)."""
    found = dict(exception_classes())
    for expected in (
        "grader.sandbox.client:GraderError",
        "grader.submission:SubmissionError",
        "grader.contest.commands:ContestCommandError",
        "grader.lmbudget.task:RunFailed",
        "grader.sandbox.common.wire:ProtocolError",
        "grader.suites.hidden.test_lmbudget:_OverAllowance",
    ):
        assert expected in found, expected
    assert len(found) >= 25, sorted(found)


def test_every_grader_exception_derives_from_the_base():
    found = dict(exception_classes())
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, GptkitError))
    assert outside == sorted(NOT_GRADER_ERRORS), "derive these from grader.errors, or say why not in NOT_GRADER_ERRORS"


@pytest.mark.parametrize(
    "name, branch",
    [
        ("grader.sandbox.client:GraderError", InternalError),
        ("grader.sandbox.client:StudentError", Finding),
        ("grader.sandbox.client:WorkerCrash", Finding),
        ("grader.submission:SubmissionError", BadUsage),
        ("grader.paper.sitting:SittingError", BadUsage),
        ("grader.batch.gradebook:NotAGradebook", BadUsage),
        ("grader.contest.config:ContestFileError", InputError),
        ("grader.roster:RosterError", InputError),
        ("grader.contest.submit:SubmitError", InputError),
        ("grader.contest.uploads:UploadError", ValueError),  # still what its callers catch
        ("grader.practice.errors:PracticeError", InputError),
        ("grader.practice.errors:Unreadable", UserError),
        ("grader.contest.web.limits:TooBig", UserError),
        ("grader.in_kernel:NotInAKernel", UserError),
    ],
)
def test_each_error_keeps_its_meaning(name, branch):
    assert issubclass(dict(exception_classes())[name], branch)


def click_exceptions_mentioned(path) -> list[str]:
    """Each mention of a click exception in the file at ``path``: ``click.UsageError``, a ``from click import``
    of one, or anything from ``click.exceptions``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in CLICK_EXCEPTIONS:
            if isinstance(node.value, ast.Name) and node.value.id == "click":
                found.append(f"line {node.lineno}: click.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("click", "click.exceptions"):
            names = [a.name for a in node.names if node.module == "click.exceptions" or a.name in CLICK_EXCEPTIONS]
            found += [f"line {node.lineno}: from {node.module} import {n}" for n in names]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(GRADER).as_posix())
def test_no_domain_module_raises_click_exceptions(path):
    relative = path.relative_to(GRADER).as_posix()
    if relative in COMMAND_LAYER:
        return
    assert click_exceptions_mentioned(path) == [], f"grader/{relative}: raise a grader.errors exception instead"


def test_the_scan_finds_click_exceptions(tmp_path):
    """The other direction: each way of naming a click exception is caught."""
    for source in (
        "raise click.UsageError('x')",
        "from click import ClickException",
        "from click.exceptions import Abort",
    ):
        (tmp_path / "m.py").write_text(source + "\n")
        assert click_exceptions_mentioned(tmp_path / "m.py"), source
    (tmp_path / "m.py").write_text("import click\nclick.echo('x')\n")
    assert click_exceptions_mentioned(tmp_path / "m.py") == []


# ---------------------------------------------------------------- the conversion


def run(raised: BaseException, cls: type[click.Command] = GraderCommand, args=()) -> click.testing.Result:
    @click.command(cls=cls)
    @click.option("--flag", is_flag=True)
    def cmd(flag: bool) -> None:
        raise raised

    return CliRunner().invoke(cmd, list(args), prog_name="grade")


def shown(result: click.testing.Result) -> tuple[str, str, int]:
    return result.stdout, result.stderr, result.exit_code


def click_exception(message: str, exit_code: int) -> click.ClickException:
    e = click.ClickException(message)
    e.exit_code = exit_code  # type: ignore[misc]  # as the commands' own classes set it
    return e


@pytest.mark.parametrize(
    "grader_error, as_before",
    [
        (BadUsage("no submissions found in x"), click.UsageError("no submissions found in x")),
        (UserError("the log is damaged"), click.ClickException("the log is damaged")),
        (InputError("there is no folder x"), click_exception("there is no folder x", 2)),
    ],
    ids=["usage", "user", "input"],
)
def test_the_conversion_shows_what_click_showed(grader_error, as_before):
    before, after = run(as_before, cls=click.Command), run(grader_error)
    assert shown(after) == shown(before)
    assert "Error: " in after.stderr and after.exit_code in (1, 2)


def test_a_usage_error_shows_the_commands_usage():
    result = run(BadUsage("say what to write"))
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: grade [OPTIONS]\nTry 'grade --help' for help.\n\nError: say what to write")


def test_the_graders_own_failure_is_said_as_grade_says_it():
    """As ``grade check`` said it: ``click.echo(f"grade: the grader itself failed: {e}", err=True); sys.exit(1)``."""
    result = run(InternalError("no fork server"))
    assert shown(result) == ("", "grade: the grader itself failed: no fork server\n", 1)


def test_a_finding_is_not_converted():
    """A finding that gets to the command line escaped the runner: a bug, whose traceback must show."""
    finding = Finding("your code raised ValueError")
    result = run(finding)
    assert result.exception is finding and result.exit_code == 1
    with pytest.raises(TypeError):
        to_click(finding)


def test_a_group_converts_every_command_under_it():
    """Commands made with ``@group.command()``, added with ``add_command`` (made elsewhere, plain), in a plain
    sub-group, and called with ``ctx.invoke``: all of them."""

    @click.group(cls=GraderGroup)
    def top() -> None:
        pass

    @top.command()
    def made_here() -> None:
        raise InputError("made here")

    @click.command()
    def plain() -> None:
        raise InputError("plain")

    @click.group()
    def sub() -> None:
        pass

    @sub.command()
    def deep() -> None:
        raise BadUsage("deep")

    @top.command()
    @click.pass_context
    def forwards(ctx: click.Context) -> None:
        ctx.invoke(plain)

    top.add_command(plain)
    top.add_command(sub)

    @sub.command()
    def later() -> None:  # added to the plain sub-group after the sub-group joined the group
        raise UserError("later")

    runner = CliRunner()
    for args, message, code in [
        (["made-here"], "Error: made here\n", 2),
        (["plain"], "Error: plain\n", 2),
        (["forwards"], "Error: plain\n", 2),
        (["sub", "deep"], "Error: deep\n", 2),
        (["sub", "later"], "Error: later\n", 1),
    ]:
        result = runner.invoke(top, args, prog_name="grade")
        assert result.stderr.endswith(message) and result.exit_code == code, (args, result.stderr, result.exception)
    usage = runner.invoke(top, ["sub", "deep"], prog_name="grade")
    assert usage.stderr.startswith("Usage: grade sub deep [OPTIONS]\n"), "the usage of the command that raised"
