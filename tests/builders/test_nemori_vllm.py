"""NEMORI builder end to end against the real vLLM server (SmolLM2-135M): a complete, consistent graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.builders.nemori import NemoriBuilder, NemoriConfig
from memora_rl.llm.client import LLMConfig
from memora_rl.memory import open_store
from tests.builders.scripted_llm import small_synthetic


@pytest.mark.slow
@pytest.mark.vllm
def test_nemori_builds_a_consistent_graph_and_reruns_for_free(vllm_server, tmp_path: Path) -> None:
    conversation = small_synthetic()
    llm = LLMConfig(
        base_url=vllm_server.base_url, model=vllm_server.model, cache_path=tmp_path / "llm.sqlite", timeout_s=600
    )
    config = NemoriConfig(
        llm=llm,
        group_max_tokens=120,
        episode_max_tokens=120,
        predict_max_tokens=48,
        distill_max_tokens=160,
        reconcile_max_tokens=80,
        continue_max_tokens=120,
    )
    with open_store(tmp_path / "graph.sqlite") as store:
        report = NemoriBuilder(config).build(conversation, store)
        assert store.check_integrity().ok
        covered = [turn for episode in store.episodes(conversation.id) for turn in episode.source_turn_ids]
        assert sorted(covered) == sorted(conversation.turn_ids())
        for entry in store.entries(conversation.id):
            assert entry.source_turn_ids and set(entry.source_turn_ids) <= conversation.turn_ids()
    assert report.http_requests > 0 and report.turns == 16
    with open_store(tmp_path / "again.sqlite") as store:  # same response cache: no HTTP call at all
        rerun = NemoriBuilder(config).build(conversation, store)
        assert rerun.http_requests == 0 and rerun.llm_calls == report.llm_calls
        assert rerun.entries_created + rerun.entries_merged == report.entries_created + report.entries_merged
