from __future__ import annotations

import pytest

from memora_rl.config import load_config
from memora_rl.errors import ConfigError
from memora_rl.memory import EntryCandidate, MemoryEntry, StoreConfig, always_create, same_speaker_merge


def entry(entry_id: str, speaker: str | None, value: str = "old") -> MemoryEntry:
    return MemoryEntry(id=entry_id, graph_id="g", abstraction="x", value=value, speaker=speaker)


@pytest.mark.parametrize(
    ("speaker", "similar", "action", "target", "merged_value"),
    [
        ("Alice", [], "create", None, None),
        ("Alice", [entry("e1", "alice"), entry("e2", "Bob")], "merge", "e1", None),
        ("Alice", [entry("e2", "Bob"), entry("e1", "Alice")], "create", None, None),
        (None, [entry("e3", None)], "merge", "e3", None),
        ("Alice", [entry("e1", "Alice", value="New ")], "merge", "e1", "New "),
    ],
)
def test_same_speaker_merge(speaker, similar, action, target, merged_value):
    decision = same_speaker_merge(EntryCandidate(abstraction="x", value="new", speaker=speaker), similar)
    assert (decision.action, decision.target_id, decision.merged_value) == (action, target, merged_value)


def test_always_create():
    assert always_create(EntryCandidate(abstraction="x", value="y"), [entry("e1", None)]).action == "create"


def test_store_config_validates(tmp_path):
    path = tmp_path / "store.yaml"
    path.write_text("upsert:\n  gamma: 0.9\nann_threshold: 5\n")
    config = load_config(StoreConfig, path, ["upsert.top_k=3"])
    assert (config.upsert.gamma, config.upsert.top_k, config.ann_threshold) == (0.9, 3, 5)
    with pytest.raises(ConfigError, match="gamma"):
        load_config(StoreConfig, None, ["upsert.gamma=2"])
    with pytest.raises(ConfigError, match="ann_dtype"):
        load_config(StoreConfig, None, ["ann_dtype=f64"])
