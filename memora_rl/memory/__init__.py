"""The harmonic memory graph: records, the stores (SQLite, PostgreSQL + pgvector), search and frontier."""

from memora_rl.memory.base_store import BaseGraphStore
from memora_rl.memory.config import StoreConfig, UpsertConfig
from memora_rl.memory.deciders import DEFAULT_DECIDER, always_create, same_speaker_merge
from memora_rl.memory.graph_copy import copy_graphs
from memora_rl.memory.postgres_store import PostgresGraphStore
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
from memora_rl.memory.sqlite_store import SQLiteGraphStore, is_postgres_url, open_store, store_exists
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
    "BaseGraphStore",
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
    "PostgresGraphStore",
    "SQLiteGraphStore",
    "SearchFilters",
    "SearchHit",
    "StoreConfig",
    "UpsertConfig",
    "UpsertResult",
    "ValueVersion",
    "always_create",
    "copy_graphs",
    "is_postgres_url",
    "open_store",
    "same_speaker_merge",
    "store_exists",
]
