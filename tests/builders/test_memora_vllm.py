"""Memora builder end to end against the real vLLM server (SmolLM2-135M): a complete, consistent graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.builders.memora import MemoraBuilder, MemoraConfig
from memora_rl.llm.client import LLMConfig
from memora_rl.memory import open_store
from tests.builders.scripted_llm import small_synthetic


@pytest.mark.slow
@pytest.mark.vllm
def test_memora_builds_a_consistent_graph_and_reruns_for_free(vllm_server, tmp_path: Path) -> None:
    conversation = small_synthetic()
    llm = LLMConfig(
        base_url=vllm_server.base_url, model=vllm_server.model, cache_path=tmp_path / "llm.sqlite", timeout_s=600
    )
    config = MemoraConfig(llm=llm, segment_max_tokens=120, extract_max_tokens=160, decide_max_tokens=80)
    with open_store(tmp_path / "graph.sqlite") as store:
        report = MemoraBuilder(config).build(conversation, store)
        assert store.check_integrity().ok
        covered = [turn for episode in store.episodes(conversation.id) for turn in episode.source_turn_ids]
        assert sorted(covered) == sorted(conversation.turn_ids())
        for entry in store.entries(conversation.id):
            assert entry.source_turn_ids and set(entry.source_turn_ids) <= conversation.turn_ids()
    assert report.http_requests > 0 and report.turns == 16
    with open_store(tmp_path / "again.sqlite") as store:  # same response cache: no HTTP call at all
        rerun = MemoraBuilder(config).build(conversation, store)
        assert rerun.http_requests == 0 and rerun.llm_calls == report.llm_calls
        assert rerun.entries_created + rerun.entries_merged == report.entries_created + report.entries_merged
