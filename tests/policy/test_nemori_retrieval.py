"""NEMORI retrieval over a real SQLite store: section order, tokens, evidence from raw messages, bad configs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.embedding import Embedder, get_embedder
from memora_rl.errors import ConfigError, EvalError, GraphError
from memora_rl.evaluation.policies import parse_policy_spec
from memora_rl.judge.graders import turn_recall
from memora_rl.memory import EntryCandidate, Episode, SQLiteGraphStore, always_create
from memora_rl.policy.context_baselines import count_words
from memora_rl.policy.nemori_retrieval import (
    EPISODES_HEADING,
    FACTS_HEADING,
    MESSAGES_HEADING,
    NemoriRetrieval,
    NemoriRetrievalConfig,
    nemori_config,
)

GRAPH_ID = "conv-nemori"
QUESTION = "What is special about Alice's new office at Nova?"
SESSIONS = [
    [
        ("Alice", "Guess what, I started at Nova on Monday!"),
        ("Bob", "Congrats! What do you do there?"),
        ("Alice", "Backend work. And the office has a rooftop garden where we eat lunch."),
        ("Bob", "That sounds lovely."),
    ],
    [
        ("Bob", "We went to the shelter on Saturday."),
        ("Bob", "We adopted a beagle puppy and named him Rex."),
        ("Alice", "Rex is such a cute name!"),
    ],
]
# NEMORI-shaped episodes: a cue and a narrative that is not the raw messages (the rooftop garden is left out)
EPISODES = [
    ("ep-job", "Alice starts her new job at Nova", "Alice told Bob she began working at Nova as a backend engineer."),
    ("ep-pet", "Bob adopts a beagle", "Bob described adopting a beagle puppy called Rex from the shelter."),
]
# (abstraction, value, episode, source turns): no fact names the rooftop garden (turn D1:3)
FACTS = [
    ("Alice + employer", "Alice works at Nova as a backend engineer", "ep-job", ["D1:1"]),
    ("Bob + pet", "Bob adopted a beagle named Rex", "ep-pet", ["D2:2"]),
]


def conversation() -> Conversation:
    """Two dated sessions, turn ids `D<session>:<n>` as in LoCoMo."""
    sessions = []
    for index, lines in enumerate(SESSIONS, start=1):
        turns = [
            Turn(id=f"D{index}:{n}", speaker=speaker, text=text, session_index=index)
            for n, (speaker, text) in enumerate(lines, start=1)
        ]
        sessions.append(Session(index=index, time=datetime(2026, 5, index), turns=turns))
    return Conversation(id=GRAPH_ID, speakers=["Alice", "Bob"], sessions=sessions)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder()


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Iterator[SQLiteGraphStore]:
    """The conversation's graph as NEMORI builds it: narrative episodes over their turns, facts under them."""
    opened = SQLiteGraphStore(tmp_path / "graph.sqlite", embedder=embedder)
    for (episode_id, cue, narrative), session in zip(EPISODES, conversation().sessions, strict=True):
        turn_ids = [turn.id for turn in session.turns]
        episode = Episode(
            id=episode_id, graph_id=GRAPH_ID, title=cue, text=narrative, source_turn_ids=turn_ids,
            start_time=session.time,
        )  # fmt: skip
        opened.add_episode(episode)
    for abstraction, value, episode_id, sources in FACTS:
        candidate = EntryCandidate(
            abstraction=abstraction, value=value, kind="semantic", episode_ids=[episode_id],
            source_turn_ids=sources, anchors=[abstraction],
        )  # fmt: skip
        opened.upsert_entry(GRAPH_ID, candidate, always_create)
    yield opened
    opened.close()


def retrieve(store: SQLiteGraphStore, **config: int) -> tuple[str, object]:
    baseline = NemoriRetrieval(store, NemoriRetrievalConfig(**config))
    context = baseline.retrieve_context(conversation(), QUESTION)
    return context.text, context


def test_context_holds_episodes_then_facts_then_the_top_episodes_raw_messages(store):
    text, context = retrieve(store, top_episodes=2, top_facts=2, raw_episodes=1)
    assert context.episode_ids == ["ep-job", "ep-pet"] and context.raw_turn_ids == ["D1:1", "D1:2", "D1:3", "D1:4"]
    narrative = text.index("Alice told Bob she began working at Nova")
    fact = text.index("- Alice + employer: Alice works at Nova as a backend engineer")
    raw = text.index("[2026-05-01] Alice: Backend work. And the office has a rooftop garden where we eat lunch.")
    assert text.index(EPISODES_HEADING) < narrative < text.index(FACTS_HEADING) < fact
    assert fact < text.index(MESSAGES_HEADING) < raw
    assert "## Alice starts her new job at Nova [2026-05-01]" in text
    messages = text[text.index(MESSAGES_HEADING) :]
    assert "Rex is such a cute name" not in messages  # only the top episode shows its raw messages
    assert context.tokens == count_words(text) > 0
    assert set(context.retrieved_ids) == {entry.id for entry in store.entries(GRAPH_ID)}

    config = NemoriRetrievalConfig(top_episodes=2, top_facts=2, raw_episodes=1)
    by_characters = NemoriRetrieval(store, config, count_tokens=len)
    counted = by_characters.retrieve_context(conversation(), QUESTION)
    assert counted.text == text and counted.tokens == len(text)


def test_evidence_recall_counts_the_raw_messages_turns(store):
    """The rooftop garden (D1:3) is in no fact's provenance: only the top episode's raw messages cover it."""
    _, shown = retrieve(store, top_episodes=1, top_facts=1, raw_episodes=1)
    _, hidden = retrieve(store, top_episodes=1, top_facts=1, raw_episodes=0)
    assert turn_recall(["D1:3"], shown.turn_ids) == 1.0
    assert turn_recall(["D1:3"], hidden.turn_ids) == 0.0
    assert MESSAGES_HEADING not in hidden.text
    assert "D1:1" in hidden.turn_ids  # the fact's (and the episode's entry's) source turn still counts


def test_an_episode_without_source_turns_shows_its_entries_turns(store):
    store.add_episode(Episode(id="ep-job", graph_id=GRAPH_ID, title=EPISODES[0][1], text=EPISODES[0][2]))
    _, context = retrieve(store, top_episodes=1, top_facts=1, raw_episodes=1)
    assert context.episode_ids == ["ep-job"] and context.raw_turn_ids == ["D1:1"]


def test_a_conversation_without_a_graph_is_a_graph_error(store):
    other = conversation().model_copy(update={"id": "conv-missing"})
    with pytest.raises(GraphError, match="conv-missing"):
        NemoriRetrieval(store).retrieve_context(other, QUESTION)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"top_episodes": 0}, "top_episodes"),
        ({"top_facts": -1}, "top_facts"),
        ({"raw_episodes": 3, "top_episodes": 2}, "raw_episodes=3 exceeds top_episodes=2"),
        ({"top_k": 3}, "top_k"),
    ],
)
def test_bad_config_is_a_config_error_naming_the_field(values, field):
    with pytest.raises(ConfigError, match=field):
        nemori_config(values)


def test_policy_spec_parses_nemori_options_and_names_the_run():
    assert parse_policy_spec("nemori").name == "nemori"
    assert parse_policy_spec("nemori:top_episodes=10,top_facts=20,raw_episodes=2").name == "nemori"
    assert parse_policy_spec("nemori:top_episodes=5, raw_episodes=1").name == "nemori-e5-f20-r1"
    with pytest.raises(ConfigError, match="top_facts"):
        parse_policy_spec("nemori:top_facts=0")
    with pytest.raises(EvalError, match="key=N"):
        parse_policy_spec("nemori:top_facts=many")


def test_retrieval_over_a_nemori_built_graph_shows_the_narrative_and_the_messages_behind_it(tmp_path, embedder):
    """The real NEMORI builder (scripted LLM): the hiking narrative, then the hiking messages of every session."""
    from memora_rl.builders.nemori import NemoriBuilder, NemoriConfig
    from tests.builders.scripted_llm import ScriptedEndpoint, scripted_client
    from tests.builders.test_nemori import HIKE, two_buffer_conversation, two_buffer_responder

    talk = two_buffer_conversation()
    client = scripted_client(ScriptedEndpoint(two_buffer_responder), tmp_path / "llm.sqlite")
    with SQLiteGraphStore(tmp_path / "nemori.sqlite", embedder=embedder) as built:
        NemoriBuilder(NemoriConfig(), client=client, embedder=embedder).build(talk, built)
        context = NemoriRetrieval(built, NemoriRetrievalConfig(raw_episodes=1)).retrieve_context(
            talk, "Where do Alice and Bob go hiking?"
        )
    hike_turns = [turn.id for turn in talk.turns() if "hike" in turn.text]
    assert context.text.index(HIKE) < context.text.index(MESSAGES_HEADING)
    assert context.raw_turn_ids == hike_turns and {turn[:2] for turn in hike_turns} == {"D1", "D2", "D3"}
    assert turn_recall(hike_turns, context.turn_ids) == 1.0
    messages = context.text[context.text.index(MESSAGES_HEADING) :]
    assert "More hike plans: we need boots." in messages and "I work at Nova now." not in messages
