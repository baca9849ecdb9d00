"""The contest's pages: the Jinja templates (grader/templates/contest/) and a time as they print it.

Below both ``state``, which makes one environment per contest on its clock, and ``views``, which renders the
pages with it, so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from grader.contest.policy import clock_text


def short_time(moment: str | datetime | None, now: datetime) -> Markup | str:
    """A time as the pages show it: short, in UTC ("13:40:00 UTC"; "12-02 09:00 UTC" on another day than
    ``now``'s), the full ISO time on hover; "" for None. A value that is not a time is shown as it is."""
    if not moment:
        return ""
    try:
        at = moment if isinstance(moment, datetime) else datetime.fromisoformat(moment)
    except (TypeError, ValueError):
        return str(moment)
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(
        at.isoformat(timespec="seconds"), plain_time(at, now)
    )


def plain_time(moment: str | datetime | None, now: datetime) -> str:
    """A time as the pages print it, without the markup: for a refusal's or an event's words, which a page and a
    script read alike ("10:04:00 UTC"; "03-15 09:00 UTC" on another day than ``now``'s)."""
    if not moment:
        return ""
    try:
        at = moment if isinstance(moment, datetime) else datetime.fromisoformat(moment)
        return clock_text(at, now)
    except (TypeError, ValueError):
        return str(moment)


def templates(clock: Callable[[], datetime]) -> Environment:
    """The contest's page templates, their times printed by ``short_time`` against ``clock``'s day."""
    env = Environment(loader=PackageLoader("grader.templates", "contest"), autoescape=select_autoescape(["html"]))
    env.filters["clock"] = lambda moment: short_time(moment, clock())
    return env
