"""The harmonic memory graph: records, the SQLite store, search and frontier."""

from memora_rl.memory.config import StoreConfig, UpsertConfig
from memora_rl.memory.deciders import DEFAULT_DECIDER, always_create, same_speaker_merge
from memora_rl.memory.records import (
    CueAnchor,
    EntryCandidate,
    EntryKind,
    Episode,
    FrontierItem,
    MemoryEntry,
    SearchHit,
    ValueVersion,
)
from memora_rl.memory.sqlite_store import SQLiteGraphStore, open_store
from memora_rl.memory.store import (
    Decider,
    GraphStore,
    IntegrityReport,
    MergeDecision,
    SearchFilters,
    UpsertResult,
)

__all__ = [
    "DEFAULT_DECIDER",
    "CueAnchor",
    "Decider",
    "EntryCandidate",
    "EntryKind",
    "Episode",
    "FrontierItem",
    "GraphStore",
    "IntegrityReport",
    "MemoryEntry",
    "MergeDecision",
    "SQLiteGraphStore",
    "SearchFilters",
    "SearchHit",
    "StoreConfig",
    "UpsertConfig",
    "UpsertResult",
    "ValueVersion",
    "always_create",
    "open_store",
    "same_speaker_merge",
]
