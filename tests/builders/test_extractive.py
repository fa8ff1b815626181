"""The extractive builder on a small synthetic conversation, with the real embedder and SQLite store."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from memora_rl.builders.cues import anchor_texts
from memora_rl.builders.extractive import ExtractiveBuilder, ExtractiveConfig, OverlapDecider
from memora_rl.builders.keyphrases import words
from memora_rl.builders.registry import BuilderRequest, builder_names, make_builder
from memora_rl.builders.statements import turn_statements
from memora_rl.config import load_config
from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.embedding import Embedder, get_embedder
from memora_rl.errors import ConfigError
from memora_rl.memory import EntryCandidate, MemoryEntry, SQLiteGraphStore, open_store

ANCHOR_RE = re.compile(r"^(?P<entity>[A-Z][\w'’.\- ]*) \+ (?P<aspect>[a-z0-9][a-z0-9'’\- ]*)$")


class CountingEmbedder:
    """Wraps the real embedder and counts `encode` calls."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls, self.dim = inner, 0, inner.dim

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return self.inner.encode(texts)


def _snapshot(store: SQLiteGraphStore, graph_id: str) -> list[tuple]:
    """Everything a build decides, in a comparable form (ids included: the store assigns them in order)."""
    anchor_text = {anchor.id: anchor.text for anchor in store.anchors(graph_id)}
    entries = [
        (e.id, e.abstraction, e.value, e.kind, tuple(e.source_turn_ids), tuple(e.episode_ids),
         tuple(sorted(anchor_text[a] for a in e.anchor_ids)), len(e.history))
        for e in store.entries(graph_id)
    ]  # fmt: skip
    episodes = [(e.id, e.title, tuple(e.source_turn_ids), e.start_time) for e in store.episodes(graph_id)]
    return entries + episodes


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, conversation: Conversation) -> tuple[SQLiteGraphStore, Path]:
    """The first synthetic conversation built once into a fresh store."""
    path = tmp_path_factory.mktemp("extractive") / "graph.sqlite"
    store = open_store(path)
    report = ExtractiveBuilder().build(conversation, store)
    assert not report.skipped and report.entries_created > 0
    yield store, path
    store.close()


def _content_turns(conversation: Conversation) -> list[Turn]:
    """Turns the builder's salience rule keeps."""
    config = ExtractiveConfig()
    return [
        turn
        for turn in conversation.turns()
        if turn_statements(turn, config.max_statement_words, config.min_content_words, conversation.speakers)
    ]


def test_every_content_turn_is_the_source_of_an_entry(built, conversation: Conversation) -> None:
    store, _ = built
    sources = {turn_id for entry in store.entries(conversation.id) for turn_id in entry.source_turn_ids}
    content = _content_turns(conversation)
    all_turns = list(conversation.turns())
    assert 0 < len(content) < len(all_turns), "the synthetic chat has both fillers and content"
    assert {turn.id for turn in content} <= sources
    assert sources <= conversation.turn_ids()


def test_greetings_and_fillers_are_skipped() -> None:
    def statements(text: str) -> list[str]:
        turn = Turn(id="D1:1", speaker="Caroline", text=text, session_index=1)
        return [s.text for s in turn_statements(turn, 50, 2, ["Caroline", "Melanie"])]

    assert statements("Hey Mel! Good to see you! How have you been?") == []
    assert statements("Thanks so much, that's awesome!") == []
    assert statements("I joined a pottery class last week.") == ["I joined a pottery class last week."]
    long_turn = " ".join(["I adopted a puppy named Rex from the shelter downtown."] * 6) + " Wow!"
    pieces = statements(long_turn)
    assert len(pieces) > 1 and all(len(piece.split()) <= 50 for piece in pieces)


def test_anchors_are_linked_and_the_store_is_consistent(built, conversation: Conversation) -> None:
    store, _ = built
    anchors = {anchor.id: anchor for anchor in store.anchors(conversation.id)}
    for entry in store.entries(conversation.id):
        assert 1 <= len(entry.anchor_ids) <= 3, entry
        for anchor_id in entry.anchor_ids:
            assert entry.id in anchors[anchor_id].entry_ids
    assert store.check_integrity().ok, store.check_integrity().problems
    shared = [anchor for anchor in anchors.values() if len(anchor.entry_ids) > 1]
    assert shared, "some anchors link several entries (the frontier needs them)"


def test_anchors_are_entity_plus_aspect_from_the_statement(built, conversation: Conversation) -> None:
    store, _ = built
    anchor_text = {anchor.id: anchor.text for anchor in store.anchors(conversation.id)}
    for entry in store.entries(conversation.id):
        value_words = set(words(" ".join([entry.value, *(version.value for version in entry.history)])))
        for anchor_id in entry.anchor_ids:
            match = ANCHOR_RE.match(anchor_text[anchor_id])
            assert match, anchor_text[anchor_id]
            entity = match.group("entity")
            assert entity in conversation.speakers or entity.split()[0].lower() in value_words, (entity, entry.value)
            assert set(words(match.group("aspect"))) <= value_words, (match.group("aspect"), entry.value)
        abstraction = ANCHOR_RE.match(entry.abstraction)
        assert abstraction, entry.abstraction
        subject = abstraction.group("entity")
        # the speaker, or the third party the statement opens with ("Hugo + adelaide")
        assert subject == entry.speaker or words(entry.value)[:1] == words(subject)[:1], (subject, entry.value)
        assert set(words(abstraction.group("aspect"))) <= value_words, (entry.abstraction, entry.value)


def test_a_statement_that_opens_with_a_third_party_is_about_them() -> None:
    """A name read mid-sentence elsewhere is the entity of a statement it opens; the speaker stays its speaker."""
    texts = [
        "My cousin Hugo came over for lunch, it was lovely.",
        "Hugo just moved to Adelaide, I will miss him so much.",
        "Pottery class made me calm again this week.",
    ]
    turns = [Turn(id=f"t{i}", speaker="Talia", text=text, session_index=1) for i, text in enumerate(texts, start=1)]
    conversation = Conversation(id="c", speakers=["Talia", "Ben"], sessions=[Session(index=1, turns=turns)])
    store = open_store(":memory:")
    ExtractiveBuilder().build(conversation, store)
    by_turn = {entry.source_turn_ids[0]: entry for entry in store.entries("c")}
    assert by_turn["t2"].abstraction.startswith("Hugo + ") and by_turn["t2"].speaker == "Talia"
    anchors = {anchor.id: anchor.text for anchor in store.anchors("c")}
    assert any(anchors[a].startswith("Talia + ") for a in by_turn["t2"].anchor_ids)
    assert by_turn["t1"].abstraction.startswith("Talia + ")
    assert by_turn["t3"].abstraction.startswith("Talia + ")


def test_episodes_cover_every_turn_once_and_entries_point_to_them(built, conversation: Conversation) -> None:
    store, _ = built
    episodes = store.episodes(conversation.id)
    covered = [turn_id for episode in episodes for turn_id in episode.source_turn_ids]
    assert sorted(covered) == sorted(turn.id for turn in conversation.turns())
    assert all(episode.start_time is not None and episode.title for episode in episodes)
    episode_of = {turn_id: episode.id for episode in episodes for turn_id in episode.source_turn_ids}
    for entry in store.entries(conversation.id):
        assert entry.episode_ids == [episode_of[entry.source_turn_ids[0]]]
        assert entry.kind in ("episodic", "factual")


def test_build_is_deterministic(built, conversation: Conversation, tmp_path: Path) -> None:
    store, _ = built
    with open_store(tmp_path / "again.sqlite") as again:
        ExtractiveBuilder().build(conversation, again)
        assert _snapshot(again, conversation.id) == _snapshot(store, conversation.id)


def test_resume_skips_a_built_conversation_and_finishes_a_partial_one(
    conversation: Conversation, synthetic_corpus, tmp_path: Path
) -> None:
    second = synthetic_corpus.conversations[1]
    builder = ExtractiveBuilder()
    with open_store(tmp_path / "resume.sqlite") as store:
        builder.build(conversation, store)
        builder.build(second, store)
        before = _snapshot(store, conversation.id)
        counting = CountingEmbedder(get_embedder())
        report = ExtractiveBuilder(embedder=counting).build(conversation, store)
        assert report.skipped and report.entries_created == report.entries_merged == report.episodes_added == 0
        assert counting.calls == 0, "a skipped conversation embeds nothing"
        assert _snapshot(store, conversation.id) == before
        # simulate a build interrupted after some writes: drop the last entry, then resume
        last = store.entries(second.id)[-1]
        store.delete_entry(second.id, last.id)
        report = builder.build(second, store)
        assert not report.skipped and report.entries_created == 1 and report.episodes_added == 0
        assert [e.value for e in store.entries(second.id)][-1] == last.value
        assert store.check_integrity().ok


def test_change_point_segmentation_covers_sessions_within_bounds(conversation: Conversation) -> None:
    config = ExtractiveConfig(segmentation="change_point", min_episode_turns=3, max_episode_turns=6)
    plan = ExtractiveBuilder(config).plan(conversation, conversation.id)
    for session in conversation.sessions:
        segments = [s.episode.source_turn_ids for s in plan if s.episode.id.startswith(f"ep-s{session.index}-")]
        assert [turn_id for segment in segments for turn_id in segment] == [turn.id for turn in session.turns]
        assert all(len(segment) <= 6 for segment in segments)
        assert all(len(segment) >= 3 for segment in segments[:-1])


def test_overlap_decider_merges_only_near_identical_statements() -> None:
    decide = OverlapDecider(min_overlap=0.8)
    candidate = EntryCandidate(abstraction="Ann + pottery", value="I love my pottery class.", speaker="Ann")

    def entry(value: str, speaker: str = "Ann") -> MemoryEntry:
        return MemoryEntry(id="e1", graph_id="g", abstraction="Ann + pottery", value=value, speaker=speaker)

    assert decide(candidate, [entry("I love my pottery class!")]).action == "merge"
    assert decide(candidate, [entry("My pottery class starts on Monday.")]).action == "create"
    assert decide(candidate, [entry("I love my pottery class.", speaker="Bob")]).action == "create"


@pytest.mark.parametrize(
    ("aspects", "names", "expected"),
    [
        (["pottery"], [], ["Ann + pottery"]),
        (["pottery", "clay"], ["Paris"], ["Ann + pottery", "Paris + pottery", "Ann + paris"]),
        (["paris trip"], ["Paris"], ["Ann + paris trip", "Ann + paris"]),
        (["paris trip", "louvre"], ["Paris", "Bob"], ["Ann + paris trip", "Paris + louvre", "Ann + paris"]),
        (["a", "b", "c"], [], ["Ann + a", "Ann + b", "Ann + c"]),
    ],
)
def test_anchor_texts(aspects: list[str], names: list[str], expected: list[str]) -> None:
    assert anchor_texts("Ann", aspects, names, max_anchors=3) == expected


def test_registry_and_config_errors(tmp_path: Path) -> None:
    assert "extractive" in builder_names()
    with pytest.raises(ConfigError, match=r"Unknown builder 'nope'\. Valid builders: .*extractive"):
        make_builder("nope")
    with pytest.raises(ConfigError, match="min_episode_turns"):
        make_builder("extractive", BuilderRequest(overrides=["min_episode_turns=30", "max_episode_turns=20"]))
    with pytest.raises(ConfigError, match="segmentation"):
        load_config(ExtractiveConfig, None, ["segmentation=sliding"])
    config_file = tmp_path / "extractive.yaml"
    config_file.write_text("window_turns: 4\n")
    builder = make_builder("extractive", BuilderRequest(config_path=config_file))
    assert isinstance(builder, ExtractiveBuilder) and builder.config.window_turns == 4


def test_shipped_yaml_matches_the_defaults() -> None:
    path = Path(__file__).resolve().parents[2] / "configs" / "builders" / "extractive.yaml"
    assert load_config(ExtractiveConfig, path) == ExtractiveConfig()
