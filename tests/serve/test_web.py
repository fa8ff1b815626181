"""The web page in real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium).

Every page is screenshot at 1400x1000 into the test's tmp_path; the walk viewer's labels are checked by
their boxes in the page (no two may overlap, none may leave the drawing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import GRAPH, LINKED_GRAPH, LiveServer, make_service, running_server

pytestmark = pytest.mark.slow


def count(browser, css: str) -> int:
    """Elements matching a CSS selector now (no implicit wait: for checking that something is absent)."""
    return browser.execute_script("return document.querySelectorAll(arguments[0]).length", css)


def screenshot(browser, path: Path) -> None:
    """Save the visible page as a PNG at `path` (a test's tmp_path) and check that something was drawn."""
    assert browser.save_screenshot(str(path)) and path.stat().st_size > 10_000


LABEL_BOXES = """
const frame = document.getElementById('graph-view').getBoundingClientRect();
const labels = Array.from(document.querySelectorAll('#graph-view text')).map((node) => {
  const box = node.getBoundingClientRect();
  return {text: node.textContent, left: box.left, top: box.top, right: box.right, bottom: box.bottom};
});
return {frame: {left: frame.left, top: frame.top, right: frame.right, bottom: frame.bottom}, labels: labels};
"""
"""Script returning the viewport boxes of the walk viewer's SVG and of every text label drawn in it."""


def overlapping(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes overlap (touching edges do not count)."""
    pairs = []
    for index, a in enumerate(boxes):
        for b in boxes[index + 1 :]:
            if a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]:
                pairs.append((a["text"], b["text"]))
    return pairs


def assert_labels_readable(browser) -> list[dict]:
    """The walk viewer's labels: none overlaps another, each lies inside the drawing, none is empty."""
    found = browser.execute_script(LABEL_BOXES)
    frame, labels = found["frame"], found["labels"]
    assert labels and all(box["text"].strip() and box["right"] > box["left"] for box in labels)
    assert overlapping(labels) == []
    outside = [box["text"] for box in labels if box["left"] < frame["left"] or box["right"] > frame["right"]
               or box["top"] < frame["top"] or box["bottom"] > frame["bottom"]]  # fmt: skip
    assert outside == []
    return labels


def test_index_lists_graphs_and_search_shows_channel_scores(browser, live_server: LiveServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(live_server.url + "/")
    assert GRAPH in browser.find_element(By.ID, "graphs").text
    screenshot(browser, tmp_path / "index.png")
    browser.find_element(By.LINK_TEXT, GRAPH).click()
    query = browser.find_element(By.ID, "q")
    query.send_keys("beagle puppy")
    browser.find_element(By.ID, "search-button").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#results tr.result")
    assert rows and "beagle puppy named Biscuit" in rows[0].text
    assert "anchor cos" in browser.find_element(By.ID, "results").text
    screenshot(browser, tmp_path / "search.png")
    rows[0].find_element(By.CSS_SELECTOR, "a.entry-link").click()
    assert browser.find_element(By.ID, "abstraction").text == "Bob + beagle puppy"
    assert "Biscuit" in browser.find_element(By.ID, "value").text
    assert "Bob + beagle puppy" in browser.find_element(By.ID, "anchors").text
    assert "Alice: I just started a new job" in browser.find_element(By.CSS_SELECTOR, "pre.episode").text
    screenshot(browser, tmp_path / "entry.png")


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
    assert count(browser, "#graph-view circle.frontier") == 0
    assert browser.find_element(By.CSS_SELECTOR, "#graph-view rect.empty-frontier").is_displayed()
    note = " ".join(element.text for element in browser.find_elements(By.CSS_SELECTOR, "#graph-view .empty-note"))
    assert note == "no frontier semantic search does not read links"
    assert browser.find_element(By.CSS_SELECTOR, "#frontier-list li.empty").text == (
        "no frontier: semantic search does not read links"
    )
    panel = browser.find_element(By.ID, "working-list").text
    assert "Priya's manager" in panel and "Priya reports to Tomas, who leads the payments team." in panel
    assert_labels_readable(browser)
    browser.find_element(By.ID, "next").click()
    assert browser.find_element(By.ID, "position").text == "step 2 / 2"
    assert browser.find_element(By.ID, "stop-reason").text == "stop"
    assert "Priya reports to Tomas" in browser.find_element(By.ID, "context").text
    screenshot(browser, tmp_path / "walk-semantic.png")


def test_walk_viewer_shows_an_api_error(browser, live_server: LiveServer) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{live_server.url}/walk?graph={GRAPH}")
    browser.find_element(By.ID, "run").click()  # empty question: the API answers 422
    WebDriverWait(browser, 30).until(lambda driver: "question" in driver.find_element(By.ID, "status").text)
    assert "fix:" in browser.find_element(By.ID, "status").text
    assert not browser.find_element(By.ID, "viewer").is_displayed()


def test_report_page_without_runs_says_how_to_set_them(browser, live_server: LiveServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(live_server.url + "/report")
    assert "--runs-dir" in browser.find_element(By.ID, "no-runs").text
    screenshot(browser, tmp_path / "report-empty.png")


def test_report_page_renders_tables_as_tables(browser, eval_server: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(eval_server + "/report")
    table = browser.find_element(By.CSS_SELECTOR, "section.run table.report-table")
    headers = [cell.text for cell in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers[:4] == ["category", "n", "correct", "ev. recall"]
    rows = {row.find_element(By.TAG_NAME, "td").text: row for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert "overall" in rows and len(rows["overall"].find_elements(By.TAG_NAME, "td")) == len(headers)
    recall = rows["overall"].find_elements(By.TAG_NAME, "td")[3]
    assert recall.value_of_css_property("text-align") == "right" and float(recall.text) > 0
    assert "|" not in browser.find_element(By.CSS_SELECTOR, "section.run").text.split("Question records")[0]
    screenshot(browser, tmp_path / "report.png")


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
    assert f"Graph '{record['conversation_id']}' is not served here" in browser.find_element(By.ID, "labels-note").text
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


@pytest.fixture(scope="module")
def eval_graph_server(eval_runs_dir: Path, tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[str]:
    """serve-memory with `--runs-dir` and a copy of the store the eval run built (its graph cache); yields its URL.

    The copy (SQLite's online backup, so a consistent one) keeps the shared cache file out of the server's hands.
    """
    import sqlite3

    from memora_rl.env.registry import graph_cache_path, resolve_env_spec

    source = graph_cache_path(resolve_env_spec("synthetic"))
    copy = tmp_path_factory.mktemp("eval-graph") / source.name
    with sqlite3.connect(source) as reader, sqlite3.connect(copy) as writer:
        reader.backup(writer)
    with running_server(make_service([copy], embedder, policy="heuristic", runs_dir=eval_runs_dir)) as url:
        yield url


def test_eval_walk_labels_its_nodes_from_the_served_graph(
    browser, eval_graph_server: str, eval_runs_dir: Path, tmp_path: Path
) -> None:
    import json

    from selenium.webdriver.common.by import By

    from tests.serve.conftest import EVAL_RUN

    record = json.loads((eval_runs_dir / EVAL_RUN / "records.jsonl").read_text().splitlines()[0])
    browser.get(f"{eval_graph_server}/walk?run={EVAL_RUN}&task={record['task_id']}")
    assert count(browser, "#labels-note") == 0
    for number, step in enumerate(record["walk"], start=1):
        ids = step["working_set_ids"] + [node["id"] for node in step["frontier"]]
        titles = browser.find_elements(By.CSS_SELECTOR, "#graph-view g.node title")
        assert [title.get_attribute("textContent").split("\n")[0] for title in titles] == ids
        assert all("no label" not in title.get_attribute("textContent") for title in titles)
        items = browser.find_elements(By.CSS_SELECTOR, "#working-list li, #frontier-list li:not(.empty)")
        assert [item.get_attribute("data-id") for item in items] == ids
        assert all(item.find_element(By.TAG_NAME, "b").text != "(no label)" for item in items)
        links = browser.find_elements(By.CSS_SELECTOR, "#working-list li a")
        assert links[0].get_attribute("href").endswith(f"/graphs/{record['conversation_id']}/entries/{ids[0]}")
        assert_labels_readable(browser)
        if number == 1:
            screenshot(browser, tmp_path / "eval-walk.png")
        if number < len(record["walk"]):
            browser.find_element(By.ID, "next").click()


WIDE_GRAPH = "launch"
"""Graph id of the wide test graph: enough linked entries for 10 working-set and 10 frontier nodes."""
WIDE_QUESTION = "What is on Priya's payments launch checklist?"
CHECKLIST = [
    "rotate the ledger signing keys before the December freeze",
    "load-test the refund queue at three times Black Friday traffic",
    "translate the checkout error messages into Portuguese and Polish",
    "move the fraud-scoring model behind the new feature flag",
    "archive the legacy settlement reports older than seven years",
    "rehearse the database failover with the on-call rotation",
    "sign the card-network certification paperwork with Visa",
    "publish the merchant migration guide on the developer portal",
    "cap the retry storm of the webhook dispatcher at five tries",
    "audit which support agents can issue manual chargebacks",
    "switch the currency-rate feed to the second provider",
    "remove the beta banner from the mobile checkout screens",
]  # fmt: skip
"""Twelve long checklist items: each a hub entry, linked by its own anchor to one owner entry."""


@pytest.fixture(scope="module")
def wide_server(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[str]:
    """serve-memory (heuristic policy, which reads the frontier) over graph `launch` in a real store; yields its URL.

    Twelve checklist entries share the anchor `launch + checklist` and each links to an owner entry by
    an anchor of its own, so a first search of 10 leaves well over 10 linked entries for the frontier.
    """
    from memora_rl.memory import EntryCandidate, always_create, open_store

    path = tmp_path_factory.mktemp("serve-wide") / "wide.sqlite"
    with open_store(path, embedder=embedder) as store:
        for number, item in enumerate(CHECKLIST, start=1):
            own = f"checklist item {number} + owner"
            hub = EntryCandidate(abstraction=f"Priya's payments launch checklist, item {number}: {item}",
                                 value=f"Before the payments launch Priya must {item}.",
                                 anchors=["launch + checklist", own], source_turn_ids=[f"D1:{number}"])  # fmt: skip
            owner = EntryCandidate(abstraction=f"Owner of launch checklist item {number} ({item.split()[0]})",
                                   value=f"Tomas's colleague number {number} owns the task to {item}.",
                                   anchors=[own], source_turn_ids=[f"D2:{number}"])  # fmt: skip
            store.upsert_entry(WIDE_GRAPH, hub, always_create)
            store.upsert_entry(WIDE_GRAPH, owner, always_create)
    with running_server(make_service([path], embedder, policy="heuristic")) as url:
        yield url


def test_walk_viewer_keeps_ten_plus_ten_nodes_readable(browser, wide_server: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{wide_server}/walk?graph={WIDE_GRAPH}")
    browser.find_element(By.ID, "question").send_keys(WIDE_QUESTION)
    browser.find_element(By.ID, "top-k").send_keys("10")
    browser.find_element(By.ID, "run").click()
    WebDriverWait(browser, 60).until(expected_conditions.visibility_of_element_located((By.ID, "viewer")))
    working = browser.find_elements(By.CSS_SELECTOR, "#graph-view circle.working")
    frontier = browser.find_elements(By.CSS_SELECTOR, "#graph-view circle.frontier")
    assert len(working) == 10 and len(frontier) == 10
    screenshot(browser, tmp_path / "walk-10-10.png")
    labels = assert_labels_readable(browser)
    # each node's label starts with its id and goes on with (the start of) its abstraction, from the store
    node_labels = [box["text"] for box in labels if box["text"].startswith("e")]
    assert len(node_labels) == 20
    assert all("Priya's payments launch" in text or "Owner of launch" in text for text in node_labels)
    titles = [t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, "#graph-view g title")]
    assert len(titles) == 20 and any(f"item 9: {CHECKLIST[8]}" in title for title in titles)
    panel = browser.find_elements(By.CSS_SELECTOR, "#working-list li, #frontier-list li")
    assert len(panel) == 20 and all(item.text.split()[0].startswith("e") for item in panel)
    assert any(CHECKLIST[0] in item.text for item in panel)
    first = browser.find_element(By.CSS_SELECTOR, "#graph-view g.node")
    ActionChains(browser).move_to_element(first).perform()  # hovering a node marks its entry in the side panel
    hovered = browser.find_elements(By.CSS_SELECTOR, "#working-list li.hover")
    assert [item.get_attribute("data-id") for item in hovered] == [first.get_attribute("data-id")]
    browser.find_element(By.ID, "next").click()  # the expand's 3 new entries join the working set
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph-view circle.working.new")) == 3
    assert_labels_readable(browser)
