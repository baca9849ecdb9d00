"""benchmarks/contest_screenshots.py, the room's pages at 1280 and 390 px in headless Chromium: every page
renders, and none runs off a phone's screen sideways (the script refuses it). The docs' screenshots
(docs/contest/room-*.png) come from ``python benchmarks/contest_screenshots.py docs/contest``."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow
pytest.importorskip("selenium.webdriver", reason="the screenshots need selenium (the dev extra)")


def test_the_rooms_pages_render_at_1280_and_390_px_without_running_off_the_screen(tmp_path):
    if not ((shutil.which("chromium") or shutil.which("chromium-browser")) and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    spec = importlib.util.spec_from_file_location("contest_screenshots", REPO / "benchmarks" / "contest_screenshots.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    taken = module.main(tmp_path)
    names = {path.name for path in taken}
    for page in (
        "student-messages",
        "student-forms",
        "student-countdown",
        "scoreboard",
        "coach",
        "coach-student",
        "coach-charts",
    ):
        assert {f"room-{page}-1280.png", f"room-{page}-390.png"} <= names, names
    assert all(path.stat().st_size > 5000 for path in taken)
