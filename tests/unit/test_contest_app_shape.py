"""The contest server stays small: its app factory and every route's function under 60 lines, so that a route
reads at a glance and the rules stay in the pure modules (policy, scoreboard, metric), not in the web layer."""

from __future__ import annotations

import inspect
from pathlib import Path

from fastapi.routing import APIRoute

from grader.contest.web.app import create_app
from helpers import ContestClock, contest_folder

MOST_LINES = 60
CONTEST = """
title = "Shape test"
[window]
start = 2026-03-14T09:00:00Z
duration = 60
[feedback]
during = "full"
[tasks.m1]
points = 30
"""


def lines(function) -> int:
    return len(inspect.getsourcelines(function)[0])


def test_the_app_factory_and_every_route_are_under_60_lines(tmp_path: Path):
    app = create_app(contest_folder(tmp_path / "contest", CONTEST), ContestClock())
    assert lines(create_app) < MOST_LINES, f"create_app is {lines(create_app)} lines"
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    assert len(routes) >= 26, [route.path for route in routes]  # every route listed, none hidden in a router
    long = {route.path: lines(route.endpoint) for route in routes if lines(route.endpoint) >= MOST_LINES}
    assert not long, long


def test_the_state_lives_on_the_app_not_in_closures(tmp_path: Path):
    """Two apps over two folders keep their own contest: nothing shared at module level."""
    first = create_app(contest_folder(tmp_path / "one", CONTEST), ContestClock())
    second = create_app(contest_folder(tmp_path / "two", CONTEST.replace("Shape", "Other")), ContestClock())
    assert first.state.contest is not second.state.contest
    assert (first.state.contest.base.title, second.state.contest.base.title) == ("Shape test", "Other test")
    assert first.state.store is first.state.contest.store
