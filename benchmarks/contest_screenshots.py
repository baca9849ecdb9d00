"""Screenshots of the contest server's room features at 1280 and 390 px wide, into a folder
(docs/contest/ for the docs): headless Chromium through Selenium, against the app served in this process on a
clock the script sets, with results written to the store (nothing is graded: it takes seconds).

    python benchmarks/contest_screenshots.py docs/contest

Each page is taken at its full height. The script fails if a page runs off the screen sideways at 390 px
(a table may scroll inside its own box; the page itself must not). tests/e2e/test_contest_screenshots.py runs it.
"""

from __future__ import annotations

import base64
import io
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import Executor, Future
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
START = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)
CONTEST = """
title = "Practice round 3"
[window]
start = 2026-03-14T09:00:00Z
duration = 180
[feedback]
during = "full"
[scoreboard]
mode = "public"
[tasks.m1]
points = 30
[tasks.m2]
points = 20
"""
WIDTHS = (1280, 390)


class Clock:
    def __init__(self) -> None:
        self.now = START + timedelta(minutes=42)

    def __call__(self) -> datetime:
        return self.now


class Idle(Executor):
    """An executor that never grades: the results are the script's, written to the store."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        return Future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def report(task: str, score: float, max_score: float = 4.0) -> dict:
    checks = [
        {"name": f"check {i}", "milestone": task, "score": float(i < score), "max_score": 1.0, "passed": i < score}
        | {"message": "" if i < score else "Likely cause: the mask is upper-triangular (torch.triu)"}
        for i in range(int(max_score))
    ]
    return {"milestones": [{"id": task, "title": task, "score": score, "max_score": max_score, "checks": checks}]}


def room(folder: Path, clock: Clock):
    """A round under way: students, uploads graded, a regrade, regrade requests, test runs, questions, an
    announcement, a latecomer."""
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from grader.contest.commands import contest as contest_group
    from grader.contest.store import Store
    from grader.contest.web.app import create_app

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "contest.toml").write_text(CONTEST)
    names = ("ada", "alan", "grace", "barbara", "edsger", "katherine")
    (folder / "roster.csv").write_text("student\n" + "".join(f"{n}\n" for n in names))
    assert CliRunner().invoke(contest_group, ["tokens", str(folder)]).exit_code == 0
    app = create_app(folder, clock, executor=Idle(), slots=2)
    client = TestClient(app)
    lines = (folder / "tokens.csv").read_text().splitlines()[1:]
    tokens = dict(line.split(",", 1) for line in lines)
    tokens["coach"] = (folder / "admin.token").read_text().strip()

    def auth(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[who]}"}

    store = Store(folder)
    code = (REPO / "solutions" / "m1_attention.py").read_bytes()
    model = (REPO / "solutions" / "m2_model.py").read_bytes()
    for who, task, score in [
        ("ada", "m1", 2), ("ada", "m1", 4), ("alan", "m1", 3), ("grace", "m1", 4), ("grace", "m2", 1),
        ("barbara", "m1", 1), ("edsger", "m1", 0),
    ]:  # fmt: skip
        clock.now += timedelta(minutes=2)
        name, data = ("m1_attention.py", code) if task == "m1" else ("m2_model.py", model)
        sent = client.post(f"/submit/{task}", files=[("files", (name, data))], headers=auth(who))
        if sent.status_code == 202:
            store.finish(sent.json()["id"], clock.now, report(task, score))
    client.post("/coach/regrade-task", data={"task": "m2"}, headers=auth("coach"))  # grace's m2: grading again
    client.post(
        "/coach/announce", data={"text": "Task m2: the hidden tests use batch size 1 too."}, headers=auth("coach")
    )
    asked = client.post(
        "/ask", data={"question": "Must m1's mask be causal for T = 1?", "task": "m1"}, headers=auth("ada")
    )
    client.post(
        "/coach/answer", data={"question": asked.json()["id"], "text": "Yes: a 1x1 mask of one.", "public": "1"},
        headers=auth("coach"),
    )  # fmt: skip
    client.post("/ask", data={"question": "Can I use torch.tril in m1?"}, headers=auth("alan"))
    client.post("/coach/extra-time", data={"student": "barbara", "minutes": "15", "set": "1"}, headers=auth("coach"))
    client.post("/coach/start-delay", data={"student": "katherine", "minutes": "70"}, headers=auth("coach"))
    regrade_requests(client, auth, clock)
    test_runs(store, clock)
    clock.now += timedelta(minutes=1)
    client.post("/coach/freeze", headers=auth("coach"))
    clock.now += timedelta(minutes=1)
    client.post("/submit/m1", files=[("files", ("m1_attention.py", code))], headers=auth("alan"))  # pending "?"
    return app, tokens


def regrade_requests(client, auth, clock: Clock) -> None:
    """ada's request still open, alan's declined, barbara's accepted (her submission queued again)."""
    for who, sid, reason in [
        ("ada", 1, "My mask is causal: check 3 fails only because of dtype, which the task did not fix."),
        ("alan", 3, "Please look again at check 4."),
        ("barbara", 6, "The grader timed out while the machine was busy; my code runs in 0.2 s here."),
    ]:  # fmt: skip
        clock.now += timedelta(minutes=1)
        client.post(f"/request-regrade/{sid}", data={"reason": reason}, headers=auth(who))
    asked = {r["student"]: r["id"] for r in client.get("/api/regrade-requests", headers=auth("coach")).json()}
    for who, action, answer in [
        ("alan", "decline", "Check 4 compares with the reference at 1e-5: your output differs by 0.3."),
        ("barbara", "regrade", "Regrading: the machine was overloaded at 09:52."),
    ]:  # fmt: skip
        client.post(
            f"/coach/regrade-requests/{asked[who]}", data={"action": action, "answer": answer}, headers=auth("coach")
        )


def test_runs(store, clock: Clock) -> None:
    """Two test runs of ada's, as the sandbox would record them: one printing, one raising."""
    for verdict, result in [
        ("ok", {"output": "torch.Size([2, 5, 8])\ntensor([[1., 0.],\n        [1., 1.]])"}),
        ("error", {"output": "", "error": "File \"run.py\", line 3\n  IndexError: index 5 is out of bounds"}),
    ]:  # fmt: skip
        clock.now += timedelta(minutes=1)
        rid = store.accept_test_run("ada", "m1", lambda: clock.now, lambda folder: None, lambda runs: None)
        store.finish_test_run(rid, clock.now, {"verdict": verdict, "seconds": 1.4, **result})


def paper_round(folder: Path, clock: Clock):
    """A round on a paper with a task of the contest's own beside it (the metric task, its points from its task
    file): one token, one page, the paper's notebook and both kinds of task."""
    from click.testing import CliRunner

    from grader.contest.commands import contest as contest_group
    from grader.contest.web.app import create_app

    (folder / "paper1").mkdir(parents=True)
    (folder / "paper1" / "paper.toml").write_text(
        'title = "Paper 1: attention"\nminutes = 120\n[parts.m1]\npoints = 20\n[parts.quiz]\npoints = 10\n'
    )
    head = CONTEST.split("[tasks.m1]")[0].replace('title = "Practice round 3"', 'title = "Round 4"\npaper = "paper1"')
    (folder / "contest.toml").write_text(head + "[tasks.lmbudget]\n")
    (folder / "roster.csv").write_text("student\nada\nalan\n")
    assert CliRunner().invoke(contest_group, ["tokens", str(folder)]).exit_code == 0
    lines = (folder / "tokens.csv").read_text().splitlines()[1:]
    return create_app(folder, clock, executor=Idle(), slots=2), dict(line.split(",", 1) for line in lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(app) -> tuple[object, str]:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def browser():
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(shutil.which("chromedriver")), options=options)


def log_in(driver, base: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(base + "/")
    box = driver.find_element(By.NAME, "token")
    box.send_keys(token)
    box.submit()
    time.sleep(0.3)


def small_png(data: bytes) -> bytes:
    """A screenshot in 64 colours (Pillow comes with matplotlib): the pages are text on a few flat colours, and a
    full coach page is a third of its size so, where the original is over 500 KB."""
    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(
        out, "PNG", optimize=True
    )
    return out.getvalue()


def shoot(
    driver, base: str, path: str, name: str, out: Path, opened: bool = False, section: str | None = None
) -> list[Path]:
    """``path`` at each width, full height; refuses a page wider than the screen. ``opened``: every folded
    section (``<details>``: the forms for a test run and a regrade request) opened first. ``section``: only the
    screen's height from the element with that id down, not the whole page again."""
    taken = []
    for width in WIDTHS:
        driver.set_window_size(width, 900)
        driver.get(base + path)
        if opened:
            driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
        time.sleep(0.4)
        wide = driver.execute_script("return document.documentElement.scrollWidth")
        inner = driver.execute_script("return document.documentElement.clientWidth")
        if wide > inner + 1:
            raise AssertionError(f"{path} at {width} px runs off the screen: {wide} > {inner} px")
        height = driver.execute_script("return document.documentElement.scrollHeight")
        top = 0
        if section:
            # at the page's top first: the table of contents sticks to the window's top, and would cover the
            # section the link scrolled to
            driver.execute_script("window.scrollTo(0, 0)")
            time.sleep(0.2)
            top = max(0, driver.execute_script(f"return document.getElementById('{section}').offsetTop") - 70)
            height = min(height - top, 900)
        clip = {"x": 0, "y": top, "width": inner, "height": min(height, 8000), "scale": 1}
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip})
        target = out / f"{name}-{width}.png"
        target.write_bytes(small_png(base64.b64decode(shot["data"])))
        taken.append(target)
    return taken


def main(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        app, tokens = room(Path(tmp) / "round", clock)
        server, base = serve(app)
        driver = browser()
        taken: list[Path] = []
        try:
            log_in(driver, base, tokens["ada"])
            taken += shoot(driver, base, "/me", "room-student-messages", out)
            taken += shoot(driver, base, "/me", "room-student-forms", out, opened=True)
            taken += shoot(driver, base, "/scoreboard", "room-scoreboard", out)
            log_in(driver, base, tokens["katherine"])  # the latecomer: her window opens in 12 min
            taken += shoot(driver, base, "/me", "room-student-countdown", out)
            log_in(driver, base, tokens["coach"])
            taken += shoot(driver, base, "/coach", "room-coach", out)
            taken += shoot(
                driver, base, "/coach?student=ad&task=m1#filters", "room-coach-filtered", out, section="filters"
            )
            taken += shoot(driver, base, "/coach/student/ada", "room-coach-student", out)
            taken += shoot(driver, base, "/coach/charts", "room-coach-charts", out)
        finally:
            server.should_exit = True  # type: ignore[attr-defined]
        app, tokens = paper_round(Path(tmp) / "paper-round", clock)
        server, base = serve(app)
        try:
            log_in(driver, base, tokens["ada"])
            taken += shoot(driver, base, "/me", "room-paper-and-task", out)
        finally:
            driver.quit()
            server.should_exit = True  # type: ignore[attr-defined]
    return taken


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    for path in main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/contest")):
        print(path)
