"""Search links in the env: the frontier offers the search's next hits, and expanding one adds it."""

from __future__ import annotations

from typing import Any

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.registry import make_env
from tests.env.test_contract import SMALL_DATA

SEARCH_LINKS = ["env.frontier_links=[search]", "env.compact=false", "env.few_shot=false", "env.initial_top_k=2"]


def test_the_frontier_offers_the_searchs_next_hits_and_says_so(judge: Any) -> None:
    env, tasks = make_env("synthetic", split="all", overrides=[*SMALL_DATA["synthetic"], *SEARCH_LINKS], judge=judge)
    for task in tasks[:5]:
        observation, info = env.reset(options={"task": task})
        held = [entry.id for entry in env.snapshot().working]
        wider = [hit.entry_id for hit in env.store.search(task.conversation_id, task.question, k=len(held) + 20)]
        offered = [item["id"] for item in info["frontier"]]
        assert offered and not set(offered) & set(held)
        assert all(item["via"] == "search" and f'[{item["id"]}] via search "query"' in observation for item in
                   info["frontier"])  # fmt: skip
        assert offered[0] in wider, task.id  # the best of them is among the search's next hits
        env.step(format_action(ExpandAction(ids=[offered[0]])))
        assert offered[0] in {entry.id for entry in env.snapshot().working}
        assert offered[0] not in {item.entry_id for item in env.snapshot().frontier}
