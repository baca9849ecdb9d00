"""The coach's pages with a room of 200 students: the coach page's size, element count and height, its time to
render, and (``--shots FOLDER``) screenshots: the coach page at 1280 px, the scoreboard at 390 px, and the
resolver's projector view at 1280 px after two steps by the keyboard (the script fails if a step reloaded the
page or revealed nothing). Headless Chromium through Selenium, against the app served in this process on a
clock the script sets; results are written to the store (nothing is graded).

    python benchmarks/contest_jury.py                  # the figures, as JSON
    python benchmarks/contest_jury.py --shots docs/contest   # and the screenshots the docs show

The room: 200 students with two graded submissions each, 80 questions (half answered), 20 regrade requests, the
board frozen by the coach and 60 submissions since the freeze (the resolver's steps).
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contest_screenshots import CONTEST, REPO, Clock, Idle, browser, log_in, report, serve, small_png  # noqa: E402

STUDENTS = 200


def room(folder: Path, clock: Clock):
    """The round above, built through the server's own routes (the store's for the grading)."""
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from grader.contest.commands import contest as contest_group
    from grader.contest.store import Store
    from grader.contest.web.app import create_app

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "contest.toml").write_text(CONTEST)
    names = [f"student{i:03d}" for i in range(STUDENTS)]
    (folder / "roster.csv").write_text("student\n" + "".join(f"{n}\n" for n in names))
    assert CliRunner().invoke(contest_group, ["tokens", str(folder)]).exit_code == 0
    app = create_app(folder, clock, executor=Idle(), slots=2)
    client = TestClient(app)
    tokens = dict(line.split(",", 1) for line in (folder / "tokens.csv").read_text().splitlines()[1:])
    tokens["coach"] = (folder / "admin.token").read_text().strip()

    def auth(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[who]}"}

    store = Store(folder)
    files = {
        "m1": ("m1_attention.py", (REPO / "solutions" / "m1_attention.py").read_bytes()),
        "m2": ("m2_model.py", (REPO / "solutions" / "m2_model.py").read_bytes()),
    }
    for i, who in enumerate(names):
        for task in ("m1", "m2"):
            clock.now += timedelta(seconds=3)
            sent = client.post(f"/submit/{task}", files=[("files", files[task])], headers=auth(who))
            if sent.status_code == 202:
                store.finish(sent.json()["id"], clock.now, report(task, (i * 7 + len(task)) % 5))
    for i, who in enumerate(names[:80]):
        clock.now += timedelta(seconds=5)
        asked = client.post(
            "/ask", data={"question": f"Question {i}: is the mask causal?", "task": "m1"}, headers=auth(who)
        )
        if i % 2:
            client.post("/coach/answer", data={"question": asked.json()["id"], "text": "Yes."}, headers=auth("coach"))
    mine = {r["student"]: r["id"] for r in client.get("/api/coach", headers=auth("coach")).json()["submissions"]}
    for who in names[100:120]:
        client.post(f"/request-regrade/{mine[who]}", data={"reason": "Please look again."}, headers=auth(who))
    client.post("/coach/freeze", headers=auth("coach"))
    for who in names[:60]:
        clock.now += timedelta(seconds=3)
        sent = client.post("/submit/m1", files=[("files", files["m1"])], headers=auth(who))
        if sent.status_code == 202:
            store.finish(sent.json()["id"], clock.now, report("m1", 4))
    return app, tokens, client


def measure(client, tokens: dict[str, str], driver, base: str) -> dict[str, object]:
    """The coach page's bytes, its median time to render (10 loads, in this process), and in Chromium at 1280 px
    its elements and height in pixels."""
    coach = {"Authorization": f"Bearer {tokens['coach']}", "Accept": "text/html"}
    page = client.get("/coach", headers=coach)
    times = []
    for _ in range(10):
        began = time.perf_counter()
        client.get("/coach", headers=coach)
        times.append(time.perf_counter() - began)
    driver.set_window_size(1280, 900)
    log_in(driver, base, tokens["coach"])
    driver.get(base + "/coach")
    time.sleep(0.5)
    return {
        "students": STUDENTS,
        "coach_page_kb": round(len(page.content) / 1024),
        "elements": driver.execute_script("return document.getElementsByTagName('*').length"),
        "height_px_1280": driver.execute_script("return document.documentElement.scrollHeight"),
        "median_render_s": round(statistics.median(times), 3),
    }


def shoot(driver, base: str, path: str, name: str, out: Path, width: int, height: int = 900) -> Path:
    """The first ``height`` pixels of ``path`` at ``width``."""
    driver.set_window_size(width, height)
    driver.get(base + path)
    time.sleep(0.5)
    inner = driver.execute_script("return document.documentElement.clientWidth")
    clip = {"x": 0, "y": 0, "width": inner, "height": height, "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip})
    target = out / f"{name}-{width}.png"
    target.write_bytes(small_png(base64.b64decode(shot["data"])))
    return target


def shoot_in_place(driver, out: Path) -> Path:
    """The resolver as the room sees it after the steps: the page as it is now, not loaded again."""
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {})
    target = out / "jury-resolver-1280.png"
    target.write_bytes(small_png(base64.b64decode(shot["data"])))
    return target


def resolver_keys(driver, base: str, token: str) -> dict[str, Any]:
    """The resolver stepped with the keyboard, logged in with ``token``: the right arrow, then the space bar (if
    a window is still open the first is refused, naming it, and the "reveal anyway" button it offers is
    clicked). Returns what the status line said after each, and whether the page was never reloaded (a mark set
    on its window is still there)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.set_window_size(1280, 700)
    log_in(driver, base, token)  # the admin's: only they may step it
    driver.get(base + "/coach/resolver")
    time.sleep(0.4)
    driver.execute_script("window.notReloaded = true")
    status = driver.find_element(By.ID, "resolver-status")
    said = []
    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_RIGHT)
    time.sleep(0.6)
    said.append(status.text)
    forced = driver.find_element(By.ID, "resolver-force")
    if forced.is_displayed():
        forced.click()
        time.sleep(0.6)
        said.append(status.text)
    body.send_keys(" ")
    time.sleep(0.6)
    said.append(status.text)
    return {"said": said, "not_reloaded": driver.execute_script("return window.notReloaded === true")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=Path, help="a folder for the screenshots")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        app, tokens, client = room(Path(tmp) / "room", clock)
        server, base = serve(app)
        driver = browser()
        try:
            print(json.dumps(measure(client, tokens, driver, base), indent=1))
            if args.shots:
                args.shots.mkdir(parents=True, exist_ok=True)
                shots = [
                    shoot(driver, base, "/coach", "jury-coach", args.shots, 1280),
                    shoot(driver, base, "/scoreboard", "jury-scoreboard", args.shots, 390, 700),
                ]
                print("\n".join(str(p) for p in shots))
            clock.now += timedelta(hours=3)  # the ceremony: every window ended, the resolver steps freely
            keys = resolver_keys(driver, base, tokens["coach"])
            print(json.dumps(keys, indent=1))
            if not keys["not_reloaded"] or not all(line.endswith("revealed.") for line in keys["said"]):
                raise SystemExit("the resolver's keys did not step the board in place")
            if args.shots:
                print(shoot_in_place(driver, args.shots))
        finally:
            driver.quit()
            server.should_exit = True  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
