"""The env over a real SQLite store with episodes: frontier link kinds and context modes from `EnvConfig`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memora_rl.core.tokens import count_tokens
from memora_rl.core.walk import FrontierNode, WalkLog
from memora_rl.data.records import Task
from memora_rl.env.config import EnvConfig
from memora_rl.env.registry import resolve_env_spec
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.judge import render_memory_context
from memora_rl.memory import EntryCandidate, Episode, SQLiteGraphStore, always_create
from memora_rl.policy.baselines import SemanticPolicy
from memora_rl.policy.runner import play_episode

JOB_TEXT = "Alma told Bruno that she started as a data analyst at Bluefin and that her desk faces the harbour."
# (abstraction, value, anchors, episode): e1 and e2 share an episode but no anchor
ENTRIES = [
    ("Alma's employer", "Alma works at Bluefin Analytics as a data analyst.", ["Alma + job"], "ep-job"),
    ("Alma's desk view", "Alma's desk faces the harbour.", ["Bluefin + office"], "ep-job"),
    ("Alma's pet", "Alma has a cat called Pepper.", ["Alma + pet"], "ep-pet"),
]
TASK = Task(
    id="t1", conversation_id="g", question="Where does Alma work?", answer="Bluefin", evidence=[], category="single-hop"
)


@pytest.fixture
def episodic_store(tmp_path: Path, embedder: Any) -> SQLiteGraphStore:
    store = SQLiteGraphStore(tmp_path / "graph.sqlite", embedder=embedder)
    store.add_episode(Episode(id="ep-job", graph_id="g", title="Alma's first day at Bluefin", text=JOB_TEXT))
    store.add_episode(Episode(id="ep-pet", graph_id="g", title="Alma's cat", text="Alma showed a photo of Pepper."))
    for abstraction, value, anchors, episode in ENTRIES:
        candidate = EntryCandidate(abstraction=abstraction, value=value, anchors=anchors, episode_ids=[episode])
        store.upsert_entry("g", candidate, always_create)
    yield store
    store.close()


def make_env(store: SQLiteGraphStore, embedder: Any, **config: Any) -> RetrievalEnv:
    env_config = EnvConfig(initial_top_k=1, frontier_limit=4, **config)
    return RetrievalEnv(store, env_config, tasks=[TASK], embedder=embedder)


def test_default_env_shows_neither_episodes_nor_episode_links(episodic_store, embedder):
    observation, info = make_env(episodic_store, embedder).reset(options={"task": TASK})
    assert info["working_set_ids"] == ["e0"]
    assert info["frontier"] == []  # e1 shares only an episode with e0
    assert "Episode" not in observation and JOB_TEXT not in observation


def test_episode_link_is_labelled_in_observation_and_info(episodic_store, embedder):
    env = make_env(episodic_store, embedder, frontier_links=["anchor", "episode"])
    observation, info = env.reset(options={"task": TASK})
    assert info["frontier"] == [{"id": "e1", "anchor": "Alma's first day at Bluefin", "via": "episode"}]
    assert "[e1] via episode \"Alma's first day at Bluefin\": Alma's desk view" in observation.splitlines()
    log = WalkLog()
    log.seen(observation, info)
    log.ended(observation, info)
    assert log.walk()[0].frontier == [FrontierNode(id="e1", anchor="Alma's first day at Bluefin", via="episode")]


def test_episodic_factual_mode_reads_the_episode_once(episodic_store, embedder):
    env = make_env(episodic_store, embedder, context_mode="episodic+factual", frontier_links=["episode"])
    observation, info = env.reset(options={"task": TASK})
    observation, _, _, _, info = env.step('{"action": "expand", "ids": ["e1"]}')
    lines = observation.splitlines()
    start = lines.index("Working set (2):")
    assert lines[start + 1 : start + 4] == [
        f'Episode "Alma\'s first day at Bluefin": {JOB_TEXT}',
        "[e0] Alma's employer: Alma works at Bluefin Analytics as a data analyst.",
        "[e1] Alma's desk view: Alma's desk faces the harbour.",
    ]
    assert observation.count(JOB_TEXT) == 1
    _, _, terminated, _, info = env.step('{"action": "stop"}')
    trajectory = info["trajectory"]
    assert terminated and trajectory.context_mode == "episodic+factual"
    assert [episode.id for episode in trajectory.episodes] == ["ep-job"]
    context = render_memory_context(trajectory.retrieved, trajectory.episodes, trajectory.context_mode)
    assert context.count(JOB_TEXT) == 1 and "- Alma's desk view: Alma's desk faces the harbour." in context
    assert trajectory.context_tokens == count_tokens(context)


@pytest.mark.parametrize("mode", ["factual", "episodic", "episodic+factual"])
def test_semantic_baseline_plays_each_context_mode_from_an_env_override(episodic_store, embedder, mode):
    spec = resolve_env_spec("synthetic", [f"env.context_mode={mode}", "env.frontier_links=[anchor,episode]"])
    assert spec.env.context_mode == mode and spec.env.frontier_links == ["anchor", "episode"]
    env = RetrievalEnv(episodic_store, spec.env, embedder=embedder)
    result = asyncio.run(play_episode(env, TASK, SemanticPolicy(), seed=0))
    trajectory = result.trajectory
    context = render_memory_context(trajectory.retrieved, trajectory.episodes, trajectory.context_mode)
    assert (JOB_TEXT in context) == (mode != "factual")
    assert ("- Alma's employer: " in context) == (mode != "episodic")
    assert trajectory.context_tokens > 0
