"""Extractive build of the first LoCoMo conversations: sizes, build time and QA evidence coverage.

Evidence coverage = share of the distinct evidence turns of the well-formed, resolvable,
non-excluded questions (the loader keeps only those ids) that are the source of at least
one entry. Two conversations (~20 s each) keep the suite short; `memora-rl graph build
--builder extractive` builds all ten. The graph is built once per test session into a
temporary store.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from memora_rl.builders.extractive import ExtractiveBuilder
from memora_rl.data.records import Corpus
from memora_rl.memory import SQLiteGraphStore, open_store

pytestmark = [pytest.mark.slow, pytest.mark.locomo]

CONVERSATIONS = 2
"""How many LoCoMo conversations (in file order) the test builds."""


@dataclass
class LocomoBuild:
    """The built store, the corpus it came from, and the build time per conversation (seconds)."""

    corpus: Corpus
    store: SQLiteGraphStore
    seconds: dict[str, float]


@pytest.fixture(scope="session")
def locomo_build(locomo_path: Path, tmp_path_factory: pytest.TempPathFactory) -> LocomoBuild:
    """The first `CONVERSATIONS` conversations and their tasks, built once with the default extractive config."""
    from memora_rl.data.locomo import load_locomo

    full = load_locomo(locomo_path)
    kept = full.conversations[:CONVERSATIONS]
    names = {conversation.id for conversation in kept}
    tasks = [task for task in full.tasks if task.conversation_id in names]
    corpus = full.model_copy(update={"conversations": kept, "tasks": tasks})
    store = open_store(tmp_path_factory.mktemp("locomo") / "locomo.sqlite")
    builder = ExtractiveBuilder()
    seconds = {}
    for conversation in corpus.conversations:
        started = time.perf_counter()
        builder.build(conversation, store)
        seconds[conversation.id] = time.perf_counter() - started
    yield LocomoBuild(corpus=corpus, store=store, seconds=seconds)
    store.close()


def evidence_coverage(corpus: Corpus, store: SQLiteGraphStore) -> tuple[int, int]:
    """(covered, total) distinct evidence turns of non-excluded questions."""
    evidence = {
        (task.conversation_id, turn_id) for task in corpus.tasks if not task.excluded for turn_id in task.evidence
    }
    sources = {
        (graph_id, turn_id)
        for graph_id in store.graph_ids()
        for entry in store.entries(graph_id)
        for turn_id in entry.source_turn_ids
    }
    return len(evidence & sources), len(evidence)


def test_locomo_build_sizes_time_and_evidence_coverage(locomo_build: LocomoBuild) -> None:
    corpus, store = locomo_build.corpus, locomo_build.store
    assert sorted(store.graph_ids()) == sorted(c.id for c in corpus.conversations)
    print(f"\n{'conversation':<14}{'turns':>7}{'entries':>9}{'anchors':>9}{'episodes':>10}{'anch/entry':>12}{'s':>8}")
    for conversation in corpus.conversations:
        counts = store.stats(conversation.id)
        turns = sum(len(session.turns) for session in conversation.sessions)
        assert counts["entries"] >= 0.7 * turns and counts["anchors"] > 0 and counts["episodes"] > 0
        print(
            f"{conversation.id:<14}{turns:>7}{counts['entries']:>9}{counts['anchors']:>9}{counts['episodes']:>10}"
            f"{counts['links'] / counts['entries']:>12.2f}{locomo_build.seconds[conversation.id]:>8.1f}"
        )
    covered, total = evidence_coverage(corpus, store)
    total_seconds = sum(locomo_build.seconds.values())
    print(f"total build {total_seconds:.1f} s; evidence coverage {covered}/{total} = {covered / total:.4f}")
    assert total > 100
    assert covered / total >= 0.95
    assert store.check_integrity().ok
