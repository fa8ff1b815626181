"""Retrieve: walk one graph with the served policy and shape the result (entries, episodes, walk, context).

The walk is the retrieval MDP itself (`RetrievalEnv`, same renderer and parser as training
and evaluation). It runs on a worker thread, because env steps are blocking CPU and SQLite
work; the policy's `act` is handed in as a plain callable, so the HTTP app can run an async
policy (an LLM client bound to the server's event loop) on that loop while the env stays off it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from memora_rl.core.context import build_context
from memora_rl.core.trajectory import Trajectory
from memora_rl.core.walk import WalkLog, WalkStep
from memora_rl.data.records import Task
from memora_rl.env.config import EnvConfig
from memora_rl.env.deps import FrontierRanker, Judge
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.errors import ConfigError, RolloutError
from memora_rl.judge import render_memory_context
from memora_rl.memory.records import Episode, MemoryEntry
from memora_rl.memory.store import GraphStore
from memora_rl.policy.base import Message
from memora_rl.policy.chat import chat_opener
from memora_rl.serve.limits import Deadline
from memora_rl.serve.schemas import ContextMode, RetrieveRequest, RetrieveResponse

logger = logging.getLogger(__name__)

ActFn = Callable[[list[Message], dict[str, Any]], str]
"""The policy's next action text for the chat so far and the env's latest info."""


def env_config_for(
    request: RetrieveRequest, base: EnvConfig, default_budget: float, max_budget: float, top_k: int
) -> EnvConfig:
    """The env settings of one request: `base` with the request's budget and top-k, or the server's defaults.

    Raises:
        ConfigError: the requested budget is above the server's `max_budget` (names the field and the fix).
    """
    budget = request.budget if request.budget is not None else default_budget
    if budget > max_budget:
        raise ConfigError(
            f"budget: {budget:g} is above this server's limit of {max_budget:g}; send budget <= {max_budget:g}."
        )
    return walk_env(base, budget, request.top_k or top_k)


def walk_env(base: EnvConfig, budget: float, top_k: int) -> EnvConfig:
    """`base` (the served env's settings) at one walk's budget, first-search size and step limit."""
    return base.model_copy(update={"budget": budget, "initial_top_k": top_k, "max_steps": walk_steps(budget)})


def walk_steps(budget: float) -> int:
    """Most steps of a served walk: the budget's worth of unit-cost actions, a stop, and one spare.

    >>> walk_steps(6.0)
    8
    """
    return max(1, int(budget) + 2)


def context_text(entries: list[MemoryEntry], episodes: list[Episode], mode: ContextMode) -> str:
    """The context an answerer reads, in the request's mode (`memora_rl.core.context`).

    >>> entry = MemoryEntry(id="e1", graph_id="g", abstraction="Alice's employer", value="Alice works at Nova")
    >>> context_text([entry], [], "factual")
    "- Alice's employer: Alice works at Nova"
    """
    return render_memory_context(entries, episodes, mode)


def play_walk(
    env: RetrievalEnv, task: Task, act: ActFn, deadline: Deadline | None = None
) -> tuple[list[WalkStep], dict[str, Any], float]:
    """Play one episode, recording each state and action; returns (walk, final info, search seconds).

    Raises:
        RequestTimeoutError: `deadline` passed before a step (checked before each of the policy's actions).
    """
    observation, info = env.reset(seed=0, options={"task": task})
    search_s = env.last_search_s
    messages = chat_opener(env.config)(observation)
    log = WalkLog()
    for step in range(env.config.max_steps + 1):
        if deadline is not None:
            deadline.check(f"walking (step {step + 1})")
        log.seen(observation, info)
        text = act(messages, dict(info))
        observation, _, terminated, truncated, info = env.step(text)
        search_s += env.last_search_s
        log.acted(text, info)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": observation}]
        if terminated or truncated:
            log.ended(observation, info)
            return log.walk() or [], dict(info), search_s
    raise RolloutError(f"The walk on {task.conversation_id!r} did not end within {env.config.max_steps} steps.")


def retrieve(
    store: GraphStore,
    request: RetrieveRequest,
    env_config: EnvConfig,
    act: ActFn,
    policy_name: str,
    judge: Judge,
    deadline: Deadline | None = None,
    ranker: FrontierRanker | None = None,
) -> RetrieveResponse:
    """Walk graph `request.graph` of `store` for `request.question` and return what the walk retrieved.

    `judge` scores the walk twice: in the env, on the env's own measure of the context, then here on the
    tokens of the context this answer carries (`request.context_mode`'s text, as the client reads it), so
    that `reward_components["context_tokens"]` and its `context_cost` agree with `context_tokens`. `ranker`
    orders and scores each frontier where `env_config.frontier_ranker` is `learned`.

    Raises:
        RequestTimeoutError: `deadline` passed during the walk.
    """
    started = time.perf_counter()
    task = Task(id=f"live-{uuid.uuid4().hex[:12]}", conversation_id=request.graph, question=request.question,
                answer="", category="open-domain")  # fmt: skip
    env = RetrievalEnv(store, config=env_config, judge=judge, ranker=ranker)
    walk, info, search_s = play_walk(env, task, act, deadline)
    trajectory: Trajectory = info["trajectory"]
    entries = trajectory.retrieved
    episode_ids = list(dict.fromkeys(episode_id for entry in entries for episode_id in entry.episode_ids))
    episodes = store.get_episodes(request.graph, episode_ids)
    context = context_text(entries, episodes, request.context_mode)
    tokens = build_context(entries, episodes, request.context_mode).tokens  # 0 without entries
    scored = judge.score(trajectory.model_copy(update={"context_tokens": tokens}))
    return RetrieveResponse(
        graph=request.graph,
        question=request.question,
        policy=policy_name,
        entries=entries,
        episodes=episodes,
        walk=walk,
        stop_reason=trajectory.stop_reason,
        budget=trajectory.budget,
        budget_spent=trajectory.budget_spent,
        reward_components={name: float(value) for name, value in scored.components.items()},
        context=context,
        context_tokens=tokens,
        latency_ms=(time.perf_counter() - started) * 1000.0,
        search_ms=search_s * 1000.0,
    )
