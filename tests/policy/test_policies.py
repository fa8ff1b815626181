"""Baselines act validly over the real env (hand-filled graph); LLM policies; non-graph context baselines."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import httpx
import pytest

from memora_rl.core.action_schema import ActionLimits, action_schema
from memora_rl.core.parse import ActionParseError, parse_action
from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.env.config import EnvConfig
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.errors import ConfigError
from memora_rl.judge import TrajectoryJudge
from memora_rl.llm.client import LLMClient, LLMConfig
from memora_rl.policy.baselines import (
    CostModel,
    HeuristicPolicy,
    RandomPolicy,
    SemanticPolicy,
    make_baseline,
)
from memora_rl.policy.context_baselines import FullContextBaseline, RagBaseline, chunk_conversation, count_words
from memora_rl.policy.llm_policy import LLMPolicyConfig, ServerLLMPolicy, TransformersPolicy
from memora_rl.policy.runner import run_episodes
from tests.policy.graph import TASKS, PolicyTestStore

SMALL = {"initial_top_k": 2, "frontier_limit": 4}


@pytest.fixture(scope="module")
def store() -> PolicyTestStore:
    return PolicyTestStore()


def play(store, policy, config: EnvConfig | None = None, repeats: int = 2):
    config = config or EnvConfig(**SMALL)
    judge = TrajectoryJudge(config.judge, embedder=store.embedder)
    make_env = lambda: RetrievalEnv(store, config, judge=judge, embedder=store.embedder)  # noqa: E731
    return asyncio.run(run_episodes(make_env, list(TASKS) * repeats, policy, concurrency=3, seed=7, progress=False))


@pytest.mark.parametrize("policy", [SemanticPolicy(), HeuristicPolicy(), RandomPolicy(seed=3)], ids=lambda p: p.name)
def test_baselines_act_validly(store, policy):
    results = play(store, policy)
    for result in results:
        actions = result.trajectory.actions
        assert actions, "every episode takes at least one action"
        assert result.trajectory.invalid_actions == 0, [a.error for a in actions]
        assert all(not isinstance(parse_action(a.text), ActionParseError) for a in actions)


def test_semantic_stops_at_once(store):
    for result in play(store, SemanticPolicy(), repeats=1):
        assert [a.kind for a in result.trajectory.actions] == ["stop"]
        assert result.trajectory.budget_spent == 0


def test_heuristic_spends_the_budget(store):
    config = EnvConfig(budget=4.0, **SMALL)
    costs = CostModel.from_env_config(config)
    for result in play(store, HeuristicPolicy(costs), config, repeats=1):
        trajectory = result.trajectory
        assert trajectory.budget_spent == pytest.approx(4.0)
        assert trajectory.stop_reason == "budget"
        assert {a.kind for a in trajectory.actions} == {"expand"}


def test_heuristic_stops_when_frontier_is_empty_or_unaffordable():
    policy = HeuristicPolicy(CostModel(expand_cost_per_id=1.0, max_ids_per_expand=3))
    frontier = [{"id": "e2", "anchor": "a"}, {"id": "e3", "anchor": "b"}, {"id": "e9", "anchor": "c"}]
    run = lambda info: json.loads(asyncio.run(policy.act([], info)))  # noqa: E731
    assert run({"budget_left": 2.5, "frontier": frontier, "working_set_ids": ["e1"]}) == {
        "action": "expand",
        "ids": ["e2", "e3"],
    }
    assert run({"budget_left": 8.0, "frontier": frontier, "working_set_ids": ["e2"]})["ids"] == ["e3", "e9"]
    assert run({"budget_left": 0.5, "frontier": frontier, "working_set_ids": []}) == {"action": "stop"}
    assert run({"budget_left": 8.0, "frontier": [], "working_set_ids": []}) == {"action": "stop"}


def test_random_is_reproducible_per_seed(store):
    texts = lambda seed: [[a.text for a in r.trajectory.actions] for r in play(store, RandomPolicy(seed))]  # noqa: E731
    assert texts(11) == texts(11)
    assert texts(11) != texts(12)


def test_make_baseline_lists_valid_names():
    assert make_baseline("heuristic").name == "heuristic"
    with pytest.raises(ConfigError, match="heuristic"):
        make_baseline("greedy")


def test_server_policy_returns_the_reply_and_sends_limits():
    bodies = []

    def endpoint(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        reply = {"choices": [{"message": {"content": '{"action": "stop"}'}, "finish_reason": "stop"}], "usage": {}}
        return httpx.Response(200, json=reply)

    client = LLMClient(
        LLMConfig(base_url="http://policy.test/v1", model="tiny", cache=False), transport=httpx.MockTransport(endpoint)
    )
    policy = ServerLLMPolicy(client, max_new_tokens=24, temperature=0.7)
    assert asyncio.run(policy.act([{"role": "user", "content": "hi"}], {})) == '{"action": "stop"}'
    assert bodies[0]["max_tokens"] == 24 and bodies[0]["temperature"] == 0.7


def scripted_client(*replies: str) -> tuple[LLMClient, list[dict]]:
    bodies: list[dict] = []

    def endpoint(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        text = replies[min(len(bodies), len(replies)) - 1]
        return httpx.Response(200, json={"choices": [{"message": {"content": text}}], "usage": {}})

    config = LLMConfig(base_url="http://policy.test/v1", model="tiny", cache=False)
    return LLMClient(config, transport=httpx.MockTransport(endpoint)), bodies


def test_constrained_policy_sends_the_state_schema():
    client, bodies = scripted_client('{"action": "expand", "ids": ["m2"]}')
    info = {"frontier": [{"id": "m2", "anchor": "a", "via": "anchor"}, {"id": "m5", "anchor": "b"}], "budget_left": 1.0}
    limits = ActionLimits(max_ids_per_expand=2)
    policy = ServerLLMPolicy(client, max_new_tokens=48, constrained=True, limits=limits)
    text = asyncio.run(policy.act([{"role": "user", "content": "hi"}], info))
    assert json.loads(text) == {"action": "expand", "ids": ["m2"]}
    schema = bodies[0]["structured_outputs"]["json"]  # vLLM's structured outputs field, one schema per turn
    assert schema == action_schema(["m2", "m5"], 1.0, limits.for_max_new_tokens(48))
    assert schema["anyOf"][0]["properties"]["ids"] == {
        "type": "array", "items": {"enum": ["m2", "m5"]}, "minItems": 1, "maxItems": 1,
    }  # fmt: skip
    assert "response_format" not in bodies[0]


def test_unconstrained_policy_sends_no_schema_and_passes_any_reply_on():
    client, bodies = scripted_client("no json here")
    text = asyncio.run(ServerLLMPolicy(client).act([{"role": "user", "content": "hi"}], {"frontier": []}))
    assert text == "no json here" and len(bodies) == 1  # the env records it as invalid
    assert "structured_outputs" not in bodies[0]


def test_server_policy_config_needs_a_url():
    with pytest.raises(ConfigError, match="base_url"):
        LLMPolicyConfig(backend="server")
    with pytest.raises(ConfigError, match="constrained"):
        LLMPolicyConfig(backend="transformers", constrained=True)


@pytest.mark.slow
def test_transformers_policy_generates_with_the_tiny_model(tiny_model_dir):
    from memora_rl.llm.registry import load_causal_lm, load_tokenizer

    model = load_causal_lm(str(tiny_model_dir), dtype="float32")
    policy = TransformersPolicy(model, load_tokenizer(str(tiny_model_dir)), max_new_tokens=8)
    messages = [{"role": "user", "content": 'Reply with {"action": "stop"}.'}]  # short: the generation path is tested
    first = asyncio.run(policy.act(messages, {}))
    assert isinstance(first, str) and first
    assert asyncio.run(policy.act(messages, {})) == first  # greedy decoding is deterministic


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
def test_server_policy_plays_episodes_against_vllm(vllm_server, store, constrained):
    client = LLMClient(LLMConfig(base_url=vllm_server.base_url, model=vllm_server.model, cache=False))
    policy = ServerLLMPolicy(client, max_new_tokens=48, constrained=constrained)
    results = play(store, policy, EnvConfig(max_steps=2, **SMALL), repeats=1)
    assert len(results) == len(TASKS)
    assert all(1 <= len(r.trajectory.actions) <= 2 for r in results)  # valid or not, every turn is recorded
    if constrained:  # guided decoding: every reply parses (the env may still reject ids outside the frontier)
        assert all(
            not isinstance(parse_action(a.text), ActionParseError) for r in results for a in r.trajectory.actions
        )


def conversation(turn_words: int = 60, turns_per_session: int = 10, sessions: int = 3) -> Conversation:
    filler = "lorem " * (turn_words - 4)
    built = []
    for s in range(1, sessions + 1):
        turns = [
            Turn(id=f"D{s}:{t}", speaker="Ana", text=f"{filler}note {s} {t}", session_index=s)
            for t in range(1, turns_per_session + 1)
        ]
        built.append(Session(index=s, time=datetime(2023, 5, s), turns=turns))
    turns = [
        t.model_copy(update={"text": "I adopted a puppy named Biscuit last week"}) if t.id == "D2:4" else t
        for t in built[1].turns
    ]
    built[1] = Session(index=2, time=built[1].time, turns=turns)
    return Conversation(id="conv", speakers=["Ana"], sessions=built)


def test_chunks_respect_the_token_size():
    chunks = chunk_conversation(conversation(), 500, count_words)
    assert all(count_words(chunk.text) <= 500 for chunk in chunks)
    assert [i for chunk in chunks for i in chunk.turn_ids] == [t.id for t in conversation().turns()]


def test_rag_finds_the_evidence_chunk(embedder):
    rag = RagBaseline(embedder=embedder, chunk_tokens=500, top_k=3)
    context = rag.retrieve_context(conversation(), "What is the name of Ana's puppy?")
    assert context.turn_ids[0] == "D1:9" and "D2:4" in context.turn_ids  # the evidence chunk ranks first
    assert "Biscuit" in context.text
    assert context.tokens == count_words(context.text) <= 3 * 500


def test_full_context_covers_every_turn():
    conv = conversation()
    context = FullContextBaseline().retrieve_context(conv, "anything")
    assert context.turn_ids == [t.id for t in conv.turns()]
    assert context.tokens == count_words(context.text)
    assert context.text.startswith("[2023-05-01] Ana: ")
