"""The session's results for the coach, as `grade contest export` and `grade report` give them: results.csv,
Gradescope's results.json files, and the report's charts (drawn anew on each visit of /coach/charts)."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response

from grader.batch.exports import gradescope_json
from grader.batch.gradebook import Gradebook
from grader.contest.export import results_csv as results_with_set_aside
from grader.contest.export import write_gradebook
from grader.contest.web import views
from grader.contest.web.deps import Coach, State
from grader.contest.web.state import ContestState

router = APIRouter(prefix="/coach")
CHARTS = "charts"  # DIR/charts/: grade report's charts of the session
CHART_NAME = re.compile(r"[a-z][a-z-]*\.png")
charts_lock = threading.Lock()  # pyplot keeps global state: one drawing at a time, whatever the app


def gradebook(state: ContestState) -> tuple[list[dict], list[dict]]:
    """The gradebook's rows and checks, written anew from the store (the server need not stop for it)."""
    book = Gradebook(write_gradebook(state.folder, state.rules(), state.store, state.students))
    try:
        return book.rows(), book.checks()
    finally:
        book.close()


@router.get("/results.csv")
def results_csv(who: Coach, state: State) -> Response:
    text = results_with_set_aside(state.rules(), state.store, *gradebook(state))
    attachment = {"Content-Disposition": "attachment; filename=results.csv"}
    return Response(text, media_type="text/csv", headers=attachment)


@router.get("/gradescope.zip")
def gradescope_zip(who: Coach, state: State) -> Response:
    rows, checks = gradebook(state)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for row in rows:
            # as the autograder zip and `grade export --gradescope` lay it out by default: a test per milestone,
            # its checks' messages hidden until the instructor publishes the grades
            results = gradescope_json(row, checks, visibility="after_published", layout="milestone")
            zf.writestr(f"{row['student']}/results.json", json.dumps(results, indent=2))
    attachment = {"Content-Disposition": "attachment; filename=gradescope-results.zip"}
    return Response(out.getvalue(), media_type="application/zip", headers=attachment)


@router.get("/charts", response_class=HTMLResponse)
def charts_page(who: Coach, state: State) -> Response:
    from grader.batch.charts import draw

    rows, checks = gradebook(state)
    with charts_lock:
        names = [path.name for path in draw(rows, checks, state.folder / CHARTS)]
        if names:
            attempts_heatmap(rows, checks, state.folder / CHARTS)
    return views.render(state, "charts.html", names=names, students=len(rows), now=views.iso(state.clock()))


NOT_ATTEMPTED_MARK = "–"  # a heatmap cell of a task with no graded submission: not a red 0


def attempts_heatmap(rows: list[dict], checks: list[dict], folder: Path) -> Path:
    """The heatmap again, for a contest: a task the student never had graded is a blank cell marked "–", apart
    from a task attempted and scored 0 (a red "0"). The gradebook records the first as a 0 of its points
    (``export.not_submitted``), which the batch's heatmap cannot tell from the second."""
    import matplotlib.pyplot as plt

    from grader.batch.charts import HEATMAP

    fig = attempts_figure(rows, checks)
    path = folder / HEATMAP
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def attempts_figure(rows: list[dict], checks: list[dict]) -> Any:
    """``attempts_heatmap``'s figure (matplotlib's, drawn with the Agg backend as ``draw`` sets it)."""
    from grader.batch.charts import heatmap
    from grader.batch.summary import NOT_SUBMITTED, stubs

    missing = {(c["student"], c["milestone"]) for c in checks if c["name"] == NOT_SUBMITTED}
    # the placeholder's score as "no number": its cell is blank (NaN), and a task nobody tried keeps its column
    blank = [{**c, "score": float("nan")} if c["name"] == NOT_SUBMITTED else c for c in checks]
    fig = heatmap(rows, blank, stubs(checks))
    ax = fig.axes[0]
    tasks = [label.get_text() for label in ax.get_xticklabels()]
    students = [label.get_text().removesuffix(" (stub)") for label in ax.get_yticklabels()]
    for i, student in enumerate(students):
        for j, task in enumerate(tasks):
            if (student, task) in missing:
                ax.text(j, i, NOT_ATTEMPTED_MARK, ha="center", va="center", fontsize=9, color="#777")
    ax.set_xlabel(f"{NOT_ATTEMPTED_MARK} (blank): not attempted, no graded submission; 0: attempted and scored 0")
    return fig


@router.get("/charts/{name}")
def chart(name: str, who: Coach, state: State) -> Response:
    path = state.folder / CHARTS / name
    if not CHART_NAME.fullmatch(name) or not path.is_file():
        raise HTTPException(404, f"no chart {name!r}: open /coach/charts to draw them")
    return FileResponse(path, media_type="image/png")
