"""The walk viewer on an eval record: a real heuristic eval run, read through `--runs-dir` by a real server."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import EVAL_RUN, make_service, running_server


def _records(runs: Path) -> list[dict]:
    return [json.loads(line) for line in (runs / EVAL_RUN / "records.jsonl").read_text().splitlines()]


def _inline_walk(page: str) -> dict:
    """The walk JSON the page hands to walk.js."""
    found = re.search(r'<script type="application/json" id="walk-data">(.*?)</script>', page, re.S)
    assert found, "the page holds no inline walk"
    return json.loads(found.group(1))


def test_record_walk_page_shows_the_question_scores_and_walk(eval_server: str, eval_runs_dir: Path) -> None:
    record = _records(eval_runs_dir)[0]
    assert len(record["walk"]) > 2  # the heuristic expands at least once, then the final state
    response = httpx.get(f"{eval_server}/walk", params={"run": EVAL_RUN, "task": record["task_id"]})
    assert response.status_code == 200, response.text
    page = unescape(response.text)
    assert record["question"] in page and record["gold_answer"] in page
    assert f"{record['evidence_recall']:.3f}" in page and f"{record['judge_total']:.3f}" in page
    walk = _inline_walk(response.text)["walk"]
    assert [step["action_text"] for step in walk] == [step["action_text"] for step in record["walk"]]
    assert walk[0]["action"] == "expand" and walk[-1]["action"] is None
    assert 'id="walk-form"' not in page  # no live-retrieve form on a record's walk


def test_report_page_links_each_record_to_its_walk(eval_server: str, eval_runs_dir: Path) -> None:
    page = unescape(httpx.get(f"{eval_server}/report").text)
    for record in _records(eval_runs_dir):
        link = "/walk?" + str(httpx.QueryParams({"run": EVAL_RUN, "task": record["task_id"]}))
        assert f'href="{link}"' in page and f"{len(record['walk'])} steps" in page


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [
        ({"run": "../..", "task": "t"}, 400, "outside the eval runs folder"),
        ({"run": "/etc", "task": "t"}, 400, "outside the eval runs folder"),
        ({"run": "nothing-here", "task": "t"}, 404, "has no records.jsonl"),
        ({"run": EVAL_RUN, "task": "no-such-task"}, 404, "'no-such-task' is not in run 'heuristic'"),
        ({"run": EVAL_RUN}, 400, "needs both run"),
    ],
)
def test_bad_run_or_task_is_refused_naming_the_problem(eval_server: str, params: dict, status: int, says: str) -> None:
    response = httpx.get(f"{eval_server}/walk", params=params)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")  # a page's error is a page
    assert says in unescape(response.text)


def test_old_record_without_walk_loads_and_says_so(tmp_path: Path, friends_store: Path, embedder) -> None:
    line = {"task_id": "old-1", "conversation_id": "c", "category": "temporal", "question": "When did Ana move?",
            "gold_answer": "May 2023", "policy": "rag", "evidence_recall": 0.5, "context_tokens": 40,
            "steps": 0}  # fmt: skip
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "records.jsonl").write_text(json.dumps(line) + "\n")
    with running_server(make_service([friends_store], embedder, runs_dir=tmp_path)) as url:
        page = httpx.get(f"{url}/walk", params={"run": "old", "task": "old-1"})
        report = httpx.get(f"{url}/report").text
    assert page.status_code == 200 and 'id="no-walk"' in page.text and "When did Ana move?" in page.text
    assert 'id="walk-data"' not in page.text
    assert "old-1" in report and "/walk?run=old" not in report  # listed, but nothing to step through


def test_record_walk_without_runs_dir_is_404(live_server) -> None:
    response = httpx.get(f"{live_server.url}/walk", params={"run": EVAL_RUN, "task": "t"})
    assert response.status_code == 404 and "--runs-dir" in unescape(response.text)
