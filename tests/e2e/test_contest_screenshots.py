"""benchmarks/contest_screenshots.py, the room's pages at 1280 and 390 px in headless Chromium: every page
renders, and none runs off a phone's screen sideways (the script refuses it). The docs' screenshots
(docs/contest/room-*.png) come from ``python benchmarks/contest_screenshots.py docs/contest``."""

from __future__ import annotations

import pytest

from helpers import benchmark, needs_a_browser

pytestmark = pytest.mark.slow
pytest.importorskip("selenium.webdriver", reason="the screenshots need selenium (the dev extra)")


def test_the_rooms_pages_render_at_1280_and_390_px_without_running_off_the_screen(tmp_path):
    needs_a_browser()
    taken = benchmark("contest_screenshots").main(tmp_path)
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
