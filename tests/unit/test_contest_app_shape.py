"""The contest server stays small: its app factory and every route's function under 60 lines, so that a route
reads at a glance and the rules stay in the pure modules (policy, scoreboard, metric), not in the web layer."""

from __future__ import annotations

import inspect

from fastapi.routing import APIRoute

from grader.contest.web.app import create_app
from helpers import ContestClock

MOST_LINES = 60


def lines(function) -> int:
    return len(inspect.getsourcelines(function)[0])


def test_the_app_factory_and_every_route_are_under_60_lines(contest):
    app = create_app(contest(title="Shape test", scoreboard=None), ContestClock())
    assert lines(create_app) < MOST_LINES, f"create_app is {lines(create_app)} lines"
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    assert len(routes) >= 26, [route.path for route in routes]  # every route listed, none hidden in a router
    long = {route.path: lines(route.endpoint) for route in routes if lines(route.endpoint) >= MOST_LINES}
    assert not long, long


def test_the_state_lives_on_the_app_not_in_closures(contest):
    """Two apps over two folders keep their own contest: nothing shared at module level."""
    first = create_app(contest(title="Shape test", name="one", scoreboard=None), ContestClock())
    second = create_app(contest(title="Other test", name="two", scoreboard=None), ContestClock())
    assert first.state.contest is not second.state.contest
    assert (first.state.contest.base.title, second.state.contest.base.title) == ("Shape test", "Other test")
    assert first.state.store is first.state.contest.store
