"""The contest's pages in a real browser: headless Chromium, driven through Selenium, against
`grade contest serve` on loopback, as a student meets them.

CI installs Debian's ``chromium`` and ``chromium-driver``; elsewhere the test is skipped, saying which is
missing. The screenshots go to ``$GPTKIT_SCREENSHOTS`` when it is set (the README's come from here), else
to the test's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from helpers import SOLUTIONS, free_port, opened_a_minute_ago, serve_contest, tokens

pytestmark = pytest.mark.slow
webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium (the dev extra)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def right_edge(element) -> float:
    """Where an element ends, in CSS pixels from the page's left."""
    return element.rect["x"] + element.rect["width"]


@pytest.fixture
def browser():
    if not (CHROMIUM and DRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(flag)
    # The driver is named, so Selenium never looks for one on the network.
    driver = webdriver.Chrome(service=webdriver.ChromeService(DRIVER), options=options)
    yield driver
    driver.quit()


def test_a_student_uploads_and_appears_on_the_scoreboard_and_the_coach_sees_the_charts(tmp_path, contest, browser):
    folder = contest(title="Browser practice", start=opened_a_minute_ago(), students=("ada", "grace"))
    token = tokens(folder)["ada"]
    shots = Path(os.environ.get("GPTKIT_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = serve_contest(folder, port)
    try:
        base = f"http://127.0.0.1:{port}"
        browser.get(base + "/")
        box = browser.find_element(By.NAME, "token")
        box.send_keys(token)
        box.submit()
        WebDriverWait(browser, 20).until(lambda b: "Logged in as" in b.page_source)

        form = browser.find_element(By.CSS_SELECTOR, 'form[action^="/submit/m1?key="]')
        form.find_element(By.NAME, "files").send_keys(str(SOLUTIONS / "m1_attention.py"))
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # (graded in a few seconds: the page after the upload nearly always still shows it waiting)
        WebDriverWait(browser, 20).until(
            lambda b: "waiting to be graded" in b.page_source or "30 / 30" in b.page_source
        )
        browser.execute_script("window.sameLoad = true")
        # The verdict comes into the page while it waits: no reload, by the test or by the page itself.
        WebDriverWait(browser, 180, poll_frequency=1).until(lambda b: "30 / 30" in b.page_source)
        assert browser.execute_script("return window.sameLoad === true"), "the page reloaded to show the verdict"
        browser.save_screenshot(str(shots / "student-page.png"))

        browser.get(base + "/scoreboard")
        row = browser.find_element(By.XPATH, "//tr[td[normalize-space()='ada']]")
        assert row.find_elements(By.TAG_NAME, "td")[0].text == "1", row.text
        assert "30" in row.find_elements(By.TAG_NAME, "td")[2].text, row.text  # the total, next to the name
        browser.save_screenshot(str(shots / "scoreboard.png"))

        # On a phone, what a student looks for is on screen without scrolling sideways: the score, the total.
        browser.set_window_size(390, 900)
        width = browser.execute_script("return document.documentElement.clientWidth")
        browser.get(base + "/me")
        score = browser.find_element(By.XPATH, "//td[contains(@class, 'feedback')]//strong")
        assert score.text == "30 / 30" and right_edge(score) <= width, (score.text, right_edge(score), width)
        browser.save_screenshot(str(tmp_path / "student-page-phone.png"))
        browser.get(base + "/scoreboard")
        total = browser.find_element(By.XPATH, "//tr[td[normalize-space()='ada']]").find_elements(By.TAG_NAME, "td")[2]
        assert right_edge(total) <= width, (right_edge(total), width)
        browser.save_screenshot(str(tmp_path / "scoreboard-phone.png"))
        browser.set_window_size(1200, 900)

        # A test run from its form: its output comes into the page while it runs, as the verdict did.
        browser.get(base + "/me")
        browser.execute_script("document.getElementById('test-run-form-m1').open = true")
        form = browser.find_element(By.CSS_SELECTOR, 'form[action="/test-run/m1"]')
        form.find_element(By.NAME, "files").send_keys(str(SOLUTIONS / "m1_attention.py"))
        script = "from m1_attention import causal_mask\nprint('ones below the diagonal:', causal_mask(3).sum().item())"
        form.find_element(By.NAME, "script").send_keys(script)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        printed = "ones below the diagonal: 6.0"
        WebDriverWait(browser, 20).until(lambda b: "waiting to run" in b.page_source or printed in b.page_source)
        browser.execute_script("window.sameLoad = true")
        WebDriverWait(browser, 120, poll_frequency=1).until(lambda b: printed in b.page_source)
        assert browser.execute_script("return window.sameLoad === true"), "the page reloaded to show the output"

        # The coach: the live page, then the session's charts, every image drawn and loaded.
        browser.delete_all_cookies()
        browser.get(base + "/")
        box = browser.find_element(By.NAME, "token")
        box.send_keys((folder / "admin.token").read_text().strip())
        box.submit()
        WebDriverWait(browser, 20).until(lambda b: "Live standings" in b.page_source)
        assert "results.csv" in browser.page_source and "Regrade the task" in browser.page_source
        browser.save_screenshot(str(shots / "coach-page.png"))
        browser.get(base + "/coach/charts")
        images = browser.find_elements(By.TAG_NAME, "img")
        assert len(images) == 4, browser.page_source
        WebDriverWait(browser, 20).until(
            lambda b: all(
                b.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i) for i in images
            )
        )
        browser.save_screenshot(str(shots / "coach-charts.png"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
