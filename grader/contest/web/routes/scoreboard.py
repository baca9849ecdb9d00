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
    """The board as ``who`` may see it, their own row marked, the attempts per task, a "?" where a frozen board
    hides submissions made since the freeze, and (a student) the time left in their window."""
    contest = state.rules()
    standings = state.board(who, contest)
    window = None if who.coach else state.window(who.name)[1]
    return views.render(
        state,
        "scoreboard.html",
        standings=views.board(standings, who.coach, views.attempts(state, contest, standings.frozen_at)),
        tasks=[t.id for t in contest.tasks],
        who=who,
        leaderboards=state.leaderboards(who, contest, standings),
        phase=window.phase.value if window else None,
        end=views.iso(window.end) if window else None,
        remaining_seconds=round(window.remaining.total_seconds()) if window else 0,
    )


@router.get("/api/scoreboard")
def scoreboard(who: Anyone, state: State) -> dict[str, Any]:
    contest = state.rules()
    standings = state.board(who, contest)
    return views.board(standings, who.coach, views.attempts(state, contest, standings.frozen_at))


@router.get("/api/leaderboards")
def leaderboards(who: Anyone, state: State) -> list[dict[str, Any]]:
    contest = state.rules()
    return state.leaderboards(who, contest, state.board(who, contest))
