"""The scoreboard and the metric tasks' leaderboards, as whoever asks may see them now (the coach: live)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from grader.contest.web import views
from grader.contest.web.deps import Anyone, State

router = APIRouter()


@router.get("/scoreboard", response_class=HTMLResponse)
def scoreboard_page(who: Anyone, state: State) -> Response:
    contest = state.rules()
    standings = state.board(who, contest)
    return views.render(
        state,
        "scoreboard.html",
        standings=views.board(standings, who.coach),
        tasks=[t.id for t in contest.tasks],
        who=who,
        leaderboards=state.leaderboards(who, contest, standings),
    )


@router.get("/api/scoreboard")
def scoreboard(who: Anyone, state: State) -> dict[str, Any]:
    return views.board(state.board(who, state.rules()), who.coach)


@router.get("/api/leaderboards")
def leaderboards(who: Anyone, state: State) -> list[dict[str, Any]]:
    contest = state.rules()
    return state.leaderboards(who, contest, state.board(who, contest))
