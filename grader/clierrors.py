"""Where the command line turns the grader's exceptions (``grader/errors.py``) into click's: one place.

A command's callback, and everything it calls, raises the domain's errors; click shows its own and exits
with their status. ``to_click`` is the one mapping, with the message and exit status each kind has always
had on the command line:

- ``BadUsage``: ``click.UsageError`` (the command's usage line, then ``Error: MESSAGE``; exit 2);
- another ``UserError``: ``Error: MESSAGE``, with its ``exit_code`` (``InputError``: 2, else 1);
- ``InternalError``: ``grade: the grader itself failed: MESSAGE``, exit 1;
- a ``Finding`` is not converted: it escaped the runner, a bug whose traceback should show.

``GraderGroup`` applies it to every command under a group (those defined with ``@group.command()`` and
those added with ``add_command``, sub-groups included); ``GraderCommand`` to a command on its own; a
command a converted one calls with ``ctx.invoke`` runs in a context of the same class. The
conversion runs in the command's own context, where click itself would attach a usage error's context.
"""

from __future__ import annotations

from typing import Any

import click

from grader.errors import BadUsage, GptkitError, InternalError, UserError

__all__ = ["GraderCommand", "GraderContext", "GraderFailed", "GraderGroup", "to_click"]


class GraderFailed(click.ClickException):
    """The grader itself failed: shown as ``grade`` has always said it, not as ``Error: ...``."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"grade: the grader itself failed: {self.format_message()}", err=True, file=file)


def to_click(error: GptkitError, ctx: click.Context | None = None) -> click.ClickException:
    """The click exception that shows ``error`` on the command line (see the module's docstring)."""
    if isinstance(error, BadUsage):
        return click.UsageError(str(error), ctx)
    if isinstance(error, InternalError):
        return GraderFailed(str(error))
    if not isinstance(error, UserError):
        raise TypeError(f"{type(error).__name__} is not shown on the command line") from error
    shown = click.ClickException(str(error))
    shown.exit_code = error.exit_code  # type: ignore[misc]  # click declares it a class variable
    return shown


class GraderContext(click.Context):
    """A command's context whose callbacks' grader errors become click's (``to_click``)."""

    def invoke(self, callback: Any, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().invoke(callback, *args, **kwargs)
        except (UserError, InternalError) as e:
            raise to_click(e, self) from e


class GraderCommand(click.Command):
    """A command whose grader errors are shown as click's: ``@click.command(cls=GraderCommand)``."""

    context_class = GraderContext


def _convert_errors_in(command: click.Command) -> None:
    """Give ``command`` (and, for a group, each command under it) contexts that convert grader errors."""
    if not issubclass(command.context_class, GraderContext):
        if command.context_class is not click.Context:
            raise TypeError(f"{command.name}: its context class {command.context_class.__name__} is its own")
        command.context_class = GraderContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _convert_errors_in(sub)


class GraderGroup(click.Group):
    """A group whose every command shows grader errors as click's: ``@click.group(cls=GraderGroup)``. Each
    command is converted as it is resolved to run, with every command under it: those made with the group's
    decorator, added with ``add_command`` (plain ``click.command()``s, made elsewhere), in plain sub-groups."""

    context_class = GraderContext

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            _convert_errors_in(cmd)
        return name, cmd, rest
