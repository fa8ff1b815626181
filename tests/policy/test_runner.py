"""The batched runner: concurrency, order, seeds, timing, and failures that propagate.

Wall-clock speed-ups from concurrency are measured by `benchmarks/runner_overlap.py`, not asserted
here (2 shared cores make timing assertions flaky); overlap is asserted by counting calls in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memora_rl.core.trajectory import ActionRecord, Trajectory
from memora_rl.data.records import Task
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.errors import LLMError, RolloutError
from memora_rl.judge import TrajectoryJudge
from memora_rl.policy.base import Policy
from memora_rl.policy.baselines import HeuristicPolicy
from memora_rl.policy.runner import run_episodes, run_episodes_sync
from tests.policy.graph import TASKS, PolicyTestStore

DELAY_S = 0.05


def make_tasks(count: int) -> list[Task]:
    return [
        Task(id=f"t{i}", conversation_id="c", question=f"question {i}?", answer="a", category="single-hop")
        for i in range(count)
    ]


SEARCH_S = 0.001


class ScriptedEnv:
    """Ends after `steps` actions; records seeds; returns a minimal trajectory at the end.

    Like `RetrievalEnv`, it reports retrieval time as `last_search_s` (never in `info`).
    """

    def __init__(self, steps: int = 2, never_ends: bool = False) -> None:
        self.steps = steps
        self.never_ends = never_ends
        self.seeds: list[int | None] = []
        self.last_search_s = 0.0
        self.config = None  # the default chat opener

    def reset(self, *, seed=None, options=None):
        self.seeds.append(seed)
        self.task = options["task"]
        self.actions: list[str] = []
        self.last_search_s = 0.0  # reset does no search here
        return f"obs for {self.task.id}", {"task_id": self.task.id, "step": 0, "budget_left": 4.0}

    def step(self, action: str):
        self.actions.append(action)
        done = not self.never_ends and len(self.actions) >= self.steps
        self.last_search_s = SEARCH_S
        info = {"task_id": self.task.id, "step": len(self.actions)}
        if done:
            records = [ActionRecord(step=i, text=a, kind="stop") for i, a in enumerate(self.actions)]
            info["trajectory"] = Trajectory(task=self.task, graph_id="c", actions=records, budget=4.0)
            info["reward_components"] = {"total": 1.0}
        return "next obs", 1.0 if done else 0.0, done, False, info


class SlowPolicy(Policy):
    """Sleeps like an LLM call and counts how many calls overlap."""

    name = "slow"

    def __init__(self, fail_on: str | None = None, error: Exception | None = None) -> None:
        self.in_flight = 0
        self.most_in_flight = 0
        self.fail_on = fail_on
        self.error = error

    async def act(self, messages, info):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(DELAY_S)
            if info.get("task_id") == self.fail_on:
                raise self.error or ValueError("policy broke")
            return '{"action": "stop"}'
        finally:
            self.in_flight -= 1


def test_runs_envs_concurrently_in_task_order():
    envs: list[ScriptedEnv] = []

    def make_env() -> ScriptedEnv:
        envs.append(ScriptedEnv(steps=2))
        return envs[-1]

    policy = SlowPolicy()
    tasks = make_tasks(16)
    results = asyncio.run(run_episodes(make_env, tasks, policy, concurrency=8, seed=100, progress=False))
    assert [r.task_id for r in results] == [t.id for t in tasks]
    assert len(envs) == 8 and policy.most_in_flight == 8  # eight policy calls overlapped
    assert sorted(seed for env in envs for seed in env.seeds) == list(range(100, 116))
    first = results[0]
    assert [m["role"] for m in first.messages[-3:]] == ["assistant", "user", "assistant"]
    assert first.timing.policy_s >= 2 * DELAY_S * 0.9
    assert first.timing.total_s >= first.timing.policy_s + first.timing.env_s - 1e-6
    assert first.timing.search_s == pytest.approx(2 * SEARCH_S)
    assert first.reward == 1.0 and first.reward_components == {"total": 1.0}


def test_policy_failure_names_the_task():
    with pytest.raises(RolloutError, match=r"'t3'.*policy broke"):
        asyncio.run(run_episodes(ScriptedEnv, make_tasks(6), SlowPolicy(fail_on="t3"), concurrency=2, progress=False))


def test_memora_errors_propagate_unchanged():
    policy = SlowPolicy(fail_on="t1", error=LLMError("endpoint down"))
    with pytest.raises(LLMError, match="endpoint down"):
        asyncio.run(run_episodes(ScriptedEnv, make_tasks(3), policy, concurrency=3, progress=False))


def test_env_that_never_ends_is_an_error():
    with pytest.raises(RolloutError, match="did not end within 5 steps"):
        asyncio.run(
            run_episodes(lambda: ScriptedEnv(never_ends=True), make_tasks(1), SlowPolicy(), max_turns=5, progress=False)
        )


def test_real_env_episodes_through_sync_entry_point():
    store = PolicyTestStore()
    judge = TrajectoryJudge(embedder=store.embedder)
    make_env = lambda: RetrievalEnv(store, judge=judge, embedder=store.embedder)  # noqa: E731
    results = run_episodes_sync(make_env, TASKS, HeuristicPolicy(), concurrency=2, progress=False)
    assert [r.task_id for r in results] == [t.id for t in TASKS]
    for result in results:
        assert result.trajectory.stop_reason in ("stop", "budget")
        assert result.reward == pytest.approx(result.reward_components["total"])
        assert result.policy == "heuristic"


class SearchTimeProbe:
    """A real `RetrievalEnv` that records its own `last_search_s` after every reset and step."""

    def __init__(self, env: RetrievalEnv) -> None:
        self.env = env
        self.config = env.config
        self.reported: list[float] = []

    @property
    def last_search_s(self) -> float:
        return self.env.last_search_s

    def reset(self, **kwargs: Any) -> Any:
        outcome = self.env.reset(**kwargs)
        self.reported.append(self.env.last_search_s)
        return outcome

    def step(self, action: str) -> Any:
        outcome = self.env.step(action)
        self.reported.append(self.env.last_search_s)
        return outcome


def test_search_time_is_the_real_envs_last_search_s():
    store = PolicyTestStore()
    judge = TrajectoryJudge(embedder=store.embedder)
    probes: list[SearchTimeProbe] = []

    def make_env() -> SearchTimeProbe:
        probes.append(SearchTimeProbe(RetrievalEnv(store, judge=judge, embedder=store.embedder)))
        return probes[-1]

    (result,) = run_episodes_sync(make_env, TASKS[:1], HeuristicPolicy(), concurrency=1, progress=False)
    (probe,) = probes
    assert len(probe.reported) == len(result.trajectory.actions) + 1  # reset + each step
    assert result.timing.search_s == pytest.approx(sum(probe.reported))
    assert 0.0 < result.timing.search_s <= result.timing.env_s  # reset embeds and searches: never zero
