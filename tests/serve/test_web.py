"""The web page in real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import GRAPH, LINKED_GRAPH, LiveServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get install -y chromium chromium-driver"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium from the system packages; skipped (saying how to install it) where absent."""
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()) and not shutil.which("chromedriver"):
        pytest.skip(f"needs Debian's Chromium and its driver at {CHROMIUM}, {CHROMEDRIVER}: run `{INSTALL}` as root")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium: pip install -e '.[dev]'")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(10)
    yield driver
    driver.quit()


def test_index_lists_graphs_and_search_shows_channel_scores(browser, live_server: LiveServer) -> None:
    from selenium.webdriver.common.by import By

    browser.get(live_server.url + "/")
    assert GRAPH in browser.find_element(By.ID, "graphs").text
    browser.find_element(By.LINK_TEXT, GRAPH).click()
    query = browser.find_element(By.ID, "q")
    query.send_keys("beagle puppy")
    browser.find_element(By.ID, "search-button").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#results tr.result")
    assert rows and "beagle puppy named Biscuit" in rows[0].text
    assert "anchor cos" in browser.find_element(By.ID, "results").text
    rows[0].find_element(By.CSS_SELECTOR, "a.entry-link").click()
    assert browser.find_element(By.ID, "abstraction").text == "Bob + beagle puppy"
    assert "Biscuit" in browser.find_element(By.ID, "value").text
    assert "Bob + beagle puppy" in browser.find_element(By.ID, "anchors").text
    assert "Alice: I just started a new job" in browser.find_element(By.CSS_SELECTOR, "pre.episode").text


def test_walk_viewer_steps_through_a_live_walk(browser, live_server: LiveServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(f"{live_server.url}/walk?graph={LINKED_GRAPH}")
    Select(browser.find_element(By.ID, "graph")).select_by_visible_text(LINKED_GRAPH)
    browser.find_element(By.ID, "question").send_keys("Who is Priya's manager?")
    browser.find_element(By.ID, "run").click()
    WebDriverWait(browser, 60).until(expected_conditions.visibility_of_element_located((By.ID, "viewer")))
    assert browser.find_element(By.ID, "position").text == "step 1 / 2"
    assert browser.find_element(By.ID, "action").text == 'stop: {"action": "stop"}'
    assert "Priya" in browser.find_element(By.ID, "observation").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph-view circle.working")) == 4
    browser.find_element(By.ID, "next").click()
    assert browser.find_element(By.ID, "position").text == "step 2 / 2"
    assert browser.find_element(By.ID, "stop-reason").text == "stop"
    assert "Priya reports to Tomas" in browser.find_element(By.ID, "context").text
    shot = tmp_path / "walk.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_walk_viewer_shows_an_api_error(browser, live_server: LiveServer) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{live_server.url}/walk?graph={GRAPH}")
    browser.find_element(By.ID, "run").click()  # empty question: the API answers 422
    WebDriverWait(browser, 30).until(lambda driver: "question" in driver.find_element(By.ID, "status").text)
    assert "fix:" in browser.find_element(By.ID, "status").text
    assert not browser.find_element(By.ID, "viewer").is_displayed()


def test_report_page_without_runs_says_how_to_set_them(browser, live_server: LiveServer) -> None:
    from selenium.webdriver.common.by import By

    browser.get(live_server.url + "/report")
    assert "--runs-dir" in browser.find_element(By.ID, "no-runs").text


def test_walk_viewer_steps_through_an_eval_records_walk(browser, eval_server: str, eval_runs_dir: Path) -> None:
    import json

    from selenium.webdriver.common.by import By

    from tests.serve.conftest import EVAL_RUN

    lines = (eval_runs_dir / EVAL_RUN / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    steps = record["walk"]
    browser.get(eval_server + "/report")
    browser.find_element(By.CSS_SELECTOR, "details.records summary").click()
    browser.find_element(By.CSS_SELECTOR, "a.walk-link").click()  # the first record's walk
    assert browser.find_element(By.ID, "record-question").text == record["question"]
    assert browser.find_element(By.ID, "record-gold").text == record["gold_answer"]
    assert browser.find_element(By.ID, "record-recall").text == f"{record['evidence_recall']:.3f}"
    assert browser.find_element(By.ID, "record-judge").text == f"{record['judge_total']:.3f}"
    assert browser.find_element(By.ID, "viewer").is_displayed()
    shown = []
    for number, step in enumerate(steps, start=1):
        assert browser.find_element(By.ID, "position").text == f"step {number} / {len(steps)}"
        assert browser.find_element(By.ID, "observation").text.strip() == step["observation"].strip()
        working = browser.find_elements(By.CSS_SELECTOR, "#graph-view circle.working")
        assert [circle.get_attribute("data-id") for circle in working] == step["working_set_ids"]
        shown.append(browser.find_element(By.ID, "action").text)
        if number < len(steps):
            browser.find_element(By.ID, "next").click()
    expected = [f"{s['action']}: {s['action_text']}" for s in steps[:-1]] + ["(final state)"]
    assert shown == expected and shown[0].startswith('expand: {"action": "expand"')
    assert browser.find_element(By.ID, "next").get_attribute("disabled")
    assert record["retrieved_ids"][0] in browser.find_element(By.ID, "retrieved").text
    browser.find_element(By.ID, "prev").click()
    assert browser.find_element(By.ID, "action").text == expected[-2]
